"""The SQLite store's file: opening it, and its schema as named, ordered migrations.

`open_database` turns every way a path can be unusable into one actionable `StoreError`. A
migration is applied once, inside the same `BEGIN IMMEDIATE` transaction that records it, so
a store is always at a version listed here. A store whose recorded version is newer than every
version this build knows, or whose tables do not match its recorded version (`check_schema`), is
refused before anything is written to it.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, Literal, NamedTuple

from subagents.errors import ErrorCode, SchemaVersionError, StoreError

from ._events import EventRecord, decode_event, decode_header
from ._summaries import (
    SUMMARY_KINDS,
    SessionSummary,
    catalog_row,
    encode_summary,
    summarize,
)

__all__ = [
    "CURRENT_SCHEMA_VERSION",
    "FILL_MEMBER",
    "MIGRATIONS",
    "Migration",
    "SCHEMA_VERSION_SUMMARIES",
    "UPSERT_CATALOG",
    "UPSERT_SUMMARY",
    "apply_migrations",
    "check_schema",
    "check_schema_version",
    "fill_members",
    "folded_summary",
    "open_database",
    "open_writer",
    "rebuild_summary",
    "refresh_listing",
    "stored_schema_version",
    "upsert_catalog",
    "upsert_summary",
    "values",
]

CURRENT_SCHEMA_VERSION: Final = 7
SCHEMA_VERSION_SUMMARIES: Final[dict[int, str]] = {
    1: "sessions (header beside tenant, parent, root, created_at) and events keyed by "
    "(session_id, seq), without rowid",
    2: "leases: which process holds a tree (holder, pid, heartbeat, expiry)",
    3: "commands to a held tree (send, steer, interrupt) and the holder's control address",
    4: "summaries (each session's status, usage and limits) and catalog (each child's entry "
    "by its creator), kept with the events so a tree is listed without reading its logs",
    5: "each summary carries its session's header and its creator's catalog entry, so a tree "
    "is listed in one read",
    6: "listing: each member's flat row as `subagents tree` shows it, kept with its summary",
    7: "events in a rowid table, (session_id, seq) unique: an insert appends to the table and "
    "adds a small index entry",
}
"""One line per schema version: what that version added."""


_SUMMARY_TABLES: Final = """
CREATE TABLE summaries (
    root TEXT NOT NULL,
    session_id TEXT NOT NULL,
    summary BLOB NOT NULL,
    PRIMARY KEY (root, session_id)
) WITHOUT ROWID;
CREATE TABLE catalog (
    root TEXT NOT NULL,
    child_id TEXT NOT NULL,
    creator TEXT NOT NULL,
    seq INTEGER NOT NULL,
    name TEXT,
    mode TEXT NOT NULL,
    label TEXT NOT NULL,
    PRIMARY KEY (root, child_id, creator)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_by_tree ON sessions (root, tenant, created_at);
DROP INDEX IF EXISTS sessions_by_root;
"""


# Both are keyed by their tree's root first: a tree's rows are one range of each table, so a
# listing reads them in order instead of looking each member up. The sessions of a tree are
# indexed in creation order, so a listing reads them without a sort (the index replaces the
# one on root alone, which it covers).
def values(columns: int, rows: int) -> str:
    """`(?,?,...),(?,?,...)`: the placeholders of `rows` rows of `columns` values."""
    row = "(" + ",".join("?" * columns) + ")"
    return ",".join([row] * rows)


def upsert_catalog(rows: int = 1) -> str:
    """Insert `rows` catalog rows.

    A later entry for a child replaces the entry, not its place among its siblings (in one
    statement too: SQLite applies the rows in order).
    """
    return (
        "INSERT INTO catalog (root, child_id, creator, seq, name, mode, label) "
        f"VALUES {values(7, rows)} ON CONFLICT (root, child_id, creator) DO UPDATE "
        "SET name = excluded.name, mode = excluded.mode, label = excluded.label"
    )


def upsert_summary(rows: int = 1) -> str:
    """Insert or replace `rows` summaries.

    Only the summary: the row's header and entry (schema 5) are set by `fill_members`.
    """
    return (
        f"INSERT INTO summaries (root, session_id, summary) VALUES {values(3, rows)} "
        "ON CONFLICT (root, session_id) DO UPDATE SET summary = excluded.summary"
    )


_MEMBER_COLUMNS: Final = (
    "header = (SELECT s.header FROM sessions s WHERE s.id = summaries.session_id), "
    "entry = (SELECT json_array(c.name, c.mode, c.label, c.seq) FROM sessions s "
    "JOIN catalog c ON c.root = summaries.root AND c.child_id = s.id AND c.creator = s.parent "
    "WHERE s.id = summaries.session_id)"
)
# The entry is a JSON array in `CatalogEntry`'s field order, so that a listing decodes a whole
# row (`[header, summary, entry]`) as one `MemberSummary`; only the parent's entry counts.


def fill_members(rows: int = 1) -> str:
    """Copy sessions' headers and parents' catalog entries for them into their summaries.

    The statement takes `rows` (root, session id) pairs. Each is looked up by its key: with
    `(root, session_id) IN (VALUES ...)` of two rows or more SQLite scanned the whole table,
    so every commit of a big store read every member.
    """
    return (
        f"WITH wanted (root, session_id) AS (VALUES {values(2, rows)}) "
        f"UPDATE summaries SET {_MEMBER_COLUMNS} FROM wanted "
        "WHERE summaries.root = wanted.root AND summaries.session_id = wanted.session_id"
    )


_LISTING_TABLE: Final = """
CREATE TABLE listing (
    root TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    row BLOB NOT NULL,
    PRIMARY KEY (root, session_id)
) WITHOUT ROWID
"""
# A `ListingRow` (its fields in order) taken out of a summaries row's JSON: `h` is its header,
# `s` its summary (`[status, usage, limits, seed_length]`), as text (a BLOB would be JSONB to a
# newer SQLite). `->` keeps a number's text, so `created_at` loses no digits; a missing field
# reads as the default the decoder would give it. `tests/sessions/test_summaries.py` holds these
# rows to `listing_row` after random writes. A row whose JSON is malformed (a damaged file)
# gets `null`, which no listing accepts, rather than failing the transaction that wrote it:
# its tree is then listed from the members.
_LISTING_ROW: Final = (
    "CASE WHEN m.whole THEN json_array(m.session_id, m.h ->> '$.parent', "
    "json(m.h -> '$.created_at'), coalesce(m.h ->> '$.depth', 0), "
    "json(coalesce(m.entry, 'null')), coalesce(m.s ->> '$[0].status', 'idle'), "
    "m.s ->> '$[0].last_stop', coalesce(json_array_length(m.s, '$[0].waiting'), 0), "
    "coalesce(m.s ->> '$[1].usage.input_tokens', 0), "
    "coalesce(m.s ->> '$[1].usage.output_tokens', 0), "
    "coalesce(m.s ->> '$[1].model_calls', 0), json(m.s -> '$[2]')) ELSE 'null' END"
)
_LISTED: Final = (
    "(SELECT root, session_id, entry, h, s, "
    "json_valid(h) AND json_valid(s) AND json_valid(coalesce(entry, 'null')) AS whole FROM "
    "(SELECT root, session_id, entry, CAST(header AS TEXT) AS h, CAST(summary AS TEXT) AS s "
    "FROM summaries)) m"
)
_UPSERT_LISTING: Final = (
    "INSERT INTO listing (root, session_id, tenant, row) SELECT m.root, m.session_id, "
    f"coalesce(CASE WHEN m.whole THEN m.h ->> '$.tenant' END, ''), {_LISTING_ROW} FROM "
)
_LISTING_CONFLICT: Final = (
    " ON CONFLICT (root, session_id) DO UPDATE SET tenant = excluded.tenant, row = excluded.row"
)


def refresh_listing(rows: int = 1) -> str:
    """Rewrite the listing rows of `rows` (root, session id) pairs from their summaries rows.

    Run after the summaries and their fills in the same transaction. A summaries row without
    its header yet gets no listing row: a listing that misses a member reads the slow way.
    """
    return (
        f"WITH wanted (root, session_id) AS (VALUES {values(2, rows)}) {_UPSERT_LISTING}"
        f"wanted w JOIN {_LISTED} ON m.root = w.root AND m.session_id = w.session_id "
        f"WHERE m.h IS NOT NULL{_LISTING_CONFLICT}"
    )


# Keyed by (session_id, seq) alone (`WITHOUT ROWID`, version 1), the events table received
# every insert inside its tree (at a random point while session ids were uuid4): each commit
# rewrote a page per session it touched, and large payloads split them. With a rowid, rows
# append to the table and only a small entry lands in the (session_id, seq) index: about three
# times fewer microseconds per row written. Reading one log costs an index range and a lookup
# per row (about 18 us instead of 12 for ten events), and logs are written far more often than
# read.
_EVENTS_BY_ROWID: Final = """
CREATE TABLE events_by_rowid (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    v INTEGER NOT NULL,
    time REAL NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (session_id, seq)
);
INSERT INTO events_by_rowid SELECT session_id, seq, kind, v, time, payload FROM events
    ORDER BY session_id, seq;
DROP TABLE events;
ALTER TABLE events_by_rowid RENAME TO events
"""

UPSERT_CATALOG: Final = upsert_catalog()
UPSERT_SUMMARY: Final = upsert_summary()
FILL_MEMBER: Final = fill_members()
_SUMMARY_EVENTS: Final = (
    "SELECT seq, kind, v, time, payload FROM events WHERE session_id = ? AND kind IN ("
    + ",".join("?" * len(SUMMARY_KINDS))
    + ") ORDER BY seq"
)


class Migration(NamedTuple):
    """One schema step: SQL statements (separated by `;`) or a callable given the connection."""

    version: int
    name: str
    apply: str | Callable[[sqlite3.Connection], None]


def _rebuild_summaries(conn: sqlite3.Connection) -> None:
    """Create the tables and fill them from every log (a migration: inside its transaction)."""
    for statement in _SUMMARY_TABLES.split(";"):
        if statement.strip():
            conn.execute(statement)
    for (session_id,) in conn.execute("SELECT id FROM sessions").fetchall():
        rebuild_summary(conn, str(session_id))


def folded_summary(
    conn: sqlite3.Connection, session_id: str
) -> tuple[str, SessionSummary, list[EventRecord]]:
    """`session_id`'s root, its summary folded from its whole log, and the records folded.

    Reads only. Raises `StoreError` when the log cannot be decoded.
    """
    (payload,) = conn.execute("SELECT header FROM sessions WHERE id = ?", (session_id,)).fetchone()
    header = decode_header(payload)
    records = [
        EventRecord(seq, stamp, decode_event(kind, v, event))
        for seq, kind, v, stamp, event in conn.execute(
            _SUMMARY_EVENTS, (session_id, *sorted(SUMMARY_KINDS))
        )
    ]
    summary = summarize(SessionSummary(seed_length=header.seed_length), records)
    return header.root_id, summary, records


def rebuild_summary(conn: sqlite3.Connection, session_id: str) -> tuple[str, SessionSummary]:
    """Store `session_id`'s summary and catalog rows as folded from its whole log.

    Returns its root and summary.
    """
    root, summary, records = folded_summary(conn, session_id)
    conn.execute(UPSERT_SUMMARY, (root, session_id, encode_summary(summary)))
    for record in records:
        row = catalog_row(session_id, record)
        if row is not None:
            conn.execute(UPSERT_CATALOG, (root, *row))
    return root, summary


MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        1,
        "create sessions and events",
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            parent TEXT,
            root TEXT NOT NULL,
            created_at REAL NOT NULL,
            header BLOB NOT NULL
        );
        CREATE INDEX sessions_by_tenant ON sessions (tenant, parent, created_at);
        CREATE INDEX sessions_by_root ON sessions (root);
        CREATE TABLE events (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            v INTEGER NOT NULL,
            time REAL NOT NULL,
            payload BLOB NOT NULL,
            PRIMARY KEY (session_id, seq)
        ) WITHOUT ROWID;
        """,
    ),
    Migration(
        2,
        "create leases",
        """
        CREATE TABLE leases (
            root TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            pid INTEGER NOT NULL,
            heartbeat REAL NOT NULL,
            expires REAL NOT NULL
        );
        """,
    ),
    Migration(
        3,
        "create commands; leases get a control address",
        """
        ALTER TABLE leases ADD COLUMN address TEXT;
        CREATE TABLE commands (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            root TEXT NOT NULL,
            tenant TEXT NOT NULL,
            target TEXT NOT NULL,
            kind TEXT NOT NULL,
            body BLOB NOT NULL,
            created_at REAL NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending',
            outcome BLOB,
            handled_at REAL
        );
        CREATE INDEX commands_by_root ON commands (root, state, id);
        """,
    ),
    Migration(
        4,
        "create summaries and catalog, rebuilt from the logs",
        _rebuild_summaries,
    ),
    Migration(
        5,
        "summaries carry each member's header and catalog entry",
        f"""
        ALTER TABLE summaries ADD COLUMN header BLOB;
        ALTER TABLE summaries ADD COLUMN entry TEXT;
        UPDATE summaries SET {_MEMBER_COLUMNS};
        """,
    ),
    Migration(
        6,
        "create listing, filled from the summaries",
        f"""
        {_LISTING_TABLE};
        {_UPSERT_LISTING}{_LISTED} WHERE m.h IS NOT NULL{_LISTING_CONFLICT};
        """,
    ),
    Migration(7, "events get a rowid, copied in log order", _EVENTS_BY_ROWID),
)


