"""The SQLite store's writer: batches of writes, each transaction a few statements.

It runs where the store puts it: in a process of its own (`_sqlite_process.py`, the default),
or in a thread of the store's process. Either way it gets `WriteBatch`es (plain data) and
answers a `WrittenBatch` for each, in order.

A transaction does not execute a statement per write: it checks every write in Python (its seq
against the cache of committed seqs, its summary against the cached one), gathers the rows,
and writes them with a few multi-row statements per table just before `COMMIT` (in a thread,
every call into `sqlite3` gives the GIL up and must take it back from a busy loop; a statement
per write, or `executemany`'s step per row, made it fall behind). Only a write that must look
at the file (a session this writer has not written yet, a summary it has not cached) first
writes what was gathered, so that what it reads is this transaction's.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import msgspec

from ..errors import (
    ConcurrencyConflict,
    DuplicateError,
    ErrorCode,
    NotFoundError,
    StoreError,
    SubagentsError,
)
from ..ids import SessionId
from ._events import EventRecord, decode_event
from ._migrations import (
    fill_members,
    rebuild_summary,
    refresh_listing,
    upsert_catalog,
    upsert_summary,
    values,
)
from ._sqlite_wire import (
    AcquireLease,
    AppendRows,
    Barrier,
    CreateSession,
    FinishCommand,
    ReleaseLease,
    Result,
    SubmitCommand,
    WireError,
    WriteBatch,
    WriteItem,
    WrittenBatch,
    error_to_wire,
)
from ._summaries import (
    SUMMARY_KINDS,
    SessionSummary,
    catalog_row,
    decode_summary,
    encode_summary,
    summarize,
)

__all__ = ["KeptLease", "TransactionWriter"]

Row = tuple[str, int, str, int, float, bytes]
"""An events row: session id, seq, kind, event version, time, payload."""
SessionRow = tuple[str, str, str | None, str, float, bytes]
"""A sessions row: id, tenant, parent, root, created_at, header."""
KeptLease = tuple[str, int, float, str | None]
"""A lease this writer renews: holder, pid, ttl, address."""


def _insert_events(rows: int) -> str:
    return f"INSERT INTO events (session_id, seq, kind, v, time, payload) VALUES {values(6, rows)}"


def _insert_sessions(rows: int) -> str:
    return (
        "INSERT OR IGNORE INTO sessions (id, tenant, parent, root, created_at, header) "
        f"VALUES {values(6, rows)}"
    )


_ROWS_MAX = 256
"""The most rows one statement writes (a power of two: see `_row_counts`)."""
_LAST_SEQ = (
    "SELECT (SELECT 1 FROM sessions WHERE id = ?), "
    "(SELECT MAX(seq) FROM events WHERE session_id = ?)"
)
_KEPT_SUMMARY = (
    "SELECT m.root, m.summary FROM sessions s JOIN summaries m "
    "ON m.root = s.root AND m.session_id = s.id WHERE s.id = ?"
)
_IDS_PER_QUERY = 500  # well under SQLite's limit on bound parameters
_LEASE_ROW = "SELECT holder, pid, heartbeat, expires, address FROM leases WHERE root = ?"
_UPSERT_LEASE = (
    "INSERT INTO leases (root, holder, pid, heartbeat, expires, address) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT(root) DO UPDATE SET holder = excluded.holder, pid = excluded.pid, "
    "heartbeat = excluded.heartbeat, expires = excluded.expires, address = excluded.address"
)


class _Written:
    """What one transaction tells: a result per item, the sessions to forget or now known."""

    __slots__ = ("created", "forget", "results")

    def __init__(self) -> None:
        self.results: list[Result] = []
        self.forget: set[str] = set()
        self.created: list[str] = []


class _Gathered:
    """The rows of one transaction not written yet, one list per statement."""

    __slots__ = ("appends", "catalog", "events", "fills", "sessions", "summaries")

    def __init__(self) -> None:
        self.sessions: list[SessionRow] = []
        self.events: list[Row] = []
        self.appends: list[AppendRows] = []
        """The writes whose rows are in `events`: one of them is the culprit of a collision."""
        self.catalog: list[tuple[str, str, str, int, str | None, str, str]] = []
        self.summaries: dict[SessionId, None] = {}
        """Sessions whose cached summary changed (in first-changed order)."""
        self.fills: dict[tuple[str, str], None] = {}
        """Summary rows to give their header and catalog entry: (root, session id)."""


class TransactionWriter:
    """The writer's side of the store: its connection and what it has committed."""

    def __init__(
        self, conn: sqlite3.Connection, path: Path, *, on_commit: Callable[[], None] | None = None
    ) -> None:
        self.conn = conn
        self.path = path
        self._on_commit = on_commit
        """Told after every commit (the writer process counts them for its checkpoints)."""
        self.commits = 0
        """Transactions committed (group commit makes it smaller than the writes)."""
        self.kept: dict[str, KeptLease] = {}
        """The leases this writer holds and renews (`renew_leases`), by root."""
        self._next: dict[SessionId, int] = {}
        """Each session's next seq as committed (or gathered in the open transaction)."""
        self._summary: dict[SessionId, tuple[str, SessionSummary]] = {}
        """Each session's root and summary as committed (or gathered)."""
        self._gathered = _Gathered()
        self._statements: dict[tuple[Callable[[int], str], int], str] = {}
        self._variables = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)

    def write(self, batches: list[WriteBatch]) -> list[WrittenBatch]:
        """Write `batches` in one transaction (group commit); on failure roll all of it back."""
        items = [item for b in batches for item in b.items]
        written = _Written()
        culprit: WriteItem | None = None
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            taken = self._taken_ids(items)
            for culprit in items:
                written.results.append(self._write_item(culprit, written, taken))
            culprit = None
            self._write_gathered()
            conn.execute("COMMIT")
        except Exception as exc:  # fail every waiter of the batch, never strand one
            appends = self._gathered.appends
            self._gathered = _Gathered()
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if culprit is None and isinstance(exc, sqlite3.IntegrityError):
                culprit = self._collided(appends)
            return self._failed(batches, exc, culprit)
        self.commits += 1
        if self._on_commit is not None:
            self._on_commit()
        return self._told(batches, written)

    def _told(
        self, batches: list[WriteBatch], written: _Written, failure: WireError | None = None
    ) -> list[WrittenBatch]:
        """`written` split back into one answer per batch (the forgets go with the first)."""
        told: list[WrittenBatch] = []
        start = 0
        forget, created = sorted(written.forget), written.created
        for batch in batches:
            end = start + len(batch.items)
            told.append(
                WrittenBatch(
                    batch.id, written.results[start:end], forget, created, self.commits, failure
                )
            )
            forget, created, start = [], [], end
        return told

    def _failed(
        self, batches: list[WriteBatch], exc: Exception, culprit: WriteItem | None
    ) -> list[WrittenBatch]:
        items = [item for b in batches for item in b.items]
        written = _Written()
        for item in items:
            sid = _session_of(item)
            if sid:
                written.forget.add(sid)
                self._next.pop(SessionId(sid), None)  # reloaded from the db on next touch
                self._summary.pop(SessionId(sid), None)
        for item in items:
            error = _write_error(exc, item, self.path, culprit=item is culprit)
            written.results.append(error_to_wire(error))
        failure = error_to_wire(_write_error(exc, items[0], self.path, culprit=False))
        return self._told(batches, written, failure)

    def _collided(self, appends: list[AppendRows]) -> AppendRows | None:
        """After a rolled-back collision: the first write whose seqs are taken in the file."""
        for item in appends:
            first, last = item.rows[0][0], item.rows[-1][0]
            with contextlib.suppress(sqlite3.Error):
                found = self.conn.execute(
                    "SELECT 1 FROM events WHERE session_id = ? AND seq BETWEEN ? AND ?",
                    (item.session_id, first, last),
                ).fetchone()
                if found is not None:
                    return item
        return None

    def _taken_ids(self, items: list[WriteItem]) -> set[str]:
        """Which of the sessions `items` create exist already (one query per 500)."""
        ids = [item.id for item in items if isinstance(item, CreateSession)]
        taken: set[str] = set()
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[start : start + _IDS_PER_QUERY]
            marks = ",".join("?" * len(chunk))
            rows = self.conn.execute(f"SELECT id FROM sessions WHERE id IN ({marks})", chunk)
            taken.update(str(row[0]) for row in rows)
        return taken

    def _write_item(self, item: WriteItem, written: _Written, taken: set[str]) -> Result:
        if isinstance(item, AppendRows):
            error = self._append(item, written)
            return None if error is None else error_to_wire(error)
        if isinstance(item, CreateSession):
            error = self._create(item, written, taken)
            return None if error is None else error_to_wire(error)
        if isinstance(item, Barrier):
            return None  # a flush: resolved with its batch
        # Leases and commands have tables of their own, which no gathered row touches: they
        # need not wait for the gathered rows (all of it commits at once anyway).
        if isinstance(item, AcquireLease):
            return self._acquire(item)
        if isinstance(item, ReleaseLease):
            self.conn.execute(
                "DELETE FROM leases WHERE root = ? AND holder = ?", (item.root, item.holder)
            )
            kept = self.kept.get(item.root)
            if kept is not None and kept[0] == item.holder:
                del self.kept[item.root]
            return None
        if isinstance(item, SubmitCommand):
            cursor = self.conn.execute(
                "INSERT INTO commands (root, tenant, target, kind, body, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (item.root, item.tenant, item.target, item.kind, item.body, item.now),
            )
            return int(cursor.lastrowid or 0)
        assert isinstance(item, FinishCommand)
        cursor = self.conn.execute(
            "UPDATE commands SET state = ?, outcome = ?, handled_at = ? "
            "WHERE id = ? AND state = 'pending'",
            (item.state, item.outcome, item.now, item.command_id),
        )
        return cursor.rowcount == 1

    def _acquire(self, item: AcquireLease) -> Result:
        """The lease of `item.root`: another's that is still valid, else now `item.holder`'s."""
        row = self.conn.execute(_LEASE_ROW, (item.root,)).fetchone()
        if row is not None and row[0] != item.holder and float(row[3]) > item.now:
            return (str(row[0]), int(row[1]), float(row[2]), float(row[3]), row[4])
        expires = item.now + item.ttl
        self.conn.execute(
            _UPSERT_LEASE, (item.root, item.holder, item.pid, item.now, expires, item.address)
        )
        self.kept[item.root] = (item.holder, item.pid, item.ttl, item.address)
        return (item.holder, item.pid, item.now, expires, item.address)

    def _append(self, item: AppendRows, written: _Written) -> SubagentsError | None:
        if not item.rows:
            return None
        sid = SessionId(item.session_id)
        expected = self._next.get(sid)
        first = item.rows[0][0]
        if expected is None or first != expected:
            # Not cached, or the cache disagrees: another process may have written the
            # session since (a child run elsewhere under this process's lease). The file says.
            self._write_gathered()
            found, last = self.conn.execute(_LAST_SEQ, (sid, sid)).fetchone()
            if found is None:
                written.forget.add(sid)
                return NotFoundError(f'session "{sid}" not found')
            expected = self._next[sid] = 0 if last is None else int(last) + 1
            self._summary.pop(sid, None)  # as stale as the seq was
        if first != expected:
            written.forget.add(sid)
            return ConcurrencyConflict(
                f'append to session "{sid}" expected seq {expected}, got {first}; '
                "another writer appended first",
                expected_seq=expected,
                seq=first,
            )
        gathered = self._gathered
        summarized: list[EventRecord] = []
        for seq, kind, v, time, payload in item.rows:
            gathered.events.append((sid, seq, kind, v, time, payload))
            if kind in SUMMARY_KINDS:
                summarized.append(EventRecord(seq, time, decode_event(kind, v, payload)))
        gathered.appends.append(item)
        self._next[sid] = expected + len(item.rows)
        if summarized:
            self._summarize(sid, summarized)
        return None

    def _create(
        self, item: CreateSession, written: _Written, taken: set[str]
    ) -> SubagentsError | None:
        if item.id in taken:
            return DuplicateError(
                f'session "{item.id}" already exists', code=ErrorCode.SESSION_EXISTS
            )
        taken.add(item.id)  # a second create of it in this batch is a duplicate too
        sid = SessionId(item.id)
        gathered = self._gathered
        gathered.sessions.append(
            (item.id, item.tenant, item.parent, item.root, item.created_at, item.header)
        )
        self._next[sid] = 0
        self._summary[sid] = (item.root, SessionSummary(seed_length=item.seed_length))
        gathered.summaries[sid] = None
        gathered.fills[item.root, item.id] = None
        written.created.append(item.id)
        return None

    def _summarize(self, sid: SessionId, records: list[EventRecord]) -> None:
        """Keep `sid`'s summary and its children's catalog entries with its new records."""
        cached = self._summary.get(sid)
        if cached is None:
            self._write_gathered()  # these records included: a fold reads them
            row = self.conn.execute(_KEPT_SUMMARY, (sid,)).fetchone()
            kept = None
            if row is not None:
                with contextlib.suppress(msgspec.DecodeError):
                    kept = decode_summary(row[1])
            if row is None or kept is None:
                # None kept, or unreadable (a damaged file): fold the log, these records included.
                cached = rebuild_summary(self.conn, sid)
                self._summary[sid] = cached
                self._gathered.fills[cached[0], sid] = None
                self._catalog(cached[0], sid, records)
                return
            cached = (str(row[0]), kept)
        root, before = cached
        after = summarize(before, records)
        self._summary[sid] = (root, after)
        if after is not before:
            self._gathered.summaries[sid] = None
        self._catalog(root, sid, records)

    def _catalog(self, root: str, sid: SessionId, records: list[EventRecord]) -> None:
        gathered = self._gathered
        for record in records:
            entry = catalog_row(sid, record)
            if entry is not None:
                gathered.catalog.append((root, *entry))
                gathered.fills[root, entry[0]] = None

    def _write_gathered(self) -> None:
        """Write what was gathered: a few statements per table, then the listing rows."""
        gathered = self._gathered
        write = self._write_rows
        write(_insert_sessions, 6, gathered.sessions)
        write(_insert_events, 6, gathered.events)
        write(upsert_catalog, 7, gathered.catalog)
        listed = gathered.fills  # then the members whose summary changed
        if gathered.summaries:
            summary = self._summary
            rows = [(summary[s][0], s, encode_summary(summary[s][1])) for s in gathered.summaries]
            write(upsert_summary, 3, rows)
            listed = {**listed, **{(root, s): None for root, s, _ in rows}}
        write(fill_members, 2, list(gathered.fills))
        write(refresh_listing, 2, list(listed))
        self._gathered = _Gathered()  # kept until written: a collision's culprit is among them

    def _write_rows(
        self, statement: Callable[[int], str], columns: int, rows: Sequence[tuple[object, ...]]
    ) -> None:
        """Write `rows` with multi-row statements, in order.

        `executemany` would step its statement once per row, and every step lets the GIL go
        and waits to take it back; a statement of many rows steps once.
        """
        start = 0
        for count in _row_counts(len(rows), columns, self._variables):
            key = (statement, count)
            sql = self._statements.get(key)
            if sql is None:
                sql = self._statements[key] = statement(count)
            chunk = rows[start : start + count]
            self.conn.execute(sql, [value for row in chunk for value in row])
            start += count

    def renew_leases(self, now: float) -> None:
        """Extend every lease this writer holds (between batches)."""
        if not self.kept:
            return
        conn = self.conn
        with contextlib.suppress(sqlite3.Error):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "UPDATE leases SET heartbeat = ?, expires = ?, pid = ? "
                "WHERE root = ? AND holder = ?",
                [
                    (now, now + ttl, pid, root, holder)
                    for root, (holder, pid, ttl, _) in self.kept.items()
                ],
            )
            conn.execute("COMMIT")


