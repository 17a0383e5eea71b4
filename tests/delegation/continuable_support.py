"""Helpers shared by the continuable-child and control-tool conformance tests.

Scenarios are scripted per agent full name (docs/design.md §6.2). Nothing waits on time: a test
waits on a log record, on an agent going idle, on the runtime being quiescent, or on a lifecycle
event counted by `Settlements`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from delegation_support import RecordingModel, events, inputs, wait_for_record

from subagents.core import Agent
from subagents.delegation import DelegationRuntime, SubagentEnded
from subagents.ids import SessionId
from subagents.models import ModelChunk, ModelRequest
from subagents.sessions import EventRecord, TurnEnd, TurnStart

__all__ = [
    "HookedModel",
    "Settlements",
    "background",
    "entered",
    "own_records",
    "sequential_session_ids",
    "sid",
    "turns",
    "wait_turn",
]


def sid(n: int) -> str:
    """The `n`-th session id handed out under `sequential_session_ids` (the lead is 1)."""
    return f"00000000-0000-4000-8000-{n:012d}"


def sequential_session_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make new sessions get `sid(1)`, `sid(2)`, ... in creation order.

    Scripts are written before a run, so a scripted model can address a child by session id
    only when the id is known in advance.
    """
    counter = iter(range(1, 1_000_000))
    monkeypatch.setattr(
        "subagents.core._runtime.new_session_id", lambda: SessionId(sid(next(counter)))
    )


class HookedModel(RecordingModel):
    """The recording model, running an async hook before chosen requests of an agent.

    `hooks[(agent_name, call_index)]` runs when that agent makes that model call: at that
    point the model has seen every earlier tool result.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.hooks: dict[tuple[str, int], Callable[[], Awaitable[None]]] = {}

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        hook = self.hooks.pop((request.agent_name, request.call_index), None)
        if hook is not None:
            await hook()
        async for chunk in super().stream(request):
            yield chunk


def background(name: str, description: str, prompt: str) -> str:
    """One YAML flow mapping: a `subagent` call starting `name` in the background."""
    return (
        f"{{tool: subagent, args: {{name: {name}, description: {description}, "
        f"prompt: {prompt}, run_in_background: true}}}}"
    )


def entered(agent: Agent) -> list[tuple[int | None, str, str]]:
    """(turn, source kind, text) of every message that entered `agent`'s turns."""
    return [(e.turn, e.message.source.kind, e.message.text) for e in inputs(agent.session.records)]


def turns(agent: Agent) -> int:
    return len(events(agent.session.records, TurnStart))


async def wait_turn(rt: DelegationRuntime, agent: Agent, turn: int) -> None:
    """Wait until `agent` has finished turn `turn` and gone idle."""
    await wait_for_record(
        rt, agent, lambda r: isinstance(r.event, TurnEnd) and r.event.turn == turn
    )
    await agent.when_idle()


def own_records(agent: Agent) -> list[EventRecord]:
    """The agent's records after its fork seed (all of them for a fresh child)."""
    return agent.session.records[agent.session.header.seed_length :]


class Settlements:
    """Counts `SubagentEnded` events; `reached(n)` waits until `n` have been seen."""

    def __init__(self, runtime: DelegationRuntime) -> None:
        self.ended: list[SubagentEnded] = []
        self._changed = asyncio.Event()
        runtime.subscribe(self._on_event, types=(SubagentEnded,))

    def _on_event(self, event: object) -> None:
        if isinstance(event, SubagentEnded):
            self.ended.append(event)
            self._changed.set()

    async def reached(self, count: int) -> None:
        while len(self.ended) < count:
            self._changed.clear()
            await self._changed.wait()
