"""Helpers shared by the delegation conformance tests (tests/delegation, tests/definitions).

Scenarios are scripted per agent full name (docs/design.md §6.2). A child is held at a known point
with the `hold` tool of `Gates`: the tool waits until the test releases its label, so nothing
depends on timing. `GatedClock` holds scripted `sleep:` answers and task-wait timers until the
test opens them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from subagents import DelegationOptions
from subagents.core import CONTEXT_SOURCE, Agent, SessionEventPosted
from subagents.delegation import DelegationRuntime, SubagentEnded, SubagentStarted
from subagents.delegation._wording import RUNTIME_GUIDANCE
from subagents.messages import Message, UserMessage
from subagents.models import ModelRequest
from subagents.sessions import (
    EventRecord,
    EventStore,
    SessionEvent,
    SubagentCatalog,
    ToolResultEvent,
    UserMessageEvent,
)
from subagents.testing import (
    FakeClock,
    GatedClock,
    InMemoryEventStore,
    RecordingModel,
)
from subagents.tools import ToolSpec, tool

E = TypeVar("E", bound=SessionEvent)

__all__ = [
    "Gates",
    "GatedClock",
    "Lifecycle",
    "RecordingModel",
    "ToolReply",
    "catalog",
    "events",
    "kinds",
    "make_runtime",
    "replies",
    "session_count",
    "wait_for_record",
]


def scripted(text: str, clock: FakeClock) -> RecordingModel:
    model = RecordingModel.from_yaml(text, clock=clock)
    assert isinstance(model, RecordingModel)
    return model


class Gates:
    """The `hold(label)` tool: it blocks until the test releases `label`.

    `started(label)` is set when a call with that label begins. With `linger(label)`, a call
    that is cancelled waits for that gate before letting the cancellation through, so the work
    it belongs to stays observably "stopping".
    """

    def __init__(self) -> None:
        self._started: dict[str, asyncio.Event] = {}
        self._release: dict[str, asyncio.Event] = {}
        self._linger: dict[str, asyncio.Event] = {}
        self.cancelled: list[str] = []

    def _event(self, table: dict[str, asyncio.Event], label: str) -> asyncio.Event:
        return table.setdefault(label, asyncio.Event())

    def started(self, label: str) -> asyncio.Event:
        return self._event(self._started, label)

    def release(self, label: str) -> None:
        self._event(self._release, label).set()

    def linger(self, label: str) -> asyncio.Event:
        """Make a cancelled `hold(label)` wait for the returned gate before it ends."""
        return self._event(self._linger, label)

    def tool(self, *, name: str = "hold", parallel_safe: bool = True) -> ToolSpec:
        """The holding tool under `name` (exclusive with `parallel_safe=False`)."""
        gates = self

        @tool(name=name, parallel_safe=parallel_safe)
        async def hold(label: str) -> str:
            """Wait until the test releases `label`."""
            gates.started(label).set()
            try:
                await gates._event(gates._release, label).wait()
            except asyncio.CancelledError:
                gates.cancelled.append(label)
                linger = gates._linger.get(label)
                if linger is not None:
                    await linger.wait()
                raise
            return f"released {label}"

        return hold


@dataclass(frozen=True, slots=True)
class ToolReply:
    """A committed tool result, as the model saw it."""

    name: str
    content: str
    is_error: bool
    code: str | None


class Lifecycle:
    """Records `SubagentStarted` / `SubagentEnded` live events in order."""

    def __init__(self, runtime: DelegationRuntime) -> None:
        self.events: list[SubagentStarted | SubagentEnded] = []
        runtime.subscribe(self._on_event)

    def _on_event(self, event: object) -> None:
        if isinstance(event, SubagentStarted | SubagentEnded):
            self.events.append(event)

    @property
    def started(self) -> list[SubagentStarted]:
        return [e for e in self.events if isinstance(e, SubagentStarted)]

    @property
    def ended(self) -> list[SubagentEnded]:
        return [e for e in self.events if isinstance(e, SubagentEnded)]

    async def child(self, name: str, runtime: DelegationRuntime) -> Agent:
        """The live child agent started under `name` (its full name)."""
        for event in self.started:
            if event.name == name:
                agent = runtime.get_agent(event.child_id)
                assert agent is not None, f"{name} is not live"
                return agent
        raise AssertionError(f"no child named {name} started; started: {self.started}")


def make_runtime(
    script: str,
    *,
    clock: FakeClock | None = None,
    store: EventStore | None = None,
    tools: Iterable[ToolSpec] = (),
    delegation: DelegationOptions | None = None,
    cwd: str | None = None,
) -> tuple[DelegationRuntime, RecordingModel]:
    clock = clock or FakeClock()
    model = scripted(script, clock)
    runtime = DelegationRuntime(
        model=model,
        store=store if store is not None else InMemoryEventStore(),
        tools=tools,
        clock=clock,
        delegation=delegation,
        cwd=cwd,
    )
    return runtime, model


def one_shot_runtime(
    script: str,
    *,
    clock: FakeClock | None = None,
    store: EventStore | None = None,
    tools: Iterable[ToolSpec] = (),
    delegation: DelegationOptions | None = None,
    cwd: str | None = None,
) -> tuple[DelegationRuntime, RecordingModel]:
    """A runtime whose `run_in_background: true` starts one-shot background tasks."""
    options = dataclasses.replace(delegation or DelegationOptions(), background_mode="one-shot")
    return make_runtime(script, clock=clock, store=store, tools=tools, delegation=options, cwd=cwd)


def kinds(records: Sequence[EventRecord]) -> list[str]:
    return [r.kind for r in records]


def events(records: Sequence[EventRecord], cls: type[E]) -> list[E]:
    return [r.event for r in records if isinstance(r.event, cls)]


def inputs(records: Sequence[EventRecord]) -> list[UserMessageEvent]:
    """The messages an agent took in, without the runtime-context snapshots the loop enters."""
    return [
        r.event
        for r in records
        if isinstance(r.event, UserMessageEvent) and r.event.message.source != CONTEXT_SOURCE
    ]


def contexts(records: Sequence[EventRecord]) -> list[str]:
    """The runtime-context snapshots an agent's log entered, in order."""
    return [
        r.event.message.text
        for r in records
        if isinstance(r.event, UserMessageEvent) and r.event.message.source == CONTEXT_SOURCE
    ]