def _row_counts(rows: int, columns: int, variables: int) -> Iterator[int]:
    """Statement sizes that add up to `rows`: full ones, then the powers of two of the rest.

    So a handful of statement texts (at most nine per table) serve every batch, and SQLite's
    statement cache keeps them prepared.
    """
    most = _ROWS_MAX
    while most > 1 and most * columns > variables:
        most //= 2
    full, rest = divmod(rows, most)
    yield from [most] * full
    size = most
    while rest:
        size //= 2
        if rest >= size:
            yield size
            rest -= size


def _session_of(item: WriteItem) -> str:
    if isinstance(item, CreateSession):
        return item.id
    return item.session_id if isinstance(item, AppendRows) else ""


def _write_error(exc: Exception, item: WriteItem, path: Path, *, culprit: bool) -> StoreError:
    if culprit and isinstance(exc, sqlite3.IntegrityError):
        return ConcurrencyConflict(
            f'append to session "{_session_of(item)}" collided with events already in the store '
            "(another writer appended first); read the log again before appending",
        )
    if culprit or not isinstance(exc, sqlite3.IntegrityError):
        return StoreError(f"cannot write to the store at {path}: {exc}", retryable=True)
    return StoreError(
        f"the store rolled back this write because another write in the same commit failed "
        f"({exc}); retry it",
        retryable=True,
    )
