"""`lease_from`: a runtime started by another to run part of its tree works under that
runtime's lease: it never takes the lease over, renews or releases it, and refuses a tree the
other runtime does not hold."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from subagents.core import AgentRuntime
from subagents.errors import ConfigError, ErrorCode, LeaseHeld
from subagents.sessions import SqliteEventStore
from subagents.testing import ScriptedModel


def runtime(path: Path, *, lease_from: str | None = None) -> AgentRuntime:
    model = ScriptedModel.from_yaml('"*": [{text: hello}, {text: again}]')
    return AgentRuntime(model=model, store=SqliteEventStore(path), lease_from=lease_from)


async def test_a_runtime_works_a_tree_under_its_starters_lease_and_leaves_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    async with runtime(path) as parent:
        lead = await parent.create_agent()
        await parent.store.flush()
        async with runtime(path, lease_from=parent.holder) as helper:
            agent = await helper.resume_agent(lead.id)
            assert agent.id == lead.id
            lease = await helper.store.get_lease(lead.id)
            assert lease is not None
            assert lease.holder == parent.holder
        # Closing the helper left the lease with its holder.
        lease = await parent.store.get_lease(lead.id)
        assert lease is not None
        assert lease.holder == parent.holder


async def test_a_tree_its_starter_does_not_hold_is_refused_and_left_free(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    async with runtime(path) as first:
        lead = await first.create_agent()
        await first.store.flush()
    async with runtime(path, lease_from="someone-else/1234") as helper:
        with pytest.raises(LeaseHeld) as refused:
            await helper.resume_agent(lead.id)
        assert refused.value.code == ErrorCode.LEASE_HELD
        assert "not held by the runtime that started this process" in refused.value.message
        assert await helper.store.get_lease(lead.id) is None  # nothing taken on the way
        assert helper.get_agent(lead.id) is None


@pytest.mark.parametrize("bad", ["", 42, b"holder"])
def test_a_bad_lease_from_is_refused_with_a_usage_error(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ConfigError) as refused:
        runtime(tmp_path / "state.db", lease_from=bad)  # type: ignore[arg-type]
    assert refused.value.code == ErrorCode.USAGE
    assert "lease_from must be a runtime's holder name" in refused.value.message


async def test_an_expired_lease_of_the_starter_is_refused_and_left_as_it_is(
    tmp_path: Path,
) -> None:
    """A borrower only reads the lease: even one that ran out stays its holder's to renew."""
    path = tmp_path / "state.db"
    async with runtime(path) as first:
        lead = await first.create_agent()
        await first.store.flush()
        await first.store.release_lease(lead.id, holder=first.holder)
        stale = await first.store.acquire_lease(
            lead.id, holder="starter/1", pid=1, now=time.time() - 3600, ttl=30.0
        )
        async with runtime(path, lease_from="starter/1") as helper:
            with pytest.raises(LeaseHeld):
                await helper.resume_agent(lead.id)
        assert await first.store.get_lease(lead.id) == stale
