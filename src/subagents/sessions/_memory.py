"""An in-memory `EventStore` for tests and embedding: the same contract, nothing on disk."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from .._resource import AsyncResource
from ..errors import ConcurrencyConflict, DuplicateError, ErrorCode, NotFoundError
from ..ids import SessionId
from ._commands import CommandRow, CommandState
from ._events import EventRecord, SessionHeader, decode_event, encode_event
from ._store import Lease, WriteDone
from ._summaries import (
    ListingRow,
    MemberSummary,
    SessionSummary,
    listing_row,
    summaries_from_logs,
)

__all__ = ["InMemoryEventStore"]


class InMemoryEventStore(AsyncResource):
    """Keeps every session in dicts.

    Records are round-tripped through the codec on append, so a payload the SQLite store
    would refuse is refused here too.
    """

    def __init__(self) -> None:
        self._headers: dict[SessionId, SessionHeader] = {}
        self._logs: dict[SessionId, list[EventRecord]] = {}
        self._leases: dict[SessionId, Lease] = {}
        self._changes = 0
        self._commands: dict[int, CommandRow] = {}

    noun = "event store"
    reentrant = True

    def create(self, header: SessionHeader) -> asyncio.Future[None]:
        self._check_open()
        if header.id in self._headers:
            raise DuplicateError(
                f'session "{header.id}" already exists', code=ErrorCode.SESSION_EXISTS
            )
        self._headers[header.id] = header
        self._logs[header.id] = []
        self._changes += 1
        return _done()

    def flush(self) -> asyncio.Future[None]:
        self._check_open()
        return _done()

    def append(
        self,
        session_id: SessionId,
        records: Sequence[EventRecord],
        *,
        done: WriteDone | None = None,
    ) -> asyncio.Future[None]:
        """Check and store `records` at once; `done` (if given) is told before this returns."""
        self._check_open()
        log = self._logs.get(session_id)
        if log is None:
            raise NotFoundError(f'session "{session_id}" not found')
        expected = len(log)
        for offset, record in enumerate(records):
            if record.seq != expected + offset:
                raise ConcurrencyConflict(
                    f'append to session "{session_id}" expected seq {expected + offset}, '
                    f"got {record.seq}; another writer appended first",
                    expected_seq=expected + offset,
                    seq=record.seq,
                )
        # Round-trip through the codec: what cannot be stored is refused before anything lands.
        checked = [
            EventRecord(r.seq, r.time, decode_event(r.kind, r.event.v, encode_event(r.event)))
            for r in records
        ]
        log.extend(checked)
        self._changes += 1
        if done is not None:
            done(None)
        return _done()

    async def read(
        self, session_id: SessionId, *, tenant: str, from_seq: int = 0, limit: int | None = None
    ) -> list[EventRecord]:
        await self.get_header(session_id, tenant=tenant)
        start = max(from_seq, 0)
        end = None if limit is None else start + max(limit, 0)
        return list(self._logs[session_id][start:end])

    async def get_header(self, session_id: SessionId, *, tenant: str) -> SessionHeader:
        self._check_open()
        header = self._headers.get(session_id)
        if header is None or header.tenant != tenant:
            raise NotFoundError(f'session "{session_id}" not found')
        return header

    async def acquire_lease(
        self,
        root: SessionId,
        *,
        holder: str,
        pid: int,
        now: float,
        ttl: float,
        address: str | None = None,
    ) -> Lease:
        self._check_open()
        current = self._leases.get(root)
        if current is not None and current.holder != holder and current.expires > now:
            return current
        lease = self._leases[root] = Lease(root, holder, pid, now, now + ttl, address)
        return lease

    def start_writer(self) -> None:
        """Nothing to start: its writes are in memory."""
        self._check_open()

    def claim_lease(
        self,
        root: SessionId,
        *,
        holder: str,
        pid: int,
        now: float,
        ttl: float,
        address: str | None = None,
    ) -> None:
        self._check_open()
        self._leases[root] = Lease(root, holder, pid, now, now + ttl, address)

    async def release_lease(self, root: SessionId, *, holder: str) -> None:
        self._check_open()
        current = self._leases.get(root)
        if current is not None and current.holder == holder:
            del self._leases[root]

    async def get_lease(self, root: SessionId) -> Lease | None:
        self._check_open()
        return self._leases.get(root)

    async def list_headers(
        self, *, tenant: str, roots_only: bool = True, root: SessionId | None = None
    ) -> list[SessionHeader]:
        self._check_open()
        rows = [
            h
            for h in reversed(self._headers.values())
            if h.tenant == tenant
            and (not roots_only or h.parent is None)
            and (root is None or h.root_id == root)
        ]
        rows.sort(key=lambda h: h.created_at, reverse=True)  # stable: newest insert first on ties
        return rows

    async def tree_members(self, root: SessionId, *, tenant: str) -> list[MemberSummary]:
        """Every session of `root`'s tree (in creation order), folded from the logs."""
        self._check_open()
        headers = [h for h in self._headers.values() if h.tenant == tenant and h.root_id == root]
        return summaries_from_logs(headers, self._logs)

    async def tree_listing(self, root: SessionId, *, tenant: str) -> list[ListingRow]:
        """`tree_members`, each as a listing row."""
        return [listing_row(m) for m in await self.tree_members(root, tenant=tenant)]

    async def summaries(
        self, session_ids: Sequence[SessionId], *, tenant: str
    ) -> dict[SessionId, SessionSummary]:
        """The summaries of `tenant`'s sessions among `session_ids`, folded from their logs."""
        self._check_open()
        headers = [
            h
            for i in dict.fromkeys(session_ids)
            if (h := self._headers.get(i)) and h.tenant == tenant
        ]
        return {m.header.id: m.summary for m in summaries_from_logs(headers, self._logs)}

    async def change_count(self) -> int:
        self._check_open()
        return self._changes

    async def submit_command(
        self, *, root: SessionId, tenant: str, target: SessionId, kind: str, body: bytes, now: float
    ) -> int:
        self._check_open()
        command_id = len(self._commands) + 1
        self._commands[command_id] = CommandRow(
            command_id, root, tenant, target, kind, body, now, "pending", None
        )
        self._changes += 1
        return command_id

    async def pending_commands(self, root: SessionId) -> list[CommandRow]:
        self._check_open()
        return [c for c in self._commands.values() if c.root == root and c.state == "pending"]

    async def get_command(self, command_id: int) -> CommandRow | None:
        self._check_open()
        return self._commands.get(command_id)

    async def finish_command(
        self, command_id: int, *, state: CommandState, outcome: bytes, now: float
    ) -> bool:
        self._check_open()
        row = self._commands.get(command_id)
        if row is None or row.state != "pending":
            return False
        self._commands[command_id] = dataclasses.replace(
            row, state=state, outcome=outcome, handled_at=now
        )
        self._changes += 1
        return True


def _done() -> asyncio.Future[None]:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done
