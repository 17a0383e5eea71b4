"""`Session`: a live session's log in memory, appended through its store."""

from __future__ import annotations

import asyncio
import logging
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

    `append` assigns the next seq, hands the record to the store at once (so records are
    committed in seq order) and returns once it is durable. A cancelled caller still waits for
    the write to finish before the cancellation propagates, so an append never tears. After a
    failed write the session is broken: later appends raise.
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

    @property
    def id(self) -> SessionId:
        return self.header.id

    @property
    def next_seq(self) -> int:
        return len(self.records)

    def observe(self, observer: SessionObserver) -> Callable[[], None]:
        """Call `observer` after each durable append; returns a function that stops it."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer) if observer in self._observers else None

    async def append_many(self, events: Sequence[SessionEvent]) -> list[EventRecord]:
        """Append several events in one store write (one commit); durable on return."""
        if self._broken is not None:
            raise StoreError(
                f'session "{self.id}" can no longer be written: {self._broken.message}',
                code=self._broken.code,
            )
        now = self.clock.now()
        records = [EventRecord(self.next_seq + i, now, e) for i, e in enumerate(events)]
        try:
            pending = self.store.append(self.id, records)
        except StoreError as exc:
            self._broken = exc
            raise
        self.records.extend(records)
        try:
            await _finish(pending)
        except StoreError as exc:
            self._broken = exc
            raise
        for record in records:
            for observer in tuple(self._observers):
                try:
                    observer(self, record)
                except Exception:
                    log.exception("session observer failed on %s", record.kind)
        return records

    async def append(self, event: SessionEvent, *, time: float | None = None) -> EventRecord:
        """Append `event` stamped with the clock (or `time`, for repair records)."""
        if self._broken is not None:
            raise StoreError(
                f'session "{self.id}" can no longer be written: {self._broken.message}',
                code=self._broken.code,
            )
        record = EventRecord(self.next_seq, self.clock.now() if time is None else time, event)
        try:
            pending = self.store.append(self.id, (record,))
        except StoreError as exc:
            self._broken = exc
            raise
        self.records.append(record)
        try:
            await _finish(pending)
        except StoreError as exc:
            self._broken = exc
            raise
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError):
                self._broken = StoreError(str(exc), code=ErrorCode.STORE)
            raise
        for observer in tuple(self._observers):
            try:
                observer(self, record)
            except Exception:
                log.exception("session observer failed on %s", record.kind)
        return record


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
