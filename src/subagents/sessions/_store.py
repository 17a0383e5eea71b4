"""The `EventStore` protocol: an append-only, per-session event log."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self

from ..ids import SessionId
from ._commands import CommandRow, CommandState
from ._events import EventRecord, SessionHeader
from ._summaries import ListingRow, MemberSummary, SessionSummary

__all__ = ["EventStore", "Lease", "WriteDone"]


WriteDone = Callable[[BaseException | None], None]
"""Told the outcome of one write (None: committed) on the event loop, in submission order."""


@dataclass(frozen=True, slots=True)
class Lease:
    """Which process holds a tree: only the holder materializes its agents."""

    root: SessionId
    holder: str
    pid: int
    heartbeat: float
    expires: float
    address: str | None = None
    """Where the holder listens for wake-ups (a local socket path); None: it does not."""


class EventStore(Protocol):
    """Where sessions live. Implementations: `SqliteEventStore`, `InMemoryEventStore`.

    Contract (pinned by `tests/sessions/test_store_contract.py` against every backend):

    - Writes are committed in the order they were submitted, across sessions: once a write is
      acknowledged, every write submitted before it is durable too (or has failed, and its
      own future says so). `flush()` resolves once everything submitted before it is durable.
    - `create` enqueues a header like an append; a second header with the same id fails with
      `DuplicateError` (code `SESSION_EXISTS`) and changes nothing.
    - `append` takes records whose seqs continue the session's log without a gap; the first seq
      must equal the stored next seq, else `ConcurrencyConflict`, and nothing is written. It
      enqueues synchronously (so two calls made in order are committed in order) and returns
      an asyncio future that resolves once the records are durable (in the SQLite WAL); a
      failure leaves none of that call's records stored. With `done`, the outcome of the
      write (None, or the error) is given to `done` on the event loop, in submission order,
      before the returned future resolves; that future may then be shared with other writes
      (one per batch, not one per write) and fails only when the whole batch did.
    - `read` returns records in seq order from `from_seq` (at most `limit`); `get_header` and
      `read` raise `NotFoundError` for an unknown id or an id of another tenant.
    - `list_headers` returns headers newest first; `roots_only` keeps sessions without a parent.
    - `tree_members` returns every session of a tree, in no set order (`list_tree` orders
      them), each with its summary (as folding its log gives it) and its parent's catalog
      entry for it, without reading logs where the store keeps summaries; `summaries` gives
      the same summaries for chosen sessions, leaving out ids that are unknown or another
      tenant's.
    - Lifecycle: `async with` opens, `aclose()` drains pending appends and closes, is safe to call
      twice; use after close raises `ClosedError`.
    """

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def aclose(self) -> None: ...

    def create(self, header: SessionHeader) -> asyncio.Future[None]: ...

    def flush(self) -> asyncio.Future[None]: ...

    def append(
        self,
        session_id: SessionId,
        records: Sequence[EventRecord],
        *,
        done: WriteDone | None = None,
    ) -> asyncio.Future[None]: ...

    async def read(
        self, session_id: SessionId, *, tenant: str, from_seq: int = 0, limit: int | None = None
    ) -> list[EventRecord]:
        """The session's records from `from_seq` in seq order, at most `limit` of them."""
        ...

    async def get_header(self, session_id: SessionId, *, tenant: str) -> SessionHeader: ...

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
        """Take or renew the lease of `root`'s tree unless another holder's lease is current.

        Returns the lease in force afterwards: ours, or the other holder's. A lease taken is
        renewed by the store (wall-clock time) until it is released or the store closes.
        """
        ...

    def start_writer(self) -> None:
        """Get ready to write now rather than with the first write (a runtime asks as it opens).

        A store with nothing to start (the in-memory one) does nothing.
        """
        ...

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
        """Take the lease of a tree created just now, which no other process can hold yet.

        It is written with the next batch (with the root's header, when they are submitted
        together) and nobody waits for it: a new root costs no round trip to the disk.
        """
        ...

    async def release_lease(self, root: SessionId, *, holder: str) -> None: ...

    async def get_lease(self, root: SessionId) -> Lease | None: ...

    async def list_headers(
        self, *, tenant: str, roots_only: bool = True, root: SessionId | None = None
    ) -> list[SessionHeader]: ...

    async def tree_members(self, root: SessionId, *, tenant: str) -> list[MemberSummary]:
        """Every session of `root`'s tree (in no set order) with its summary and catalog entry."""
        ...

    async def tree_listing(self, root: SessionId, *, tenant: str) -> list[ListingRow]:
        """`tree_members` as `listing_row` gives each: what `subagents tree` shows of them."""
        ...

    async def summaries(
        self, session_ids: Sequence[SessionId], *, tenant: str
    ) -> dict[SessionId, SessionSummary]:
        """The summaries of those of `session_ids` that are `tenant`'s sessions (others absent)."""
        ...

    async def change_count(self) -> int:
        """A number that changes whenever anything is committed to the store, by any process.

        Readers that follow a tree from outside (`watch`, a remote `send` waiting for its
        answer) compare it between reads, so an idle store costs them one cheap check.
        """
        ...

    # commands to a held tree (see `_commands.py`)

    async def submit_command(
        self, *, root: SessionId, tenant: str, target: SessionId, kind: str, body: bytes, now: float
    ) -> int:
        """Store a pending command durably (its own transaction); returns its id."""
        ...

    async def pending_commands(self, root: SessionId) -> list[CommandRow]:
        """The pending commands of `root`'s tree, oldest first."""
        ...

    async def get_command(self, command_id: int) -> CommandRow | None: ...

    async def finish_command(
        self, command_id: int, *, state: CommandState, outcome: bytes, now: float
    ) -> bool:
        """Mark a pending command `done` or `failed`; False when it was not pending."""
        ...
