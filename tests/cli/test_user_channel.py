"""The user channel of the command line, run as real subprocesses (docs/design.md §13
`send`, `interrupt` and `resume`; leases, §4.3: a person talks to any
agent of a stored tree by its full name, recorded as source `user`).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from cli_support import Cli, write_script

from subagents.ids import SessionId
from subagents.sessions import SqliteEventStore

# The reviewer's notice may reach the lead within its first turn or start a second one (the
# subprocess has no test gates to order them), so every later lead answer is the same text.
SCRIPT = """
lead:
  - calls:
      - tool: subagent
        args: {name: reviewer, description: Review the code, prompt: Review app.py,
               run_in_background: true}
  - text: Lead here.
  - text: Lead here.
  - text: Lead here.
  - text: Lead here.
  - text: Lead here.
reviewer:
  - text: first review
  - text: second review
"""


def run_tree(cli: Cli, tmp_path: Path) -> tuple[str, str, str]:
    """A stored tree whose background reviewer has settled: (model spec, root id, reviewer id)."""
    spec = write_script(tmp_path / "s.yaml", SCRIPT)
    done = cli("run", "Review app.py", "--model", spec, "--json")
    assert done.returncode == 0, done.stderr
    session = json.loads(done.stdout)["session_id"]
    tree = json.loads(cli("tree", session, "--json").stdout)
    assert [(r["name"], r["mode"]) for r in tree] == [("lead", "root"), ("reviewer", "continuable")]
    return spec, session, tree[1]["session_id"]


def log_events(cli: Cli, target: str, session: str) -> list[dict[str, Any]]:
    done = cli("log", target, "--session", session, "--json")
    assert done.returncode == 0, done.stderr
    events: list[dict[str, Any]] = json.loads(done.stdout)
    return events


def entered(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(source kind, text) of every message that entered a turn (not runtime context)."""
    return [
        (
            e["payload"]["message"]["source"]["kind"],
            "".join(b["text"] for b in e["payload"]["message"]["content"]),
        )
        for e in events
        if e["kind"] == "user/message" and e["payload"]["message"]["source"]["name"] != "context"
    ]


def one_line_error(done: Any) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    line: str = lines[0]
    assert line.startswith("subagents: error: ")
    return line


def test_send_runs_a_child_as_the_user_and_prints_its_answer(cli: Cli, tmp_path: Path) -> None:
    spec, session, _ = run_tree(cli, tmp_path)
    done = cli("send", session, "reviewer", "Check it again", "--model", spec)
    assert (done.returncode, done.stdout, done.stderr) == (0, "second review\n", "")
    assert entered(log_events(cli, "reviewer", session)) == [
        ("parent", "Review app.py"),
        ("user", "Check it again"),
    ]
    # The tree is resumed with its lead loaded: the child's settlement notice is taken in by
    # a turn of the lead at once, not left queued until a later command.
    lead = log_events(cli, "lead", session)
    assert [kind for kind, _ in entered(lead)] == ["user", "subagent-settled", "subagent-settled"]
    assert "second review" in entered(lead)[-1][1]
    assert lead[-1]["kind"] == "turn/end"
    assert lead[-1]["payload"]["reason"] == "completed"

    done = cli("send", session, "lead", "Continue", "--model", spec)
    assert (done.returncode, done.stdout) == (0, "Lead here.\n"), done.stderr
    lead = log_events(cli, "lead", session)
    assert [kind for kind, _ in entered(lead)] == [
        "user",
        "subagent-settled",
        "subagent-settled",
        "user",
    ]
    assert entered(lead)[-1] == ("user", "Continue")
    assert lead[-1]["kind"] == "turn/end"
    assert lead[-1]["payload"]["reason"] == "completed"


def test_send_reuses_the_recorded_model(cli: Cli, tmp_path: Path) -> None:
    _, session, _ = run_tree(cli, tmp_path)
    done = cli("send", session, "/reviewer", "Check it again")
    assert (done.returncode, done.stdout) == (0, "second review\n"), done.stderr


def test_interrupt_of_a_settled_agent_exits_0(cli: Cli, tmp_path: Path) -> None:
    _, session, _ = run_tree(cli, tmp_path)
    before = log_events(cli, "reviewer", session)
    done = cli("interrupt", session, "reviewer")
    assert (done.returncode, done.stdout) == (0, "reviewer was not running; nothing to interrupt\n")
    assert log_events(cli, "reviewer", session) == before


@pytest.mark.parametrize("command", ["send", "interrupt"])
def test_bad_targets_exit_2_with_one_line(cli: Cli, tmp_path: Path, command: str) -> None:
    spec, session, reviewer = run_tree(cli, tmp_path)
    extra = ["Hello", "--model", spec] if command == "send" else []
    line = one_line_error(cli(command, session, "ghost", *extra))
    assert f"no agent named 'ghost' in session {session}" in line
    line = one_line_error(cli(command, reviewer, "reviewer", *extra))
    assert f"session {reviewer} is not a root session" in line
    line = one_line_error(cli(command, "not-a-session", "reviewer", *extra))
    assert "'not-a-session' is not a session id" in line


def test_an_empty_message_exits_2(cli: Cli, tmp_path: Path) -> None:
    spec, session, _ = run_tree(cli, tmp_path)
    before = log_events(cli, "reviewer", session)
    for message in ("", "   "):
        line = one_line_error(cli("send", session, "reviewer", message, "--model", spec))
        assert line == "subagents: error: the message must not be empty"
    assert log_events(cli, "reviewer", session) == before


async def _hold_and_count(path: Path, root: str, *, hold: bool) -> dict[str, int]:
    """Per-session record counts of the store; with `hold`, first take the tree's lease."""
    async with SqliteEventStore(path) as store:
        if hold:
            lease = await store.acquire_lease(
                SessionId(root),
                holder=f"999@{socket.gethostname()}/x",
                pid=os.getpid(),  # this test process: alive for as long as the commands run
                now=time.time(),
                ttl=3600,
            )
            assert lease.pid == os.getpid()
        headers = await store.list_headers(tenant="default", roots_only=False)
        return {h.id: len(await store.read(h.id, tenant="default")) for h in headers}


def test_a_tree_held_by_another_live_process_is_refused(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    spec, session, _ = run_tree(cli, tmp_path)
    path = home / "state.db"
    before = asyncio.run(_hold_and_count(path, session, hold=True))
    attempts = {
        "send": cli("send", session, "reviewer", "Hello", "--model", spec),
        "send lead": cli("send", session, "lead", "Hello", "--model", spec),
        "interrupt": cli("interrupt", session, "reviewer"),
        "resume": cli("resume", session, "Go on", "--model", spec),
    }
    for name, done in attempts.items():
        line = one_line_error(done)
        assert f"is held by process {os.getpid()}" in line, name
        assert "[LEASE_HELD]" in line, name
    assert asyncio.run(_hold_and_count(path, session, hold=False)) == before
