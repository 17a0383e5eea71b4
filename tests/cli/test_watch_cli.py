"""`subagents watch`: a tree followed from another process, through the store alone.

Real subprocesses: `subagents run` holds the tree; the test lets it go on by creating the file
a `bash` call waits for, so the tree is running while it is watched without any sleep here.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import signal
import sqlite3  # noqa: TID251 - the holder's file, read as a bystander would and compared
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import Cli, write_script

WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.05; done; echo ok"
BASH_WAITS = f'{{tool: bash, args: {{command: "{WAIT_FOR_GO}", timeout_ms: 30000}}}}'

# The reviewer runs in the background and waits for `go`; its notice starts a second lead turn
# (or reaches the first one's next step), so every lead answer after the first is the same.
CHILD_WAITS = f"""
lead:
  - calls:
      - tool: subagent
        args: {{name: reviewer, description: Review the code, prompt: Review app.py,
               run_in_background: true}}
  - text: Lead here.
  - text: Lead here.
  - text: Lead here.
  - text: Lead here.
reviewer:
  - calls: [{BASH_WAITS}]
  - text: first review
"""
LEAD_WAITS = f"lead:\n  - calls: [{BASH_WAITS}]\n  - text: done\n"


def environment(home: Path) -> dict[str, str]:
    """The `cli` fixture's environment, for processes the test starts and stops itself."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SUBAGENTS_", "OPENAI_", "DEEPSEEK_"))
    }
    env["SUBAGENTS_HOME"] = str(home)
    return env


def start(home: Path, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "subagents", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(home),
        cwd=tmp_path,
    )


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test started: killed (and a waiting `bash` let go) when it ends."""
    started: list[subprocess.Popen[str]] = []
    yield started
    (tmp_path / "go").touch()
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def bash_call_stored(home: Path, holder: subprocess.Popen[str]) -> str:
    """Wait (bounded) until a `bash` tool call is in the store; returns the root session id."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if holder.poll() is not None:
            raise AssertionError(f"the holder exited {holder.returncode}: {holder.communicate()}")
        row = None
        db = home / "state.db"
        if db.exists():
            # (the file exists a moment before its tables do)
            with contextlib.suppress(sqlite3.OperationalError), sqlite3.connect(db) as conn:
                row = conn.execute(
                    "SELECT s.root FROM events e JOIN sessions s ON s.id = e.session_id "
                    "WHERE e.kind = 'tool/call' "
                    'AND CAST(e.payload AS TEXT) LIKE \'%"name":"bash"%\''
                ).fetchone()
        if row is not None:
            return str(row[0])
        time.sleep(0.02)
    raise AssertionError("the holder never made its bash call")


def read_until_bash_call(watch: subprocess.Popen[str]) -> list[dict[str, Any]]:
    """Lines of `watch --json` up to (and with) the `bash` tool call."""
    assert watch.stdout is not None
    lines: list[dict[str, Any]] = []
    for text in watch.stdout:
        line = json.loads(text)
        lines.append(line)
        if line.get("kind") == "tool/call" and line["payload"]["name"] == "bash":
            return lines
    raise AssertionError(f"watch ended before the bash call: {watch.wait()}")


def log_events(cli: Cli, name: str, session: str) -> list[dict[str, Any]]:
    done = cli("log", name, "--session", session, "--json")
    assert done.returncode == 0, done.stderr
    events: list[dict[str, Any]] = json.loads(done.stdout)
    return events


