"""`runtime.stream`: a run as events (docs/streaming.md).

A stream yields every durable record of every member once, in each session's seq order, with
a step's model output (text and reasoning deltas) between that step's `step/start` and its
`assistant/message`, and one `RunFinished` last. Stopping early stops the run. Nothing here
waits on time: the tests wait on events (gates a tool holds, records committing).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import warnings
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
from delegation_support import Gates, make_runtime, wait_for_record

import subagents.core._loop as loop_module
from subagents import AgentReasoningDelta, AgentTextDelta, RunFinished, StreamEvent
from subagents.core import (
    AgentRuntime,
    EventBus,
    PostedRecords,
    RunResult,
    SessionEventPosted,
    stream_while,
)
from subagents.errors import ConfigError, ErrorCode
from subagents.ids import SessionId
from subagents.messages import ReasoningBlock, Usage
from subagents.models import (
    Finish,
    ModelChunk,
    ModelRequest,
    ReasoningDelta,
    ScriptedModel,
    TextDelta,
    UsageChunk,
)
from subagents.sessions import (
    AssistantMessageEvent,
    EventRecord,
    SqliteEventStore,
    StepStart,
    TurnEnd,
)
from subagents.testing import FakeClock, InMemoryEventStore

# The lead says something, delegates to a foreground helper in the same response, then
# answers: two lead steps with text, one helper step.
TREE = """
lead:
  - text: Asking the helper.
    calls:
      - tool: subagent
        args: {name: helper, description: Help, prompt: Count the words}
  - text: The helper counted 13 words.
helper:
  - text: 13 words
"""

HELD = """
lead:
  - calls:
      - tool: subagent
        args: {name: helper, description: Help, prompt: Wait for the gate}
  - text: never reached
helper:
  - calls:
      - tool: hold
        args: {label: gate}
  - text: never reached either
"""


def sqlite_store(tmp_path: Path, name: str = "state.db") -> SqliteEventStore:
    # SQLite commits off the loop, as the command line does: records post after the write.
    return SqliteEventStore(tmp_path / name)


def records_by_session(events: Sequence[StreamEvent]) -> dict[str, list[EventRecord]]:
    found: dict[str, list[EventRecord]] = {}
    for event in events:
        if isinstance(event, SessionEventPosted):
            found.setdefault(event.agent_id, []).append(event.record)
    return found


def assert_deltas_inside_their_steps(
    events: Sequence[StreamEvent],
) -> dict[tuple[str, int, int], str]:
    """Each delta comes after its step's `step/start` and before its `assistant/message`.

    Returns the text deltas joined per (session, turn, step).
    """
    started: set[tuple[str, int, int]] = set()
    answered: set[tuple[str, int, int]] = set()
    joined: dict[tuple[str, int, int], str] = {}
    for event in events:
        match event:
            case SessionEventPosted(agent_id=agent_id, record=EventRecord(event=StepStart() as s)):
                started.add((agent_id, s.turn, s.step))
            case SessionEventPosted(
                agent_id=agent_id, record=EventRecord(event=AssistantMessageEvent() as m)
            ):
                answered.add((agent_id, m.turn, m.step))
            case AgentTextDelta() | AgentReasoningDelta():
                key = (event.agent_id, event.turn, event.step)
                assert key in started, f"{event} came before its step/start"
                assert key not in answered, f"{event} came after its assistant/message"
                if isinstance(event, AgentTextDelta):
                    joined[key] = joined.get(key, "") + event.text
            case _:
                pass
    return joined


async def test_a_stream_yields_every_record_of_the_tree_once_in_log_order(tmp_path: Path) -> None:
    runtime, _ = make_runtime(TREE, store=sqlite_store(tmp_path))
    async with runtime:
        events = [event async for event in runtime.stream("How many words?")]
        headers = await runtime.store.list_headers(tenant=runtime.tenant, roots_only=False)
        stored = {h.id: await runtime.store.read(h.id, tenant=runtime.tenant) for h in headers}

    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert not any(isinstance(e, RunFinished) for e in events[:-1])
    streamed = records_by_session(events)
    assert len(stored) == 2  # the lead and its helper
    assert set(streamed) == set(stored)
    for session_id, records in stored.items():
        # Exactly once each, in seq order, and nothing the log does not hold.
        assert [(r.seq, r.kind, r.event) for r in streamed[session_id]] == [
            (r.seq, r.kind, r.event) for r in records
        ]
    names = {e.agent_id: e.name for e in events if isinstance(e, SessionEventPosted)}
    assert sorted(names.values()) == ["helper", "lead"]

    # Deltas are live only: the stream carries them, the log holds the assistant messages.
    joined = assert_deltas_inside_their_steps(events)
    answers = {
        (session_id, r.event.turn, r.event.step): r.event.message.text
        for session_id, records in stored.items()
        for r in records
        if isinstance(r.event, AssistantMessageEvent)
    }
    assert joined == answers
    assert sorted(answers.values()) == [
        "13 words",
        "Asking the helper.",
        "The helper counted 13 words.",
    ]

    # The result is what `run` returns for the same run.
    again, _ = make_runtime(TREE, store=sqlite_store(tmp_path, "again.db"))
    async with again:
        ran = await again.run("How many words?")
    assert finished.result.session_id == next(h for h in headers if h.parent is None).id
    assert dataclasses.replace(finished.result, session_id=ran.session_id) == ran
    assert finished.result.output == "The helper counted 13 words."


BACKGROUND = """
lead:
  - calls:
      - tool: subagent
        args: {name: reviewer, description: Review, prompt: Review app.py,
               run_in_background: true}
  - text: Started the reviewer.
  - text: The reviewer is done.
  - text: The reviewer is done.
