"""A session tells its observers of every record before `flush` returns.

A store acknowledges a write by resolving its future; the session's done-callback then runs
on a later turn of the event loop. Awaiting a future that is already done does not yield,
so a `flush` right after the acknowledgement used to return before that callback ran, and
an agent disposed then (it stops observing after its flush) never posted its last records:
under a slow disk, a stream lost whole children. Here the acknowledgement is held back by
the test, on a real in-memory store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from subagents._clock import FakeClock
from subagents.ids import SessionId, new_session_id
from subagents.sessions import EventRecord, InMemoryEventStore, Session, SessionHeader, TurnStart


class HeldAcks:
    """Stores through a real in-memory store; acknowledges each write when the test says."""

    def __init__(self, inner: InMemoryEventStore) -> None:
        self.inner = inner
        self.acks: list[asyncio.Future[None]] = []

    def append(self, session_id: SessionId, records: Sequence[EventRecord]) -> asyncio.Future[None]:
        self.inner.append(session_id, records)
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.acks.append(ack)
        return ack


async def test_flush_returns_only_after_observers_saw_every_acknowledged_record() -> None:
    async with InMemoryEventStore() as inner:
        header = SessionHeader(id=new_session_id(), tenant="default", created_at=0.0, cwd="/")
        inner.create(header)
        store = HeldAcks(inner)
        session = Session(header, store, FakeClock())  # pyright: ignore[reportArgumentType]
        seen: list[int] = []
        session.observe(lambda _, record: seen.append(record.seq))
        for turn in (1, 2, 3):
            session.submit(TurnStart(turn=turn))
        for ack in store.acks:
            ack.set_result(None)  # acknowledged; the callbacks are only queued
        await session.flush()
        assert seen == [0, 1, 2]
        await asyncio.sleep(0)  # the queued callbacks run now: nothing is told twice
        assert seen == [0, 1, 2]
        assert [r.seq for r in await inner.read(header.id, tenant="default")] == [0, 1, 2]
