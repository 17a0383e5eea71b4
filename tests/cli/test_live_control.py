"""Control of a live tree from another process: `send`, `steer` and `interrupt` reach the
process that holds it, through the store, and each takes effect exactly once.

Real processes on one real SQLite file: the holder is `subagents run`, the senders are
`subagents send|steer|interrupt`. Members are kept busy by a `bash` call waiting for a gate
file, so every wait here is on an event in the store.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from cli_support import Cli, write_script
from live_support import Event, StoreView, finished, gate_call, started, wait_until

from subagents.sessions import InboxSpliced, ToolCallEvent, TurnEnd, UserMessageEvent

STEER = "Steer: also check the tests"
MESSAGE = "Message: what did you find?"

LIVE_SCRIPT = f"""
lead:
  - calls:
      - {{tool: subagent, args: {{name: worker, description: Work, prompt: Work on it,
          run_in_background: true}}}}
      - {gate_call("lead-go")}
  - text: lead answer 1
  - text: lead answer 2
  - text: lead answer 3
  - text: lead answer 4
  - text: lead answer 5
worker:
  - calls:
      - {gate_call("worker-go")}
  - text: worker answer 1
  - text: worker answer 2
"""


def texts(events: list[Event]) -> list[tuple[int, str]]:
    """(seq, text) of every message that entered a turn of this session."""
    return [(e.seq, e.event.message.text) for e in events if isinstance(e.event, UserMessageEvent)]


def turn_of(events: list[Event], seq: int) -> int:
    """The number of the turn a record belongs to."""
    turn = 0
    for e in events:
        if e.seq > seq:
            break
        if e.kind == "turn/start":
            turn = e.event.turn
    return turn


def bash_calls(events: list[Event]) -> list[Event]:
    return [e for e in events if isinstance(e.event, ToolCallEvent) and e.event.name == "bash"]


def one_line_error(done: Any, code: str | None) -> None:
    """A refusal: one line on stderr (with its stable code, where the runtime refused)."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("subagents: error: ")
    assert code is None or f"[{code}]" in lines[0], lines[0]