reviewer:
  - text: looks fine
"""


async def test_a_settled_childs_mark_is_streamed_with_its_whole_log(tmp_path: Path) -> None:
    """A continuable child's `subagent/settled` mark is written once its agent is released,
    and streamed all the same: every record of both logs comes once, in seq order."""
    runtime, _ = make_runtime(BACKGROUND, store=sqlite_store(tmp_path))
    async with runtime:
        events = [event async for event in runtime.stream("Review it")]
        headers = await runtime.store.list_headers(tenant=runtime.tenant, roots_only=False)
        stored = {h.id: await runtime.store.read(h.id, tenant=runtime.tenant) for h in headers}
    streamed = records_by_session(events)
    assert len(stored) == 2
    for session_id, records in stored.items():
        assert [(r.seq, r.event) for r in streamed[session_id]] == [
            (r.seq, r.event) for r in records
        ]
    kinds = {e.name: e.record.kind for e in events if isinstance(e, SessionEventPosted)}
    assert kinds["reviewer"] == "subagent/settled"  # the reviewer's last record
    assert isinstance(events[-1], RunFinished)


async def test_records_the_bus_never_posted_are_read_back_from_the_log(tmp_path: Path) -> None:
    """What a stream missed of a session it heard of (a record written while no agent held
    it) is read back from that session's log, after what it passed on, in seq order; what
    came before the first record it heard of stays out."""
    runtime = AgentRuntime(model=ScriptedModel({}), store=sqlite_store(tmp_path))
    async with runtime:
        agent = await runtime.create_agent()
        records = [await agent.session.append(StepStart(turn=1, step=n)) for n in range(5)]
        posted = PostedRecords()
        for seq in (1, 3):
            posted.add(SessionEventPosted(agent.id, agent.name, records[seq]))
        missing = await posted.missing(runtime)
        again = await posted.missing(runtime)
    assert [(e.agent_id, e.name, e.record) for e in missing] == [
        (agent.id, agent.name, records[2]),
        (agent.id, agent.name, records[4]),
    ]
    assert again == []  # what it read back counts as passed on


class ChunkedModel:
    """A model that streams its answer in pieces: reasoning first, then the text in three."""

    provider = "chunked"
    name = "chunked-1"
    reasoning = ("Count ", "the words.")
    text = ("There are ", "13 ", "words.")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        for piece in self.reasoning:
            yield ReasoningDelta(piece)
        for piece in self.text:
            await asyncio.sleep(0)  # the pieces arrive across loop iterations, as from a server
            yield TextDelta(piece)
        yield UsageChunk(Usage(input_tokens=5, output_tokens=4))
        yield Finish("stop")

    async def aclose(self) -> None:
        return None


async def test_deltas_come_inside_their_step_and_join_into_its_message(tmp_path: Path) -> None:
    model = ChunkedModel()
    async with AgentRuntime(model=model, store=sqlite_store(tmp_path), clock=FakeClock()) as rt:
        events = [event async for event in rt.stream("How many words?")]
        lead = records_by_session(events)
        [session_id] = lead
        stored = await rt.store.read(SessionId(session_id), tenant=rt.tenant)

    texts = [e for e in events if isinstance(e, AgentTextDelta)]
    thoughts = [e for e in events if isinstance(e, AgentReasoningDelta)]
    assert [e.text for e in texts] == list(model.text)
    assert [e.text for e in thoughts] == list(model.reasoning)
    assert {(e.agent_id, e.name, e.turn, e.step) for e in [*texts, *thoughts]} == {
        (session_id, "lead", 1, 1)
    }
    # Reasoning, then text, in the order the model sent them.
    kinds = [type(e) for e in events if isinstance(e, AgentTextDelta | AgentReasoningDelta)]
    assert kinds == [AgentReasoningDelta] * 2 + [AgentTextDelta] * 3
    joined = assert_deltas_inside_their_steps(events)
    [message] = [r.event for r in stored if isinstance(r.event, AssistantMessageEvent)]
    assert message.message.text == "There are 13 words."
    assert joined == {(session_id, 1, 1): message.message.text}
    reasoning = [b.text for b in message.message.content if isinstance(b, ReasoningBlock)]
    assert reasoning == ["".join(model.reasoning)]
    # Never stored: the log holds the same records the stream carried, and no delta.
    assert [r.seq for r in lead[session_id]] == [r.seq for r in stored]


async def test_stopping_early_stops_the_run(tmp_path: Path) -> None:
    gates = Gates()
    runtime, _ = make_runtime(HELD, store=sqlite_store(tmp_path), tools=[gates.tool()])
    async with runtime:
        seen: list[StreamEvent] = []
        async with aclosing(runtime.stream("Start the helper")) as events:
            async for event in events:
                seen.append(event)
                if (
                    isinstance(event, SessionEventPosted)
                    and event.name == "helper"
                    and event.record.kind == "tool/call"
                ):
                    break  # the helper is inside `hold`: the tree is mid-run
        # Closed: the run was stopped, the turns it left are closed, nothing runs on.
        assert gates.cancelled == ["gate"]
        lead_id = next(e.agent_id for e in seen if isinstance(e, SessionEventPosted))
        records = await runtime.read_log(SessionId(lead_id))
        ends = [r.event for r in records if isinstance(r.event, TurnEnd)]
        assert [(e.reason, e.cause) for e in ends] == [("aborted", "user")]
        assert all(agent.status == "idle" for agent in runtime.agents.values())
        running = {task.get_name() for task in asyncio.all_tasks() if not task.done()}
        assert not {n for n in running if n == "streamed run" or n.startswith(("turn ", "driver "))}
        assert not any(isinstance(e, RunFinished) for e in seen)


async def test_leaving_the_loop_without_closing_stops_the_run_too(tmp_path: Path) -> None:
    gates = Gates()
    runtime, _ = make_runtime(HELD, store=sqlite_store(tmp_path), tools=[gates.tool()])
    async with runtime:
        lead_id = ""
        async for event in runtime.stream("Start the helper"):
            if isinstance(event, SessionEventPosted):
                lead_id = lead_id or event.agent_id
                if event.name == "helper" and event.record.kind == "tool/call":
                    break
        # The generator is closed when it is collected (the loop's hook); wait for its effect.
        lead = runtime.get_agent(lead_id)
        assert lead is not None
        end = await wait_for_record(runtime, lead, lambda r: isinstance(r.event, TurnEnd))
        assert isinstance(end.event, TurnEnd)
        assert (end.event.reason, end.event.cause) == ("aborted", "user")
        await lead.when_idle()
        assert gates.cancelled == ["gate"]


async def test_a_failing_run_raises_after_its_events() -> None:
    runtime, _ = make_runtime(TREE)
    async with runtime:
        stream = runtime.stream("   ")
        with pytest.raises(ConfigError) as raised:
            await anext(stream)
    assert raised.value.code == ErrorCode.USAGE


async def test_work_that_fails_midway_yields_what_came_before_then_raises(tmp_path: Path) -> None:
    runtime, _ = make_runtime(TREE, store=sqlite_store(tmp_path))

    async def run_then_fail() -> RunResult:
        await runtime.run("How many words?")
        raise RuntimeError("after the run")

    async def consume(seen: list[StreamEvent]) -> None:
        async for event in stream_while(runtime, run_then_fail):
            seen.append(event)  # noqa: PERF401 (kept when the stream raises)

    async with runtime:
        seen: list[StreamEvent] = []
        with pytest.raises(RuntimeError, match="after the run"):
            await consume(seen)
        headers = await runtime.store.list_headers(tenant=runtime.tenant, roots_only=False)
        stored = sum([len(await runtime.store.read(h.id, tenant=runtime.tenant)) for h in headers])
    assert len([e for e in seen if isinstance(e, SessionEventPosted)]) == stored


async def test_a_stream_never_iterated_starts_nothing_and_warns_nothing() -> None:
    runtime, _ = make_runtime(TREE)
    async with runtime:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stream = runtime.stream("How many words?")
            del stream
            gc.collect()
        assert [str(w.message) for w in caught] == []
        assert runtime.agents == {}


class DeltaSpy:
    """What the loop decided per step (an emitter or none) and the deltas that reached the bus."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, bus: EventBus) -> None:
        self.emitters: list[bool] = []
        self.emitted: list[object] = []
        real_emitter = loop_module._delta_emitter
        real_emit = bus.emit

        def emitter(*args: Any) -> Any:
            made = real_emitter(*args)
            self.emitters.append(made is not None)
            return made

        def emit(event: object) -> None:
            if isinstance(event, AgentTextDelta | AgentReasoningDelta):
                self.emitted.append(event)
            real_emit(event)

        monkeypatch.setattr(loop_module, "_delta_emitter", emitter)
        monkeypatch.setattr(bus, "emit", emit)


