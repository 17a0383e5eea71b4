"""Human approval of gated tool calls: requests, decisions, inheritance, timeouts, recovery.

Every tree runs a scripted model on a real SQLite file with `tmp_path` as its cwd, so `bash`
(confined) writes there. A test learns that a call waits from the runtime's `ApprovalWaiting`
live event (emitted once the request is durable), never from a sleep; the timeout is driven
by a `GatedClock`. A crash while a call waits is simulated in-process by copying the stored
logs of a waiting tree into a fresh store: the copy is exactly what a killed process leaves
(an open turn whose last record is the request, no live holder).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from approval_support import Waits, copy_tree, first_of, logs
from delegation_support import events

from subagents import DelegationOptions, RunResult, Runtime
from subagents._clock import FakeClock, GatedClock
from subagents.core import ApprovalWaiting, Status
from subagents.definitions import parse_definition
from subagents.delegation._tree import TreeMember, tree_json, tree_rows
from subagents.errors import ErrorCode, SubagentsError
from subagents.ids import SessionId
from subagents.sessions import (
    ApprovalDecided,
    ApprovalPolicySet,
    ApprovalRequested,
    EventRecord,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
)
from subagents.testing import RecordingModel

GRANDCHILD = """
lead:
  - calls: [{tool: subagent, args: {name: a, description: helper, prompt: go}}]
  - text: lead done
a:
  - calls: [{tool: subagent, args: {name: b, description: helper, prompt: go}}]
  - text: a done
a/b:
  - calls: [{tool: bash, args: {command: "echo ran >> log.txt"}}]
  - text: b done
"""

LEAD_BASH = """
lead:
  - calls: [{tool: bash, args: {command: "echo ran >> log.txt"}}]
  - text: lead done
