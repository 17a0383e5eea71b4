"""The durable `EventStore`: one SQLite file in WAL mode, written by one thread with group commit.

`append` validates on the caller's thread and adds the write to the loop's outbox; at the end of
the loop iteration the outbox goes to the writer thread as one batch (one queue item, one
future), so the many small writes of one step cross threads once. The writer takes every batch
queued (up to about `batch_max` records), writes them in one `BEGIN IMMEDIATE ... COMMIT`, and
only then resolves their futures, so an acknowledged event is in the WAL. Reads use a separate
connection from a worker thread (`asyncio.to_thread`): the event loop never blocks on SQLite.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

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
    EventRecord,
    SessionHeader,
    decode_event,
    decode_header,
    encode_event,
    encode_header,
)
from ._migrations import folded_summary, open_database
from ._sqlite_writer import Append, Batch, Call, Create, Item, Outcome, Row, TransactionWriter
from ._store import Lease, WriteDone
from ._summaries import (
    SUMMARY_KINDS,
    CatalogEntry,
    MemberSummary,
    SessionSummary,
    decode_members,
    decode_summary,
)

__all__ = ["SqliteEventStore", "default_store_path", "parse_store_url"]

# One JSON array of `[header, summary, entry]` rows (an incomplete row is left out), as bytes:
# a damaged row's bytes are then msgspec's to refuse, not a text decoding error of the read.
_TREE_ROWS = (
    "SELECT CAST('[' || group_concat('[' || header || ',' || summary || ',' || "
    "coalesce(entry, 'null') || ']') || ']' AS BLOB) FROM summaries WHERE root = ?"
)
_TREE_SIZE = "SELECT count(*) FROM sessions WHERE root = ? AND tenant = ?"
_TREE_SESSIONS = (
    "SELECT header FROM sessions WHERE root = ? AND tenant = ? ORDER BY created_at, rowid"
)
_TREE_SUMMARIES = "SELECT session_id, summary FROM summaries WHERE root = ?"
_TREE_CATALOG = "SELECT child_id, creator, seq, name, mode, label FROM catalog WHERE root = ?"
_SUMMARIES_OF = (
    "SELECT s.id, m.summary FROM sessions s"
    " LEFT JOIN summaries m ON m.root = s.root AND m.session_id = s.id"
    " WHERE s.id IN ({marks}) AND s.tenant = ?"
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


_STOP = object()
log = logging.getLogger("subagents.sessions")
WRITE_WINDOW = 0.002
"""The longest a write waits in the outbox for others to share its commit, unless awaited."""
LEASE_RENEW_SECONDS = 10.0
"""How often the writer renews the leases this store holds (they last 30 s)."""


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
    """

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        batch_max: int = 512,
        write_window: float = WRITE_WINDOW,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigError(f"synchronous must be NORMAL or FULL, got {synchronous!r}")
        if batch_max < 1:
            raise ConfigError(f"batch_max must be at least 1, got {batch_max}")
        if not 0 <= write_window <= 1:
            raise ConfigError(f"write_window must be between 0 and 1 second, got {write_window}")
        self._write_window = write_window
        self.path = Path(path)
        self._synchronous: Literal["NORMAL", "FULL"] = synchronous
        self._batch_max = batch_max
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: queue.SimpleQueue[Batch | object] = queue.SimpleQueue()
        self._outbox: list[Item] = []  # loop thread: this iteration's writes, not yet sent
        self._outbox_size = 0
        self._shared: asyncio.Future[None] | None = None  # the outbox's future
        self._timer: asyncio.TimerHandle | None = None  # sends the outbox when its window ends
        self._in_flight = 0  # loop thread: batches sent whose outcome is not told yet
        self._next: dict[SessionId, int] = {}  # loop thread: next seq per touched session
        self._wconn: sqlite3.Connection | None = None
        self._transactions: TransactionWriter | None = None
        self._rconn: sqlite3.Connection | None = None
        self._rlock = threading.Lock()
        self._writer: threading.Thread | None = None
        self._kept: dict[SessionId, tuple[str, int, float, str | None]] = {}  # leases to renew
        self._renewed = time.time()

    @property
    def commits(self) -> int:
        """Transactions the writer has committed (group commit makes it smaller than appends)."""
        return 0 if self._transactions is None else self._transactions.commits

    # lifecycle

    noun = "event store"
    reentrant = True

    async def _open(self) -> None:
        self._wconn, self._rconn = await asyncio.to_thread(
            open_database, self.path, synchronous=self._synchronous
        )
        self._transactions = TransactionWriter(self._wconn, self.path)
        self._loop = asyncio.get_running_loop()
        self._writer = threading.Thread(
            target=self._run_writer, name="subagents-sqlite-writer", daemon=True
        )
        self._writer.start()

    async def _close(self) -> None:
        """Drain pending appends, stop the writer and close the connections."""
        if self._writer is not None:
            self._send()
            self._queue.put(_STOP)
        await asyncio.to_thread(self._shutdown)  # runs to the end even if we are cancelled

    def _shutdown(self) -> None:
        if self._writer is not None:
            self._writer.join()
        with self._rlock:
            if self._rconn is not None:
                self._rconn.close()
                self._rconn = None

    # writes

    def _enqueue(self, item: Item, size: int, *, now: bool = False) -> asyncio.Future[None]:
        """Add `item` to the outbox; it goes to the writer with the batch it is part of.

        A batch goes when someone waits for it (`flush`, a lease or a command: `now`), when
        it holds `batch_max` records, or `write_window` seconds after its first write,
        whichever comes first. Waking the writer thread costs the loop a hand-over of the
        GIL, so a run that nobody waits on pays it once per window, not once per write.
        """
        shared = self._shared
        if shared is None:
            assert self._loop is not None
            shared = self._shared = self._loop.create_future()
            if self._write_window:
                self._timer = self._loop.call_later(self._write_window, self._send)
            else:
                self._loop.call_soon(self._send)
        self._outbox.append(item)
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
        self._queue.put(Batch(self._outbox, shared, self._outbox_size))
        self._in_flight += 1
        self._outbox = []
        self._outbox_size = 0
        self._shared = None

    def create(self, header: SessionHeader) -> asyncio.Future[None]:
        """Enqueue `header` (through the writer, so creates are group-committed too)."""
        self._check_open()
        assert self._loop is not None
        row = (header.id, header.tenant, header.parent, header.root_id, header.created_at)
        future: asyncio.Future[None] = self._loop.create_future()
        self._enqueue(Create(header, (*row, encode_header(header)), future), 1)
        self._next.setdefault(header.id, 0)
        return future

    def flush(self) -> asyncio.Future[None]:
        """A future that resolves once every write submitted before it is committed."""
        self._check_open()
        if self._shared is None and not self._in_flight:
            assert self._loop is not None
            settled: asyncio.Future[None] = self._loop.create_future()
            settled.set_result(None)  # every batch sent was told: nothing to wait for
            return settled
        return self._enqueue(Append(SessionId(""), [], None), 0, now=True)

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
        self._check_open()
        assert self._loop is not None
        known = self._next.get(session_id)
        base = known if known is not None else (records[0].seq if records else 0)
        for offset, record in enumerate(records):
            if record.seq != base + offset:
                raise ConcurrencyConflict(
                    f'append to session "{session_id}" expected seq {base + offset}, '
                    f"got {record.seq}; another writer appended first",
                    expected_seq=base + offset,
                    seq=record.seq,
                )
        rows: list[Row] = []
        summarized: list[EventRecord] | None = None
        for r in records:
            kind = r.kind
            rows.append((session_id, r.seq, kind, r.event.v, r.time, encode_event(r.event)))
            if kind in SUMMARY_KINDS:
                if summarized is None:
                    summarized = []
                summarized.append(r)
        if done is None:  # its own future: someone is about to wait for it
            future: asyncio.Future[None] = self._loop.create_future()
            self._enqueue(Append(session_id, rows, future, None, summarized), len(rows), now=True)
        else:
            future = self._enqueue(Append(session_id, rows, None, done, summarized), len(rows))
        if records:
            # A session this process has not written yet is checked by the writer instead.
            self._next[session_id] = base + len(records)
        return future

    def _run_writer(self) -> None:
        conn = self._wconn
        writer = self._transactions
        assert conn is not None
        assert writer is not None
        try:
            stop = False
            while not stop:
                batches: list[Batch] = []
                size = 0
                if time.time() - self._renewed > LEASE_RENEW_SECONDS:
                    self._renewed = time.time()
                    writer.renew_leases(dict(self._kept), self._renewed)
                try:
                    taken = self._queue.get(timeout=LEASE_RENEW_SECONDS)
                except queue.Empty:
                    continue
                while True:
                    if taken is _STOP:
                        stop = True
                        break
                    assert isinstance(taken, Batch)
                    batches.append(taken)
                    size += taken.size
                    if size >= self._batch_max:
                        break
                    try:
                        taken = self._queue.get_nowait()
                    except queue.Empty:
                        break
                if batches:
                    self._settle(writer.write(batches))
        finally:
            conn.close()
            self._wconn = None

    def _settle(self, outcome: Outcome) -> None:
        assert self._loop is not None
        # RuntimeError: the loop is gone, so nobody is waiting.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._resolve, outcome)

    def _resolve(self, outcome: Outcome) -> None:
        """On the loop: correct the seq cache first, then wake the waiters."""
        for sid in outcome.forget:
            self._next.pop(sid, None)
        for sid in outcome.created:
            self._next.setdefault(sid, 0)
        for item, error in outcome.results:
            future = item.future
            if future is None:
                assert isinstance(item, Append)
                if item.done is not None:
                    try:
                        item.done(error)
                    except Exception:
                        log.exception("a write's done callback failed")
                continue
            if future.done():  # the waiter was cancelled; the write stands
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
        self._in_flight -= len(outcome.batches)
        for shared in outcome.batches:
            if shared.done():
                continue
            if outcome.failure is None:
                shared.set_result(None)  # each write's own outcome went to its future or `done`
            else:
                shared.set_exception(outcome.failure)
                shared.exception()  # told through `done` already: never "unretrieved" at exit

    # leases (through the writer, each in the batch's transaction)

    async def _call(self, fn: Callable[[sqlite3.Connection], None]) -> None:
        self._check_open()
        assert self._loop is not None
        future: asyncio.Future[None] = self._loop.create_future()
        self._enqueue(Call(fn, future), 1, now=True)
        await future

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
        held: list[Lease] = []

        def acquire(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT holder, pid, heartbeat, expires, address FROM leases WHERE root = ?",
                (root,),
            ).fetchone()
            if row is not None and row[0] != holder and float(row[3]) > now:
                held.append(_lease(root, row))
                return
            conn.execute(
                "INSERT INTO leases (root, holder, pid, heartbeat, expires, address) "
                "VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(root) DO UPDATE SET holder = excluded.holder, pid = excluded.pid, "
                "heartbeat = excluded.heartbeat, expires = excluded.expires, "
                "address = excluded.address",
                (root, holder, pid, now, now + ttl, address),
            )
            held.append(Lease(root, holder, pid, now, now + ttl, address))

        await self._call(acquire)
        if held[0].holder == holder:
            self._kept[root] = (holder, pid, ttl, address)
        return held[0]

    async def release_lease(self, root: SessionId, *, holder: str) -> None:
        def release(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM leases WHERE root = ? AND holder = ?", (root, holder))

        kept = self._kept.get(root)
        if kept is not None and kept[0] == holder:
            del self._kept[root]
        await self._call(release)

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
        ids: list[int] = []

        def insert(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "INSERT INTO commands (root, tenant, target, kind, body, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (root, tenant, target, kind, body, now),
            )
            ids.append(int(cursor.lastrowid or 0))

        await self._call(insert)
        return ids[0]

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
        changed: list[bool] = []

        def finish(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "UPDATE commands SET state = ?, outcome = ?, handled_at = ? "
                "WHERE id = ? AND state = 'pending'",
                (state, outcome, now, command_id),
            )
            changed.append(cursor.rowcount == 1)

        await self._call(finish)
        return changed[0]

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