def tree_rows(cli: Cli, session: str) -> list[dict[str, Any]]:
    done = cli("tree", session, "--json")
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def events_by_session(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The event lines of each session, as `log --json` prints events."""
    found: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        assert line["v"] == 1
        if line["type"] == "event":
            event = {k: line[k] for k in ("seq", "kind", "time", "payload")}
            found.setdefault(line["session_id"], []).append(event)
    return found


def assert_stream_is_the_log(cli: Cli, lines: list[dict[str, Any]], session: str) -> None:
    """Every event of every member exactly once, in seq order, named as `tree` names it."""
    rows = tree_rows(cli, session)
    names = {line["session_id"]: line["name"] for line in lines if line["type"] == "event"}
    assert names == {row["session_id"]: row["name"] for row in rows}
    streamed = events_by_session(lines)
    assert streamed == {row["session_id"]: log_events(cli, row["name"], session) for row in rows}


def snapshot(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the store."""
    with sqlite3.connect(db) as conn:
        tables = [
            str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        return {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables}


def finished_tree(cli: Cli, tmp_path: Path, script: str) -> dict[str, Any]:
    spec = write_script(tmp_path / "s.yaml", script)
    done = cli("run", "Review app.py", "--model", spec, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_watch_follows_a_running_tree_until_it_is_quiescent(
    cli: Cli, home: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    spec = write_script(tmp_path / "s.yaml", CHILD_WAITS)
    holder = start(home, tmp_path, "run", "Review app.py", "--model", spec)
    processes.append(holder)
    session = bash_call_stored(home, holder)
    watch = start(home, tmp_path, "watch", session, "--json")
    processes.append(watch)

    lines = read_until_bash_call(watch)
    assert lines[-1]["name"] == "reviewer"
    assert watch.poll() is None  # the reviewer is still at work: watch goes on
    (tmp_path / "go").touch()
    rest, err = watch.communicate(timeout=60)
    lines += [json.loads(text) for text in rest.splitlines()]

    assert (watch.returncode, err) == (0, "")
    assert holder.wait(timeout=60) == 0
    assert_stream_is_the_log(cli, lines, session)
    assert [line["type"] for line in lines].count("result") == 1
    result = lines[-1]
    assert result["type"] == "result"
    assert (result["session_id"], result["stop_reason"], result["output"]) == (
        session,
        "completed",
        "Lead here.",
    )
    rows = tree_rows(cli, session)
    assert result["usage"] == rows[0]["usage"]
    assert result["total_usage"] == rows[0]["total_usage"]


def test_watch_of_a_finished_tree_prints_its_whole_stream(cli: Cli, tmp_path: Path) -> None:
    ran = finished_tree(cli, tmp_path, "lead:\n  - text: All done.\n")
    done = cli("watch", ran["session_id"], "--json")
    assert (done.returncode, done.stderr) == (0, "")
    lines = [json.loads(text) for text in done.stdout.splitlines()]
    assert_stream_is_the_log(cli, lines, ran["session_id"])
    assert lines[-1] == {"v": 1, "type": "result", **ran}  # what `run --json` printed
    # `tree --follow` is the same command.
    followed = cli("tree", ran["session_id"], "--follow", "--json")
    assert (followed.returncode, followed.stdout) == (0, done.stdout)


def test_watch_prints_the_final_tree_as_text_off_a_terminal(cli: Cli, tmp_path: Path) -> None:
    script = CHILD_WAITS.replace(WAIT_FOR_GO, "echo no wait")
    ran = finished_tree(cli, tmp_path, script)
    done = cli("watch", "--last")
    assert (done.returncode, done.stderr) == (0, "")
    rows = tree_rows(cli, ran["session_id"])
    lines = done.stdout.splitlines()
    assert len(lines) == len(rows) == 2
    pattern = re.compile(
        r"^( *)(\S+)  \[([a-z-]+)\]  turn [0-9.]+s  (\d+) model calls, tokens in/out (\d+)/(\d+)$"
    )
    for line, row in zip(lines, rows, strict=True):
        match = pattern.match(line)
        assert match is not None, line
        indent, name, status, calls, tokens_in, tokens_out = match.groups()
        usage = row["usage"]
        assert (len(indent) // 2, name, status) == (row["depth"], row["name"], row["status"])
        assert (int(calls), int(tokens_in), int(tokens_out)) == (
            usage["model_calls"],
            usage["input_tokens"],
            usage["output_tokens"],
        )
    assert [row["status"] for row in rows] == ["completed", "ready"]


def test_a_killed_holder_stops_watch_with_exit_1(
    cli: Cli, home: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    spec = write_script(tmp_path / "s.yaml", LEAD_WAITS)
    holder = start(home, tmp_path, "run", "Wait for go", "--model", spec)
    processes.append(holder)
    session = bash_call_stored(home, holder)
    watch = start(home, tmp_path, "watch", session, "--json")
    processes.append(watch)
    read_until_bash_call(watch)

    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=60)  # reaped: its pid is gone, as a dead holder's is
    _, err = watch.communicate(timeout=60)
    assert watch.returncode == 1
    assert err == (
        "subagents: the process holding this tree died; resume it with: "
        f"subagents resume {session}\n"
    )
    text = cli("watch", session)
    assert text.returncode == 1
    assert re.match(r"^lead  \[crashed\]  turn [0-9.]+s  1 model calls, ", text.stdout)
    assert text.stdout.rstrip("\n").endswith("→ bash")


def test_watch_never_writes_to_the_store(cli: Cli, home: Path, tmp_path: Path) -> None:
    ran = finished_tree(cli, tmp_path, CHILD_WAITS.replace(WAIT_FOR_GO, "echo no wait"))
    db = home / "state.db"
    before = snapshot(db)
    with sqlite3.connect(db) as observer:
        version = observer.execute("PRAGMA data_version").fetchone()
        for args in ((), ("--json",)):
            assert cli("watch", ran["session_id"], *args).returncode == 0
        # data_version moves when another connection commits: watch committed nothing.
        assert observer.execute("PRAGMA data_version").fetchone() == version
    assert snapshot(db) == before


def test_bad_input_is_one_line_exit_2(cli: Cli, home: Path, tmp_path: Path) -> None:
    finished_tree(cli, tmp_path, CHILD_WAITS.replace(WAIT_FOR_GO, "echo no wait"))
    rows = tree_rows(cli, "lead")
    root, child = rows[0]["session_id"], rows[1]["session_id"]
    before = snapshot(home / "state.db")
    cases = [
        (("nope",), "'nope' is not a session id"),
        (("00000000-0000-4000-8000-000000000000",), "not found"),
        ((root, "--tenant", "other"), "not found"),
        ((child,), f"session {child} is not a root session"),
        ((root, "--interval", "0"), "--interval 0"),
        ((root, "--interval", "6"), "--interval 6"),
        ((root, "--interval", "abc"), "--interval"),
    ]
    for args, expected in cases:
        done = cli("watch", *args)
        assert (done.returncode, done.stdout) == (2, ""), (args, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("subagents: error: "), lines
        assert expected in lines[0], lines
    assert snapshot(home / "state.db") == before


def test_watch_draws_the_tree_on_a_terminal(cli: Cli, home: Path, tmp_path: Path) -> None:
    finished_tree(cli, tmp_path, CHILD_WAITS.replace(WAIT_FOR_GO, "echo no wait"))
    master, slave = pty.openpty()
    env = environment(home) | {"TERM": "xterm-256color", "COLUMNS": "100"}
    process = subprocess.Popen(
        [sys.executable, "-m", "subagents", "watch", "--last"],
        stdout=slave,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (0, "")
    screen = b"".join(chunks).decode("utf-8", "replace")
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)  # without colours and cursor moves
    assert "agents" in plain
    assert re.search(r"lead completed  turn [0-9.]+s  \d+ model calls, tokens in/out", plain)
    assert re.search(r"└── reviewer ready  turn", plain)
