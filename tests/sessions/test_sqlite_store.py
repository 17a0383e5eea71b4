"""What the SQLite store adds to the contract: durability, WAL, group commit, schema, open errors.

Raw `sqlite3` and file access run through `asyncio.to_thread`, like the store's own I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any, cast

import pytest

from subagents.errors import (
    ConcurrencyConflict,
    ConfigError,
    ErrorCode,
    SchemaVersionError,
    StoreError,
)
from subagents.ids import SessionId, new_session_id
from subagents.sessions import SqliteEventStore, parse_store_url
from subagents.sessions._events import (
    EventRecord,
    SessionHeader,
    StepStart,
    TurnStart,
    encode_event,
)
from subagents.sessions._migrations import (
    CURRENT_SCHEMA_VERSION,
    MIGRATIONS,
    SCHEMA_VERSION_SUMMARIES,
    Migration,
    apply_migrations,
)

Row = tuple[Any, ...]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


def header(*, parent: SessionHeader | None = None, created_at: float = 1.0) -> SessionHeader:
    return SessionHeader(
        id=new_session_id(),
        tenant="default",
        created_at=created_at,
        cwd="/work",
        parent=parent.id if parent else None,
        root=parent.root_id if parent else None,
    )


def turn(seq: int) -> EventRecord:
    return EventRecord(seq, 1_700_000_000.0 + seq, TurnStart(turn=seq))


def query(path: Path, sql: str, params: Row = ()) -> list[Row]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql, params).fetchall()


def execute(path: Path, sql: str, params: Row = ()) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(sql, params)


def insert_event(
    path: Path, session: SessionId, seq: int, kind: str, v: int, payload: bytes
) -> None:
    execute(
        path, "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", (session, seq, kind, v, 0.0, payload)
    )


async def test_everything_survives_close_and_reopen(db: Path) -> None:
    root = header(created_at=10.0)
    child = header(parent=root, created_at=11.0)
    async with SqliteEventStore(db) as store:
        await store.create(root)
        await store.create(child)
        await store.append(root.id, [turn(0), turn(1)])
        await store.append(child.id, [turn(0)])
    async with SqliteEventStore(db) as store:
        assert await store.list_headers(tenant="default") == [root]
        assert await store.list_headers(tenant="default", roots_only=False) == [child, root]
        assert await store.read(root.id, tenant="default") == [turn(0), turn(1)]
        with pytest.raises(ConcurrencyConflict):
            await store.append(root.id, [turn(1)])  # checked against the file, not memory
        await store.append(root.id, [turn(2)])
        await store.append(root.id, [turn(3)])
    async with SqliteEventStore(db) as store:
        assert [r.seq for r in await store.read(root.id, tenant="default")] == [0, 1, 2, 3]
        assert await store.read(child.id, tenant="default") == [turn(0)]


async def test_the_store_runs_in_wal_mode(db: Path) -> None:
    async with SqliteEventStore(db):
        pass
    assert await asyncio.to_thread(query, db, "PRAGMA journal_mode") == [("wal",)]


async def test_an_acknowledged_append_is_visible_to_a_new_connection(db: Path) -> None:
    async with SqliteEventStore(db) as store:
        session = header()
        await store.create(session)
        await store.append(session.id, [turn(0), turn(1)])
        rows = await asyncio.to_thread(
            query, db, "SELECT seq, kind FROM events WHERE session_id = ?", (session.id,)
        )
        assert rows == [(0, "turn/start"), (1, "turn/start")]
        wal = db.with_name(db.name + "-wal")
        assert (await asyncio.to_thread(wal.stat)).st_size > 0  # committed into the WAL


async def test_group_commit_batches_concurrent_appends(db: Path) -> None:
    sessions = [header() for _ in range(200)]
    async with SqliteEventStore(db) as store:
        created = [store.create(session) for session in sessions]
        for ack in created:
            await ack
        before = store.commits
        acks = [store.append(s.id, [turn(seq)]) for seq in range(5) for s in sessions]
        for ack in acks:
            await ack
        assert 1 <= store.commits - before < len(acks)
    count = await asyncio.to_thread(query, db, "SELECT COUNT(*) FROM events")
    assert count == [(1000,)]
    async with SqliteEventStore(db) as store:
        for session in sessions[::50]:
            assert [r.seq for r in await store.read(session.id, tenant="default")] == [
                0,
                1,
                2,
                3,
                4,
            ]


async def test_batch_max_bounds_a_commit(db: Path) -> None:
    async with SqliteEventStore(db, batch_max=1, synchronous="FULL") as store:
        session = header()
        await store.create(session)
        before = store.commits
        acks = [store.append(session.id, [turn(seq)]) for seq in range(20)]
        for ack in acks:
            await ack
        assert store.commits - before == 20


async def test_bad_options_are_config_errors(db: Path) -> None:
    with pytest.raises(ConfigError):
        SqliteEventStore(db, synchronous=cast("Any", "OFF"))
    with pytest.raises(ConfigError):
        SqliteEventStore(db, batch_max=0)


async def test_a_foreign_row_fails_the_batch_and_the_next_append_recovers(db: Path) -> None:
    async with SqliteEventStore(db) as store:
        session = header()
        await store.create(session)
        await store.append(session.id, [turn(0), turn(1), turn(2)])
        # another process sneaks in seq 3 behind the store's back
        await asyncio.to_thread(
            insert_event, db, session.id, 3, "turn/start", 1, encode_event(TurnStart(turn=99))
        )
        with pytest.raises(ConcurrencyConflict):
            await store.append(session.id, [turn(3)])
        await store.append(session.id, [turn(4)])
        log = await store.read(session.id, tenant="default")
        assert [r.seq for r in log] == [0, 1, 2, 3, 4]
        assert log[3].event == TurnStart(turn=99)


async def test_migrations_are_recorded_by_name_in_order(db: Path) -> None:
    async with SqliteEventStore(db):
        pass
    rows = await asyncio.to_thread(
        query, db, "SELECT version, name FROM schema_migrations ORDER BY applied_at, version"
    )
    assert rows == [(m.version, m.name) for m in MIGRATIONS]
    assert CURRENT_SCHEMA_VERSION == MIGRATIONS[-1].version == max(SCHEMA_VERSION_SUMMARIES)
    assert sorted(SCHEMA_VERSION_SUMMARIES) == [m.version for m in MIGRATIONS]


def test_migrations_upgrade_an_older_store_and_roll_back_a_failed_step(tmp_path: Path) -> None:
    def add_column(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE notes ADD COLUMN author TEXT")

    newer = (
        *MIGRATIONS,
        Migration(8, "add notes", "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);"),
        Migration(9, "add note authors", add_column),
    )
    broken = (*newer, Migration(10, "broken", "CREATE TABLE half (a);\nNOT SQL;"))
    with contextlib.closing(sqlite3.connect(tmp_path / "s.db", isolation_level=None)) as conn:
        assert apply_migrations(conn, migrations=MIGRATIONS[:1]) == [1]  # an older build's store
        assert apply_migrations(conn) == [2, 3, 4, 5, 6, 7]  # this build upgrades it
        assert apply_migrations(conn) == []
        assert apply_migrations(conn, migrations=newer) == [8, 9]
        conn.execute("INSERT INTO notes (body, author) VALUES ('hi', 'me')")
        with pytest.raises(sqlite3.OperationalError):
            apply_migrations(conn, migrations=broken)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "half" not in tables
        names = conn.execute("SELECT name FROM schema_migrations ORDER BY version").fetchall()
        assert names == [
            ("create sessions and events",),
            ("create leases",),
            ("create commands; leases get a control address",),
            ("create summaries and catalog, rebuilt from the logs",),
            ("summaries carry each member's header and catalog entry",),
            ("create listing, filled from the summaries",),
            ("events get a rowid, copied in log order",),
            ("add notes",),
            ("add note authors",),
        ]


# How version 6 kept the events: keyed by (session_id, seq) alone, without a rowid.
_EVENTS_OF_VERSION_6 = (
    "CREATE TABLE events_v6 (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "kind TEXT NOT NULL, v INTEGER NOT NULL, time REAL NOT NULL, payload BLOB NOT NULL, "
    "PRIMARY KEY (session_id, seq)) WITHOUT ROWID",
    "INSERT INTO events_v6 SELECT * FROM events",
    "DROP TABLE events",
    "ALTER TABLE events_v6 RENAME TO events",
    "DELETE FROM schema_migrations WHERE version >= 7",
)


def _events_table(path: Path) -> str:
    rows = query(path, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'")
    return str(rows[0][0])


async def test_a_version_6_store_keeps_every_event_when_its_events_get_a_rowid(db: Path) -> None:
    parent = header()
    child = header(parent=parent)
    async with SqliteEventStore(db) as store:
        store.create(parent)
        store.create(child)
        # Interleaved, as live sessions write: the copy must put each log back in seq order.
        for seq in range(6):
            store.append(parent.id, [turn(seq)])
            store.append(child.id, [turn(seq)])
        await store.flush()

    def downgrade() -> None:
        with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
            for statement in _EVENTS_OF_VERSION_6:
                conn.execute(statement)

    await asyncio.to_thread(downgrade)
    assert "WITHOUT ROWID" in await asyncio.to_thread(_events_table, db)
    before = await asyncio.to_thread(query, db, "SELECT * FROM events ORDER BY session_id, seq")
    async with SqliteEventStore(db) as store:
        assert "WITHOUT ROWID" not in await asyncio.to_thread(_events_table, db)
        after = await asyncio.to_thread(query, db, "SELECT * FROM events ORDER BY session_id, seq")
        assert after == before
        assert len(after) == 12
        for session in (parent, child):
            log = await store.read(session.id, tenant="default")
            assert log == [turn(seq) for seq in range(6)]
        # (session_id, seq) is still unique: a second writer's seq collides.
        await asyncio.to_thread(
            insert_event, db, child.id, 6, "turn/start", 1, encode_event(TurnStart(turn=6))
        )
        with pytest.raises(sqlite3.IntegrityError):
            await asyncio.to_thread(
                insert_event, db, child.id, 6, "turn/start", 1, encode_event(TurnStart(turn=6))
            )
        await store.append(parent.id, [turn(6)])
        assert [r.seq for r in await store.read(parent.id, tenant="default")] == list(range(7))
    versions = await asyncio.to_thread(query, db, "SELECT max(version) FROM schema_migrations")
    assert versions == [(CURRENT_SCHEMA_VERSION,)]


async def test_a_store_from_a_newer_build_is_refused_untouched(db: Path) -> None:
    async with SqliteEventStore(db) as store:
        await store.create(header())
    await asyncio.to_thread(
        execute, db, "INSERT INTO schema_migrations VALUES (8, 'from the future', 0)"
    )
    before = await asyncio.to_thread(db.read_bytes)
    with pytest.raises(SchemaVersionError) as caught:
        async with SqliteEventStore(db):
            pass
    assert caught.value.code == ErrorCode.SCHEMA_VERSION
    assert "schema version 8" in caught.value.message
    assert (
        "supports schema versions [1, 2, 3, 4, 5, 6, 7]; upgrade subagents" in caught.value.message
    )
    assert await asyncio.to_thread(db.read_bytes) == before


async def test_a_new_file_with_a_future_schema_gets_no_tables(db: Path) -> None:
    await asyncio.to_thread(
        execute, db, "CREATE TABLE schema_migrations (version INTEGER, name TEXT, applied_at REAL)"
    )
    await asyncio.to_thread(execute, db, "INSERT INTO schema_migrations VALUES (9, 'x', 0)")
    with pytest.raises(SchemaVersionError, match=r"schema version 9.*\[1, 2, 3, 4, 5, 6, 7\]"):
        async with SqliteEventStore(db):
            pass
    tables = await asyncio.to_thread(query, db, "SELECT name FROM sqlite_master")
    assert tables == [("schema_migrations",)]


@pytest.mark.parametrize(
    ("kind", "v", "named"),
    [("future/kind", 1, "future/kind"), ("turn/start", 99, "version 99")],
)
async def test_an_unknown_event_is_refused_on_read(db: Path, kind: str, v: int, named: str) -> None:
    session = header()
    async with SqliteEventStore(db) as store:
        await store.create(session)
    await asyncio.to_thread(
        insert_event, db, session.id, 0, kind, v, b'{"kind": "%s"}' % kind.encode()
    )
    async with SqliteEventStore(db) as store:
        with pytest.raises(StoreError) as caught:
            await store.read(session.id, tenant="default")
    assert caught.value.code == ErrorCode.EVENT_UNSUPPORTED
    assert named in caught.value.message
    assert "upgrade subagents" in caught.value.message


async def test_a_gap_in_a_stored_log_is_corruption(db: Path) -> None:
    session = header()
    async with SqliteEventStore(db) as store:
        await store.create(session)
    for seq in (0, 2):
        payload = encode_event(StepStart(turn=1, step=seq))
        await asyncio.to_thread(insert_event, db, session.id, seq, "step/start", 1, payload)
    async with SqliteEventStore(db) as store:
        with pytest.raises(StoreError) as caught:
            await store.read(session.id, tenant="default")
    assert caught.value.code == ErrorCode.STORE_CORRUPT


@pytest.mark.parametrize("under", ["file/state.db", "file/deeper/state.db", "adir"])
async def test_an_unwritable_path_is_refused_and_nothing_is_created(
    tmp_path: Path, under: str
) -> None:
    await asyncio.to_thread((tmp_path / "file").write_text, "not a directory")
    await asyncio.to_thread((tmp_path / "adir").mkdir)
    path = tmp_path / under
    with pytest.raises(StoreError) as caught:
        async with SqliteEventStore(path):
            pass
    error = caught.value
    assert error.code == ErrorCode.STORE_UNWRITABLE
    assert f"cannot open the store at {path}" in error.message
    assert "pass --store or set SUBAGENTS_STORE to a writable path" in error.message
    assert "\n" not in error.message
    assert sorted(p.name for p in await asyncio.to_thread(lambda: list(tmp_path.iterdir()))) == [
        "adir",
        "file",
    ]


async def test_a_file_that_is_not_sqlite_is_corrupt(db: Path) -> None:
    garbage = b"this is not a database, it is a shopping list\n" * 100
    await asyncio.to_thread(db.write_bytes, garbage)
    with pytest.raises(StoreError) as caught:
        async with SqliteEventStore(db):
            pass
    assert caught.value.code == ErrorCode.STORE_CORRUPT
    assert str(db) in caught.value.message
    assert await asyncio.to_thread(db.read_bytes) == garbage


async def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".subagents" / "state.db"
    async with SqliteEventStore(path) as store:
        await store.create(header())
    assert await asyncio.to_thread(path.is_file)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:////var/lib/subagents/state.db", "/var/lib/subagents/state.db"),
        ("sqlite:///tmp/state.db", "/tmp/state.db"),
        ("sqlite://relative/state.db", "relative/state.db"),
        ("SQLite:///x.db", "/x.db"),
        ("/abs/state.db", "/abs/state.db"),
        ("state.db", "state.db"),
        ("./dir/state.db", "dir/state.db"),
    ],
)
def test_parse_store_url(url: str, path: str) -> None:
    assert parse_store_url(url) == Path(path)


@pytest.mark.parametrize("url", ["postgres://db/subagents", "file:///tmp/x.db", "sqlite://", ""])
def test_parse_store_url_refuses_other_schemes(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_store_url(url)
    assert caught.value.code == ErrorCode.CONFIG
    assert "sqlite:///" in caught.value.message
