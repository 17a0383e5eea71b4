"""A session one SQLite store wrote, then another process's store continued, then the first
again: the case of a child run elsewhere under its parent's lease. Each store caches the next
seq of the sessions it wrote; a read that sees more, or a file that holds more, moves it on,
while a real conflict is still refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.errors import ConcurrencyConflict
from subagents.ids import new_session_id
from subagents.sessions import EventRecord, SessionHeader, SqliteEventStore, TurnStart


def turn(seq: int) -> EventRecord:
    return EventRecord(seq=seq, time=float(seq), event=TurnStart(turn=seq + 1))


async def test_a_store_continues_a_session_another_store_wrote_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    header = SessionHeader(id=new_session_id(), tenant="default", created_at=0.0, cwd="/")
    async with SqliteEventStore(path) as parent, SqliteEventStore(path) as child:
        await parent.create(header)
        await parent.append(header.id, [turn(0)])
        await child.append(header.id, [turn(1), turn(2)])  # the other process's writes
        # Appending on from a stale cache is refused before anything is queued ...
        with pytest.raises(ConcurrencyConflict):
            parent.append(header.id, [turn(3)])
        # ... a read that sees the other writer's records moves it on (and the writer thread,
        # whose own cache is stale too, consults the file).
        records = await parent.read(header.id, tenant="default")
        assert [r.seq for r in records] == [0, 1, 2]
        await parent.append(header.id, [turn(3)])
        assert [r.seq for r in await child.read(header.id, tenant="default")] == [0, 1, 2, 3]
        await child.append(header.id, [turn(4)])
        assert len(await parent.read(header.id, tenant="default")) == 5
        await parent.append(header.id, [turn(5)])
        # A real conflict (a seq that is taken) is still refused.
        with pytest.raises(ConcurrencyConflict):
            await child.append(header.id, [turn(5)])
        await parent.flush()
        assert [r.seq for r in await child.read(header.id, tenant="default")] == list(range(6))
