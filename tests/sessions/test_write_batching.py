"""How the SQLite store batches writes: one commit and one future per batch, outcomes in order.

Writes that name a `done` callback wait in the loop's outbox and go to the writer as one batch
when somebody waits (`flush`), when the batch is full, or when its window ends. Each write's
outcome is told to its `done` in submission order, before the batch's shared future resolves.
Every wait here is on an event or a future; no test sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any, cast

import pytest

from subagents.errors import ConfigError, NotFoundError
from subagents.ids import new_session_id
from subagents.sessions import SqliteEventStore
from subagents.sessions._events import EventRecord, SessionHeader, TurnStart


def header() -> SessionHeader:
    return SessionHeader(id=new_session_id(), tenant="default", created_at=1.0, cwd="/work")


def turn(seq: int) -> EventRecord:
    return EventRecord(seq, 1_700_000_000.0 + seq, TurnStart(turn=seq))


def stored_seqs(path: Path, session: str) -> list[int]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT seq FROM events WHERE session_id = ? ORDER BY seq", (session,)
        ).fetchall()
    return [int(row[0]) for row in rows]


class Told:
    """Collects the outcomes a store tells, in the order it tells them."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[str, BaseException | None]] = []
        self.first = asyncio.Event()

    def done(self, label: str) -> Any:
        def tell(error: BaseException | None) -> None:
            self.outcomes.append((label, error))
            self.first.set()

        return tell


async def test_the_writes_of_one_iteration_share_one_commit_and_one_future(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    async with SqliteEventStore(db) as store:
        session = header()
        await store.create(session)
        store.flush()
        before = store.commits
        told = Told()
        futures = [
            store.append(session.id, [turn(seq)], done=told.done(f"w{seq}")) for seq in range(50)
        ]
        assert len({id(f) for f in futures}) == 1  # one future for the whole batch
        assert told.outcomes == []  # nothing is told before it is committed
        await store.flush()
        assert store.commits - before == 1
        assert told.outcomes == [(f"w{seq}", None) for seq in range(50)]
        assert all(f.done() and f.exception() is None for f in futures)
        assert await asyncio.to_thread(stored_seqs, db, session.id) == list(range(50))


async def test_a_write_nobody_waits_for_reaches_the_disk_when_its_window_ends(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    async with SqliteEventStore(db) as store:
        session = header()
        await store.create(session)
        told = Told()
        store.append(session.id, [turn(0)], done=told.done("w0"))
        await told.first.wait()  # no flush: the window sent it
        assert told.outcomes == [("w0", None)]
        assert await asyncio.to_thread(stored_seqs, db, session.id) == [0]


async def test_one_writes_failure_is_its_own_and_the_batch_still_commits(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    async with SqliteEventStore(db) as store:
        known = header()
        await store.create(known)
        told = Told()
        missing = new_session_id()  # never created: the writer finds it absent from the file
        shared = store.append(missing, [turn(0)], done=told.done("missing"))
        store.append(known.id, [turn(0)], done=told.done("known"))
        await store.flush()
        assert shared.exception() is None  # the batch was handled; the failure went to `done`
        (label, error), (other, fine) = told.outcomes
        assert (label, other, fine) == ("missing", "known", None)
        assert isinstance(error, NotFoundError)
        assert await asyncio.to_thread(stored_seqs, db, known.id) == [0]


async def test_a_write_with_its_own_future_is_sent_at_once_and_fails_through_it(
    tmp_path: Path,
) -> None:
    async with SqliteEventStore(tmp_path / "state.db", write_window=1.0) as store:
        with pytest.raises(NotFoundError):
            await store.append(new_session_id(), [turn(0)])  # no `done`: not held for a second


async def test_a_flush_with_nothing_pending_is_already_done(tmp_path: Path) -> None:
    async with SqliteEventStore(tmp_path / "state.db") as store:
        session = header()
        await store.create(session)
        await store.flush()
        assert store.flush().done()
        store.append(session.id, [turn(0)], done=lambda _: None)
        pending = store.flush()
        assert not pending.done()
        await pending
        assert store.flush().done()


async def test_close_sends_what_the_outbox_holds(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    told = Told()
    async with SqliteEventStore(db, write_window=1.0) as store:
        session = header()
        await store.create(session)
        store.append(session.id, [turn(0), turn(1)], done=told.done("w"))
    assert told.outcomes == [("w", None)]
    assert await asyncio.to_thread(stored_seqs, db, session.id) == [0, 1]


@pytest.mark.parametrize("window", [-0.001, 1.5, float("nan")])
def test_a_bad_write_window_is_a_config_error(tmp_path: Path, window: float) -> None:
    with pytest.raises(ConfigError, match="write_window must be between 0 and 1 second"):
        SqliteEventStore(tmp_path / "state.db", write_window=cast("Any", window))
    assert not (tmp_path / "state.db").exists()


async def test_close_sends_the_outbox_of_a_store_that_had_sent_nothing(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    told = Told()
    session = header()
    async with SqliteEventStore(db, write_window=1.0) as store:
        store.create(session)  # held for the window: no writer link made yet
        store.append(session.id, [turn(0)], done=told.done("w"))
    assert told.outcomes == [("w", None)]
    assert await asyncio.to_thread(stored_seqs, db, session.id) == [0]