def test_send_steer_and_interrupt_take_effect_in_the_running_tree_once(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", LIVE_SCRIPT)
    view = StoreView(home / "state.db")
    with started(home, tmp_path) as start:
        holder = start("run", "Go", "--model", spec, "--json")
        root = wait_until(lambda: view.roots(), "the root session")[0]
        worker = wait_until(lambda: view.children(root).get("worker"), "the worker")
        wait_until(lambda: bash_calls(view.events(worker)), "the worker's bash call")
        wait_until(lambda: bash_calls(view.events(root)), "the lead's bash call")

        steered = cli("steer", root, "lead", STEER, "--json")
        assert steered.returncode == 0, steered.stderr
        assert json.loads(steered.stdout) == {
            "session_id": root,
            "name": "lead",
            "placement": "joined",
        }
        interrupted = cli("interrupt", root, "worker", "--json")
        assert interrupted.returncode == 0, interrupted.stderr
        assert json.loads(interrupted.stdout) == {
            "session_id": worker,
            "name": "worker",
            "interrupted": True,
        }
        sender = start("send", root, "lead", MESSAGE, "--model", spec, "--json")
        wait_until(
            lambda: [c for c in view.commands() if c[1] == "send" and c[2] == "done"],
            "the holder to take the message",
        )
        assert holder.poll() is None  # all of it happened while the tree was running
        (tmp_path / "lead-go").touch()
        sent_status, sent_out, sent_err = finished(sender)
        run_status, run_out, run_err = finished(holder)
    assert (sent_status, run_status) == (0, 0), (sent_err, run_err)

    commands = view.commands()
    assert [(kind, state) for _, kind, state, _ in commands] == [
        ("steer", "done"),
        ("interrupt", "done"),
        ("send", "done"),
    ]
    interrupt_id = commands[1][0]
    lead = view.events(root)
    entered = texts(lead)
    steer_at = [seq for seq, text in entered if text == STEER]
    message_at = [seq for seq, text in entered if text == MESSAGE]
    assert len(steer_at) == 1, entered
    assert len(message_at) == 1, entered
    # The steer joined the turn that was waiting in bash; the message began a later turn.
    assert turn_of(lead, steer_at[0]) == turn_of(lead, bash_calls(lead)[0].seq) == 1
    assert turn_of(lead, message_at[0]) > 1
    # The send answered with the lead's answer to the message's turn.
    answer = json.loads(sent_out)
    turn = turn_of(lead, message_at[0])
    answers = [
        e.event.message.text
        for e in lead
        if e.kind == "assistant/message" and turn_of(lead, e.seq) == turn and e.event.message.text
    ]
    assert answer["output"] == answers[-1]
    assert answer["stop_reason"] == "completed"
    # The worker's turn was stopped once, by that command, and not run again.
    stopped = [e.event for e in view.events(worker) if isinstance(e.event, TurnEnd)]
    assert [(t.reason, t.command) for t in stopped if t.reason == "aborted"] == [
        ("aborted", interrupt_id)
    ]
    assert len(bash_calls(view.events(worker))) == 1
    assert json.loads(run_out)["stop_reason"] == "completed"


def _submit(db: Path, root: str, target: str, kind: str, text: str | None) -> None:
    """What a sender writes before it wakes the holder (a sender that then died)."""
    from subagents.sessions import encode_body

    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute(
            "INSERT INTO commands (root, tenant, target, kind, body, created_at) "
            "VALUES (?, 'default', ?, ?, ?, 0)",
            (root, target, kind, encode_body(text)),
        )


KILL_SCRIPT = f"""
lead:
  - calls:
      - {gate_call("lead-go")}
  - text: lead answer 1
  - text: lead answer 2
  - text: lead answer 3
"""


def test_commands_pending_when_the_holder_is_killed_run_once_on_resume(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", KILL_SCRIPT)
    db = home / "state.db"
    view = StoreView(db)
    with started(home, tmp_path) as start:
        holder = start("run", "Go", "--model", spec)
        root = wait_until(lambda: view.roots(), "the root session")[0]
        wait_until(lambda: bash_calls(view.events(root)), "the lead's bash call")
        holder.send_signal(signal.SIGSTOP)  # it can take nothing now
        _submit(db, root, root, "interrupt", None)
        _submit(db, root, root, "steer", STEER)
        _submit(db, root, root, "send", MESSAGE)
        holder.kill()
        holder.wait()
    assert [state for _, _, state, _ in view.commands()] == ["pending"] * 3

    (tmp_path / "lead-go").touch()
    resumed = cli("resume", root, "--model", spec, "--json")
    assert resumed.returncode == 0, resumed.stderr
    again = cli("resume", root, "--model", spec, "--json")
    assert again.returncode == 0, again.stderr

    commands = view.commands()
    assert [(kind, state) for _, kind, state, _ in commands] == [
        ("interrupt", "done"),
        ("steer", "done"),
        ("send", "done"),
    ]
    assert json.loads(commands[0][3] or "{}") == {"interrupted": True}
    lead = view.events(root)
    # The interrupt closed the turn the kill cut off (as `interrupted`), instead of running
    # it again; the steer and the message each began one later turn.
    ends = [e.event for e in lead if isinstance(e.event, TurnEnd)]
    assert [t.reason for t in ends] == ["interrupted", "completed", "completed"]
    assert len(bash_calls(lead)) == 1
    entered = [text for _, text in texts(lead)]
    assert entered.count(STEER) == 1
    assert entered.count(MESSAGE) == 1
    queued = [e for e in lead if isinstance(e.event, InboxSpliced) and e.event.inserted]
    assert sum(1 for e in queued for m in e.event.inserted if m.text == STEER) == 1


def test_bad_commands_to_a_live_tree_change_nothing(cli: Cli, tmp_path: Path, home: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", KILL_SCRIPT)
    db = home / "state.db"
    view = StoreView(db)
    with started(home, tmp_path) as start:
        holder = start("run", "Go", "--model", spec, "--json")
        root = wait_until(lambda: view.roots(), "the root session")[0]
        wait_until(lambda: bash_calls(view.events(root)), "the lead's bash call")
        before = view.events()

        one_line_error(cli("send", root, "nobody", "Hello", "--model", spec), "NOT_FOUND")
        one_line_error(cli("steer", root, "Bad Name", "Hello"), "INVALID_NAME")
        one_line_error(cli("interrupt", root, "lead", "--tenant", "other"), "NOT_FOUND")
        one_line_error(cli("steer", root, "lead", "   "), None)
        assert view.commands() == []  # refused before anything was written

        # Rows nobody could write through the API: each fails with BAD_COMMAND, once a real
        # command wakes the holder; the tree goes on untouched.
        with closing(sqlite3.connect(db, isolation_level=None)) as conn:
            for kind, target, body in [
                ("explode", root, b"{}"),
                ("send", root, b"not json"),
                ("send", "../../etc/passwd", b'{"text": "hi"}'),
                ("interrupt", root, b'{"text": "an interrupt carries no text"}'),
            ]:
                conn.execute(
                    "INSERT INTO commands (root, tenant, target, kind, body, created_at) "
                    "VALUES (?, 'default', ?, ?, ?, 0)",
                    (root, target, kind, body),
                )
            # A command for a session of another tenant, in this tree's queue.
            conn.execute(
                "INSERT INTO commands (root, tenant, target, kind, body, created_at) "
                "VALUES (?, 'other', ?, 'interrupt', '{}', 0)",
                (root, root),
            )
        steered = cli("steer", root, "lead", STEER, "--json")
        assert steered.returncode == 0, steered.stderr
        outcomes = {row[0]: (row[2], json.loads(row[3] or "{}")) for row in view.commands()}
        failed = [outcome for state, outcome in outcomes.values() if state == "failed"]
        assert [f["code"] for f in failed] == ["BAD_COMMAND"] * 4 + ["NOT_FOUND"]
        assert all("\n" not in f["message"] for f in failed)
        assert holder.poll() is None
        new = [
            e
            for e in view.events()
            if (e.session_id, e.seq) not in {(b.session_id, b.seq) for b in before}
        ]
        assert [e.kind for e in new] == ["agent/inbox/spliced"]  # only the steer
        (tmp_path / "lead-go").touch()
        status, out, err = finished(holder)
    assert status == 0, err
    assert json.loads(out)["stop_reason"] == "completed"


def test_a_stale_lease_is_taken_over_by_the_sender(cli: Cli, tmp_path: Path, home: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", KILL_SCRIPT)
    view = StoreView(home / "state.db")
    with started(home, tmp_path) as start:
        holder = start("run", "Go", "--model", spec)
        root = wait_until(lambda: view.roots(), "the root session")[0]
        wait_until(lambda: bash_calls(view.events(root)), "the lead's bash call")
        holder.kill()
        holder.wait()
    assert view.lease_pid(root) == holder.pid  # its lease is still there, its process is not
    (tmp_path / "lead-go").touch()
    done = cli("send", root, "lead", MESSAGE, "--model", spec, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stop_reason"] == "completed"
    assert view.commands() == []  # no holder to ask: it ran the tree itself, as before
    assert view.lease_pid(root) is None
    assert os.getpid() != holder.pid


def test_send_streams_the_members_work_in_the_other_process(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", KILL_SCRIPT)
    view = StoreView(home / "state.db")
    with started(home, tmp_path) as start:
        holder = start("run", "Go", "--model", spec)
        root = wait_until(lambda: view.roots(), "the root session")[0]
        wait_until(lambda: bash_calls(view.events(root)), "the lead's bash call")
        sender = start("send", root, "lead", MESSAGE, "--model", spec, "--stream")
        wait_until(lambda: [c for c in view.commands() if c[2] == "done"], "the message taken")
        (tmp_path / "lead-go").touch()
        status, out, err = finished(sender)
        assert finished(holder)[0] == 0
    assert status == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert all(line["v"] == 1 for line in lines)
    assert lines[-1]["type"] == "result"
    assert lines[-1]["stop_reason"] == "completed"
    events = lines[:-1]
    assert {(e["type"], e["name"], e["session_id"]) for e in events} == {("event", "lead", root)}
    # From the record that queued the message on, each of the lead's records once, in order.
    logged = {e.seq: e.kind for e in view.events(root)}
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(seqs[0], max(logged) + 1))
    assert [e["kind"] for e in events] == [logged[s] for s in seqs]
    assert events[0]["kind"] == "agent/inbox/spliced"
    assert MESSAGE in json.dumps(events[0]["payload"])


def test_a_stream_whose_reader_goes_away_still_runs_the_tree(tmp_path: Path, home: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", KILL_SCRIPT)
    view = StoreView(home / "state.db")
    with started(home, tmp_path) as start:
        holder = start("run", "Go", "--model", spec, "--stream")
        assert holder.stdout is not None
        first = json.loads(holder.stdout.readline())
        assert first["type"] == "event"
        holder.stdout.close()  # the reader is gone (`| head -1`)
        root = wait_until(lambda: view.roots(), "the root session")[0]
        wait_until(lambda: bash_calls(view.events(root)), "the lead's bash call")
        (tmp_path / "lead-go").touch()
        assert holder.stderr is not None
        err = holder.stderr.read()
        assert holder.wait() == 0, err
    assert err == ""
    ends = [e.event for e in view.events(root) if isinstance(e.event, TurnEnd)]
    assert [t.reason for t in ends] == ["completed"]
