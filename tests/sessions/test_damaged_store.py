"""A damaged store is one `STORE_CORRUPT` error naming the file, and the file is left as it was.

Real SQLite files, damaged the ways a disk, a crash or a user can damage them.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3  # noqa: TID251 - damaging a store takes raw SQLite
from collections.abc import Callable
from pathlib import Path

import pytest

from subagents.errors import ErrorCode, StoreError
from subagents.ids import new_session_id
from subagents.sessions import SqliteEventStore
from subagents.sessions._events import EventRecord, SessionHeader, TurnStart
from subagents.sessions._migrations import CURRENT_SCHEMA_VERSION


async def _good_store(path: Path) -> None:
    async with SqliteEventStore(path) as store:
        head = SessionHeader(id=new_session_id(), tenant="default", created_at=1.0, cwd="/w")
        await store.create(head)
        await store.append(head.id, [EventRecord(0, 1.0, TurnStart(turn=0))])
    await asyncio.to_thread(_checkpoint, path)


def _checkpoint(path: Path) -> None:
    # Everything into the main file, so the bytes compared below are the whole store.
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _alter(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _drop_events(path: Path) -> None:
    _alter(path, "DROP TABLE events")


def _drop_leases(path: Path) -> None:
    _alter(path, "DROP TABLE leases")


def _drop_a_column(path: Path) -> None:
    _alter(path, "ALTER TABLE leases DROP COLUMN pid")


def _drop_the_record_table(path: Path) -> None:
    _alter(path, "DROP TABLE schema_migrations")


def _wal_has_frames(path: Path) -> bool:
    wal = f"{path}-wal"
    return os.path.exists(wal) and os.path.getsize(wal) > 0


Damage = Callable[[Path], None]


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        pytest.param(
            _drop_events,
            f"schema version {CURRENT_SCHEMA_VERSION} is recorded but the table events",
            id="events",
        ),
        pytest.param(_drop_leases, "the table leases is missing", id="leases"),
        pytest.param(_drop_a_column, "the table leases lacks the column pid", id="column"),
        pytest.param(_drop_the_record_table, "but no schema record", id="no-record"),
    ],
)
async def test_a_missing_table_or_column_is_refused_untouched(
    tmp_path: Path, damage: Damage, needle: str
) -> None:
    path = tmp_path / "state.db"
    await _good_store(path)
    await asyncio.to_thread(damage, path)
    before = await asyncio.to_thread(path.read_bytes)
    with pytest.raises(StoreError) as caught:
        async with SqliteEventStore(path):
            pytest.fail("a damaged store was opened")
    error = caught.value
    assert error.code == ErrorCode.STORE_CORRUPT
    assert error.message.startswith(f"the store at {path} is damaged: "), error.message
    assert needle in error.message
    assert "\n" not in error.message
    assert error.fields["path"] == str(path)
    assert await asyncio.to_thread(path.read_bytes) == before
    assert not await asyncio.to_thread(_wal_has_frames, path)


async def test_another_programs_database_is_not_migrated(tmp_path: Path) -> None:
    path = tmp_path / "theirs.db"
    await asyncio.to_thread(_alter, path, "CREATE TABLE recipes (name TEXT)")
    before = await asyncio.to_thread(path.read_bytes)
    with pytest.raises(StoreError, match=r"holds tables \(recipes\) but no schema record") as c:
        async with SqliteEventStore(path):
            pytest.fail("a foreign database was opened")
    assert c.value.code == ErrorCode.STORE_CORRUPT
    assert await asyncio.to_thread(path.read_bytes) == before


@pytest.mark.parametrize("keep", [100, 4096, 8192, 12288])
async def test_a_truncated_store_is_corrupt_and_untouched(tmp_path: Path, keep: int) -> None:
    path = tmp_path / "state.db"
    await _good_store(path)
    data = (await asyncio.to_thread(path.read_bytes))[:keep]
    assert len(data) == keep  # the store is larger than what is kept
    await asyncio.to_thread(path.write_bytes, data)
    with pytest.raises(StoreError) as caught:
        async with SqliteEventStore(path):
            pytest.fail("a truncated store was opened")
    assert caught.value.code == ErrorCode.STORE_CORRUPT
    assert str(path) in caught.value.message
    assert await asyncio.to_thread(path.read_bytes) == data


async def test_an_older_store_without_its_newer_table_is_migrated(tmp_path: Path) -> None:
    # Version 1 recorded and no leases table: a real older store, not a damaged one.
    path = tmp_path / "state.db"
    await _good_store(path)
    await asyncio.to_thread(
        _alter,
        path,
        "DROP TABLE leases",
        "DROP TABLE commands",
        "DROP TABLE summaries",
        "DROP TABLE catalog",
        "DROP TABLE listing",
        "DELETE FROM schema_migrations WHERE version >= 2",
    )
    async with SqliteEventStore(path) as store:
        assert await store.list_headers(tenant="default") != []
