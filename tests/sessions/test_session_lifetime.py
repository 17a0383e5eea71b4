"""A session nobody holds is freed at once, not when the cyclic collector next runs.

A session kept a bound method of its own as every write's `done`: a reference cycle, so a
disposed child's session and its whole log stayed in memory until a collection of the
generation it had reached. Each test runs with the collector off and counts what is left.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.ids import new_session_id
from subagents.models import ScriptedCall, ScriptedModel, ScriptedResponse
from subagents.sessions import (
    EventStore,
    InMemoryEventStore,
    Session,
    SessionHeader,
    SqliteEventStore,
    TurnStart,
)
from subagents.testing import FakeClock


@pytest.fixture
def collector_off() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.collect()  # nothing left over from earlier tests is counted
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _store(kind: str, tmp_path: Path) -> EventStore:
    return SqliteEventStore(tmp_path / "s.db") if kind == "sqlite" else InMemoryEventStore()


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_a_session_whose_writes_are_told_is_freed_when_dropped(
    kind: str, tmp_path: Path
) -> None:
    async with _store(kind, tmp_path) as store:
        header = SessionHeader(id=new_session_id(), tenant="default", created_at=0.0, cwd="/")
        store.create(header)
        session = Session(header, store, FakeClock())
        session.submit(TurnStart(turn=1))
        session.submit_many([TurnStart(turn=2), TurnStart(turn=3)])
        await session.append(TurnStart(turn=4))
        gone = weakref.ref(session)
        del session
        assert gone() is None
        assert len(await store.read(header.id, tenant="default")) == 4


@pytest.mark.usefixtures("collector_off")
async def test_finished_children_leave_no_session_behind(tmp_path: Path) -> None:
    call = ScriptedCall("subagent", {"description": "check", "prompt": "check it"})
    model = ScriptedModel(
        {
            "lead": [ScriptedResponse(calls=(call, call, call)), ScriptedResponse(text="done")],
            "*": [ScriptedResponse(text="checked")],
        }
    )
    async with Runtime(model=model, store=tmp_path / "s.db") as runtime:
        result = await runtime.run("check three times")
        await runtime.store.flush()
        assert result.output == "done"
        children = [
            o for o in gc.get_objects() if isinstance(o, Session) and o.header.parent is not None
        ]
        assert children == []