async def test_without_a_delta_listener_no_delta_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    model = ChunkedModel()
    async with AgentRuntime(model=model, store=InMemoryEventStore(), clock=FakeClock()) as rt:
        spy = DeltaSpy(monkeypatch, rt.bus)
        records: list[object] = []
        rt.subscribe(records.append, types=(SessionEventPosted,))
        assert not rt.bus.wants(AgentTextDelta)
        assert not rt.bus.wants(AgentReasoningDelta)
        await rt.run("How many words?")
        assert records  # the run happened, and was watched
        # Asked once for the one step: nobody listens, so no emitter and no delta at all.
        assert (spy.emitters, spy.emitted) == ([False], [])

        # The spy does see them: a listener for text deltas gets them built (and only them).
        texts: list[object] = []
        rt.subscribe(texts.append, types=(AgentTextDelta,))
        await rt.run("Again?")
    assert spy.emitters == [False, True]
    assert spy.emitted == texts
    assert [getattr(e, "text", None) for e in texts] == list(model.text)


def test_a_listener_for_every_event_wants_deltas() -> None:
    bus = EventBus()
    assert not bus.wants(AgentTextDelta)
    remove = bus.subscribe(lambda _: None)
    assert bus.wants(AgentTextDelta)
    assert bus.wants(AgentReasoningDelta)
    remove()
    assert not bus.wants(AgentTextDelta)