"""


# -- helpers ---------------------------------------------------------------------------------


def make(
    tmp_path: Path,
    script: str,
    *,
    approval: str | list[str] | None = "bash",
    approval_timeout: float | None = None,
    clock: FakeClock | None = None,
    tenant: str = "default",
    store: Path | None = None,
    definitions: Mapping[str, Any] | None = None,
) -> tuple[Runtime, RecordingModel]:
    model = RecordingModel.from_yaml(script)
    assert isinstance(model, RecordingModel)
    delegation = DelegationOptions(definitions=definitions) if definitions is not None else None
    runtime = Runtime(
        model=model,
        store=store or tmp_path / "s.db",
        cwd=tmp_path,
        clock=clock,
        tenant=tenant,
        approval=approval,
        approval_timeout=approval_timeout,
        delegation=delegation,
    )
    return runtime, model


@dataclass
class Running:
    """A tree running in the background whose first gated call waits now."""

    runtime: Runtime
    model: RecordingModel
    root: str
    waiting: ApprovalWaiting
    waits: Waits
    run: asyncio.Task[RunResult]
    tasks: asyncio.TaskGroup

    async def next_wait(self) -> ApprovalWaiting:
        return await first_of(self.tasks, self.waits.next(), self.run)


@asynccontextmanager
async def waiting_tree(
    tmp_path: Path, script: str = GRANDCHILD, **options: Any
) -> AsyncGenerator[Running]:
    """Enter a runtime, start `script` and yield once its first gated call waits.

    The test must let the run end (decide or interrupt); leaving awaits it.
    """
    runtime, model = make(tmp_path, script, **options)
    async with runtime, asyncio.TaskGroup() as tasks:
        waits = Waits(runtime)
        lead = await runtime.create_agent()
        run = tasks.create_task(runtime.run("go", agent=lead))
        waiting = await first_of(tasks, waits.next(), run)
        yield Running(runtime, model, str(lead.id), waiting, waits, run, tasks)
        await run


async def members(runtime: Runtime, root: str) -> list[TreeMember]:
    return await runtime.tree(root)


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def kinds_of(records: list[EventRecord], *tags: str) -> list[str]:
    return [r.kind for r in records if r.kind in tags]


async def refused(code: ErrorCode, attempt: Callable[[], Awaitable[object]]) -> SubagentsError:
    with pytest.raises(SubagentsError) as caught:
        await attempt()
    assert caught.value.code == code, caught.value
    return caught.value


async def log_lengths(runtime: Runtime, root: str) -> dict[str, int]:
    return {name: len(records) for name, records in (await logs(runtime, root)).items()}


# -- a gated grandchild ----------------------------------------------------------------------


async def test_a_gated_grandchild_call_waits_listed_and_runs_once_when_approved(
    tmp_path: Path,
) -> None:
    async with waiting_tree(tmp_path) as tree:
        rt, root = tree.runtime, tree.root
        assert tree.waiting.name == "a/b"
        (pending,) = await rt.approvals()
        assert (pending.root, pending.name, pending.held) == (root, "a/b", True)
        request = pending.request
        assert (request.name, request.state, request.agent) == ("bash", "pending", "a/b")
        assert json.loads(request.arguments) == {"command": "echo ran >> log.txt"}
        assert request.reason == "gated by 'bash'"
        assert request.deadline is None
        assert tree.waiting.request.call_id == request.call_id
        assert [p.request.call_id for p in await rt.approvals(root)] == [request.call_id]
        shown = pending.to_json()
        assert (shown["name"], shown["tool"], shown["state"]) == ("a/b", "bash", "pending")

        # Durable before anything of the call: the request is in the store, no `tool/call`.
        stored = await logs(rt, root)
        b = stored["a/b"]
        (asked,) = events(b, ApprovalRequested)
        assert (asked.call_id, asked.name, asked.agent) == (request.call_id, "bash", "a/b")
        assert not [e for e in events(b, ToolCallEvent) if e.call_id == request.call_id]
        assert not (tmp_path / "log.txt").exists()

        tree_now = await members(rt, root)
        assert [(m.row.name, m.row.status) for m in tree_now] == [
            ("lead", Status.RUNNING),
            ("a", Status.RUNNING),
            ("a/b", Status.WAITING),
        ]
        rows = {r.name: r for r in tree_json(tree_now)}
        assert rows["a/b"].status == "waiting for approval"
        assert {n: (r.approvals_pending, r.approvals_below) for n, r in rows.items()} == {
            "lead": (0, 1),
            "a": (0, 1),
            "a/b": (1, 0),
        }
        # `subagents tree` reads the store's listing rows: the same rows, rolled up alike.
        header = await rt.store.get_header(SessionId(root), tenant="default")
        assert await tree_rows(rt.store, header) == list(rows.values())

        decided = await rt.approve(root, "a/b", request.call_id, by="cli:alice")
        assert decided == {
            "name": "a/b",
            "call_id": request.call_id,
            "tool": "bash",
            "approved": True,
            "by": "cli:alice",
            "applied": True,
        }
        result = await tree.run
    assert (result.stop_reason, result.output) == ("completed", "lead done")
    assert lines_of(tmp_path / "log.txt") == ["ran"]

    rt2, _ = make(tmp_path, GRANDCHILD)
    async with rt2:
        assert await rt2.approvals() == []
        after = await logs(rt2, root)
        assert all(m.row.status != Status.WAITING for m in await members(rt2, root))
        rows = {r.name: r for r in tree_json(await members(rt2, root))}
    assert all((r.approvals_pending, r.approvals_below) == (0, 0) for r in rows.values())
    b = after["a/b"]
    tags = ("tool/approval-requested", "tool/approval-decided", "tool/call", "tool/result")
    assert kinds_of(b, *tags) == list(tags)
    (decision,) = events(b, ApprovalDecided)
    assert (decision.approved, decision.by, decision.reason) == (True, "cli:alice", None)
    (answer,) = events(b, ToolResultEvent)
    assert (answer.message.is_error, answer.code) == (False, None)
    assert len(events(b, ApprovalRequested)) == 1


async def test_a_denied_call_never_runs_and_its_model_reads_the_reason(tmp_path: Path) -> None:
    async with waiting_tree(tmp_path) as tree:
        rt, root = tree.runtime, tree.root
        call_id = tree.waiting.request.call_id
        decided = await rt.deny(root, "a/b", reason="not on this machine", by="web")
        assert decided == {
            "name": "a/b",
            "call_id": call_id,
            "tool": "bash",
            "approved": False,
            "by": "web",
            "applied": True,
        }
        result = await tree.run
    assert result.stop_reason == "completed"
    assert not (tmp_path / "log.txt").exists()

    rt2, _ = make(tmp_path, GRANDCHILD)
    async with rt2:
        b = (await logs(rt2, root))["a/b"]
    (decision,) = events(b, ApprovalDecided)
    assert (decision.approved, decision.by, decision.reason) == (
        False,
        "web",
        "not on this machine",
    )
    (answer,) = events(b, ToolResultEvent)
    assert answer.message.call_id == call_id
    assert answer.message.is_error
    assert answer.code == ErrorCode.APPROVAL_DENIED
    assert "not on this machine" in answer.message.content
    assert "denied by web" in answer.message.content
    # What the model was sent next carries that result.
    second = tree.model.requests_of("a/b")[1]
    sent = [getattr(m, "content", "") for m in second.messages]
    assert any("not on this machine" in str(c) for c in sent)


# -- which calls are gated -------------------------------------------------------------------


async def test_a_child_of_a_gated_parent_is_gated(tmp_path: Path) -> None:
    script = """
