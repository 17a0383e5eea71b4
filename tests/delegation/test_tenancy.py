"""Tenant isolation: random interleaved work by two tenants on one store never crosses."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from subagents import ConfigError
from subagents.delegation import DelegationRuntime
from subagents.errors import NotFoundError, SubagentError
from subagents.ids import SessionId
from subagents.messages import MessageSource, user_message
from subagents.sessions import InMemoryEventStore, SqliteEventStore
from subagents.testing import FakeClock, ScriptedModel, ScriptedResponse

TENANTS = ("acme", "globex")

SCRIPT = {
    "lead": [ScriptedResponse(text=f"answer {n}") for n in range(40)],
    "*": [ScriptedResponse(text="child")],
}


@dataclass
class World:
    path: Path
    clock: FakeClock
    roots: dict[str, list[SessionId]] = field(default_factory=lambda: {t: [] for t in TENANTS})


def runtime(world: World, tenant: str) -> DelegationRuntime:
    """A runtime of `tenant` on the shared SQLite file, as another process would open it."""
    return DelegationRuntime(
        model=ScriptedModel(SCRIPT, clock=world.clock),
        store=SqliteEventStore(world.path),
        clock=world.clock,
        tenant=tenant,
        cwd=world.path.parent,
    )


async def act(world: World, tenant: str, op: str) -> None:
    """One operation of `tenant`; cross-tenant reads must fail closed."""
    other = TENANTS[1 - TENANTS.index(tenant)]
    async with runtime(world, tenant) as rt:
        if op == "run":
            result = await rt.run("work")
            world.roots[tenant].append(result.session_id)
        elif op == "resume-own" and world.roots[tenant]:
            agent = await rt.resume_agent(world.roots[tenant][-1])
            assert agent.session.header.tenant == tenant
        elif op == "resume-other" and world.roots[other]:
            with pytest.raises(NotFoundError):
                await rt.resume_agent(world.roots[other][-1])
        elif op == "deliver-other" and world.roots[other]:
            before = len(await rt.store.read(world.roots[other][-1], tenant=other))
            with pytest.raises(NotFoundError):
                await rt.deliver(world.roots[other][-1], user_message("intrude"))
            assert len(await rt.store.read(world.roots[other][-1], tenant=other)) == before
        elif op == "send-other" and world.roots[other]:
            lead = await rt.create_agent()
            world.roots[tenant].append(lead.id)
            with pytest.raises(SubagentError):
                await rt.continuable.send(
                    lead, world.roots[other][-1], "hello", source=MessageSource(kind="parent")
                )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(TENANTS),
            st.sampled_from(["run", "resume-own", "resume-other", "deliver-other", "send-other"]),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_interleaved_tenants_never_cross(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str]]
) -> None:
    async def scenario() -> None:
        world = World(tmp_path_factory.mktemp("tenants") / "state.db", FakeClock())
        for tenant, op in ops:
            await act(world, tenant, op)
        async with SqliteEventStore(world.path) as store:
            for tenant in TENANTS:
                other = TENANTS[1 - TENANTS.index(tenant)]
                mine = {h.id for h in await store.list_headers(tenant=tenant, roots_only=False)}
                theirs = {h.id for h in await store.list_headers(tenant=other, roots_only=False)}
                assert not mine & theirs
                assert set(world.roots[tenant]) <= mine
                for session in mine:
                    header = await store.get_header(session, tenant=tenant)
                    assert header.tenant == tenant
                    with pytest.raises(NotFoundError):
                        await store.get_header(session, tenant=other)
                    with pytest.raises(NotFoundError):
                        await store.read(session, tenant=other)

    asyncio.run(scenario())


def test_an_empty_tenant_is_refused() -> None:
    with pytest.raises(ConfigError):
        DelegationRuntime(model=ScriptedModel({}), store=InMemoryEventStore(), tenant="")
