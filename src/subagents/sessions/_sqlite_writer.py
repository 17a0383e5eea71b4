"""The SQLite store's writer thread: batches of writes, each one transaction of few statements.

Every call into `sqlite3` lets the writer thread give up the GIL and take it back, which on a
busy event loop costs a switch of threads each time. So a transaction does not execute a
statement per write: it checks every write in Python (its seq against the cache of committed
seqs, its summary against the cached one), gathers the rows, and writes them with one
`executemany` per table just before `COMMIT`. Only a write that needs to look at the file (a
session this store has not written yet, a summary it has not cached, a lease or a command)
first writes what was gathered, so that what it reads is this transaction's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConcurrencyConflict, DuplicateError, ErrorCode, NotFoundError, StoreError
from ..ids import SessionId
from ._events import EventRecord, SessionHeader
from ._migrations import fill_members, rebuild_summary, upsert_catalog, upsert_summary, values
from ._store import WriteDone
from ._summaries import SessionSummary, catalog_row, decode_summary, encode_summary, summarize

__all__ = ["Append", "Batch", "Call", "Create", "Item", "Outcome", "Row", "TransactionWriter"]

Row = tuple[str, int, str, int, float, bytes]
"""An events row: session id, seq, kind, event version, time, payload."""
SessionRow = tuple[str, str, str | None, str, float, bytes]
"""A sessions row: id, tenant, parent, root, created_at, header."""


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


@dataclass(slots=True)
class Append:
    session_id: SessionId
    rows: list[Row]
    future: asyncio.Future[None] | None
    """This write's own future; None when its outcome goes to `done` instead."""
    done: WriteDone | None = None
    summarized: list[EventRecord] | None = None
    """Its records that change the session's summary or the catalog (None: none do)."""


@dataclass(slots=True)
class Call:
    """Work for the writer's connection, done inside a batch (leases, commands)."""

    fn: Callable[[sqlite3.Connection], None]
    future: asyncio.Future[None]


@dataclass(slots=True)
class Create:
    header: SessionHeader
    row: SessionRow
    future: asyncio.Future[None]


Item = Append | Create | Call


@dataclass(slots=True)
class Batch:
    """One loop iteration's writes, in submission order, and the future they share."""

    items: list[Item]
    future: asyncio.Future[None]
    size: int


@dataclass(slots=True)
class Outcome:
    """What the writer hands back to the loop for one transaction."""

    results: list[tuple[Item, BaseException | None]] = field(
        default_factory=list[tuple[Item, BaseException | None]]
    )
    batches: list[asyncio.Future[None]] = field(default_factory=list[asyncio.Future[None]])
    failure: StoreError | None = None
    """Set when the whole transaction was rolled back."""
    forget: set[SessionId] = field(default_factory=lambda: set[SessionId]())
    created: list[SessionId] = field(default_factory=list[SessionId])


class _Gathered:
    """The rows of one transaction not written yet, one list per statement."""

    __slots__ = ("appends", "catalog", "events", "fills", "sessions", "summaries")

    def __init__(self) -> None:
        self.sessions: list[SessionRow] = []
        self.events: list[Row] = []
        self.appends: list[Append] = []
        """The writes whose rows are in `events`: one of them is the culprit of a collision."""
        self.catalog: list[tuple[str, str, str, int, str | None, str, str]] = []
        self.summaries: dict[SessionId, None] = {}
        """Sessions whose cached summary changed (in first-changed order)."""
        self.fills: dict[tuple[str, str], None] = {}
        """Summary rows to give their header and catalog entry: (root, session id)."""