_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at REAL NOT NULL
)
"""


def stored_schema_version(conn: sqlite3.Connection) -> int:
    """The highest version recorded in the store, 0 for a store without migrations. Reads only."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def check_schema_version(
    conn: sqlite3.Connection, *, where: str, migrations: Sequence[Migration] = MIGRATIONS
) -> int:
    """Refuse a store written by a newer build; return its recorded version. Reads only.

    Raises:
        SchemaVersionError: the store records a version this build does not know.
    """
    version = stored_schema_version(conn)
    supported = sorted(m.version for m in migrations)
    if version > max(supported, default=0):
        raise SchemaVersionError(
            f"the store at {where} has schema version {version}, but this build of subagents "
            f"supports schema versions {supported}; upgrade subagents",
            store_version=version,
            supported=supported,
        )
    return version


def check_schema(
    conn: sqlite3.Connection,
    version: int,
    *,
    where: str,
    migrations: Sequence[Migration] = MIGRATIONS,
) -> None:
    """Refuse a store whose tables are not those its recorded `version` implies. Reads only.

    The expected tables and columns are those the migrations up to `version` create, built in
    an in-memory database, so the check follows the migrations without a second description.

    Raises:
        StoreError: `STORE_CORRUPT`, naming the file and the first table or column missing.
    """
    found = _tables(conn)
    if version == 0:
        if found:  # a new store is empty; anything else belongs to someone else
            raise _corrupt(
                where, f"it holds tables ({', '.join(sorted(found))}) but no schema record"
            )
        return
    expected = _expected_tables(version, tuple(migrations))
    for table, columns in sorted(expected.items()):
        if table not in found:
            raise _corrupt(
                where, f"schema version {version} is recorded but the table {table} is missing"
            )
        missing = sorted(columns - found[table])
        if missing:
            raise _corrupt(where, f"the table {table} lacks the column {missing[0]}")


