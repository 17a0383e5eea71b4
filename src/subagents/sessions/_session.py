"""`Session`: a live session's log in memory, appended through its store."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence

from .._clock import Clock
from ..errors import ErrorCode, StoreError
from ..ids import SessionId
from ._events import EventRecord, SessionEvent, SessionHeader
from ._store import EventStore

__all__ = ["Session", "SessionObserver"]

log = logging.getLogger("subagents.sessions")

SessionObserver = Callable[["Session", EventRecord], None]


class Session:
    """The append-only log of one session.

    `submit` assigns the next seq and hands the record to the store at once, so records are
    committed in seq order; it does not wait. `append` submits and waits until the record is
    durable (an acknowledged append); `flush` waits for everything submitted so far. Because
    the store commits in submission order, one acknowledgement covers every earlier record.
    Observers run once a record is durable. A cancelled waiter still lets the write finish, so
    an append never tears. After a failed write the session is broken: later appends raise.
    """

    def __init__(
        self,
        header: SessionHeader,
        store: EventStore,
        clock: Clock,
        records: Sequence[EventRecord] = (),
    ) -> None:
        self.header = header
        self.store = store
        self.clock = clock
        self.records: list[EventRecord] = list(records)
        self._observers: list[SessionObserver] = []
        self._broken: StoreError | None = None
        self._last: asyncio.Future[None] | None = None
        self._unseen: deque[tuple[list[EventRecord], asyncio.Future[None]]] = deque()
        """Writes submitted whose outcome observers have not been told yet, oldest first."""

    @property
    def id(self) -> SessionId:
        return self.header.id

    @property
    def next_seq(self) -> int:
        return len(self.records)

    def observe(self, observer: SessionObserver) -> Callable[[], None]:
        """Call `observer` after each record is durable; returns a function that stops it."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer) if observer in self._observers else None

    def _check(self) -> None:
        if self._broken is not None:
            raise StoreError(
                f'session "{self.id}" can no longer be written: {self._broken.message}',
                code=self._broken.code,
            )

    def submit_many(
        self, events: Sequence[SessionEvent], *, time: float | None = None
    ) -> list[EventRecord]:
        """Hand `events` to the store in one write without waiting for it."""
        self._check()
        now = self.clock.now() if time is None else time
        records = [EventRecord(self.next_seq + i, now, e) for i, e in enumerate(events)]
        try:
            pending = self.store.append(self.id, records)
        except StoreError as exc:
            self._broken = exc
            raise
        self.records.extend(records)
        self._last = pending
        self._unseen.append((records, pending))
        if pending.done():  # an in-memory store: committed already
            self._take_commits()
        else:
            pending.add_done_callback(lambda _: self._take_commits())
        return records

    def submit(self, event: SessionEvent, *, time: float | None = None) -> EventRecord:
        """Hand `event` to the store without waiting; `flush` or a later `append` acks it."""
        return self.submit_many((event,), time=time)[0]

    async def append(self, event: SessionEvent, *, time: float | None = None) -> EventRecord:
        """Append `event` (stamped with the clock, or `time` for repair records), durably."""
        record = self.submit(event, time=time)
        await self.flush()
        return record

    async def flush(self) -> None:
        """Wait until everything submitted so far is durable; raise if a write failed.

        Observers have seen every record by then: a write the store has acknowledged may
        still have its done-callback queued (awaiting a future that is already done does not
        yield), so the commits are taken here too. Without it, an agent disposed right after
        a flush stopped observing before its last records were posted.
        """
        if self._last is not None:
            await _finish(self._last)
        self._take_commits()
        self._check()

    def _take_commits(self) -> None:
        """Tell observers of every write that has finished, in submission order, once."""
        while self._unseen and self._unseen[0][1].done():
            records, done = self._unseen.popleft()
            self._committed(records, done)

    def _committed(self, records: list[EventRecord], done: asyncio.Future[None]) -> None:
        if done.cancelled():
            return
        error = done.exception()
        if error is not None:
            if self._broken is None:
                self._broken = (
                    error
                    if isinstance(error, StoreError)
                    else StoreError(str(error), code=ErrorCode.STORE)
                )
            return
        for record in records:
            for observer in tuple(self._observers):
                try:
                    observer(self, record)
                except Exception:
                    log.exception("session observer failed on %s", record.kind)


async def _finish(future: asyncio.Future[None]) -> None:
    """Await a store write; if the caller is cancelled meanwhile, let the write finish first."""
    try:
        await asyncio.shield(future)
    except asyncio.CancelledError:
        if not future.done():
            await asyncio.wait([future])
        if not future.cancelled() and (error := future.exception()) is not None:
            raise error from None
        raise
