"""A tree resumed by a runtime that lacks the provider one of its children was started by:
the rest of the tree resumes, and whoever waited for the child hears why it did not run."""

from __future__ import annotations

import logging
import sqlite3  # noqa: TID251 - the state a crash leaves is a snapshot of the file
from pathlib import Path

import pytest
from continuable_support import background
from delegation_support import Gates, Lifecycle, make_runtime

from subagents.core import replay_inbox
from subagents.delegation import DelegationRuntime, InProcessProvider
from subagents.delegation.tools import SubagentToolConfig, mount_subagent_tool
from subagents.ids import SessionId
from subagents.messages import user_message
from subagents.sessions import SqliteEventStore


def with_tiny(rt: DelegationRuntime) -> None:
    """An in-process provider named `tiny`, offered as `subagent_tiny`."""
    rt.subagents.register_provider(
        InProcessProvider(rt, name="tiny", inherits_parent_context=False)
    )
    mount_subagent_tool(
        rt.subagents,
        SubagentToolConfig(provider="tiny", tool_name="subagent_tiny", max_depth=3),
        tasks=rt.tasks,
        continuable=rt.continuable,
    )


async def test_a_continuable_child_whose_provider_is_gone_waits_and_the_tree_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.db"
    script = f"""
lead:
  - calls:
      - {background("helper", "Help", "Help").replace("subagent", "subagent_tiny")}
  - text: Started.
  - text: Heard it.
helper:
  - text: helped
"""
    rt, _ = make_runtime(script, store=SqliteEventStore(path))
    async with rt:
        with_tiny(rt)
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await rt.wait_quiescent()
        [started] = lifecycle.started
        helper = SessionId(started.child_id)

    rt, _ = make_runtime("{}", store=SqliteEventStore(path))
    async with rt:
        await rt.deliver(helper, user_message("more"), wake=False)  # owed a turn
        with caplog.at_level(logging.WARNING):
            resumed = await rt.resume_tree(lead.id)
        assert resumed.id == lead.id
        assert 'provider "tiny", which this runtime does not have' in caplog.text
        assert rt.continuable.get(helper) is None
        pending = replay_inbox(await rt.store.read(helper, tenant=rt.tenant))
        assert [m.text for m in pending.next_turn] == ["more"]  # still there for later


async def test_a_cut_foreground_child_whose_provider_is_gone_answers_with_why(
    tmp_path: Path,
) -> None:
    path, crashed = tmp_path / "state.db", tmp_path / "crashed.db"
    gates = Gates()
    script = """
lead:
  - calls:
      - {tool: subagent_tiny, args: {name: worker, description: Work, prompt: Work}}
  - text: done
worker:
  - calls: [{tool: hold, args: {label: worker}}]
  - text: worked
"""
    rt, _ = make_runtime(script, store=SqliteEventStore(path), tools=[gates.tool()])
    async with rt:
        with_tiny(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("worker").wait()
        await rt.store.flush()
        # The state a crash leaves: the worker's turn open, the lead waiting on its call.
        with sqlite3.connect(path) as source, sqlite3.connect(crashed) as copy:
            source.backup(copy)
        gates.release("worker")
        await rt.wait_quiescent()
    with sqlite3.connect(crashed) as copy:
        copy.execute("DELETE FROM leases")  # the crashed holder's lease ran out

    rt, _ = make_runtime("lead: [{text: x}, {text: recovered}]", store=SqliteEventStore(crashed))
    async with rt:
        await rt.resume_tree(lead.id)
        [outcome] = rt.recovered_outcomes(lead.id).values()
        assert outcome.is_error
        assert 'its provider "tiny" is not available in this runtime' in outcome.content