def _tables(conn: sqlite3.Connection) -> dict[str, frozenset[str]]:
    """Each table of the database (SQLite's own excluded) with its column names."""
    names = [
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    # A parameter, not an f-string: table names in a damaged or hostile file are arbitrary.
    return {
        name: frozenset(
            str(row[0]) for row in conn.execute("SELECT name FROM pragma_table_info(?)", (name,))
        )
        for name in names
    }


@functools.cache  # the same for every store a process opens: about 2 ms each time
def _expected_tables(
    version: int, migrations: tuple[Migration, ...]
) -> Mapping[str, frozenset[str]]:
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    try:
        apply_migrations(scratch, migrations=[m for m in migrations if m.version <= version])
        return _tables(scratch)
    finally:
        scratch.close()


def _corrupt(where: str, reason: str) -> StoreError:
    return StoreError(
        f"the store at {where} is damaged: {reason}; move it aside or {_FIX}",
        code=ErrorCode.STORE_CORRUPT,
        path=where,
    )


def apply_migrations(
    conn: sqlite3.Connection, *, where: str = "", migrations: Sequence[Migration] = MIGRATIONS
) -> list[int]:
    """Bring the store up to the newest of `migrations`; return the versions applied, in order.

    `conn` must be in autocommit mode (`isolation_level=None`). The check and every step run in
    one `BEGIN IMMEDIATE` transaction, so two processes opening one new store cannot both
    migrate it, and a failed step leaves the store as it was.

    Raises:
        SchemaVersionError: the store records a version this build does not know.
    """
    ordered = sorted(migrations, key=lambda m: m.version)
    if check_schema_version(conn, where=where, migrations=ordered) >= max(
        (m.version for m in ordered), default=0
    ):
        return []  # up to date: write nothing
    conn.execute("BEGIN IMMEDIATE")
    try:
        check_schema_version(conn, where=where, migrations=ordered)
        conn.execute(_MIGRATIONS_TABLE)
        done = {int(r[0]) for r in conn.execute("SELECT version FROM schema_migrations")}
        applied: list[int] = []
        for migration in ordered:
            if migration.version in done:
                continue
            if isinstance(migration.apply, str):
                for statement in _statements(migration.apply):
                    conn.execute(statement)
            else:
                migration.apply(conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, time.time()),
            )
            applied.append(migration.version)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return applied