lead:
  - calls: [{tool: subagent, args: {name: a, description: helper, prompt: go}}]
  - text: lead done
a:
  - calls: [{tool: bash, args: {command: "echo ran >> log.txt"}}]
  - text: a done
"""
    async with waiting_tree(tmp_path, script) as tree:
        assert tree.waiting.name == "a"
        (pending,) = await tree.runtime.approvals()
        assert (pending.name, pending.request.name) == ("a", "bash")
        policy = events((await logs(tree.runtime, tree.root))["a"], ApprovalPolicySet)
        assert [p.tools for p in policy] == [("bash",)]
        await tree.runtime.approve(tree.root, "a")
        await tree.run
    assert lines_of(tmp_path / "log.txt") == ["ran"]


GUARDED = """\
---
name: guarded
description: A helper whose shell calls wait for a person.
approval: [bash]
approval_timeout: 30
---
Run what you are asked.
"""

DEFINED = """
lead:
  - calls: [{tool: bash, args: {command: "echo lead >> log.txt"}}]
  - calls: [{tool: subagent, args: {name: g, agent: guarded, description: helper, prompt: go}}]
  - text: lead done
g:
  - calls: [{tool: bash, args: {command: "echo g >> log.txt"}}]
  - calls: [{tool: write_file, args: {path: w.txt, content: hi}}]
  - text: g done
