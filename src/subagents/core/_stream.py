"""A run as a stream of events: its durable records as they commit, its model output live.

`stream_while` watches the bus while a piece of work (a `run`, a `resume`, a `send`) goes
on, and yields what it hears in log order (`CausalOrder`): every record of every member once
it is durable, with the text and reasoning deltas of a step after that step's `step/start`
and before its `assistant/message`. One `RunFinished` comes last.

A record written to a session no live agent holds (the `subagent/settled` mark a child's log
gets once it is released) is durable but never posted on the bus; `PostedRecords` finds such
records afterwards in the logs of the sessions a stream heard of, so a stream still carries
every record of those sessions once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias

from .._task_owner import TaskOwner
from ..ids import SessionId
from ..sessions import EventRecord
from ._bus import AgentCreated, AgentReasoningDelta, AgentTextDelta, SessionEventPosted

if TYPE_CHECKING:
    from ._agent import Agent
    from ._runtime import RunResult

__all__ = [
    "STREAMED_TYPES",
    "PostedRecords",
    "RunFinished",
    "StreamEvent",
    "StreamSource",
    "stream_while",
]


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The last event of a stream: what the run returned."""

    result: RunResult


StreamEvent: TypeAlias = SessionEventPosted | AgentTextDelta | AgentReasoningDelta | RunFinished
"""What a stream yields: durable records, live model output, and one `RunFinished` last."""

STREAMED_TYPES: tuple[type, ...] = (SessionEventPosted, AgentTextDelta, AgentReasoningDelta)
"""The live events a stream passes on, in the order the bus's `CausalOrder` gives them."""


class StreamSource(Protocol):
    """What a stream needs of a runtime: its live events and its agents (`AgentRuntime`)."""

    def subscribe(
        self, listener: Callable[[object], None], *, types: tuple[type, ...] = ()
    ) -> Callable[[], None]:
        """Watch live events (in log order when `types` holds `SessionEventPosted`)."""
        ...

    def get_agent(self, agent_id: str) -> Agent | None:
        """The live agent with this id, or None."""
        ...

    async def read_log(self, session_id: SessionId) -> Sequence[EventRecord]:
        """A session's records (a loaded agent's, else the store's)."""
        ...


class PostedRecords:
    """The records a stream passed on, per session, and the ones the bus never posted."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._seqs: dict[str, set[int]] = {}

    def add(self, event: SessionEventPosted) -> None:
        """Note a record the stream passed on."""
        self._names.setdefault(event.agent_id, event.name)
        self._seqs.setdefault(event.agent_id, set()).add(event.record.seq)

    async def missing(self, runtime: StreamSource) -> list[SessionEventPosted]:
        """The records of the sessions heard of, written since their first one, not passed on.

        Read once the work is quiescent (its log durable); in each session's seq order, after
        every record the bus did post.
        """
        found: list[SessionEventPosted] = []
        for session_id, seqs in self._seqs.items():
            first = min(seqs)
            name = self._names[session_id]
            found += [
                SessionEventPosted(session_id, name, record)
                for record in await runtime.read_log(SessionId(session_id))
                if record.seq > first and record.seq not in seqs
            ]
        for event in found:
            self.add(event)
        return found


async def stream_while(
    runtime: StreamSource, work: Callable[[], Awaitable[RunResult]]
) -> AsyncGenerator[StreamEvent, None]:
    """Start `work()` and yield the runtime's records and deltas until it returns.

    The events heard before the work returned are all yielded, then the records of the
    sessions heard of that the bus never posted (`PostedRecords`), then one `RunFinished`
    with its result; a failure of the work is raised once the events heard are yielded.
    Nothing starts before the first iteration. A consumer that stops early (leaves its
    `async for`, closes the generator) stops the run: the work is cancelled, and every agent
    the stream heard of that is still running has its turn cancelled (cause `user`, queued
    input kept, as `interrupt` does); closing returns once they are idle.
    `contextlib.aclosing` makes that happen at once rather than when the generator is
    collected.
    """
    queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
    posted = PostedRecords()
    heard: dict[str, None] = {}
    """The agents the stream heard of, oldest first: those to stop if the consumer stops."""

    def on_event(event: object) -> None:
        agent_id = getattr(event, "agent_id", None)
        if isinstance(agent_id, str):
            heard.setdefault(agent_id, None)
        if isinstance(event, SessionEventPosted | AgentTextDelta | AgentReasoningDelta):
            queue.put_nowait(event)

    # `AgentCreated` only tells which agents to stop: a lead is heard of before it writes.
    unsubscribe = runtime.subscribe(on_event, types=(*STREAMED_TYPES, AgentCreated))
    owner = TaskOwner("stream")
    task = owner.spawn(_outcome(work), name="streamed run")
    # Put after every event emitted while the work ran, so those are all yielded first.
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (event := await queue.get()) is not None:
            if isinstance(event, SessionEventPosted):
                posted.add(event)
            yield event
    finally:
        if not task.done():  # the consumer stopped first
            await owner.aclose()
            await _stop_turns(runtime, list(heard))
        unsubscribe()
    while not queue.empty():  # posted after the work returned, before the unsubscription
        late = queue.get_nowait()
        if isinstance(late, SessionEventPosted):
            posted.add(late)
        if late is not None:
            yield late
    outcome = task.result()
    if isinstance(outcome, BaseException):
        raise outcome
    for event in await posted.missing(runtime):
        yield event
    yield RunFinished(outcome)


async def _outcome(work: Callable[[], Awaitable[RunResult]]) -> RunResult | Exception:
    """The work's result or its failure, as a value: the stream raises it after the events.

    Returned, not raised, so the task owner does not log as unhandled what the stream raises.
    """
    try:
        return await work()
    except Exception as exc:
        return exc


async def _stop_turns(runtime: StreamSource, agent_ids: list[str]) -> None:
    """Cancel the running turns of these agents and wait until they are idle.

    Cancelling the work only stops waiting for it: the agents run their turns in their own
    tasks.
    """
    running = [
        agent
        for agent_id in agent_ids
        if (agent := runtime.get_agent(agent_id)) is not None and agent.status == "running"
    ]
    for agent in running:
        await agent.cancel("user", keep_inbox=True)
    for agent in running:
        await agent.when_idle()