def _statements(script: str) -> list[str]:
    """Split a script into complete statements (`executescript` would commit our transaction)."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        statements.append(pending.strip())
    return statements


_FIX = "pass --store or set SUBAGENTS_STORE to a writable path"


def open_database(
    path: Path, *, synchronous: Literal["NORMAL", "FULL"]
) -> tuple[sqlite3.Connection, sqlite3.Connection]:
    """Open (creating it and its directories) and migrate the store; return (writer, reader).

    Both connections are in autocommit mode, WAL, with a busy timeout; the reader is query-only.
    Blocking: call it from a worker thread.

    Raises:
        StoreError: `STORE_UNWRITABLE` when the file or its directory cannot be written,
            `STORE_CORRUPT` when the file is not a SQLite database.
        SchemaVersionError: the store was written by a newer build (nothing is written to it).
    """
    where = os.path.abspath(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            raise IsADirectoryError(21, "Is a directory", str(path))
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        if exc.filename is not None and os.path.abspath(exc.filename) != where:
            reason += f" ({exc.filename})"
        raise StoreError(
            f"cannot open the store at {where}: {reason}; {_FIX}",
            code=ErrorCode.STORE_UNWRITABLE,
            path=where,
        ) from exc
    opened: list[sqlite3.Connection] = []
    try:
        writer = _connect(path, opened)
        # Both checks come before anything is written (even the journal-mode pragma).
        check_schema(writer, check_schema_version(writer, where=where), where=where)
        writer.execute(f"PRAGMA synchronous = {synchronous}")
        writer.execute("PRAGMA journal_mode = WAL")
        apply_migrations(writer, where=where)
        reader = _connect(path, opened)
        reader.execute("PRAGMA query_only = ON")
    except BaseException as exc:
        for conn in opened:
            conn.close()
        if isinstance(exc, sqlite3.Error):
            raise _open_error(exc, where) from exc
        raise
    return writer, reader


def open_writer(path: Path, *, synchronous: Literal["NORMAL", "FULL"]) -> sqlite3.Connection:
    """The writer connection of a store `open_database` opened (and migrated) already.

    Raises:
        StoreError: the file cannot be opened, is not a database, or is not at this build's
            schema version (another build migrated it since).
    """
    where = os.path.abspath(path)
    opened: list[sqlite3.Connection] = []
    try:
        writer = _connect(path, opened)
        version = check_schema_version(writer, where=where)
        if version != CURRENT_SCHEMA_VERSION:
            raise StoreError(
                f"the store at {where} is at schema version {version}, not "
                f"{CURRENT_SCHEMA_VERSION}; open it again",
                code=ErrorCode.STORE,
            )
        writer.execute(f"PRAGMA synchronous = {synchronous}")
    except BaseException as exc:
        for conn in opened:
            conn.close()
        if isinstance(exc, sqlite3.Error):
            raise _open_error(exc, where) from exc
        raise
    return writer


def _connect(path: Path, opened: list[sqlite3.Connection]) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
    opened.append(conn)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # is it a database at all?
    return conn


def _open_error(exc: sqlite3.Error, where: str) -> StoreError:
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        return StoreError(
            f"the store at {where} is not a subagents SQLite database ({text}); move it aside "
            f"or {_FIX}",
            code=ErrorCode.STORE_CORRUPT,
            path=where,
        )
    unwritable = any(s in text for s in ("readonly", "read-only", "unable to open"))
    return StoreError(
        f"cannot open the store at {where}: {text}; {_FIX}",
        code=ErrorCode.STORE_UNWRITABLE if unwritable else ErrorCode.STORE,
        path=where,
    )
