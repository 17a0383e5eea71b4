"""A second transport through the one provider contract: children in their own processes.

`SubprocessProvider` (a test helper, unknown to the delegation layer) runs each child in a
subprocess of our runtime against the same SQLite store. Foreground and background children,
messages, interrupts and cold resumes all go through the verbs every provider has, and the
lifecycle (notices, settlement records, the tree) is the one in-process children get.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from continuable_support import Settlements
from delegation_support import Lifecycle, ToolReply, make_runtime, replies
from subprocess_provider import SubprocessProvider

from subagents.delegation import DelegationOptions, DelegationRuntime
from subagents.delegation.tools import SubagentToolConfig, mount_subagent_tool
from subagents.errors import ErrorCode, SubagentError
from subagents.ids import SessionId
from subagents.sessions import (
    SqliteEventStore,
    SubagentSettled,
    TurnEnd,
    UserMessageEvent,
)

CHILD_SCRIPT = """
helper:
  - text: facts from another process
  - text: more facts from another process
holder:
  - calls:
      - {tool: hold}
  - text: stopped holding
"""


def remote_runtime(
    tmp_path: Path, lead_script: str
) -> tuple[DelegationRuntime, SubprocessProvider]:
    """A runtime on a SQLite file whose `subagent_remote` tool starts subprocess children."""
    child_script = tmp_path / "child.yaml"
    child_script.write_text(CHILD_SCRIPT)
    store = tmp_path / "state.db"
    rt, _ = make_runtime(
        lead_script,
        store=SqliteEventStore(store),
        cwd=str(tmp_path),
        delegation=DelegationOptions(definitions={}, fork_tool=False, team_tools=False),
    )
    provider = SubprocessProvider(rt, store=store, script=child_script)
    return rt, provider


def mount(rt: DelegationRuntime, provider: SubprocessProvider) -> None:
    rt.subagents.register_provider(provider)
    mount_subagent_tool(
        rt.subagents,
        SubagentToolConfig(provider=provider.name, tool_name="subagent_remote", max_depth=None),
        tasks=rt.tasks,
        continuable=rt.continuable,
    )


async def stored(rt: DelegationRuntime, session: SessionId) -> list[object]:
    await rt.store.flush()
    return [r.event for r in await rt.store.read(session, tenant=rt.tenant)]


async def test_a_foreground_child_in_another_process_answers_its_parent(tmp_path: Path) -> None:
    rt, provider = remote_runtime(
        tmp_path,
        """
lead:
  - calls:
      - {tool: subagent_remote, args: {name: helper, description: Help, prompt: Gather}}
  - text: The helper answered.
""",
    )
    async with rt:
        mount(rt, provider)
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [
            ToolReply("subagent_remote", "facts from another process", False, None)
        ]
        [child] = provider.started
        assert child.exited  # its own process, ended with its run
        assert [(e.name, e.local) for e in lifecycle.started] == [("helper", False)]
        assert [e.stop_reason for e in lifecycle.ended] == ["completed"]
        # The child's log was written by the other process, in the shared store.
        log = await stored(rt, child.id)
        prompts = [e.message.text for e in log if isinstance(e, UserMessageEvent)]
        assert prompts == ["Gather"]
        assert [e.reason for e in log if isinstance(e, TurnEnd)] == ["completed"]
        header = await rt.store.get_header(child.id, tenant=rt.tenant)
        assert header.parent == lead.id


async def test_a_background_child_elsewhere_settles_and_cold_resumes(tmp_path: Path) -> None:
    rt, provider = remote_runtime(
        tmp_path,
        """
lead:
  - calls:
      - tool: subagent_remote
        args: {name: helper, description: Help, prompt: Gather, run_in_background: true}
  - text: Started.
  - calls:
      - {tool: send_message, args: {agent: helper, message: Gather more}}
  - text: Asked again.
  - text: Heard it again.
""",
    )
    async with rt:
        mount(rt, provider)
        lead = await rt.create_agent()
        await lead.followup("go")
        await rt.wait_quiescent()
        first, second = provider.started
        assert first.id == second.id
        assert first.pid != second.pid  # resumed in a new process
        assert first.exited
        assert second.exited
        notices = [
            e.message.text
            for e in (r.event for r in lead.session.records)
            if isinstance(e, UserMessageEvent) and e.message.source.kind == "subagent-settled"
        ]
        assert notices[0].endswith("Its closing message:\nfacts from another process")
        assert notices[1].endswith("Its closing message:\nmore facts from another process")
        log = await stored(rt, first.id)
        assert [e.stop_reason for e in log if isinstance(e, SubagentSettled)] == [
            "completed",
            "completed",
        ]
        assert provider.list() == []


async def test_an_interrupt_reaches_a_child_in_another_process(tmp_path: Path) -> None:
    rt, provider = remote_runtime(
        tmp_path,
        """
lead:
  - calls:
      - tool: subagent_remote
        args: {name: holder, description: Hold, prompt: Hold on, run_in_background: true}
  - text: Started.
  - text: Heard it stop.
""",
    )
    async with rt:
        mount(rt, provider)
        settlements = Settlements(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        child = await provider.arrivals.get()
        await child.holding.get()  # its hold tool runs, in the other process
        assert provider.list() == [child]
        assert child.running or child.pending
        assert await rt.interrupt(lead.id, "holder")  # the runtime's verb reaches it
        await settlements.reached(1)
        await rt.wait_quiescent()
        log = await stored(rt, child.id)
        assert [e.reason for e in log if isinstance(e, TurnEnd)] == ["aborted"]
        assert [e.stop_reason for e in log if isinstance(e, SubagentSettled)] == ["aborted"]
        assert child.exited


async def test_a_start_needing_a_capability_it_lacks_is_refused_before_any_process(
    tmp_path: Path,
) -> None:
    rt, provider = remote_runtime(tmp_path, "{}")
    async with rt:
        mount(rt, provider)
        lead = await rt.create_agent()
        with pytest.raises(SubagentError) as refused:
            rt.subagents.admit(provider.name, parent=lead, prompt="p", label="l", max_depth=2)
        assert refused.value.code == ErrorCode.UNSUPPORTED_CAPABILITY
        assert provider.started == []
