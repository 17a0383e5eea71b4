"""The durable `EventStore`: one SQLite file in WAL mode, written by one writer with group commit.

`append` validates on the caller's thread and adds the write to the loop's outbox; at the end of
the loop iteration (or of the write window) the outbox goes to the writer as one batch, so the
many small writes of one step cross to it once. The writer is a process of its own (a thread
until it is ready, or where no process can start; `writer="thread"` keeps the thread): it takes
every batch queued (up to about `batch_max` records), writes them in one `BEGIN IMMEDIATE ...
COMMIT`, and only then acknowledges them, so an acknowledged event is in the WAL. Reads use a
separate connection from a worker thread (`asyncio.to_thread`): the event loop never blocks on
SQLite.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import re
import sqlite3
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeAlias, cast

import msgspec

from .._resource import AsyncResource
from ..errors import (
    ClosedError,
    ConcurrencyConflict,
    ConfigError,
    ErrorCode,
    NotFoundError,
    StoreError,
)
from ..ids import SessionId
from ._commands import CommandRow, CommandState
from ._events import (
    HEADER_VERSION,
    KIND_OF,
    EventRecord,
    SessionHeader,
    decode_event,
    decode_header,
    encode_header,
)
from ._migrations import folded_summary, open_database
from ._sqlite_wire import (
    AcquireLease,
    AppendRows,
    Barrier,
    CreateSession,
    EventRow,
    FinishCommand,
    ReleaseLease,
    SubmitCommand,
    WireError,
    WriteBatch,
    WriteItem,
    WrittenBatch,
    error_from_wire,
)
from ._store import Lease, WriteDone
from ._summaries import (
    CatalogEntry,
    ListingRow,
    MemberSummary,
    SessionSummary,
    decode_listing,
    decode_members,
    decode_summary,
    listing_row,
)

if TYPE_CHECKING:
    from ._sqlite_link import WriterLink

__all__ = ["SqliteEventStore", "Writer", "default_store_path", "parse_store_url"]

_encode = msgspec.json.Encoder().encode
_BARRIER = Barrier()

# One JSON array of `[header, summary, entry]` rows (an incomplete row is left out), as bytes:
# a damaged row's bytes are then msgspec's to refuse, not a text decoding error of the read.
_TREE_ROWS = (
    "SELECT CAST('[' || group_concat('[' || header || ',' || summary || ',' || "
    "coalesce(entry, 'null') || ']') || ']' AS BLOB) FROM summaries WHERE root = ?"
)
_TREE_SIZE = "SELECT count(*) FROM sessions WHERE root = ?1 AND tenant = ?2"
# The listing rows of a tree as one JSON array. A row that does not start with its own key's id
# (`["<id>",...`: a damaged file) is left out, and the tree is then read the slow way.
# With the count of the tree's sessions, which the rows must match, in the same read.
_TREE_LISTING = (
    "SELECT CAST('[' || group_concat(row) || ']' AS BLOB), "
    f"({_TREE_SIZE}) FROM listing "
    "WHERE root = ?1 AND tenant = ?2 AND substr(row, 3, length(session_id)) = session_id"
)
_TREE_SESSIONS = (
    "SELECT header FROM sessions WHERE root = ? AND tenant = ? ORDER BY created_at, rowid"
)
_TREE_SUMMARIES = "SELECT session_id, summary FROM summaries WHERE root = ?"
_TREE_CATALOG = "SELECT child_id, creator, seq, name, mode, label FROM catalog WHERE root = ?"
_SUMMARIES_OF = (
    "SELECT s.id, m.summary FROM sessions s"
    " LEFT JOIN summaries m ON m.root = s.root AND m.session_id = s.id"
    # `+s.tenant`: looked up by id, then checked. Without statistics SQLite would otherwise walk
    # the tenant's index for a list of ids (every session of a one-tenant store: 7 ms for 50
    # ids among 10,000 sessions, against 0.5 ms by id).
    " WHERE s.id IN ({marks}) AND +s.tenant = ?"
)
_IDS_PER_QUERY = 500  # well under SQLite's limit on bound parameters
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)


def _whole_tree(members: list[MemberSummary], root: str, tenant: str, size: int) -> bool:
    """Whether `members` are `size` distinct sessions of `tenant`'s tree `root`, each readable."""
    return (
        len(members) == size
        and all(
            m.header.tenant == tenant and m.header.root_id == root and m.header.v == HEADER_VERSION
            for m in members
        )
        and len({m.header.id for m in members}) == size
    )