def context_of(request: ModelRequest) -> str:
    """The runtime context a request carries: its last runtime-context message ("" if none)."""
    told = [
        m.text
        for m in request.messages
        if isinstance(m, UserMessage) and m.source == CONTEXT_SOURCE
    ]
    return told[-1] if told else ""


def conversation(request: ModelRequest) -> list[Message]:
    """A request's messages without its runtime-context messages."""
    return [
        m
        for m in request.messages
        if not (isinstance(m, UserMessage) and m.source == CONTEXT_SOURCE)
    ]


def system_with(instructions: str) -> str:
    """The system prompt of an agent of a delegation runtime with these instructions."""
    return f"{RUNTIME_GUIDANCE}\n\n{instructions}"


def replies(agent: Agent) -> list[ToolReply]:
    return [
        ToolReply(e.message.name, e.message.content, e.message.is_error, e.code)
        for e in events(agent.session.records, ToolResultEvent)
    ]


def catalog(agent: Agent) -> list[SubagentCatalog]:
    return events(agent.session.records, SubagentCatalog)


async def session_count(runtime: DelegationRuntime) -> int:
    """How many sessions (roots and children) the runtime's store holds, once durable."""
    await runtime.store.flush()
    return len(await runtime.store.list_headers(tenant=runtime.tenant, roots_only=False))


async def wait_for_record(
    runtime: DelegationRuntime, agent: Agent, predicate: Callable[[EventRecord], bool]
) -> EventRecord:
    """Wait until `agent`'s log has a durable record matching `predicate`; return it."""
    for record in agent.session.records:
        if predicate(record):
            return record
    found: list[EventRecord] = []
    seen = asyncio.Event()

    def on_event(event: object) -> None:
        if (
            isinstance(event, SessionEventPosted)
            and event.agent_id == agent.id
            and not found
            and predicate(event.record)
        ):
            found.append(event.record)
            seen.set()

    unsubscribe = runtime.subscribe(on_event, types=(SessionEventPosted,))
    try:
        await seen.wait()
    finally:
        unsubscribe()
    return found[0]
