"""Helpers for tests that drive a live tree in one process from another.

The holder is a real `subagents run` subprocess; a member is kept busy by a `bash` tool call
that waits for a file the test creates (`gate_call`), so a test waits on events (what the
store says), never on sleeps. `StoreView` reads the holder's SQLite file directly, read-only,
the way another process would.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Generator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subagents.sessions._events import decode_event

WAIT_SECONDS = 60.0
"""How long a test waits for an event before it fails (a loaded 2-core machine is slow)."""


def gate_call(gate: str) -> str:
    """A scripted `bash` call that returns once the file `gate` exists in the agent's cwd."""
    command = f"while [ ! -e {gate} ]; do sleep 0.02; done; echo {gate}-open"
    return json.dumps({"tool": "bash", "args": {"command": command}})


@dataclass(frozen=True)
class Event:
    session_id: str
    seq: int
    kind: str
    event: Any


class StoreView:
    """Read-only looks at a store file another process writes."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        if not self.path.exists():
            return []
        uri = f"file:{self.path}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
            try:
                return list(conn.execute(sql, params).fetchall())
            except sqlite3.OperationalError:
                return []  # the schema is not there yet

    def events(self, session_id: str | None = None) -> list[Event]:
        sql = "SELECT session_id, seq, kind, v, payload FROM events"
        params: tuple[object, ...] = ()
        if session_id is not None:
            sql += " WHERE session_id = ?"
            params = (session_id,)
        rows = self._rows(sql + " ORDER BY session_id, seq", params)
        return [Event(r[0], r[1], r[2], decode_event(r[2], r[3], r[4])) for r in rows]

    def roots(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT id FROM sessions WHERE parent IS NULL")]

    def children(self, root: str) -> dict[str, str]:
        """Child session ids by short name (from the parents' catalog events)."""
        ids = {r[0] for r in self._rows("SELECT id FROM sessions WHERE root = ?", (root,))}
        names: dict[str, str] = {}
        for event in self.events():
            if event.session_id in ids and event.kind == "subagent/catalog" and event.event.name:
                names[event.event.name] = event.event.child_id
        return names

    def commands(self) -> list[tuple[int, str, str, str | None]]:
        """(id, kind, state, outcome JSON) of every command."""
        rows = self._rows("SELECT id, kind, state, outcome FROM commands ORDER BY id")
        return [(r[0], r[1], r[2], None if r[3] is None else r[3].decode()) for r in rows]

    def lease_pid(self, root: str) -> int | None:
        rows = self._rows("SELECT pid FROM leases WHERE root = ?", (root,))
        return int(rows[0][0]) if rows else None


def wait_until(check: Callable[[], Any], what: str) -> Any:
    """Poll `check` until it returns something truthy (the event happened); fail after a bound."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def environment(home: Path) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SUBAGENTS_", "OPENAI_", "DEEPSEEK_", "ANTHROPIC_", "CLAUDE_"))
    }
    base["SUBAGENTS_HOME"] = str(home)
    base["CLAUDE_CONFIG_DIR"] = str(home / "claude")
    return base


@contextmanager
def started(home: Path, cwd: Path) -> Generator[Callable[..., subprocess.Popen[str]], None, None]:
    """Start `python -m subagents ...` processes; every one still running is killed after."""
    processes: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-m", "subagents", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(home),
            cwd=cwd,
        )
        processes.append(process)
        return process

    try:
        yield start
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
            process.communicate(timeout=WAIT_SECONDS)


def finished(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Wait for a process; (exit status, stdout, stderr)."""
    out, err = process.communicate(timeout=WAIT_SECONDS)
    return process.returncode, out, err