class TransactionWriter:
    """The writer thread's side of the store: its connection and what it has committed."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self.commits = 0
        """Transactions committed (group commit makes it smaller than the writes)."""
        self._next: dict[SessionId, int] = {}
        """Each session's next seq as committed (or gathered in the open transaction)."""
        self._summary: dict[SessionId, tuple[str, SessionSummary]] = {}
        """Each session's root and summary as committed (or gathered)."""
        self._gathered = _Gathered()
        self._statements: dict[tuple[Callable[[int], str], int], str] = {}
        self._variables = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)

    def write(self, batches: list[Batch]) -> Outcome:
        """Write `batches` in one transaction (group commit); on failure roll all of it back."""
        outcome = Outcome(batches=[b.future for b in batches])
        batch = [item for b in batches for item in b.items]
        culprit: Item | None = None
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            taken = self._taken_ids(batch)
            for culprit in batch:
                outcome.results.append((culprit, self._write_item(culprit, outcome, taken)))
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
            return self._failed(batch, outcome.batches, exc, culprit)
        self.commits += 1
        return outcome

    def _failed(
        self,
        batch: list[Item],
        futures: list[asyncio.Future[None]],
        exc: Exception,
        culprit: Item | None,
    ) -> Outcome:
        touched = {_session_of(item) for item in batch}
        for sid in touched:
            self._next.pop(sid, None)  # reloaded from the db on next touch
            self._summary.pop(sid, None)
        failed = Outcome(
            forget=touched,
            batches=futures,
            failure=_write_error(exc, batch[0], self.path, culprit=False),
        )
        for item in batch:
            error = _write_error(exc, item, self.path, culprit=item is culprit)
            failed.results.append((item, error))
        return failed

    def _collided(self, appends: list[Append]) -> Append | None:
        """After a rolled-back collision: the first write whose seqs are taken in the file."""
        for item in appends:
            first, last = item.rows[0][1], item.rows[-1][1]
            with contextlib.suppress(sqlite3.Error):
                found = self.conn.execute(
                    "SELECT 1 FROM events WHERE session_id = ? AND seq BETWEEN ? AND ?",
                    (item.session_id, first, last),
                ).fetchone()
                if found is not None:
                    return item
        return None

    def _taken_ids(self, batch: list[Item]) -> set[str]:
        """Which of the sessions `batch` creates exist already (one query per 500)."""
        ids = [item.header.id for item in batch if isinstance(item, Create)]
        taken: set[str] = set()
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[start : start + _IDS_PER_QUERY]
            marks = ",".join("?" * len(chunk))
            rows = self.conn.execute(f"SELECT id FROM sessions WHERE id IN ({marks})", chunk)
            taken.update(str(row[0]) for row in rows)
        return taken

    def _write_item(self, item: Item, outcome: Outcome, taken: set[str]) -> BaseException | None:
        if isinstance(item, Call):
            self._write_gathered()  # what it reads or writes comes after them
            item.fn(self.conn)
            return None
        if isinstance(item, Create):
            return self._create(item, outcome, taken)
        if not item.rows:
            return None  # a flush barrier: resolved with its batch
        sid = item.session_id
        expected = self._next.get(sid)
        first = item.rows[0][1]
        if expected is None or first != expected:
            # Not cached, or the cache disagrees: another process may have written the
            # session since (a child run elsewhere under this process's lease). The file says.
            self._write_gathered()
            found, last = self.conn.execute(_LAST_SEQ, (sid, sid)).fetchone()
            if found is None:
                outcome.forget.add(sid)
                return NotFoundError(f'session "{sid}" not found')
            expected = self._next[sid] = 0 if last is None else int(last) + 1
            self._summary.pop(sid, None)  # as stale as the seq was
        if first != expected:
            outcome.forget.add(sid)
            return ConcurrencyConflict(
                f'append to session "{sid}" expected seq {expected}, got {first}; '
                "another writer appended first",
                expected_seq=expected,
                seq=first,
            )
        gathered = self._gathered
        gathered.events.extend(item.rows)
        gathered.appends.append(item)
        self._next[sid] = expected + len(item.rows)
        if item.summarized is not None:
            self._summarize(sid, item.summarized)
        return None

    def _create(self, item: Create, outcome: Outcome, taken: set[str]) -> BaseException | None:
        header = item.header
        if header.id in taken:
            return DuplicateError(
                f'session "{header.id}" already exists', code=ErrorCode.SESSION_EXISTS
            )
        taken.add(header.id)  # a second create of it in this batch is a duplicate too
        gathered = self._gathered
        gathered.sessions.append(item.row)
        self._next[header.id] = 0
        self._summary[header.id] = (header.root_id, SessionSummary(seed_length=header.seed_length))
        gathered.summaries[header.id] = None
        gathered.fills[header.root_id, header.id] = None
        outcome.created.append(header.id)
        return None

    def _summarize(self, sid: SessionId, records: list[EventRecord]) -> None:
        """Keep `sid`'s summary and its children's catalog entries with its new records."""
        cached = self._summary.get(sid)
        if cached is None:
            self._write_gathered()  # these records included: a fold reads them
            row = self.conn.execute(_KEPT_SUMMARY, (sid,)).fetchone()
            if row is None:  # none kept (a damaged file): fold the log, these records included
                cached = rebuild_summary(self.conn, sid)
                self._summary[sid] = cached
                self._gathered.fills[cached[0], sid] = None
                self._catalog(cached[0], sid, records)
                return
            cached = (str(row[0]), decode_summary(row[1]))
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
        """Write what was gathered: a few statements per table, the summaries' fills last."""
        gathered = self._gathered
        write = self._write_rows
        write(_insert_sessions, 6, gathered.sessions)
        write(_insert_events, 6, gathered.events)
        write(upsert_catalog, 7, gathered.catalog)
        if gathered.summaries:
            summary = self._summary
            rows = [(summary[s][0], s, encode_summary(summary[s][1])) for s in gathered.summaries]
            write(upsert_summary, 3, rows)
        write(fill_members, 2, list(gathered.fills))
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

    def renew_leases(
        self, kept: dict[SessionId, tuple[str, int, float, str | None]], now: float
    ) -> None:
        """Extend every lease in `kept` (between batches)."""
        if not kept:
            return
        conn = self.conn
        with contextlib.suppress(sqlite3.Error):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "UPDATE leases SET heartbeat = ?, expires = ?, pid = ? "
                "WHERE root = ? AND holder = ?",
                [
                    (now, now + ttl, pid, root, holder)
                    for root, (holder, pid, ttl, _) in kept.items()
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


def _session_of(item: Item) -> SessionId:
    if isinstance(item, Call):
        return SessionId("")
    return item.header.id if isinstance(item, Create) else item.session_id


def _write_error(exc: Exception, item: Item, path: Path, *, culprit: bool) -> StoreError:
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