def parse_store_url(url: str) -> Path:
    """The file a store URL names: `sqlite:///abs/path`, `sqlite://relative/path` or a path.

    Raises:
        ConfigError: the URL is empty or uses a scheme other than `sqlite`.
    """
    match = _SCHEME.match(url)
    if match is None:
        rest = url
    elif match.group(1).lower() == "sqlite":
        rest = match.group(2)
    else:
        raise ConfigError(
            f"unsupported store URL {url!r}: use sqlite:///ABSOLUTE/PATH, "
            "sqlite://RELATIVE/PATH or a plain file path",
            url=url,
        )
    if not rest.strip():
        raise ConfigError(
            f"store URL {url!r} names no file: use sqlite:///ABSOLUTE/PATH or a file path",
            url=url,
        )
    if rest.startswith("//"):  # sqlite:////abs/path, as SQLAlchemy spells it
        rest = "/" + rest.lstrip("/")
    return Path(rest).expanduser()


def default_store_path() -> Path:
    """`$SUBAGENTS_STORE`, else `$SUBAGENTS_HOME/state.db` (home defaults to ~/.subagents)."""
    explicit = os.environ.get("SUBAGENTS_STORE")
    if explicit:
        return parse_store_url(explicit)
    home = os.environ.get("SUBAGENTS_HOME") or str(Path.home() / ".subagents")
    return Path(home) / "state.db"


log = logging.getLogger("subagents.sessions")
WRITE_WINDOW = 0.002
"""The longest a write waits in the outbox for others to share its commit, unless awaited."""

Writer = Literal["process", "thread"]


@dataclass(slots=True)
class _Sent:
    """A batch handed to the writer: its waiters, in item order, and its shared future."""

    id: int
    waiters: list[_Waiter]
    future: asyncio.Future[None]


_Waiter: TypeAlias = "asyncio.Future[Any] | WriteDone | None"
"""Who hears an item's outcome: its own future (someone waits for it), a `done` callback, or
nobody (a barrier). One object, not a pair: thousands of writes can be in flight at once, and
a pair each was a tracked tuple each for the collector."""


def _tell(
    waiter: asyncio.Future[Any] | WriteDone, result: object, error: BaseException | None
) -> None:
    """Tell one write's outcome to its waiter: its `done` callback, or its own future."""
    if not isinstance(waiter, asyncio.Future):
        try:
            waiter(error)
        except Exception:
            log.exception("a write's done callback failed")
    elif waiter.done():  # a cancelled waiter: the write stands
        return
    elif error is None:
        cast("asyncio.Future[Any]", waiter).set_result(result)
    else:
        waiter.set_exception(error)


