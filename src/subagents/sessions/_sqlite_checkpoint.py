"""Checkpoints of the store's WAL, from a thread of the writer process, off every commit.

SQLite copies the write-ahead log back into the database file every thousand pages, inside the
commit that crosses the mark, and with `synchronous=NORMAL` a checkpoint syncs both files: one
commit in eighty took several milliseconds (measured on S1b, a run per commit: 40% of the time
the writer spent committing). The writer therefore turns those off on its connection and has
this thread, on a connection of its own, run a PASSIVE checkpoint (it copies what no reader
still needs and waits for nothing) every `every` commits. The thread spends its time in SQLite,
which lets the GIL go, so the writer's next transaction does not wait for it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["CHECKPOINT_EVERY", "Checkpointer"]

CHECKPOINT_EVERY = 128
"""Commits between checkpoints: about as many WAL pages as SQLite's own default (1,000) at the
eight or so pages a small commit writes."""

Checkpointed = Callable[[tuple[int, int, int]], None]
"""Told `(busy, log frames, frames checkpointed)` after each checkpoint (for tests)."""


class Checkpointer:
    """Runs `PRAGMA wal_checkpoint(PASSIVE)` on `path` in a thread, when `committed` says to."""

    def __init__(
        self, path: Path, *, every: int = CHECKPOINT_EVERY, on_done: Checkpointed | None = None
    ) -> None:
        self._path = path
        self._every = every
        self._on_done = on_done
        self._commits = 0
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(
            target=self._run, name="subagents-sqlite-checkpoint", daemon=True
        )
        self._thread.start()

    def committed(self) -> None:
        """Count a commit; every `every` of them, wake the thread (never waits)."""
        self._commits += 1
        if self._commits >= self._every:
            self._commits = 0
            self._wake.set()

    def close(self) -> None:
        """Stop the thread (after the checkpoint it may be running)."""
        self._stopping = True
        self._wake.set()
        self._thread.join()

    def _run(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, timeout=5.0)
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                with contextlib.suppress(sqlite3.Error):  # the next one tries again
                    row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    if self._on_done is not None:
                        self._on_done((int(row[0]), int(row[1]), int(row[2])))
        finally:
            conn.close()