"""


async def test_a_definition_adds_a_gate_its_parent_lacks(tmp_path: Path) -> None:
    folder = tmp_path / ".subagents" / "agents"
    folder.mkdir(parents=True)
    (folder / "guarded.md").write_text(GUARDED)
    clock = GatedClock()
    async with waiting_tree(tmp_path, DEFINED, approval=None, clock=clock) as tree:
        rt, root = tree.runtime, tree.root
        # The lead is ungated: its bash ran at once; the child's waits.
        assert lines_of(tmp_path / "log.txt") == ["lead"]
        assert tree.waiting.name == "g"
        (pending,) = await rt.approvals()
        assert (pending.name, pending.request.name) == ("g", "bash")
        assert pending.request.deadline == pytest.approx(clock.now() + 30)
        stored = await logs(rt, root)
        assert events(stored["lead"], ApprovalPolicySet) == []
        assert [(p.tools, p.timeout) for p in events(stored["g"], ApprovalPolicySet)] == [
            (("bash",), 30.0)
        ]
        await rt.approve(root, "g")
        result = await tree.run
    assert result.output == "lead done"
    assert lines_of(tmp_path / "log.txt") == ["lead", "g"]
    assert (tmp_path / "w.txt").read_text() == "hi"  # write_file is not gated for g
    assert len(tree.waits.seen) == 1


async def test_a_definition_cannot_drop_its_parents_gate_and_its_gates_join(
    tmp_path: Path,
) -> None:
    definition, problems = parse_definition(GUARDED, source="guarded.md")
    assert problems == []
    assert definition is not None
    async with waiting_tree(
        tmp_path, DEFINED, approval=["write_file"], definitions={"guarded": definition}
    ) as tree:
        rt, root = tree.runtime, tree.root
        assert tree.waiting.name == "g"
        assert tree.waiting.request.name == "bash"
        stored = await logs(rt, root)
        (lead_policy,) = events(stored["lead"], ApprovalPolicySet)
        assert lead_policy.tools == ("write_file",)
        (child_policy,) = events(stored["g"], ApprovalPolicySet)
        assert (child_policy.tools, child_policy.timeout) == (("bash", "write_file"), 30.0)
        await rt.approve(root, "g")
        second = await tree.next_wait()  # the parent's gate holds too
        assert (second.name, second.request.name) == ("g", "write_file")
        await rt.deny(root, "g", reason="no files today")
        await tree.run
    assert lines_of(tmp_path / "log.txt") == ["lead", "g"]
    assert not (tmp_path / "w.txt").exists()


async def test_a_definition_with_no_gates_still_inherits_its_parents(tmp_path: Path) -> None:
    text = "---\nname: open\ndescription: Wants no gates.\napproval: []\n---\nGo.\n"
    definition, problems = parse_definition(text, source="open.md")
    assert problems == []
    assert definition is not None
    script = """
lead:
  - calls: [{tool: subagent, args: {name: o, agent: open, description: helper, prompt: go}}]
  - text: lead done
o:
  - calls: [{tool: bash, args: {command: "echo o >> log.txt"}}]
  - text: o done
"""
    async with waiting_tree(tmp_path, script, definitions={"open": definition}) as tree:
        assert (tree.waiting.name, tree.waiting.request.name) == ("o", "bash")
        await tree.runtime.deny(tree.root, "o")
    assert not (tmp_path / "log.txt").exists()
    rt2, _ = make(tmp_path, script)
    async with rt2:
        o = (await logs(rt2, tree.root))["o"]
    (answer,) = events(o, ToolResultEvent)
    assert answer.code == ErrorCode.APPROVAL_DENIED
    assert "denied by api: no reason given" in answer.message.content


async def test_ungated_tools_run_without_a_request(tmp_path: Path) -> None:
    script = """
lead:
  - calls:
      - {tool: write_file, args: {path: w.txt, content: hi}}
      - {tool: glob, args: {pattern: "*.txt"}}
  - text: lead done
"""
    runtime, _ = make(tmp_path, script)
    async with runtime:
        waits = Waits(runtime)
        result = await runtime.run("go")
        lead = (await logs(runtime, result.session_id))["lead"]
        assert await runtime.approvals() == []
    assert result.output == "lead done"
    assert (tmp_path / "w.txt").read_text() == "hi"
    assert waits.seen == []
    assert events(lead, ApprovalRequested) == []
    assert [e.code for e in events(lead, ToolResultEvent)] == [None, None]


async def test_all_gates_every_tool(tmp_path: Path) -> None:
    script = """
lead:
  - calls: [{tool: glob, args: {pattern: "*"}}]
  - text: lead done
