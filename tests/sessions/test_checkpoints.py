"""The writer's checkpoints run in a thread of their own, off every commit."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

from subagents.sessions._sqlite_checkpoint import Checkpointer


def _wal_database(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # as the writer has it
    conn.execute("CREATE TABLE t (x BLOB)")
    return conn


def test_every_nth_commit_wakes_a_passive_checkpoint_of_the_wal(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    done = threading.Event()
    results: list[tuple[int, int, int]] = []

    def told(result: tuple[int, int, int]) -> None:
        results.append(result)
        done.set()

    with contextlib.closing(_wal_database(path)) as conn:
        checkpoints = Checkpointer(path, every=3, on_done=told)
        try:
            for _ in range(2):
                conn.execute("INSERT INTO t VALUES (?)", (bytes(5000),))
                checkpoints.committed()
            assert not done.is_set()  # two commits: not yet
            conn.execute("INSERT INTO t VALUES (?)", (bytes(5000),))
            checkpoints.committed()  # the third
            assert done.wait(timeout=30)
        finally:
            checkpoints.close()
    busy, frames, copied = results[0]
    assert busy == 0
    assert frames > 0
    assert copied == frames  # nobody reads: the whole log went into the database


def test_closing_stops_the_thread_without_a_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    results: list[tuple[int, int, int]] = []
    with contextlib.closing(_wal_database(path)):
        checkpoints = Checkpointer(path, every=100, on_done=results.append)
        checkpoints.committed()
        checkpoints.close()
    assert results == []
    assert not any(t.name == "subagents-sqlite-checkpoint" for t in threading.enumerate())
