"""A child's file policy: its parent's at start, recorded in its log, only ever narrowed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from delegation_support import Gates, Lifecycle, events, make_runtime

from subagents.errors import ConfigError
from subagents.sessions import SandboxModeSet, SqliteEventStore

SCRIPT = """
lead:
  - calls: [{tool: subagent, args: {description: d, prompt: p, name: kid}}]
  - text: done
kid:
  - calls: [{tool: hold, args: {label: kid}}]
  - text: kid done
"""


async def test_a_child_records_its_parents_mode_and_keeps_it(tmp_path: Path) -> None:
    gates = Gates()
    rt, _ = make_runtime(SCRIPT, tools=[gates.tool()], cwd=str(tmp_path))
    rt.sandbox = "read-only"
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("kid").wait()
        kid = await lifecycle.child("kid", rt)
        assert [(e.mode, e.source) for e in events(lead.session.records, SandboxModeSet)] == [
            ("read-only", "runtime")
        ]
        assert [(e.mode, e.source) for e in events(kid.session.records, SandboxModeSet)] == [
            ("read-only", "delegation")
        ]
        # A child cannot widen itself; the parent may switch, but the child keeps its mode.
        with pytest.raises(ConfigError, match="can only narrow"):
            rt.set_sandbox_mode(kid, "workspace-write")
        rt.set_sandbox_mode(lead, "danger-full-access")
        assert rt.sandbox_policy(kid.id).mode == "read-only"
        assert rt.sandbox_policy(lead.id).mode == "danger-full-access"
        root = await asyncio.to_thread(tmp_path.resolve)
        assert rt.sandbox_policy(kid.id).workspace_root == str(root)
        gates.release("kid")
        await rt.wait_quiescent()


async def test_a_resumed_root_keeps_its_recorded_mode(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    rt, _ = make_runtime("lead:\n  - text: one\n", store=SqliteEventStore(path), cwd=str(tmp_path))
    rt.sandbox = "read-only"
    async with rt:
        first = await rt.run("go")
    # A new runtime whose default is wider: the root keeps the read-only its log recorded.
    again, _ = make_runtime(
        "lead:\n  - text: two\n", store=SqliteEventStore(path), cwd=str(tmp_path)
    )
    async with again:
        lead = await again.resume_agent(first.session_id)
        assert again.sandbox == "workspace-write"
        assert again.sandbox_policy(lead.id).mode == "read-only"
