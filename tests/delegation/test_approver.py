"""A parent as approver: `approver: parent` gives the parent `approve_request`, for its own
children's requests only.

The lead starts a background child from a definition that gates `bash` and names its parent
the approver. The lead's model then calls `until_waiting`, a test tool that returns once the
child's request is durable (the runtime's `ApprovalWaiting` event), so the lead decides in a
known step and no test waits on time.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from delegation_support import events

from subagents import DelegationOptions, RunResult, Runtime
from subagents.core import ApprovalWaiting
from subagents.definitions import AgentDefinition, parse_definition
from subagents.delegation import PendingApproval
from subagents.delegation._approvals import APPROVAL_NOTICE_SOURCE
from subagents.errors import ErrorCode
from subagents.sessions import ApprovalDecided, EventRecord, ToolResultEvent, UserMessageEvent
from subagents.testing import RecordingModel
from subagents.tools import tool

CHECKED = """\
---
name: checked
description: A helper whose shell calls its parent approves.
approval: [bash]
approver: parent
---
Run what you are asked.
"""

PLAIN = """\
---
name: plain
description: A helper whose shell calls a person approves.
approval: [bash]
---
Run what you are asked.
"""


def script(agent: str, decision: str, *, grandchild: bool = False) -> str:
    """The lead starts `c` in the background and, once `c` waits, calls `decision`."""
    c_steps = (
        """
  - calls: [{tool: subagent, args: {name: g, agent: checked, description: helper,
      prompt: go, run_in_background: true}}]
  - text: c waits for g
"""
        if grandchild
        else """
  - calls: [{tool: bash, args: {command: "echo c >> log.txt"}}]
  - text: c done
"""
    )
    return f"""
lead:
  - calls: [{{tool: subagent, args: {{name: c, agent: {agent}, description: helper,
      prompt: go, run_in_background: true}}}}]
  - calls: [{{tool: until_waiting, args: {{}}}}]
  - calls: [{decision}]
  - calls: [{{tool: decided, args: {{}}}}]
  - text: lead decided
  - text: lead done
  - text: lead done again
c:{c_steps}
c/g:
  - calls: [{{tool: bash, args: {{command: "echo g >> log.txt"}}}}]
  - text: g done
"""


class Tree:
    """A runtime whose lead's model tells the test when a call waits and when it decided."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.waiting: asyncio.Queue[ApprovalWaiting] = asyncio.Queue()
        self.decided = asyncio.Event()
        runtime.subscribe(self._on_waiting, types=(ApprovalWaiting,))

        @tool(name="until_waiting", description="Returns once a call waits for approval.")
        async def until_waiting() -> str:
            return f"{(await self.waiting.get()).name} waits"

        @tool(name="decided", description="Tells the test the lead has decided.")
        async def decided() -> str:
            self.decided.set()
            return "ok"

        runtime.tools.register(until_waiting)
        runtime.tools.register(decided)

    def _on_waiting(self, event: object) -> None:
        assert isinstance(event, ApprovalWaiting)
        self.waiting.put_nowait(event)

    async def after_decision(self, tasks: asyncio.TaskGroup, run: asyncio.Task[RunResult]) -> None:
        """Return once the lead made its decision (fail fast if the run ends first)."""
        wait = tasks.create_task(self.decided.wait())
        done, _ = await asyncio.wait({wait, run}, return_when=asyncio.FIRST_COMPLETED)
        assert wait in done, f"the run ended first: {run.result()!r}"


def make(tmp_path: Path, text: str) -> Tree:
    definitions: dict[str, AgentDefinition] = {}
    for source in (CHECKED, PLAIN):
        found, problems = parse_definition(source, source="test.md")
        assert found is not None, problems
        definitions[found.name] = found
    model = RecordingModel.from_yaml(text)
    assert isinstance(model, RecordingModel)
    runtime = Runtime(
        model=model,
        store=tmp_path / "s.db",
        cwd=tmp_path,
        delegation=DelegationOptions(definitions=definitions),
    )
    return Tree(runtime)


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def decision_result(records: list[EventRecord]) -> ToolResultEvent:
    (result,) = [r for r in events(records, ToolResultEvent) if r.message.name == "approve_request"]
    return result


async def run_all(tree: Tree) -> dict[str, list[EventRecord]]:
    """Run the lead to the end of its tree; every member's log by full name."""
    rt = tree.runtime
    lead = await rt.create_agent()
    await rt.run("go", agent=lead)
    await rt.wait_quiescent()
    return {m.row.name: m.records for m in await rt.tree(lead.id)}


async def test_a_parent_approves_its_childs_call_and_it_runs_once(tmp_path: Path) -> None:
    tree = make(
        tmp_path, script("checked", "{tool: approve_request, args: {agent: c, approve: true}}")
    )
    async with tree.runtime:
        logs = await run_all(tree)
    assert lines_of(tmp_path / "log.txt") == ["c"]
    result = decision_result(logs["lead"])
    assert not result.message.is_error, result.message.content
    assert result.message.content.startswith("approved: c's bash call")
    (decided,) = events(logs["c"], ApprovalDecided)
    assert decided.approved
    assert decided.by == "agent:lead"
    notices = [e.message.text for e in events(logs["lead"], UserMessageEvent)]
    assert any("waiting for your approval" in text for text in notices), notices


async def test_a_parents_denial_reaches_the_child_with_its_reason(tmp_path: Path) -> None:
    decision = "{tool: approve_request, args: {agent: c, approve: false, reason: not needed}}"
    tree = make(tmp_path, script("checked", decision))
    async with tree.runtime:
        logs = await run_all(tree)
    assert lines_of(tmp_path / "log.txt") == []
    (denied,) = [r for r in events(logs["c"], ToolResultEvent) if r.message.name == "bash"]
    assert denied.message.is_error
    assert "not needed" in denied.message.content
    assert denied.code == ErrorCode.APPROVAL_DENIED
    (decided,) = events(logs["c"], ApprovalDecided)
    assert (decided.approved, decided.by, decided.reason) == (False, "agent:lead", "not needed")


