"""A session tells its observers of every record before `flush` returns.

A store tells each write's outcome to the session's `done` callback before the future it
returned resolves. An agent disposed right after its flush stops observing, so a record told
later would never be posted: under a slow disk, a stream once lost whole children. Here the
acknowledgement is held back by the test, on a real in-memory store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from subagents._clock import FakeClock
from subagents.ids import SessionId, new_session_id
from subagents.sessions import (
    EventRecord,
    InMemoryEventStore,
    Session,
    SessionHeader,
    TurnStart,
    WriteDone,
)


class HeldAcks:
    """Stores through a real in-memory store; acknowledges each write when the test says."""

    def __init__(self, inner: InMemoryEventStore) -> None:
        self.inner = inner
        self.acks: list[asyncio.Future[None]] = []
        self.dones: list[WriteDone] = []

    def append(
        self,
        session_id: SessionId,
        records: Sequence[EventRecord],
        *,
        done: WriteDone | None = None,
    ) -> asyncio.Future[None]:
        self.inner.append(session_id, records)
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.acks.append(ack)
        if done is not None:
            self.dones.append(done)
        return ack

    def flush(self) -> asyncio.Future[None]:
        """Resolves once every write so far is acknowledged (as a store's barrier does)."""
        barrier: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.acks.append(barrier)
        return barrier

    def acknowledge(self) -> None:
        """What a store does: tell each write's outcome in order, then resolve its future."""
        for done in self.dones:
            done(None)
        for ack in self.acks:
            ack.set_result(None)


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
        assert seen == []  # nothing is durable yet
        store.acknowledge()
        await session.flush()
        assert seen == [0, 1, 2]
        await asyncio.sleep(0)  # nothing is told twice
        assert seen == [0, 1, 2]
        assert [r.seq for r in await inner.read(header.id, tenant="default")] == [0, 1, 2]


async def test_an_unobserved_observer_hears_of_no_later_record() -> None:
    """`unobserve` takes an equal observer: an agent passes its bound method made again."""

    class Follower:
        def __init__(self) -> None:
            self.seen: list[int] = []

        def on_record(self, _: Session, record: EventRecord) -> None:
            self.seen.append(record.seq)

    async with InMemoryEventStore() as store:
        header = SessionHeader(id=new_session_id(), tenant="default", created_at=0.0, cwd="/")
        store.create(header)
        session = Session(header, store, FakeClock())
        follower, other = Follower(), Follower()
        session.observe(follower.on_record)
        session.observe(other.on_record)
        await session.append(TurnStart(turn=1))
        session.unobserve(follower.on_record)
        session.unobserve(follower.on_record)  # twice: nothing to stop, no error
        await session.append(TurnStart(turn=2))
    assert follower.seen == [0]
    assert other.seen == [0, 1]