async def test_a_stream_on_a_stored_agent_streams_its_next_turn(tmp_path: Path) -> None:
    runtime, _ = make_runtime(
        "lead:\n  - text: first\n  - text: second\n", store=sqlite_store(tmp_path)
    )
    async with runtime:
        first = await runtime.run("One")
        lead = runtime.get_agent(first.session_id)
        assert lead is not None
        events = [event async for event in runtime.stream("Two", agent=lead)]
        stored = await runtime.store.read(lead.id, tenant=runtime.tenant)
    streamed = records_by_session(events)[lead.id]
    # Only what this run wrote: the records after the first run's, in order.
    assert [r.seq for r in streamed] == [r.seq for r in stored if r.seq >= streamed[0].seq]
    assert streamed[0].seq > 0
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.result.output == "second"


async def test_a_listener_for_records_and_deltas_alone_gets_them_in_log_order(
    tmp_path: Path,
) -> None:
    """The command line's subscription: no lifecycle types, yet a delta waits for its step.

    A child's first records are written as it is created, before its agent runs; a delta
    that overtook them would come before the child's own `step/start`.
    """
    runtime, _ = make_runtime(TREE, store=sqlite_store(tmp_path))
    heard: list[StreamEvent] = []

    def on_event(event: object) -> None:
        assert isinstance(event, SessionEventPosted | AgentTextDelta | AgentReasoningDelta)
        heard.append(event)

    async with runtime:
        runtime.subscribe(on_event, types=(SessionEventPosted, AgentTextDelta, AgentReasoningDelta))
        await runtime.run("How many words?")
        headers = await runtime.store.list_headers(tenant=runtime.tenant, roots_only=False)
        stored = {h.id: await runtime.store.read(h.id, tenant=runtime.tenant) for h in headers}
    streamed = records_by_session(heard)
    assert {k: [r.seq for r in v] for k, v in streamed.items()} == {
        k: [r.seq for r in v] for k, v in stored.items()
    }
    joined = assert_deltas_inside_their_steps(heard)
    assert len(joined) == 3  # two lead steps and the helper's