async def test_a_child_that_does_not_name_its_parent_waits_for_a_person(tmp_path: Path) -> None:
    # No child names the lead its approver, so it was never offered the tool.
    decision = "{tool: approve_request, args: {agent: c, approve: true}}"
    tree = make(tmp_path, script("plain", decision))
    async with tree.runtime:
        (pending,) = await pending_after(tree, "c", ErrorCode.UNKNOWN_TOOL)
        notices = await approval_notices(tree.runtime, pending.root)
    assert (pending.name, pending.approver, pending.state) == ("c", "person", "pending")
    assert lines_of(tmp_path / "log.txt") == []
    # The background parent was told its child waits, on whom, and on which call.
    assert len(notices) == 1
    assert "background subagent c is waiting for a person to approve its bash call" in notices[0]
    assert pending.request.call_id in notices[0]


async def approval_notices(rt: Runtime, root: str) -> list[str]:
    """The texts of the approval notices the lead received."""
    (lead, *_) = await rt.tree(root)
    return [
        e.message.text
        for e in events(lead.records, UserMessageEvent)
        if e.message.source == APPROVAL_NOTICE_SOURCE
    ]


FOREGROUND = """
lead:
  - calls: [{tool: subagent, args: {name: c, agent: plain, description: helper, prompt: go}}]
  - text: lead done
c:
  - calls: [{tool: bash, args: {command: "echo c >> log.txt"}}]
  - text: c done
"""


async def test_a_foreground_parent_is_not_told_it_keeps_waiting_for_its_child(
    tmp_path: Path,
) -> None:
    tree = make(tmp_path, FOREGROUND)
    rt = tree.runtime
    async with rt, asyncio.TaskGroup() as tasks:
        lead = await rt.create_agent()
        run = tasks.create_task(rt.run("go", agent=lead))
        waiting = tasks.create_task(tree.waiting.get())
        done, _ = await asyncio.wait({waiting, run}, return_when=asyncio.FIRST_COMPLETED)
        assert waiting in done, "the run ended before the child's call waited"
        await rt.approve(lead.id, "c")
        result = await run
        notices = await approval_notices(rt, str(lead.id))
    assert result.output == "lead done"
    assert notices == []
    assert lines_of(tmp_path / "log.txt") == ["c"]


async def pending_after(tree: Tree, name: str, code: ErrorCode) -> list[PendingApproval]:
    rt = tree.runtime
    lead = await rt.create_agent()
    async with asyncio.TaskGroup() as tasks:
        run = tasks.create_task(rt.run("go", agent=lead))
        await tree.after_decision(tasks, run)
        result = decision_result((await rt.tree(lead.id))[0].records)
        assert result.message.is_error
        assert result.code == code, result
        pending = await rt.approvals(lead.id)
        assert all(not events(m.records, ApprovalDecided) for m in await rt.tree(lead.id))
        await rt.deny(lead.id, name, reason="test over")
    await rt.wait_quiescent()
    return pending


async def test_a_parent_cannot_decide_for_a_grandchild(tmp_path: Path) -> None:
    # c and g both name their parent the approver: the lead may decide c's calls, not g's.
    decision = "{tool: approve_request, args: {agent: c/g, approve: true}}"
    tree = make(tmp_path, script("checked", decision, grandchild=True))
    async with tree.runtime:
        (pending,) = await pending_after(tree, "c/g", ErrorCode.UNAUTHORIZED)
    assert (pending.name, pending.approver) == ("c/g", "parent")
    assert lines_of(tmp_path / "log.txt") == []


@pytest.mark.parametrize(
    ("call_id", "code"), [("nope", ErrorCode.NOT_FOUND), ("x" * 300, ErrorCode.USAGE)]
)
async def test_an_unknown_call_id_decides_nothing(
    tmp_path: Path, call_id: str, code: ErrorCode
) -> None:
    decision = f"{{tool: approve_request, args: {{agent: c, approve: true, call_id: {call_id}}}}}"
    tree = make(tmp_path, script("checked", decision))
    async with tree.runtime:
        (pending,) = await pending_after(tree, "c", code)
    assert pending.state == "pending"
    assert lines_of(tmp_path / "log.txt") == []


LISTING = """
lead:
  - calls: [{tool: subagent, args: {name: c, agent: plain, description: helper, prompt: go,
      run_in_background: true}}]
  - calls: [{tool: until_waiting, args: {}}]
  - calls: [{tool: list_agents, args: {}}]
  - calls: [{tool: decided, args: {}}]
  - text: lead listed
  - text: lead done
  - text: lead done again
c:
  - calls: [{tool: bash, args: {command: "echo c >> log.txt"}}]
  - text: c done
"""


async def test_list_agents_shows_a_child_waiting_for_approval(tmp_path: Path) -> None:
    tree = make(tmp_path, LISTING)
    rt = tree.runtime
    async with rt, asyncio.TaskGroup() as tasks:
        lead = await rt.create_agent()
        run = tasks.create_task(rt.run("go", agent=lead))
        await tree.after_decision(tasks, run)
        (listed,) = [
            r
            for r in events((await rt.tree(lead.id))[0].records, ToolResultEvent)
            if r.message.name == "list_agents"
        ]
        await rt.approve(lead.id, "c")
    assert not listed.message.is_error
    (row,) = listed.message.content.splitlines()
    assert row.startswith("c")
    assert "waiting for approval" in row
    assert lines_of(tmp_path / "log.txt") == ["c"]
