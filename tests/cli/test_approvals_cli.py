"""Approvals across processes: a gated call waits durably, is listed, and is decided once.

Real processes on one real SQLite file. The holder is `subagents run --approve bash` (or a
`subagents resume`); the deciders are `subagents approvals | approve | deny` run from other
processes. The tree is lead -> a -> a/b, and the grandchild's gated `bash` call appends a line
to a file in the run's cwd, so "it ran once" and "it never ran" are read off that file.

Every wait is on an event: a record in the store (`StoreView`), or the one stderr line a
holder prints once its turn really waits on the call (the point after which a decision ends
the wait at once instead of being found in the log later). Holders write stdout and stderr
to files, so a test can poll a line while the process runs, without pipes or threads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli_support import Cli, write_script
from live_support import WAIT_SECONDS, Event, StoreView, environment, wait_until

from subagents.cli._approvals import decider
from subagents.sessions import ApprovalDecided, ApprovalRequested, ToolCallEvent, ToolResultEvent

COMMAND = "echo ran >> ran.txt"
"""The grandchild's gated command: each run of it adds one line `ran` to `ran.txt`."""

SCRIPT = f"""
lead:
  - calls: [{{tool: subagent, args: {{name: a, description: helper, prompt: go}}}}]
  - text: lead done
a:
  - calls: [{{tool: subagent, args: {{name: b, description: helper, prompt: go}}}}]
  - text: a done
a/b:
  - calls: [{{tool: bash, args: {{command: "{COMMAND}"}}}}]
  - text: b done
"""

UNKNOWN_SESSION = "00000000-0000-4000-8000-000000000000"


# -- processes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spawned:
    """A `python -m subagents ...` process whose stdout and stderr go to files."""

    process: subprocess.Popen[bytes]
    out: Path
    err: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr(self) -> str:
        return self.err.read_text(encoding="utf-8") if self.err.exists() else ""

    def finish(self) -> tuple[int, str, str]:
        """Wait for it to exit; (exit status, stdout, stderr)."""
        status = self.process.wait(timeout=WAIT_SECONDS)
        return status, self.out.read_text(encoding="utf-8"), self.stderr()

    def kill(self) -> None:
        """SIGKILL: what a crash leaves (no lease released, nothing flushed after)."""
        self.process.kill()
        self.process.wait(timeout=WAIT_SECONDS)


@contextmanager
def spawning(home: Path, cwd: Path) -> Generator[Callable[..., Spawned], None, None]:
    """Start subagents processes in `cwd`; every one still running is killed after."""
    spawned: list[Spawned] = []

    def start(*args: str) -> Spawned:
        index = len(spawned)
        out, err = cwd / f"process-{index}.out", cwd / f"process-{index}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "subagents", *args],
                stdout=stdout,
                stderr=stderr,
                env=environment(home),
                cwd=cwd,
            )
        spawned.append(Spawned(process, out, err))
        return spawned[-1]

    try:
        yield start
    finally:
        for one in spawned:
            if one.process.poll() is None:
                one.kill()


# -- what the store says ---------------------------------------------------------------------


def requests_of(events: list[Event]) -> list[ApprovalRequested]:
    return [e.event for e in events if isinstance(e.event, ApprovalRequested)]


def decisions_of(events: list[Event]) -> list[ApprovalDecided]:
    return [e.event for e in events if isinstance(e.event, ApprovalDecided)]


def calls_of(events: list[Event], call_id: str) -> list[ToolCallEvent]:
    return [
        e.event for e in events if isinstance(e.event, ToolCallEvent) and e.event.call_id == call_id
    ]


def results_of(events: list[Event], call_id: str) -> list[ToolResultEvent]:
    return [
        e.event
        for e in events
        if isinstance(e.event, ToolResultEvent) and e.event.message.call_id == call_id
    ]


def ran_lines(cwd: Path) -> list[str] | None:
    """The lines the gated command wrote, or None when it never ran."""
    path = cwd / "ran.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else None


