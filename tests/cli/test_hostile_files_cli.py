"""Hostile files met by real `subagents` processes: a model script that would hang, a damaged
store and a name with a stray slash each give exit 2 and one line, and write nothing."""

from __future__ import annotations

import json
import os
import sqlite3  # noqa: TID251 - damaging a store takes raw SQLite
import subprocess
from pathlib import Path

import pytest
from cli_support import Cli, write_script

SCRIPT = """
lead:
  - calls:
      - {tool: subagent, args: {name: reviewer, description: Review, prompt: Review it}}
  - text: Reviewed.
  - text: Again.
reviewer:
  - text: Looks fine.
  - text: Still fine.
"""


def _one_line(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("subagents: error: "), done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert done.stdout == ""
    return lines[0]


@pytest.mark.parametrize(
    ("script", "needle"),
    [
        pytest.param("lead: [{text: a, sleep: .inf}]\n", "lead[0].sleep", id="sleep-inf"),
        pytest.param("lead: [{text: a, sleep: .nan}]\n", "lead[0].sleep", id="sleep-nan"),
        pytest.param('lead: [{text: "\\ud800"}]\n', "lone surrogate", id="surrogate"),
        pytest.param("a: &a [*a]\nlead: [{text: a}]\n", "contains it", id="recursive-alias"),
    ],
)
def test_a_bad_script_is_refused_before_any_session(
    cli: Cli, home: Path, tmp_path: Path, script: str, needle: str
) -> None:
    spec = write_script(tmp_path / "s.yaml", script)
    _one_line(cli("run", "go", "--model", spec), "[SCRIPT_INVALID]", needle)
    assert not (home / "state.db").exists(), "the session must not be created"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_as_the_script_does_not_hang(cli: Cli, home: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)
    # Without O_NONBLOCK the open would wait for a writer; the cli fixture's timeout fails it.
    _one_line(cli("run", "go", "--model", f"scripted:{fifo}"), "not a regular file")
    assert not (home / "state.db").exists()


def _stored_tree(cli: Cli, tmp_path: Path) -> tuple[str, str, Path]:
    spec = write_script(tmp_path / "s.yaml", SCRIPT)
    store = tmp_path / "state.db"
    done = cli("run", "Review", "--model", spec, "--store", str(store), "--json")
    assert done.returncode == 0, done.stderr
    return spec, json.loads(done.stdout)["session_id"], store


def _drop_events(store: Path) -> None:
    conn = sqlite3.connect(store, isolation_level=None)
    try:
        conn.execute("DROP TABLE events")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def test_a_damaged_store_is_one_line_for_every_command(cli: Cli, tmp_path: Path) -> None:
    spec, session, store = _stored_tree(cli, tmp_path)
    _drop_events(store)
    before = store.read_bytes()
    commands = [
        ["run", "again", "--model", spec],
        ["sessions"],
        ["tree", session],
        ["send", session, "reviewer", "Look again"],
        ["resume", session, "Go on"],
        ["log", "lead", "--session", session],
        ["interrupt", session, "reviewer"],
    ]
    for command in commands:
        line = _one_line(cli(*command, "--store", str(store)), "[STORE_CORRUPT]", str(store))
        assert "the table events is missing" in line, (command, line)
        assert store.read_bytes() == before, f"{command[0]} wrote to the damaged store"


@pytest.mark.parametrize("name", ["reviewer/", "//reviewer", "reviewer//x", "/"])
def test_a_stray_slash_names_nobody(cli: Cli, tmp_path: Path, name: str) -> None:
    _, session, store = _stored_tree(cli, tmp_path)
    log_before = cli("log", "reviewer", "--session", session, "--store", str(store), "--json")
    assert log_before.returncode == 0, log_before.stderr
    line = _one_line(cli("send", session, name, "Hello", "--store", str(store)), repr(name))
    assert line.endswith("[INVALID_NAME]"), line
    log_after = cli("log", "reviewer", "--session", session, "--store", str(store), "--json")
    assert log_after.stdout == log_before.stdout, "the message must not reach `reviewer`"