class SqliteEventStore(AsyncResource):
    """The default store: `path` is the database file (parent directories are created).

    Args:
        path: the SQLite file.
        synchronous: `NORMAL` (an acknowledged event survives a process crash) or `FULL`
            (it also survives a power loss, at the cost of an fsync per commit).
        batch_max: about the most records (events, or one per created session) the writer
            commits in one transaction.
        write_window: the longest, in seconds, a write nobody waits for is held back to share
            its commit with later ones (0: until the end of the event loop's iteration).
            A write somebody waits for (a flush, a lease, a command) goes at once.
        writer: where the writes are committed: `process` (the default), a thread of this
            process until a writer process of the store's own (started by the first write) is
            ready, then that process; `thread`, a thread of this process only, which shares
            the GIL with the event loop (`_sqlite_link.py` says what that costs).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        batch_max: int = 512,
        write_window: float = WRITE_WINDOW,
        writer: Writer = "process",
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigError(f"synchronous must be NORMAL or FULL, got {synchronous!r}")
        if batch_max < 1:
            raise ConfigError(f"batch_max must be at least 1, got {batch_max}")
        if not 0 <= write_window <= 1:
            raise ConfigError(f"write_window must be between 0 and 1 second, got {write_window}")
        if writer not in ("process", "thread"):
            raise ConfigError(f"writer must be process or thread, got {writer!r}")
        self._write_window = write_window
        self.path = Path(path)
        self._synchronous: Literal["NORMAL", "FULL"] = synchronous
        self._batch_max = batch_max
        self._writer_kind: Writer = writer
        self._loop: asyncio.AbstractEventLoop | None = None
        self._link: WriterLink | None = None
        self._wconn: sqlite3.Connection | None = None  # the writer's, until a link takes it
        self._outbox: list[WriteItem] = []  # this iteration's writes, not yet sent
        self._outbox_waiters: list[_Waiter] = []
        self._outbox_size = 0
        self._shared: asyncio.Future[None] | None = None  # the outbox's future
        self._timer: asyncio.TimerHandle | None = None  # sends the outbox when its window ends
        self._sent: deque[_Sent] = deque()  # batches sent whose outcome is not told yet
        self._batch_ids = itertools.count(1)
        self._next: dict[SessionId, int] = {}  # next seq per touched session
        self._broken: StoreError | None = None
        self._commits = 0
        self._rconn: sqlite3.Connection | None = None
        self._rlock = threading.Lock()

    @property
    def commits(self) -> int:
        """Transactions the writer has committed (group commit makes it smaller than appends)."""
        return self._commits

    # lifecycle

    noun = "event store"
    reentrant = True

    async def _open(self) -> None:
        self._wconn, self._rconn = await asyncio.to_thread(
            open_database, self.path, synchronous=self._synchronous
        )
        self._loop = asyncio.get_running_loop()

    def _writer_link(self) -> WriterLink:
        """The link to the writer, made with the first write.

        A store that only reads has none and does not import it (startup time of `subagents
        sessions` and `tree`).
        """
        if self._link is not None:
            return self._link
        assert self._loop is not None
        assert self._wconn is not None
        wconn, self._wconn = self._wconn, None
        if self._writer_kind == "thread":
            from ._sqlite_link import ThreadLink

            self._link = ThreadLink(
                wconn,
                self.path,
                batch_max=self._batch_max,
                on_written=self._written,
                loop=self._loop,
            )
            return self._link
        from ._sqlite_link import HandoverLink

        self._link = HandoverLink(
            wconn,
            self.path,
            synchronous=self._synchronous,
            batch_max=self._batch_max,
            on_written=self._written,
            on_broken=self._break,
            loop=self._loop,
        )
        return self._link

    def start_writer(self) -> None:
        """Start the writer now rather than with the first write (a runtime does as it opens).

        Its process then starts while the caller prepares, not while a run's first writes
        wait for it: a busy event loop takes its turns slowly, and its start takes a few.
        """
        self._check_open()
        self._writer_link().start()

    async def _close(self) -> None:
        """Drain pending appends, stop the writer and close the connections."""
        self._send()  # writes still in the outbox make the link, if none was made yet
        if self._link is not None:
            await self._link.aclose()
        if self._wconn is not None:  # never written through: no link took it
            wconn, self._wconn = self._wconn, None
            await asyncio.to_thread(wconn.close)
        await asyncio.to_thread(self._close_reader)  # runs to the end even if we are cancelled

    def _close_reader(self) -> None:
        with self._rlock:
            if self._rconn is not None:
                self._rconn.close()
                self._rconn = None

    # writes

    def _enqueue(
        self, item: WriteItem, size: int, waiter: _Waiter, *, now: bool = False
    ) -> asyncio.Future[None]:
        """Add `item` to the outbox; it goes to the writer with the batch it is part of.

        A batch goes when someone waits for it (`flush`, a lease or a command: `now`), when
        it holds `batch_max` records, or `write_window` seconds after its first write,
        whichever comes first, so that a run nobody waits on hands the writer a batch per
        window, not one per write.
        """
        if self._broken is not None:
            raise self._broken
        shared = self._shared
        if shared is None:
            assert self._loop is not None
            shared = self._shared = self._loop.create_future()
            if self._write_window:
                self._timer = self._loop.call_later(self._write_window, self._send)
            else:
                self._loop.call_soon(self._send)
        self._outbox.append(item)
        self._outbox_waiters.append(waiter)
        self._outbox_size += size
        if now or self._outbox_size >= self._batch_max:
            self._send()
        return shared

    def _send(self) -> None:
        """Hand the outbox to the writer as one batch (on the loop)."""
        shared = self._shared
        if shared is None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch = WriteBatch(next(self._batch_ids), self._outbox, self._outbox_size)
        self._sent.append(_Sent(batch.id, self._outbox_waiters, shared))
        self._outbox = []
        self._outbox_waiters = []
        self._outbox_size = 0
        self._shared = None
        try:
            self._writer_link().send(batch)
        except StoreError as exc:
            self._break(exc)

    def _future(self) -> asyncio.Future[Any]:
        assert self._loop is not None
        return self._loop.create_future()

    def create(self, header: SessionHeader) -> asyncio.Future[None]:
        """Enqueue `header` (through the writer, so creates are group-committed too)."""
        self._check_open()
        future = self._future()
        item = CreateSession(
            header.id,
            header.tenant,
            header.parent,
            header.root_id,
            header.created_at,
            encode_header(header),
            header.seed_length,
        )
        self._enqueue(item, 1, future)
        self._next.setdefault(header.id, 0)
        return future

    def flush(self) -> asyncio.Future[None]:
        """A future that resolves once every write submitted before it is committed."""
        self._check_open()
        if self._shared is None and not self._sent:
            settled = self._future()
            if self._broken is not None:
                settled.set_exception(self._broken)
            else:
                settled.set_result(None)  # every batch sent was told: nothing to wait for
            return settled
        return self._enqueue(_BARRIER, 0, None, now=True)

    def append(
        self,
        session_id: SessionId,
        records: Sequence[EventRecord],
        *,
        done: WriteDone | None = None,
    ) -> asyncio.Future[None]:
        """Check and enqueue `records`; the future resolves once they are committed.

        A wrong seq for a session this store has written is refused here, synchronously. A
        session it has not touched yet (say, after a restart) is checked by the writer against
        the file, so `NotFoundError` or `ConcurrencyConflict` then arrives through the future,
        or, with `done`, through `done` (the returned future is then shared with the other
        writes of this loop iteration and only says the batch was handled).
        """
        if self._state != "opened":
            self._check_open()
        known = self._next.get(session_id)
        if done is not None and len(records) == 1:
            # One record told through `done`: a session's `submit`, a dozen times per child.
            record = records[0]
            seq = record.seq
            if known is not None and seq != known:
                self._conflict(session_id, known, seq)
            event = record.event
            row = (seq, KIND_OF[type(event)], event.v, record.time, _encode(event))
            future = self._enqueue(AppendRows(session_id, [row]), 1, done)
            self._next[session_id] = seq + 1
            return future
        base = known if known is not None else (records[0].seq if records else 0)
        rows: list[EventRow] = []
        for offset, r in enumerate(records):
            if r.seq != base + offset:
                self._conflict(session_id, base + offset, r.seq)
            event = r.event
            rows.append((r.seq, KIND_OF[type(event)], event.v, r.time, _encode(event)))
        item = AppendRows(session_id, rows)
        if done is None:  # its own future: someone is about to wait for it
            future = self._future()
            self._enqueue(item, len(rows), future, now=True)
        else:
            future = self._enqueue(item, len(rows), done)
        if records:
            # A session this process has not written yet is checked by the writer instead.
            self._next[session_id] = base + len(records)
        return future

    @staticmethod
    def _conflict(session_id: SessionId, expected: int, seq: int) -> NoReturn:
        raise ConcurrencyConflict(
            f'append to session "{session_id}" expected seq {expected}, '
            f"got {seq}; another writer appended first",
            expected_seq=expected,
            seq=seq,
        )

    def _written(self, answer: WrittenBatch) -> None:
        """On the loop: a batch's outcome. Correct the seq cache first, then wake the waiters."""
        sent = self._sent.popleft()
        assert sent.id == answer.id, f"the writer answered batch {answer.id}, not {sent.id}"
        self._commits = answer.commits
        for sid in answer.forget:
            self._next.pop(SessionId(sid), None)
        for sid in answer.created:
            self._next.setdefault(SessionId(sid), 0)
        for waiter, result in zip(sent.waiters, answer.results, strict=True):
            if waiter is not None:
                error = error_from_wire(result) if isinstance(result, WireError) else None
                _tell(waiter, result, error)
        if not sent.future.done():
            if answer.failure is None:
                sent.future.set_result(None)  # each write's own outcome went to its waiter
            else:
                sent.future.set_exception(error_from_wire(answer.failure))
                sent.future.exception()  # told through `done` already: never "unretrieved"

    def _break(self, error: StoreError) -> None:
        """The writer is gone: every write in flight and every later one fails with `error`."""
        if self._broken is None:
            self._broken = error
            log.error("the event store at %s can no longer write: %s", self.path, error)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending = list(self._sent)
        self._sent.clear()
        if self._shared is not None:
            pending.append(_Sent(0, self._outbox_waiters, self._shared))
            self._outbox, self._outbox_waiters, self._outbox_size = [], [], 0
            self._shared = None
        for sent in pending:
            for waiter in sent.waiters:
                if waiter is not None:
                    _tell(waiter, None, error)
            if not sent.future.done():
                sent.future.set_exception(error)
                sent.future.exception()

    # leases and commands (through the writer, each in its batch's transaction)

    async def _call(self, item: WriteItem) -> Any:
        self._check_open()
        future = self._future()
        self._enqueue(item, 1, future, now=True)
        return await future

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
        row = await self._call(AcquireLease(root, holder, pid, now, ttl, address))
        return _lease(root, row)

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
        # The writer renews it from then on; nobody hears its outcome (a failure breaks the
        # writes after it too, which somebody does wait for).
        self._enqueue(AcquireLease(root, holder, pid, now, ttl, address), 1, None)

    async def release_lease(self, root: SessionId, *, holder: str) -> None:
        await self._call(ReleaseLease(root, holder))

    async def get_lease(self, root: SessionId) -> Lease | None:
        self._check_open()
        rows = await asyncio.to_thread(
            self._query_rows,
            "SELECT holder, pid, heartbeat, expires, address FROM leases WHERE root = ?",
            (root,),
        )
        return _lease(root, rows[0]) if rows else None

    # commands (written through the writer, each in its batch's transaction)

    async def submit_command(
        self, *, root: SessionId, tenant: str, target: SessionId, kind: str, body: bytes, now: float
    ) -> int:
        return int(await self._call(SubmitCommand(root, tenant, target, kind, body, now)))

    async def pending_commands(self, root: SessionId) -> list[CommandRow]:
        self._check_open()
        rows = await asyncio.to_thread(
            self._query_rows,
            f"SELECT {_COMMAND_COLUMNS} FROM commands WHERE root = ? AND state = 'pending' "
            "ORDER BY id",
            (root,),
        )
        return [_command(row) for row in rows]

    async def get_command(self, command_id: int) -> CommandRow | None:
        self._check_open()
        rows = await asyncio.to_thread(
            self._query_rows, f"SELECT {_COMMAND_COLUMNS} FROM commands WHERE id = ?", (command_id,)
        )
        return _command(rows[0]) if rows else None

    async def finish_command(
        self, command_id: int, *, state: CommandState, outcome: bytes, now: float
    ) -> bool:
        return bool(await self._call(FinishCommand(command_id, state, outcome, now)))

    async def change_count(self) -> int:
        """SQLite's `data_version` on the reader connection.

        It moves with every commit made through another connection (this store's writer
        included), and costs no disk read.
        """
        self._check_open()
        row = await asyncio.to_thread(self._query, "PRAGMA data_version", (), one=True)
        return int(row[0])

    def _query_rows(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        with self._rlock:
            conn = self._rconn
            assert conn is not None
            return list(conn.execute(sql, params).fetchall())

    # reads

    async def read(
        self, session_id: SessionId, *, tenant: str, from_seq: int = 0, limit: int | None = None
    ) -> list[EventRecord]:
        self._check_open()
        records = await asyncio.to_thread(
            self._read, session_id, tenant, max(from_seq, 0), -1 if limit is None else limit
        )
        known = self._next.get(session_id)
        if known is not None and records and records[-1].seq >= known:
            # Another process wrote the session since this store did (a child run elsewhere
            # under this process's lease): what was read is where the next append goes.
            self._next[session_id] = records[-1].seq + 1
        return records

    async def get_header(self, session_id: SessionId, *, tenant: str) -> SessionHeader:
        self._check_open()
        return await asyncio.to_thread(self._get_header, session_id, tenant)

    async def list_headers(
        self, *, tenant: str, roots_only: bool = True, root: SessionId | None = None
    ) -> list[SessionHeader]:
        self._check_open()
        sql = "SELECT header FROM sessions WHERE tenant = ?"
        params: list[str] = [tenant]
        if roots_only:
            sql += " AND parent IS NULL"
        if root is not None:
            sql += " AND root = ?"
            params.append(root)
        sql += " ORDER BY created_at DESC, rowid DESC"
        rows = await asyncio.to_thread(self._query, sql, tuple(params))
        return [decode_header(row[0]) for row in rows]

    async def tree_members(self, root: SessionId, *, tenant: str) -> list[MemberSummary]:
        """Every session of `root`'s tree (in no set order) from the summaries, no log read."""
        self._check_open()
        return await asyncio.to_thread(self._tree_members, root, tenant)

    def _tree_members(self, root: SessionId, tenant: str) -> list[MemberSummary]:
        # One range read of the summaries, whose rows carry their headers and entries, as one
        # JSON text decoded in one call: for 10,000 members some 20 ms where building each
        # member from three tables took a hundred. A tree whose rows are not all there and
        # whole (a damaged file, a session created in between) is read the slow way.
        (text,) = self._query(_TREE_ROWS, (root,), one=True)  # bytes, or None: no rows
        (size,) = self._query(_TREE_SIZE, (root, tenant), one=True)
        members = None if text is None else decode_members(text)
        if members is not None and _whole_tree(members, root, tenant, size):
            return members
        return self._tree_members_joined(root, tenant)

    async def tree_listing(self, root: SessionId, *, tenant: str) -> list[ListingRow]:
        """Every session of `root`'s tree (in no set order) as a listing row, no log read."""
        self._check_open()
        return await asyncio.to_thread(self._tree_listing, root, tenant)

    def _tree_listing(self, root: SessionId, tenant: str) -> list[ListingRow]:
        # The flat rows the writer keeps (a third of the bytes of the members' summaries rows,
        # decoded into one object each). A tree whose rows are not all there (a damaged file,
        # a session created in between) is listed from its members.
        text, size = self._query(_TREE_LISTING, (root, tenant), one=True)
        rows = None if text is None else decode_listing(text)
        if rows is not None and len(rows) == size:  # each its key's id: no duplicates
            return rows
        return [listing_row(m) for m in self._tree_members(root, tenant)]

    def _tree_members_joined(self, root: SessionId, tenant: str) -> list[MemberSummary]:
        # Three range reads of tables keyed by root, joined here: a join in SQL looks each
        # member up in each table instead.
        headers: list[tuple[bytes]] = self._query(_TREE_SESSIONS, (root, tenant))
        summaries: dict[str, bytes] = dict(self._query(_TREE_SUMMARIES, (root,)))
        entries: dict[tuple[str, str], CatalogEntry] = {
            (child, creator): CatalogEntry(name, mode, label, seq)
            for child, creator, seq, name, mode, label in self._query(_TREE_CATALOG, (root,))
        }
        members: list[MemberSummary] = []
        for (blob,) in headers:
            header = decode_header(blob)
            summary = self._kept_or_folded(header.id, summaries.get(header.id))
            entry = None if header.parent is None else entries.get((header.id, header.parent))
            members.append(MemberSummary(header, summary, entry))
        return members

    async def summaries(
        self, session_ids: Sequence[SessionId], *, tenant: str
    ) -> dict[SessionId, SessionSummary]:
        """The summaries of `tenant`'s sessions among `session_ids`, in one read, no log read.

        A session whose summary is missing and whose log cannot be read is left out.
        """
        self._check_open()
        return await asyncio.to_thread(self._summaries, list(dict.fromkeys(session_ids)), tenant)

    def _summaries(
        self, session_ids: list[SessionId], tenant: str
    ) -> dict[SessionId, SessionSummary]:
        found: dict[SessionId, SessionSummary] = {}
        for start in range(0, len(session_ids), _IDS_PER_QUERY):
            chunk = session_ids[start : start + _IDS_PER_QUERY]
            marks = ", ".join("?" * len(chunk))
            rows: list[tuple[str, bytes | None]] = self._query(
                _SUMMARIES_OF.format(marks=marks), (*chunk, tenant)
            )
            for session_id, kept in rows:
                try:
                    found[SessionId(session_id)] = self._kept_or_folded(session_id, kept)
                except (StoreError, sqlite3.Error):
                    continue  # no summary kept and an unreadable log: the session is left out
        return found

    def _kept_or_folded(self, session_id: str, kept: bytes | None) -> SessionSummary:
        """The summary kept for a session, or its log's fold (none kept, or unreadable)."""
        if kept is not None:
            with contextlib.suppress(msgspec.DecodeError):
                return decode_summary(kept)
        with self._rlock:
            assert self._rconn is not None
            return folded_summary(self._rconn, session_id)[1]

    def _query(self, sql: str, params: tuple[object, ...], *, one: bool = False) -> Any:
        """Run one read on the reader connection (from a worker thread)."""
        with self._rlock:
            if self._rconn is None:
                raise ClosedError("the event store is closed; open it with `async with`")
            try:
                cursor = self._rconn.execute(sql, params)
                return cursor.fetchone() if one else cursor.fetchall()
            except sqlite3.Error as exc:
                corrupt = "malformed" in str(exc) or "not a database" in str(exc)
                raise StoreError(
                    f"cannot read the store at {self.path}: {exc}",
                    code=ErrorCode.STORE_CORRUPT if corrupt else ErrorCode.STORE,
                    retryable=None if corrupt else True,
                ) from exc

    def _get_header(self, session_id: SessionId, tenant: str) -> SessionHeader:
        sql = "SELECT header FROM sessions WHERE id = ? AND tenant = ?"
        row = self._query(sql, (session_id, tenant), one=True)
        if row is None:
            raise NotFoundError(f'session "{session_id}" not found')
        return decode_header(row[0])

    def _read(
        self, session_id: SessionId, tenant: str, from_seq: int, limit: int
    ) -> list[EventRecord]:
        sql = "SELECT 1 FROM sessions WHERE id = ? AND tenant = ?"
        if self._query(sql, (session_id, tenant), one=True) is None:
            raise NotFoundError(f'session "{session_id}" not found')
        rows = self._query(  # LIMIT -1: no limit
            "SELECT seq, kind, v, time, payload FROM events "
            "WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
            (session_id, from_seq, limit),
        )
        records: list[EventRecord] = []
        for offset, (seq, kind, v, stamp, payload) in enumerate(rows):
            if seq != from_seq + offset:
                raise StoreError(
                    f'the log of session "{session_id}" has a gap before seq {seq}',
                    code=ErrorCode.STORE_CORRUPT,
                )
            records.append(EventRecord(seq, stamp, decode_event(kind, v, payload)))
        return records


_COMMAND_COLUMNS = "id, root, tenant, target, kind, body, created_at, state, outcome, handled_at"


def _lease(root: SessionId, row: Sequence[Any]) -> Lease:
    holder, pid, heartbeat, expires, address = row
    return Lease(
        root, str(holder), int(pid), float(heartbeat), float(expires), _text_or_none(address)
    )


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _command(row: Sequence[Any]) -> CommandRow:
    """A stored row as it is.

    Odd column types (a hand-edited row) become values that `parse_command` refuses, never an
    exception here.
    """
    id_, root, tenant, target, kind, body, created_at, state, outcome, handled_at = row
    return CommandRow(
        id=int(id_),
        root=str(root),
        tenant=str(tenant),
        target=str(target),
        kind=str(kind),
        body=body if isinstance(body, bytes) else str(body).encode(),
        created_at=float(created_at) if isinstance(created_at, int | float) else 0.0,
        state=str(state),
        outcome=outcome if isinstance(outcome, bytes) else None,
        handled_at=float(handled_at) if isinstance(handled_at, int | float) else None,
    )
