"""Sandbox escalation: under `sandbox:ask` a file call that needs more than its agent's mode
asks a person instead of failing, and an approval widens that one call only.

Real SQLite files and real files under `tmp_path`; a call's wait is learned from the
runtime's `ApprovalWaiting` event, never from a sleep.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from approval_support import Waits, copy_tree, first_of, logs
from delegation_support import events

from subagents import Runtime
from subagents.core import SANDBOX_ASK, ApprovalPolicy
from subagents.errors import ErrorCode
from subagents.policy import SandboxMode
from subagents.sessions import ApprovalRequested, EventRecord, ToolResultEvent
from subagents.testing import RecordingModel

TWO_WRITES = """
lead:
  - calls: [{tool: write_file, args: {path: w.txt, content: one}}]
  - calls: [{tool: write_file, args: {path: w.txt, content: two}}]
  - text: lead done
"""


def make(
    tmp_path: Path,
    script: str,
    *,
    sandbox: SandboxMode = "read-only",
    approval: list[str] | None = None,
    store: Path | None = None,
) -> Runtime:
    model = RecordingModel.from_yaml(script)
    if store is None:
        # In a folder of its own: a store's folder is hidden from agents, and never granted.
        (tmp_path / "db").mkdir(exist_ok=True)
        store = tmp_path / "db" / "s.db"
    return Runtime(
        model=model,
        store=store,
        cwd=tmp_path / "work",
        sandbox=sandbox,
        approval=[SANDBOX_ASK] if approval is None else approval,
    )


def results(records: list[EventRecord], tool: str) -> list[ToolResultEvent]:
    return [r for r in events(records, ToolResultEvent) if r.message.name == tool]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder.resolve()  # canonical, as the grants name paths


def test_sandbox_ask_is_a_policy_entry_and_never_gates_a_tool_by_name() -> None:
    policy = ApprovalPolicy.parse("bash, sandbox:ask")
    assert policy.escalation
    assert policy.gates("bash") == "bash"
    assert policy.gates("write_file") is None
    assert not ApprovalPolicy.parse("bash").escalation
    assert ApprovalPolicy.parse("bash").join(ApprovalPolicy.parse([SANDBOX_ASK])).escalation
    # `none` gates nothing (it is not a tool's name), alone or beside others.
    assert ApprovalPolicy.parse("none").empty
    assert ApprovalPolicy.parse(["none", "bash"]).tools == {"bash"}


def test_joined_gates_are_both_policies_gates_and_the_shorter_timeout() -> None:
    gated = ApprovalPolicy(frozenset({"bash"}), 30.0)
    assert gated.join(ApprovalPolicy()) is gated  # nothing added: the same policy, no copy
    assert gated.join(ApprovalPolicy(timeout=5.0)) == ApprovalPolicy(frozenset({"bash"}), 5.0)
    assert gated.join(ApprovalPolicy(timeout=60.0)) == gated
    assert ApprovalPolicy().join(gated) == gated
    assert gated.join(ApprovalPolicy(frozenset({"write_file"}))) == ApprovalPolicy(
        frozenset({"bash", "write_file"}), 30.0
    )


async def test_a_write_under_read_only_asks_and_an_approval_widens_that_call_only(
    tmp_path: Path, work: Path
) -> None:
    rt = make(tmp_path, TWO_WRITES)
    async with rt, asyncio.TaskGroup() as tasks:
        waits = Waits(rt)
        lead = await rt.create_agent()
        run = tasks.create_task(rt.run("go", agent=lead))
        first = await first_of(tasks, waits.next(), run)
        request = first.request
        assert request.name == "write_file"
        assert request.grant == f"write:{work / 'w.txt'}"
        assert "needs more than the read-only sandbox allows" in request.reason
        assert "the session is read-only" in request.reason
        assert not (work / "w.txt").exists()
        await rt.approve(lead.id, "lead")
        # The grant was for that call: the next write of the same file asks again.
        second = await first_of(tasks, waits.next(), run)
        assert second.request.call_id != request.call_id
        assert (work / "w.txt").read_text() == "one"
        await rt.deny(lead.id, "lead", reason="once is enough")
        result = await run
        lead_log = (await logs(rt, str(lead.id)))["lead"]
    assert result.output == "lead done"
    assert (work / "w.txt").read_text() == "one"
    written, denied = results(lead_log, "write_file")
    assert (written.message.is_error, written.code) == (False, None)
    assert (denied.message.is_error, denied.code) == (True, ErrorCode.APPROVAL_DENIED)
    assert "once is enough" in denied.message.content


async def test_without_sandbox_ask_the_call_fails_as_before_and_nobody_is_asked(
    tmp_path: Path, work: Path
) -> None:
    rt = make(tmp_path, TWO_WRITES, approval=[])
    async with rt:
        waits = Waits(rt)
        lead = await rt.create_agent()
        await rt.run("go", agent=lead)
        lead_log = (await logs(rt, str(lead.id)))["lead"]
    assert waits.seen == []
    assert events(lead_log, ApprovalRequested) == []
    assert [r.code for r in results(lead_log, "write_file")] == [ErrorCode.SANDBOX_DENIED] * 2
    assert not (work / "w.txt").exists()


async def test_a_write_outside_the_workspace_asks_under_workspace_write(
    tmp_path: Path, work: Path
) -> None:
    outside = work.parent / "outside.txt"
    script = f"""