@dataclass(frozen=True)
class Waiting:
    """A tree whose grandchild's gated call waits: the ids a test addresses it by."""

    root: str
    b: str
    """The session id of `a/b`."""
    call_id: str


def wait_for_request(view: StoreView) -> Waiting:
    """The tree's ids, once a/b's request is durable in the store."""
    root = wait_until(lambda: view.roots(), "the root session")[0]
    b = wait_until(lambda: view.children(root).get("b"), "the grandchild a/b")
    (request,) = wait_until(lambda: requests_of(view.events(b)), "a/b's approval request")
    return Waiting(root, b, request.call_id)


def killed_while_waiting(home: Path, cwd: Path, view: StoreView) -> tuple[Spawned, Waiting]:
    """A `subagents run --approve bash` SIGKILLed once a/b's request is durable.

    Returns the dead holder and the tree's ids; nobody holds the tree after.
    """
    spec = write_script(cwd / "s.yaml", SCRIPT)
    with spawning(home, cwd) as start:
        holder = start("run", "Go", "--model", spec, "--approve", "bash", "--json")
        waiting = wait_for_request(view)
        holder.kill()
    return holder, waiting


def wait_for_notice(holder: Spawned, waiting: Waiting) -> str:
    """The holder's one stderr line, printed once its turn waits on the call (not earlier)."""
    hint = f"subagents approve {waiting.root} a/b {waiting.call_id}"
    return wait_until(
        lambda: next((line for line in holder.stderr().splitlines() if hint in line), None),
        "the holder's notice that a/b waits",
    )


def start_waiting(
    start: Callable[..., Spawned], spec: str, view: StoreView
) -> tuple[Spawned, Waiting]:
    """`subagents run --approve bash`, up to the point where a/b's call waits in it."""
    holder = start("run", "Go", "--model", spec, "--approve", "bash", "--json")
    waiting = wait_for_request(view)
    wait_for_notice(holder, waiting)
    return holder, waiting


def snapshot(view: StoreView) -> tuple[list[tuple[str, int, str]], list[tuple[int, str, str]]]:
    """Every record (session, seq, kind) and every command (id, kind, state) in the store."""
    events = [(e.session_id, e.seq, e.kind) for e in view.events()]
    commands = [(c[0], c[1], c[2]) for c in view.commands()]
    return events, commands


# -- what the commands print -----------------------------------------------------------------