"""
    async with waiting_tree(tmp_path, script, approval="all") as tree:
        assert (tree.waiting.name, tree.waiting.request.name) == ("lead", "glob")
        assert tree.waiting.request.reason == "gated by '*'"
        (lead,) = await members(tree.runtime, tree.root)
        assert lead.row.status == Status.WAITING
        (row,) = tree_json([lead])
        assert (row.approvals_pending, row.approvals_below) == (1, 0)
        await tree.runtime.approve(tree.root, "lead")
        result = await tree.run
    assert result.output == "lead done"


@pytest.mark.parametrize(
    ("call", "code"),
    [
        ("{tool: bash, args: {}}", ErrorCode.INVALID_ARGS),
        ("{tool: bash, args: {command: [1, 2]}}", ErrorCode.INVALID_ARGS),
        ("{tool: no_such_tool, args: {}}", ErrorCode.UNKNOWN_TOOL),
    ],
)
async def test_a_gated_call_that_would_fail_anyway_is_not_put_to_anyone(
    tmp_path: Path, call: str, code: ErrorCode
) -> None:
    script = f"lead:\n  - calls: [{call}]\n  - text: lead done\n"
    runtime, _ = make(tmp_path, script, approval="all")
    async with runtime:
        waits = Waits(runtime)
        result = await runtime.run("go")
        lead = (await logs(runtime, result.session_id))["lead"]
    assert result.output == "lead done"
    assert waits.seen == []
    assert events(lead, ApprovalRequested) == []
    (answer,) = events(lead, ToolResultEvent)
    assert (answer.message.is_error, answer.code) == (True, code)


# -- timeout ---------------------------------------------------------------------------------


async def test_a_request_nobody_decides_in_time_is_denied_by_timeout(tmp_path: Path) -> None:
    clock = GatedClock()
    async with waiting_tree(tmp_path, approval_timeout=30, clock=clock) as tree:
        rt, root = tree.runtime, tree.root
        asked_at = clock.now()
        timer = await clock.next_sleeper()  # the request's timer: still pending meanwhile
        (pending,) = await rt.approvals()
        assert pending.request.state == "pending"
        assert pending.request.deadline == pytest.approx(asked_at + 30)
        timer.set()  # 30 s pass
        result = await tree.run
    assert result.stop_reason == "completed"
    assert not (tmp_path / "log.txt").exists()

    rt2, _ = make(tmp_path, GRANDCHILD)
    async with rt2:
        b = (await logs(rt2, root))["a/b"]
        assert await rt2.approvals() == []
        await refused(
            ErrorCode.ALREADY_DECIDED, lambda: rt2.approve(root, "a/b", pending.request.call_id)
        )
    (decision,) = events(b, ApprovalDecided)
    assert (decision.approved, decision.by) == (False, "timeout")
    (answer,) = events(b, ToolResultEvent)
    assert answer.code == ErrorCode.APPROVAL_DENIED
    assert "no one decided in time" in answer.message.content


async def test_a_fake_clock_times_a_request_out_at_once(tmp_path: Path) -> None:
    runtime, _ = make(tmp_path, LEAD_BASH, approval_timeout=5, clock=FakeClock())
    async with runtime:
        waits = Waits(runtime)
        result = await runtime.run("go")
        lead = (await logs(runtime, result.session_id))["lead"]
    assert len(waits.seen) == 1
    (decision,) = events(lead, ApprovalDecided)
    assert (decision.approved, decision.by) == (False, "timeout")
    assert not (tmp_path / "log.txt").exists()


# -- who may decide, and what is refused -----------------------------------------------------


async def test_another_tenant_sees_no_request_and_cannot_decide(tmp_path: Path) -> None:
    async with waiting_tree(tmp_path) as tree:
        rt, root = tree.runtime, tree.root
        call_id = tree.waiting.request.call_id
        before = await log_lengths(rt, root)
        other, _ = make(tmp_path, GRANDCHILD, tenant="other")
        async with other:
            assert await other.approvals() == []
            await refused(ErrorCode.NOT_FOUND, lambda: other.approvals(root))
            await refused(ErrorCode.NOT_FOUND, lambda: other.approve(root, "a/b", call_id))
            await refused(ErrorCode.NOT_FOUND, lambda: other.deny(root, "a/b", reason="no"))
        assert await log_lengths(rt, root) == before
        assert [p.request.state for p in await rt.approvals()] == ["pending"]
        await rt.approve(root, "a/b", call_id)
        await tree.run
    assert lines_of(tmp_path / "log.txt") == ["ran"]


async def test_every_refused_decision_changes_nothing(tmp_path: Path) -> None:
    async with waiting_tree(tmp_path) as tree:
        rt, root = tree.runtime, tree.root
        call_id = tree.waiting.request.call_id
        before = await log_lengths(rt, root)
        loose = cast("Any", rt)  # what callers pass is not type-checked
        attempts: list[tuple[ErrorCode, Callable[[], Awaitable[object]]]] = [
            (ErrorCode.NOT_FOUND, lambda: rt.approve(root, "a/b", "no-such-call")),
            (ErrorCode.NOT_FOUND, lambda: rt.deny(root, "a/b", "no-such-call")),
            (ErrorCode.NOT_FOUND, lambda: rt.approve(root, "a/zz")),
            (ErrorCode.NOT_FOUND, lambda: rt.approve(root, "zz", call_id)),
            (ErrorCode.NO_PENDING_REQUEST, lambda: rt.approve(root, "a")),
            (ErrorCode.NO_PENDING_REQUEST, lambda: rt.deny(root, "lead")),
            (ErrorCode.USAGE, lambda: rt.approve(root, "a/b", call_id, by="")),
            (ErrorCode.USAGE, lambda: rt.approve(root, "a/b", call_id, by="   ")),
            (ErrorCode.USAGE, lambda: loose.approve(root, "a/b", call_id, by=7)),
            (ErrorCode.USAGE, lambda: loose.approve(root, "a/b", 42)),
            (ErrorCode.USAGE, lambda: rt.approve(root, "a/b", "")),
            (ErrorCode.USAGE, lambda: rt.deny(root, "a/b", call_id, reason="x" * 2001)),
            (ErrorCode.USAGE, lambda: loose.deny(root, "a/b", call_id, reason=["no"])),
        ]
        for code, attempt in attempts:
            await refused(code, attempt)
            assert await log_lengths(rt, root) == before, code
        assert not (tmp_path / "log.txt").exists()
        (pending,) = await rt.approvals()
        assert pending.request.state == "pending"

        # A reason of exactly the longest length is taken.
        await rt.deny(root, "a/b", call_id, reason="y" * 2000)
        await tree.run
        decided = await log_lengths(rt, root)
        await refused(ErrorCode.ALREADY_DECIDED, lambda: rt.approve(root, "a/b", call_id))
        await refused(ErrorCode.ALREADY_DECIDED, lambda: rt.deny(root, "a/b", call_id))
        await refused(ErrorCode.NO_PENDING_REQUEST, lambda: rt.approve(root, "a/b"))
        assert await log_lengths(rt, root) == decided
    assert not (tmp_path / "log.txt").exists()


async def test_a_second_decision_on_an_approved_call_is_refused(tmp_path: Path) -> None:
    async with waiting_tree(tmp_path) as tree:
        rt, root = tree.runtime, tree.root
        call_id = tree.waiting.request.call_id
        await rt.approve(root, "a/b", call_id)
        await refused(ErrorCode.ALREADY_DECIDED, lambda: rt.deny(root, "a/b", call_id))
        await tree.run
    assert lines_of(tmp_path / "log.txt") == ["ran"]


# -- interrupt -------------------------------------------------------------------------------


async def test_interrupting_a_waiting_member_aborts_its_turn_and_closes_the_request(
    tmp_path: Path,
) -> None:
    async with waiting_tree(tmp_path) as tree:
        rt, root = tree.runtime, tree.root
        call_id = tree.waiting.request.call_id
        assert await rt.interrupt(root, "a/b") is True
        result = await tree.run
        assert result.stop_reason == "completed"
        assert await rt.approvals() == []
        b = (await logs(rt, root))["a/b"]
        await refused(ErrorCode.ALREADY_DECIDED, lambda: rt.approve(root, "a/b", call_id))
        assert all(m.row.status != Status.WAITING for m in await members(rt, root))
    assert not (tmp_path / "log.txt").exists()
    assert [e.reason for e in events(b, TurnEnd)] == ["aborted"]
    (answer,) = events(b, ToolResultEvent)
    assert (answer.message.call_id, answer.code) == (call_id, ErrorCode.ABORTED_BEFORE_DISPATCH)
    assert events(b, ApprovalDecided) == []


# -- a turn whose process stopped while it waited --------------------------------------------


async def crashed_while_waiting(tmp_path: Path) -> tuple[str, str, Path]:
    """(root, call id, store) of a tree cut off while its call waited (nobody holds it)."""
    crashed = tmp_path / "crashed.db"
    async with waiting_tree(tmp_path) as tree:
        await copy_tree(tree.runtime, tree.root, crashed)
        root, call_id = tree.root, tree.waiting.request.call_id
        # The original process goes on without running the call: only the copy matters.
        await tree.runtime.deny(root, tree.waiting.name, reason="the original run")
    return root, call_id, crashed


async def test_a_decision_made_while_nobody_holds_the_tree_is_applied_on_resume(
    tmp_path: Path,
) -> None:
    root, call_id, crashed = await crashed_while_waiting(tmp_path)
    rt2, _ = make(tmp_path, GRANDCHILD, store=crashed)
    async with rt2:
        (pending,) = await rt2.approvals()
        assert (pending.name, pending.request.call_id, pending.held) == ("a/b", call_id, False)
        statuses = {m.row.name: m.row.status for m in await members(rt2, root)}
        assert statuses["a/b"] == Status.WAITING
        decided = await rt2.approve(root, "a/b", by="cli:bob")
        assert (decided["call_id"], decided["approved"], decided["applied"]) == (
            call_id,
            True,
            False,
        )
        b = (await logs(rt2, root))["a/b"]
        assert [(d.call_id, d.by) for d in events(b, ApprovalDecided)] == [(call_id, "cli:bob")]
        assert events(b, ToolCallEvent) == []
        # Decided but not acted on yet: still listed (its resume applies it), not decidable.
        (listed,) = await rt2.approvals()
        assert (listed.request.state, listed.to_json()["decided_by"]) == ("approved", "cli:bob")
        await refused(ErrorCode.ALREADY_DECIDED, lambda: rt2.deny(root, "a/b", call_id))
    assert not (tmp_path / "log.txt").exists()

    rt3, _ = make(tmp_path, GRANDCHILD, store=crashed)
    async with rt3:
        waits = Waits(rt3)
        result = await rt3.resume(root)
        after = await logs(rt3, root)
        assert await rt3.approvals() == []
    assert (result.stop_reason, result.output) == ("completed", "lead done")
    assert lines_of(tmp_path / "log.txt") == ["ran"]
    assert waits.seen == []  # decided already: nothing waited
    b = after["a/b"]
    assert len(events(b, ApprovalRequested)) == 1
    assert len(events(b, ApprovalDecided)) == 1
    assert [e.call_id for e in events(b, ToolCallEvent)] == [call_id]
    (answer,) = [e for e in events(b, ToolResultEvent) if e.message.call_id == call_id]
    assert (answer.message.is_error, answer.code) == (False, None)


async def test_a_resumed_tree_takes_up_the_same_wait(tmp_path: Path) -> None:
    root, call_id, crashed = await crashed_while_waiting(tmp_path)
    rt2, _ = make(tmp_path, GRANDCHILD, store=crashed)
    async with rt2, asyncio.TaskGroup() as tasks:
        waits = Waits(rt2)
        resumed = tasks.create_task(rt2.resume(root))
        again = await first_of(tasks, waits.next(), resumed)
        assert (again.name, again.request.call_id) == ("a/b", call_id)
        (pending,) = await rt2.approvals()
        assert (pending.request.call_id, pending.held) == (call_id, True)
        await rt2.approve(root, "a/b", call_id)
        result = await resumed
        after = await logs(rt2, root)
    assert (result.stop_reason, result.output) == ("completed", "lead done")
    assert lines_of(tmp_path / "log.txt") == ["ran"]
    b = after["a/b"]
    assert len(events(b, ApprovalRequested)) == 1
    assert [e.call_id for e in events(b, ToolCallEvent)] == [call_id]