lead:
  - calls: [{{tool: write_file, args: {{path: {outside}, content: out}}}}]
  - calls: [{{tool: write_file, args: {{path: inside.txt, content: in}}}}]
  - text: lead done
"""
    rt = make(tmp_path, script, sandbox="workspace-write")
    async with rt, asyncio.TaskGroup() as tasks:
        waits = Waits(rt)
        lead = await rt.create_agent()
        run = tasks.create_task(rt.run("go", agent=lead))
        waiting = await first_of(tasks, waits.next(), run)
        assert waiting.request.grant == f"write:{outside}"
        assert "outside the workspace" in waiting.request.reason
        await rt.approve(lead.id, "lead")
        await run
    assert outside.read_text() == "out"
    assert (work / "inside.txt").read_text() == "in"  # allowed as it was: nobody was asked
    assert len(waits.seen) == 1


async def test_the_store_and_its_folder_are_never_put_to_anyone(tmp_path: Path, work: Path) -> None:
    store = tmp_path / "db" / "s.db"
    script = f"""
lead:
  - calls: [{{tool: read_file, args: {{path: {store}}}}}]
  - calls: [{{tool: write_file, args: {{path: {store}, content: x}}}}]
  - calls: [{{tool: write_file, args: {{path: {tmp_path / "db" / "beside.txt"}, content: x}}}}]
  - calls: [{{tool: read_file, args: {{path: /proc/self/environ}}}}]
  - text: lead done
"""
    rt = make(tmp_path, script, sandbox="workspace-write")
    async with rt:
        waits = Waits(rt)
        lead = await rt.create_agent()
        await rt.run("go", agent=lead)
        lead_log = (await logs(rt, str(lead.id)))["lead"]
    assert waits.seen == []
    codes = [r.code for r in events(lead_log, ToolResultEvent)]
    assert codes == [ErrorCode.SANDBOX_DENIED] * 4
    assert not (tmp_path / "db" / "beside.txt").exists()


async def test_a_read_of_home_asks_and_a_grant_reads_it(
    tmp_path: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = work.parent / "home"
    home.mkdir()
    (home / "notes.txt").write_text("private\n")
    monkeypatch.setenv("HOME", str(home))
    script = f"""
lead:
  - calls: [{{tool: read_file, args: {{path: {home / "notes.txt"}}}}}]
  - text: lead done
"""
    rt = make(tmp_path, script, sandbox="workspace-write")
    async with rt, asyncio.TaskGroup() as tasks:
        waits = Waits(rt)
        lead = await rt.create_agent()
        run = tasks.create_task(rt.run("go", agent=lead))
        waiting = await first_of(tasks, waits.next(), run)
        assert waiting.request.grant == f"read:{home / 'notes.txt'}"
        await rt.approve(lead.id, "lead")
        await run
        lead_log = (await logs(rt, str(lead.id)))["lead"]
    (read,) = results(lead_log, "read_file")
    assert not read.message.is_error
    assert "private" in read.message.content


async def test_a_resumed_wait_keeps_its_grant(tmp_path: Path, work: Path) -> None:
    (tmp_path / "db").mkdir()
    crashed = tmp_path / "db" / "crashed.db"
    rt = make(tmp_path, TWO_WRITES)
    async with rt, asyncio.TaskGroup() as tasks:
        waits = Waits(rt)
        lead = await rt.create_agent()
        run = tasks.create_task(rt.run("go", agent=lead))
        first = await first_of(tasks, waits.next(), run)
        await copy_tree(rt, str(lead.id), crashed)
        # The original run ends without writing: only the copy matters from here.
        await rt.interrupt(lead.id, "lead")
        await run
    assert not (work / "w.txt").exists()

    rt2 = make(tmp_path, TWO_WRITES, store=crashed)
    async with rt2, asyncio.TaskGroup() as tasks:
        waits = Waits(rt2)
        await rt2.approve(lead.id, "lead", first.request.call_id)
        resumed = tasks.create_task(rt2.resume(lead.id))
        second = await first_of(tasks, waits.next(), resumed)
        assert second.request.call_id != first.request.call_id
        assert (work / "w.txt").read_text() == "one"
        await rt2.deny(lead.id, "lead", reason="done")
        await resumed
    assert (work / "w.txt").read_text() == "one"