def subset(row: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    """`row` cut to `expected`'s keys (a listing may carry more fields than a test checks)."""
    return {key: row.get(key) for key in expected}


def ok_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json.loads(done.stdout)


def refused(done: subprocess.CompletedProcess[str], code: str) -> str:
    """A refusal: exit 2, nothing on stdout, one line on stderr carrying its stable code."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("subagents: error: "), lines[0]
    assert f"[{code}]" in lines[0], lines[0]
    return lines[0]


def finished_run(holder: Spawned) -> str:
    """Wait for a holder to finish the tree as the script says; its stderr."""
    status, out, err = holder.finish()
    assert status == 0, err
    result = json.loads(out)
    assert (result["stop_reason"], result["output"]) == ("completed", "lead done")
    return err


# -- deciding while the run process holds the tree --------------------------------------------


def test_a_grandchilds_gated_call_is_listed_and_runs_once_when_approved_from_another_process(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", SCRIPT)
    view = StoreView(home / "state.db")
    with spawning(home, tmp_path) as start:
        holder, waiting = start_waiting(start, spec, view)
        root, call_id = waiting.root, waiting.call_id
        # Durable before anything of the call: a request, no `tool/call`, nothing ran.
        assert calls_of(view.events(waiting.b), call_id) == []
        assert ran_lines(tmp_path) is None

        expected = {
            "root": root,
            "session_id": waiting.b,
            "name": "a/b",
            "call_id": call_id,
            "tool": "bash",
            "reason": "gated by 'bash'",
            "deadline": None,
            "state": "pending",
            "decided_by": None,
            "held": True,  # the run process holds the tree
        }
        (listed,) = ok_json(cli("approvals", "--json"))
        assert subset(listed, expected) == expected
        assert json.loads(listed["arguments"]) == {"command": COMMAND}
        assert ok_json(cli("approvals", root, "--json")) == [listed]
        text = cli("approvals")
        assert text.returncode == 0, text.stderr
        assert f"subagents approve {root} a/b {call_id}" in text.stdout

        # The member waits; each ancestor rolls the wait up.
        tree = cli("tree", root)
        assert tree.returncode == 0, tree.stderr
        lead_line, a_line, b_line = tree.stdout.splitlines()[:3]
        assert lead_line.startswith("lead  [running]")
        assert "1 approval pending below" in lead_line
        assert a_line.startswith("  a  [running]")
        assert "1 approval pending below" in a_line
        assert b_line.startswith("    a/b  [waiting for approval]")
        assert "pending below" not in b_line
        rows = {row["name"]: row for row in ok_json(cli("tree", root, "--json"))}
        assert {
            name: (r["approvals_pending"], r["approvals_below"]) for name, r in rows.items()
        } == {
            "lead": (0, 1),
            "a": (0, 1),
            "a/b": (1, 0),
        }
        assert rows["a/b"]["status"] == "waiting for approval"
        assert holder.process.poll() is None  # all of that while the run waits

        decided = ok_json(cli("approve", root, "a/b", "--json"))
        assert decided == {
            "root": root,
            "name": "a/b",
            "call_id": call_id,
            "tool": "bash",
            "approved": True,
            "by": decider(),
            "applied": True,  # the holder's wait ended at once
        }
        assert decided["by"].startswith("cli:")
        run_err = finished_run(holder)

    assert ran_lines(tmp_path) == ["ran"]
    # The decision travelled as one control command, taken by the holder.
    ((command, kind, state),) = snapshot(view)[1]
    assert (kind, state) == ("approve", "done")
    assert len(decisions_of(view.events())) == 1  # in the whole tree's logs
    b = view.events(waiting.b)
    (decision,) = decisions_of(b)
    assert (decision.call_id, decision.approved, decision.reason) == (call_id, True, None)
    assert decision.by.startswith("cli:")
    assert decision.command == command
    assert len(requests_of(b)) == 1
    assert len(calls_of(b, call_id)) == 1
    (result,) = results_of(b, call_id)
    assert (result.message.is_error, result.code) == (False, None)
    order = [e.kind for e in b if e.kind.startswith("tool/")]
    assert order == ["tool/approval-requested", "tool/approval-decided", "tool/call", "tool/result"]
    assert ok_json(cli("approvals", "--json")) == []
    # The run told its user once, on stderr, how to decide.
    notices = [line for line in run_err.splitlines() if "waits for approval" in line]
    assert len(notices) == 1, run_err
    assert f"subagents approve {root} a/b {call_id}" in notices[0]


def test_a_denied_call_never_runs_and_the_grandchilds_model_reads_why(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", SCRIPT)
    view = StoreView(home / "state.db")
    with spawning(home, tmp_path) as start:
        holder, waiting = start_waiting(start, spec, view)
        decided = ok_json(cli("deny", waiting.root, "a/b", "--reason", "not today", "--json"))
        assert decided == {
            "root": waiting.root,
            "name": "a/b",
            "call_id": waiting.call_id,
            "tool": "bash",
            "approved": False,
            "by": decider(),
            "applied": True,
        }
        finished_run(holder)

    assert ran_lines(tmp_path) is None  # the command never ran
    b = view.events(waiting.b)
    # The denied call gets its `tool/call` only with its result, after the decision.
    order = [e.kind for e in b if e.kind.startswith("tool/")]
    assert order == ["tool/approval-requested", "tool/approval-decided", "tool/call", "tool/result"]
    (decision,) = decisions_of(b)
    assert (decision.approved, decision.reason) == (False, "not today")
    assert decision.by.startswith("cli:")
    # What the model got back for the call: an error result naming who denied it and why.
    (result,) = results_of(b, waiting.call_id)
    assert result.message.is_error
    assert result.code == "APPROVAL_DENIED"
    assert "not today" in result.message.content
    assert f"denied by {decision.by}" in result.message.content
    # ... and it went on to its next step with that result.
    answers = [e.event.message.text for e in b if e.kind == "assistant/message"]
    assert answers[-1] == "b done"


# -- deciding while no process holds the tree -------------------------------------------------


def test_a_decision_made_after_a_crash_is_recorded_and_applied_once_by_resume(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    view = StoreView(home / "state.db")
    holder, waiting = killed_while_waiting(home, tmp_path, view)
    root, call_id = waiting.root, waiting.call_id
    assert view.lease_pid(root) == holder.pid  # the dead holder's lease is still there

    # Still pending, and listed as such; nobody holds the tree now.
    (listed,) = ok_json(cli("approvals", "--json"))
    assert (listed["call_id"], listed["state"], listed["held"]) == (call_id, "pending", False)

    decided = ok_json(cli("approve", root, "a/b", "--json"))
    assert (decided["call_id"], decided["approved"], decided["applied"]) == (call_id, True, False)
    assert decided["by"].startswith("cli:")
    assert ran_lines(tmp_path) is None  # recorded only: nothing runs until a resume
    (listed,) = ok_json(cli("approvals", "--json"))
    assert (listed["state"], listed["decided_by"], listed["held"]) == (
        "approved",
        decided["by"],
        False,
    )
    assert view.commands() == []  # no holder to ask: written straight into a/b's log

    resumed = ok_json(cli("resume", root, "--json"))
    assert (resumed["stop_reason"], resumed["output"]) == ("completed", "lead done")
    assert ran_lines(tmp_path) == ["ran"]
    b = view.events(waiting.b)
    assert len(requests_of(b)) == 1  # the resume asked nobody again
    (decision,) = decisions_of(b)
    assert (decision.approved, decision.command) == (True, None)
    assert len(calls_of(b, call_id)) == 1
    assert ok_json(cli("approvals", "--json")) == []

    # A second resume finds nothing to do again: the command still ran once.
    again = cli("resume", root, "--json")
    assert again.returncode == 0, again.stderr
    assert ran_lines(tmp_path) == ["ran"]


def test_a_resume_takes_up_the_same_wait_without_asking_again(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", SCRIPT)
    view = StoreView(home / "state.db")
    with spawning(home, tmp_path) as start:
        holder = start("run", "Go", "--model", spec, "--approve", "bash", "--json")
        waiting = wait_for_request(view)
        holder.kill()
        root, call_id = waiting.root, waiting.call_id

        # Resumed without a decision: a/b waits again, on the same call, asked nobody anew.
        resumer = start("resume", root, "--json")
        wait_until(lambda: view.lease_pid(root) == resumer.pid, "the resume to hold the tree")
        wait_for_notice(resumer, waiting)
        b = view.events(waiting.b)
        assert [r.call_id for r in requests_of(b)] == [call_id]
        assert calls_of(b, call_id) == []
        (listed,) = ok_json(cli("approvals", "--json"))
        assert (listed["call_id"], listed["state"], listed["held"]) == (call_id, "pending", True)
        tree = ok_json(cli("tree", root, "--json"))
        assert [(row["name"], row["status"]) for row in tree][2] == ("a/b", "waiting for approval")
        assert resumer.process.poll() is None  # it waits; it does not end the turn

        # Killed again while waiting: still the one request, and a decision then still works.
        resumer.kill()
    assert [r.call_id for r in requests_of(view.events(waiting.b))] == [call_id]
    decided = ok_json(cli("approve", root, "a/b", call_id, "--json"))
    assert (decided["approved"], decided["applied"]) == (True, False)
    resumed = ok_json(cli("resume", root, "--json"))
    assert (resumed["stop_reason"], resumed["output"]) == ("completed", "lead done")
    assert ran_lines(tmp_path) == ["ran"]
    b = view.events(waiting.b)
    assert [r.call_id for r in requests_of(b)] == [call_id]
    assert len(decisions_of(b)) == 1
    assert len(calls_of(b, call_id)) == 1


LEAD_SCRIPT = f"""
lead:
  - calls: [{{tool: bash, args: {{command: "{COMMAND}"}}}}]
  - text: lead done
"""


def resumed_and_waiting(
    start: Callable[..., Spawned], spec: str, view: StoreView, name: str
) -> tuple[Spawned, str, str]:
    """A run killed while `name`'s call waits, then a live resume waiting on that call again.

    Returns the resume's process, the root and the call id.
    """
    holder = start("run", "Go", "--model", spec, "--approve", "bash", "--json")
    root = wait_until(lambda: view.roots(), "the root session")[0]
    session = root if name == "lead" else wait_until(lambda: view.children(root).get("b"), "a/b")
    (request,) = wait_until(lambda: requests_of(view.events(session)), f"{name}'s request")
    holder.kill()
    resumer = start("resume", root, "--json")
    wait_until(lambda: view.lease_pid(root) == resumer.pid, "the resume to hold the tree")
    hint = f"subagents approve {root} {name} {request.call_id}"
    wait_until(lambda: hint in resumer.stderr(), f"the resume's notice that {name} waits")
    return resumer, root, request.call_id


def test_a_lead_waiting_again_in_a_resume_is_approved_from_another_process(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", LEAD_SCRIPT)
    view = StoreView(home / "state.db")
    with spawning(home, tmp_path) as start:
        resumer, root, call_id = resumed_and_waiting(start, spec, view, "lead")
        decided = ok_json(cli("approve", root, "lead", "--json"))
        assert (decided["call_id"], decided["applied"]) == (call_id, True)
        finished_run(resumer)
    assert ran_lines(tmp_path) == ["ran"]
    ((command, kind, state),) = snapshot(view)[1]
    assert (kind, state) == ("approve", "done")
    lead = view.events(root)
    assert [r.call_id for r in requests_of(lead)] == [call_id]
    (decision,) = decisions_of(lead)
    assert (decision.approved, decision.command) == (True, command)
    assert len(calls_of(lead, call_id)) == 1


def test_a_grandchild_waiting_again_in_a_resume_is_approved_from_another_process(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", SCRIPT)
    view = StoreView(home / "state.db")
    with spawning(home, tmp_path) as start:
        resumer, root, call_id = resumed_and_waiting(start, spec, view, "a/b")
        decided = ok_json(cli("approve", root, "a/b", "--json"))
        assert (decided["call_id"], decided["applied"]) == (call_id, True)
        finished_run(resumer)
    assert ran_lines(tmp_path) == ["ran"]
    assert [(kind, state) for _, kind, state in snapshot(view)[1]] == [("approve", "done")]


# -- refusals ----------------------------------------------------------------------------------


def test_another_tenant_sees_no_request_and_cannot_decide_one(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", SCRIPT)
    view = StoreView(home / "state.db")
    with spawning(home, tmp_path) as start:
        holder, waiting = start_waiting(start, spec, view)
        root, call_id = waiting.root, waiting.call_id
        before = snapshot(view)

        assert ok_json(cli("approvals", "--tenant", "other", "--json")) == []
        listing = cli("approvals", "--tenant", "other")
        assert (listing.returncode, listing.stdout.strip()) == (0, "no approval requests wait")
        refused(cli("approvals", root, "--tenant", "other", "--json"), "NOT_FOUND")
        refused(cli("approve", root, "a/b", "--tenant", "other"), "NOT_FOUND")
        refused(cli("approve", root, "a/b", call_id, "--tenant", "other"), "NOT_FOUND")
        refused(
            cli("deny", root, "a/b", call_id, "--reason", "no", "--tenant", "other"), "NOT_FOUND"
        )

        # Nothing was written (not even a command), and the owner's request still waits.
        assert snapshot(view) == before
        (listed,) = ok_json(cli("approvals", "--json"))
        assert (listed["call_id"], listed["state"]) == (call_id, "pending")
        assert holder.process.poll() is None
        ok_json(cli("approve", root, "a/b", "--json"))
        finished_run(holder)
    assert ran_lines(tmp_path) == ["ran"]


def test_bad_decisions_are_refused_with_a_stable_code_and_change_nothing(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", SCRIPT)
    view = StoreView(home / "state.db")
    with spawning(home, tmp_path) as start:
        holder, waiting = start_waiting(start, spec, view)
        root, call_id = waiting.root, waiting.call_id
        events_before = snapshot(view)[0]

        # While the call waits in the live holder.
        refused(cli("approve", root, "a/b", "call_nope"), "NOT_FOUND")
        refused(cli("deny", root, "a/b", "call_nope", "--reason", "no"), "NOT_FOUND")
        refused(cli("approve", root, "nobody"), "NOT_FOUND")
        refused(cli("approve", root, "a/nobody", call_id), "NOT_FOUND")
        refused(cli("approve", UNKNOWN_SESSION, "a/b", call_id), "NOT_FOUND")
        refused(cli("approve", root, "a"), "NO_PENDING_REQUEST")  # a waits on no call of its own
        refused(cli("deny", root, "lead", "--reason", "no"), "NO_PENDING_REQUEST")
        refused(cli("approve", root, "a/b", " "), "USAGE")

        # No record anywhere, the call still waits, and the holder runs on. An unknown call id
        # is checked against the stored log before any command is written: none was.
        assert snapshot(view)[0] == events_before
        assert view.commands() == []
        (listed,) = ok_json(cli("approvals", "--json"))
        assert (listed["call_id"], listed["state"]) == (call_id, "pending")
        assert holder.process.poll() is None

        ok_json(cli("approve", root, "a/b", call_id, "--json"))
        finished_run(holder)

    # Once decided (and run), a second decision is refused, however it is addressed.
    before = snapshot(view)
    refused(cli("approve", root, "a/b", call_id), "ALREADY_DECIDED")
    refused(cli("deny", root, "a/b", call_id, "--reason", "too late"), "ALREADY_DECIDED")
    refused(cli("approve", root, "a/b"), "NO_PENDING_REQUEST")
    refused(cli("deny", root, "a/b", "--reason", "too late"), "NO_PENDING_REQUEST")
    assert snapshot(view) == before
    assert ran_lines(tmp_path) == ["ran"]


def test_a_second_decision_on_a_call_decided_while_the_tree_was_down_is_refused(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    view = StoreView(home / "state.db")
    _, waiting = killed_while_waiting(home, tmp_path, view)
    ok_json(cli("deny", waiting.root, "a/b", "--reason", "not today", "--json"))
    before = snapshot(view)
    # Decided but not yet acted on (it is listed until a resume applies it): still final.
    refused(cli("approve", waiting.root, "a/b", waiting.call_id), "ALREADY_DECIDED")
    refused(cli("approve", waiting.root, "a/b"), "NO_PENDING_REQUEST")
    assert snapshot(view) == before
    (listed,) = ok_json(cli("approvals", "--json"))
    assert (listed["state"], listed["held"]) == ("denied", False)


def test_a_reason_over_2000_characters_is_refused_as_usage(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    view = StoreView(home / "state.db")
    _, waiting = killed_while_waiting(home, tmp_path, view)
    before = snapshot(view)
    refused(cli("deny", waiting.root, "a/b", "--reason", "x" * 2001), "USAGE")
    assert snapshot(view) == before
    (listed,) = ok_json(cli("approvals", "--json"))
    assert listed["state"] == "pending"
