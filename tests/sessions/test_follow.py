"""`TreeFollower`: a tree's new records, read from the store alone, exactly once and in order."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from subagents.ids import SessionId, new_session_id
from subagents.sessions import (
    EventRecord,
    InMemoryEventStore,
    SessionHeader,
    SqliteEventStore,
    StepStart,
    TreeFollower,
    TurnEnd,
    TurnStart,
)

TENANT = "t"


def header(parent: SessionHeader | None = None, *, at: float = 1.0) -> SessionHeader:
    if parent is None:
        return SessionHeader(id=new_session_id(), tenant=TENANT, created_at=at, cwd="/")
    return SessionHeader(
        id=new_session_id(),
        tenant=TENANT,
        created_at=at,
        cwd="/",
        parent=parent.id,
        root=parent.root_id,
        origin="subagent",
        depth=parent.depth + 1,
    )


def turn(first_seq: int, number: int) -> list[EventRecord]:
    """One whole turn of three records from `first_seq`."""
    return [
        EventRecord(first_seq, 1.0, TurnStart(turn=number)),
        EventRecord(first_seq + 1, 1.0, StepStart(turn=number, step=1)),
        EventRecord(first_seq + 2, 1.0, TurnEnd(turn=number, reason="completed")),
    ]


def count_reads(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[SessionId]:
    """The sessions `store.read` is called for from now on, one entry a call."""
    reads: list[SessionId] = []
    read = store.read

    async def counted(session_id: SessionId, *, tenant: str, from_seq: int = 0) -> Any:
        reads.append(session_id)
        return await read(session_id, tenant=tenant, from_seq=from_seq)

    monkeypatch.setattr(store, "read", counted)
    return reads


@asynccontextmanager
async def writer_and_reader(kind: str, tmp_path: Path) -> AsyncGenerator[tuple[Any, Any]]:
    """Two stores on one tree: for SQLite two connections to one file, as two processes."""
    if kind == "memory":
        async with InMemoryEventStore() as store:
            yield store, store
        return
    path = tmp_path / "state.db"
    async with SqliteEventStore(path) as writer, SqliteEventStore(path) as reader:
        yield writer, reader


def seqs(batch: list[tuple[SessionHeader, EventRecord]]) -> list[tuple[SessionId, int]]:
    return [(h.id, r.seq) for h, r in batch]


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_records_appear_once_in_order_and_new_children_are_found(
    kind: str, tmp_path: Path
) -> None:
    async with writer_and_reader(kind, tmp_path) as (writer, reader):
        root = header()
        await writer.create(root)
        await writer.append(root.id, turn(0, 1))
        follower = TreeFollower(reader, tenant=TENANT, root=root.id)

        assert seqs(await follower.poll()) == [(root.id, 0), (root.id, 1), (root.id, 2)]
        assert await follower.poll() == []

        child = header(root, at=2.0)
        await writer.create(child)
        await writer.append(child.id, turn(0, 1))
        await writer.append(root.id, turn(3, 2))
        batch = await follower.poll()
        # The parent's new records come first, then the child's, each in seq order.
        assert seqs(batch) == [
            (root.id, 3),
            (root.id, 4),
            (root.id, 5),
            (child.id, 0),
            (child.id, 1),
            (child.id, 2),
        ]
        assert [r.event for _, r in batch] == [
            *(r.event for r in turn(3, 2)),
            *(r.event for r in turn(0, 1)),
        ]
        assert [h.id for h in follower.members] == [root.id, child.id]

        grandchild = header(child, at=3.0)
        await writer.create(grandchild)
        await writer.append(grandchild.id, turn(0, 1)[:1])
        assert seqs(await follower.poll()) == [(grandchild.id, 0)]
        assert [h.id for h in follower.members] == [root.id, child.id, grandchild.id]
        assert await follower.poll() == []


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_an_unchanged_store_returns_nothing_without_reading(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with writer_and_reader(kind, tmp_path) as (writer, reader):
        root = header()
        await writer.create(root)
        await writer.create(header(root, at=2.0))
        await writer.append(root.id, turn(0, 1))
        reads = count_reads(reader, monkeypatch)
        follower = TreeFollower(reader, tenant=TENANT, root=root.id)
        assert len(await follower.poll()) == 3
        assert len(reads) == 2  # one read per known session, from its next seq

        for _ in range(5):
            assert await follower.poll() == []
        assert len(reads) == 2

        await writer.append(root.id, turn(3, 2))
        assert len(await follower.poll()) == 3
        assert len(reads) == 4


async def test_sessions_of_other_trees_are_not_followed(tmp_path: Path) -> None:
    async with writer_and_reader("sqlite", tmp_path) as (writer, reader):
        root, other = header(), header()
        await writer.create(root)
        await writer.create(other)
        await writer.append(other.id, turn(0, 1))
        follower = TreeFollower(reader, tenant=TENANT, root=root.id)
        assert await follower.poll() == []
        assert [h.id for h in follower.members] == [root.id]


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_wait_change_returns_once_something_is_committed(kind: str, tmp_path: Path) -> None:
    async with writer_and_reader(kind, tmp_path) as (writer, reader):
        root = header()
        await writer.create(root)
        follower = TreeFollower(reader, tenant=TENANT, root=root.id)
        await follower.poll()
        sleeps: list[float] = []

        async def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            if len(sleeps) == 3:  # another process commits while we wait
                await writer.append(root.id, turn(0, 1))

        await follower.wait_change(interval=0.25, sleep=sleep)
        assert sleeps == [0.25, 0.25, 0.25]
        assert seqs(await follower.poll()) == [(root.id, 0), (root.id, 1), (root.id, 2)]

        sleeps.clear()
        await writer.append(root.id, turn(3, 2))
        await follower.wait_change(interval=0.25, sleep=sleep)
        assert sleeps == []  # already changed: no wait at all
