"""`Session`: a live session's log in memory, appended through its store."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final

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

    # One per live agent: no dict each (a fan-out holds thousands).
    __slots__ = (
        "__weakref__",
        "_broken",
        "_observers",
        "_submitted",
        "_told",
        "_untold",
        "_untold_head",
        "_when_told",
        "clock",
        "header",
        "id",
        "records",
        "store",
    )

    def __init__(
        self,
        header: SessionHeader,
        store: EventStore,
        clock: Clock,
        records: Sequence[EventRecord] = (),
    ) -> None:
        self.header: Final = header
        self.id: Final[SessionId] = header.id
        self.store = store
        self.clock = clock
        self.records: list[EventRecord] = list(records)
        self._observers: tuple[SessionObserver, ...] = ()
        """A tuple replaced on change: telling a record walks it without copying it first,
        and a session nobody observes holds the one empty tuple."""
        self._broken: StoreError | None = None
        self._submitted = 0
        """Writes handed to the store."""
        self._told = 0
        """Writes whose outcome the store has told (in submission order)."""
        self._when_told: deque[tuple[int, Callable[[], None]]] | None = None
        """Callbacks waiting for writes to be told (made on first use: most sessions have
        none, and an empty deque is 600 bytes)."""
        self._untold: list[EventRecord | list[EventRecord]] = []
        """The records of each write not told yet, in submission order: the store tells
        outcomes in that order, so the session itself is every write's `done` (see
        `__call__`)."""
        self._untold_head = 0
        """The first of `_untold` not told yet (a list read from the front, emptied when all
        is told: lighter than a deque, which a session would keep for its lifetime)."""

    @property
    def next_seq(self) -> int:
        return len(self.records)

    def observe(self, observer: SessionObserver) -> None:
        """Call `observer` after each record is durable, until `unobserve(observer)`."""
        self._observers = (*self._observers, observer)

    def unobserve(self, observer: SessionObserver) -> None:
        """Stop calling `observer` (an equal one: a bound method may be made again)."""
        if observer in self._observers:
            index = self._observers.index(observer)
            self._observers = self._observers[:index] + self._observers[index + 1 :]

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
        if self._broken is not None:
            self._check()
        now = self.clock.now() if time is None else time
        base = len(self.records)
        records = [EventRecord(base + i, now, e) for i, e in enumerate(events)]
        self._hand_over(records, records)
        return records

    def submit(self, event: SessionEvent, *, time: float | None = None) -> EventRecord:
        """Hand `event` to the store without waiting; `flush` or a later `append` acks it."""
        if self._broken is not None:
            self._check()
        records = self.records
        record = EventRecord(len(records), self.clock.now() if time is None else time, event)
        # `_hand_over` for one record, inline: this runs for every event.
        records.append(record)
        self._submitted += 1
        self._untold.append(record)
        try:
            self.store.append(self.id, (record,), done=self)
        except BaseException as exc:  # not handed over: as if it was never submitted
            self._submitted -= 1
            self._untold.pop()
            records.pop()
            if isinstance(exc, StoreError):
                self._broken = exc
            raise
        return record

    def _hand_over(
        self, records: Sequence[EventRecord], untold: EventRecord | list[EventRecord]
    ) -> None:
        # In the log before the store is asked: a store that commits at once (in memory)
        # tells the observers inside `append`, and they may read the log.
        base = len(self.records)
        self.records.extend(records)
        self._submitted += 1
        self._untold.append(untold)
        try:
            self.store.append(self.id, records, done=self)
        except BaseException as exc:  # not handed over: as if it was never submitted
            self._submitted -= 1
            self._untold.pop()
            del self.records[base:]
            if isinstance(exc, StoreError):
                self._broken = exc
            raise

    async def append(self, event: SessionEvent, *, time: float | None = None) -> EventRecord:
        """Append `event` (stamped with the clock, or `time` for repair records), durably."""
        record = self.submit(event, time=time)
        await self.flush()
        return record

    async def flush(self) -> None:
        """Wait until everything submitted so far is durable; raise if a write failed.

        The store tells each write's outcome (and so the observers) before the future it
        returned resolves, so observers have seen every record by then.
        """
        if self._told < self._submitted:
            # The store's barrier sends what it holds at once; this session's writes are
            # before it, so their outcomes are told when it resolves.
            await _finish(self.store.flush())
        self._check()

    def __call__(self, error: BaseException | None) -> None:
        """The outcome of the oldest write not told yet (the store tells them in order).

        The session is the `done` of each of its writes: no callback object per write, and
        none kept on the session either. A bound method kept there was a reference cycle, so
        a disposed child's session, and its whole log, waited for the cyclic collector.
        """
        self._told += 1
        untold = self._untold[self._untold_head]
        self._untold_head += 1
        if self._untold_head == len(self._untold):
            self._untold.clear()
            self._untold_head = 0
        if error is not None:
            if self._broken is None:
                self._broken = (
                    error
                    if isinstance(error, StoreError)
                    else StoreError(str(error), code=ErrorCode.STORE)
                )
        elif self._observers:
            for record in (untold,) if isinstance(untold, EventRecord) else untold:
                for observer in self._observers:
                    try:
                        observer(self, record)
                    except Exception:
                        log.exception("session observer failed on %s", record.kind)
        when_told = self._when_told
        while when_told and when_told[0][0] <= self._told:
            self._run(when_told.popleft()[1])

    @property
    def broken(self) -> StoreError | None:
        """The failed write that broke this session, if one did."""
        return self._broken

    def when_told(self, callback: Callable[[], None]) -> None:
        """Call `callback` once every write submitted so far has been told (now, if it has).

        Told means committed and seen by the observers, or failed (see `broken`).
        """
        target = self._submitted
        if self._told >= target:
            self._run(callback)
        else:
            if self._when_told is None:
                self._when_told = deque()
            self._when_told.append((target, callback))

    @staticmethod
    def _run(callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:
            log.exception("a session's when_told callback failed")


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
