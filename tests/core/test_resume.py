"""Conformance tests for crash repair and resume through the `AgentRuntime` (docs/design.md §12;
§6.2 on the scripted model's position).

Logs that a crash cut open are written by hand into an `InMemoryEventStore`, exactly as a
killed process would have left them; `AgentRuntime.resume_agent` must then close the open turn.
A "restart" is a new runtime over a new store holding a copy of the stored log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

import pytest

from subagents.core import Agent, AgentRuntime
from subagents.errors import ErrorCode, NotFoundError
from subagents.ids import new_message_id, new_session_id
from subagents.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    UserMessage,
    user_message,
)
from subagents.sessions import (
    AssistantMessageEvent,
    EventRecord,
    InboxSpliced,
    ModelErrorEvent,
    RequestHeader,
    SessionEvent,
    SessionHeader,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from subagents.sessions._repair import CRASH_RETRY_SOURCE, interrupted_turn_closers
from subagents.testing import (
    FakeClock,
    GatedClock,
    InMemoryEventStore,
    RecordingModel,
    ScriptedModel,
)
from subagents.tools import ToolSpec, tool

E = TypeVar("E", bound=SessionEvent)

TENANT = "default"
NOT_STARTED = (
    "The tool call was interrupted before the Harness recorded it as started. "
    "Retry it if it is still needed."
)
OUTCOME_UNKNOWN = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)
SYSTEM = "You are a helpful agent. Use the tools you have when they help."
SCRIPT = """
lead:
  - text: Checking both.
    calls:
      - {tool: probe, args: {n: 1}, id: c1}
      - {tool: probe, args: {n: 2}, id: c2}
  - text: Recovered after the crash.
  - text: And the next one.
  - text: And one more.
"""


# -- helpers ---------------------------------------------------------------------------------


def scripted(text: str, clock: FakeClock) -> RecordingModel:
    model = RecordingModel.from_yaml(text, clock=clock)
    assert isinstance(model, RecordingModel)
    return model


@tool(parallel_safe=True)
async def probe(n: int) -> str:
    """Probe something."""
    return f"probe {n} ok"


async def open_store(
    header: SessionHeader, records: Iterable[EventRecord] = ()
) -> InMemoryEventStore:
    """A store holding one session whose log is `records` (what a killed process left)."""
    store = InMemoryEventStore()
    await store.__aenter__()
    await store.create(header)
    records = list(records)
    if records:
        await store.append(header.id, records)
    return store


def new_header(clock: FakeClock) -> SessionHeader:
    return SessionHeader(id=new_session_id(), tenant=TENANT, created_at=clock.now(), cwd="/")


def as_records(events: Sequence[SessionEvent], clock: FakeClock) -> list[EventRecord]:
    return [EventRecord(seq, clock.now(), event) for seq, event in enumerate(events)]


def restarted(
    store: InMemoryEventStore, model: ScriptedModel, clock: FakeClock, tools: Iterable[ToolSpec]
) -> AgentRuntime:
    """A fresh runtime over `store`, as after a process restart."""
    return AgentRuntime(model=model, store=store, tools=tools, clock=clock)


def kinds(records: Iterable[EventRecord]) -> list[str]:
    return [r.kind for r in records]


def events(agent: Agent, cls: type[E]) -> list[E]:
    return [r.event for r in agent.session.records if isinstance(r.event, cls)]


def unanswered_calls(messages: Iterable[Message]) -> list[str]:
    """Tool calls of the transcript with no result after them (a provider would refuse)."""
    pending: list[str] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            pending.extend(c.id for c in message.tool_calls)
        elif isinstance(message, ToolResultMessage):
            pending.remove(message.call_id)
    return pending


def texts(messages: Iterable[Message]) -> list[str]:
    out: list[str] = []
    for message in messages:
        match message:
            case UserMessage():
                out.append(f"user:{message.text}")
            case AssistantMessage():
                out.extend(f"call:{c.id}" for c in message.tool_calls)
                if message.text:
                    out.append(f"assistant:{message.text}")
            case ToolResultMessage():
                out.append(f"tool:{message.call_id}:{message.content[:24]}")
    return out


def crashed_mid_tools(clock: FakeClock) -> tuple[list[SessionEvent], UserMessage, UserMessage]:
    """A turn cut open after the first of two tool calls was recorded as started."""
    prompt = user_message("check both probes")
    pending = user_message("queued before the crash")
    answer = AssistantMessage(
        id=new_message_id(),
        content=(
            TextBlock("Checking both."),
            ToolCallBlock("c1", "probe", '{"n":1}'),
            ToolCallBlock("c2", "probe", '{"n":2}'),
        ),
        provider="scripted",
        model="<yaml script>",
    )
    log: list[SessionEvent] = [
        InboxSpliced(target="next-turn", start=0, inserted=(prompt,)),
        TurnStart(turn=1),
        StepStart(turn=1, step=1),
        UserMessageEvent(message=prompt, turn=1),
        RequestHeader(
            reason="initial",
            provider="scripted",
            model="<yaml script>",
            system=SYSTEM,
            tools=("probe",),
        ),
        AssistantMessageEvent(turn=1, step=1, message=answer, finish="tool-calls"),
        InboxSpliced(target="next-turn", start=0, inserted=(pending,)),
        ToolCallEvent(turn=1, step=1, call_id="c1", name="probe", arguments='{"n":1}'),
    ]
    return log, prompt, pending


CRASHED_KINDS = [
    "agent/inbox/spliced",
    "turn/start",
    "step/start",
    "user/message",
    "request/header",
    "assistant/message",
    "agent/inbox/spliced",
    "tool/call",
]
REPAIR_KINDS = ["tool/result", "tool/result", "step/end", "turn/end", "agent/inbox/spliced"]
"""Closing the cut turn, then queueing its re-run (the turn had entered its prompt)."""


# -- repair ----------------------------------------------------------------------------------


async def test_resume_closes_a_turn_cut_open_during_tool_calls(clock: FakeClock) -> None:
    log, _, _ = crashed_mid_tools(clock)
    header = new_header(clock)
    store = await open_store(header, as_records(log, clock))
    model = scripted(SCRIPT, clock)
    async with restarted(store, model, clock, [probe]) as rt:
        agent = await rt.resume_agent(header.id)
        assert agent.id == header.id
        assert kinds(agent.session.records) == CRASHED_KINDS + REPAIR_KINDS
        repair = [r.event for r in agent.session.records[len(log) :]]
        assert [r.seq for r in agent.session.records] == list(range(len(log) + 5))
        first, second, step_end, turn_end, retry = repair
        assert isinstance(first, ToolResultEvent)
        assert isinstance(second, ToolResultEvent)
        # Recorded as started, no result: the outcome is unknown.
        assert (first.turn, first.step, first.code) == (1, 1, ErrorCode.TOOL_OUTCOME_UNKNOWN)
        assert (first.message.call_id, first.message.name) == ("c1", "probe")
        assert first.message.content == OUTCOME_UNKNOWN
        assert first.message.is_error
        # Never recorded as started.
        assert (second.turn, second.step, second.code) == (1, 1, ErrorCode.TOOL_NOT_STARTED)
        assert (second.message.call_id, second.message.name) == ("c2", "probe")
        assert second.message.content == NOT_STARTED
        assert second.message.is_error
        assert step_end == StepEnd(turn=1, step=1)
        assert turn_end == TurnEnd(turn=1, reason="interrupted")
        # The cut turn runs again as a fresh turn, first in line (before the queued prompt).
        assert isinstance(retry, InboxSpliced)
        assert (retry.target, retry.start) == ("next-turn", 0)
        (message,) = retry.inserted
        assert message.source == CRASH_RETRY_SOURCE
        assert "re-run 1 of at most 3" in message.text
        assert agent.inbox.next_turn == (message, *agent.inbox.next_turn[1:])
        # The repair is durable, not only in memory.
        stored = await rt.store.read(header.id, tenant=TENANT)
        assert stored == agent.session.records
        assert agent.status == "idle"
        assert model.requests == []  # nothing runs until the agent is woken


async def test_a_second_resume_adds_nothing(clock: FakeClock) -> None:
    log, _, _ = crashed_mid_tools(clock)
    header = new_header(clock)
    store = await open_store(header, as_records(log, clock))
    async with restarted(store, scripted(SCRIPT, clock), clock, [probe]) as rt:
        agent = await rt.resume_agent(header.id)
        assert await rt.resume_agent(header.id) is agent
        repaired = await rt.store.read(header.id, tenant=TENANT)
    assert len(repaired) == len(log) + 5
    assert interrupted_turn_closers(repaired) == []

    # A restart over the repaired log finds nothing to close.
    store = await open_store(header, repaired)
    async with restarted(store, scripted(SCRIPT, clock), clock, [probe]) as rt:
        again = await rt.resume_agent(header.id)
        assert again.session.records == repaired
        assert await rt.store.read(header.id, tenant=TENANT) == repaired


async def test_repair_of_a_turn_cut_during_the_model_call(clock: FakeClock) -> None:
    prompt = user_message("hello")
    log: list[SessionEvent] = [
        InboxSpliced(target="next-turn", start=0, inserted=(prompt,)),
        TurnStart(turn=1),
        StepStart(turn=1, step=1),
        UserMessageEvent(message=prompt, turn=1),
    ]
    header = new_header(clock)
    store = await open_store(header, as_records(log, clock))
    model = scripted("lead:\n  - text: hi\n  - text: hi again\n", clock)
    async with restarted(store, model, clock, []) as rt:
        agent = await rt.resume_agent(header.id)
        repair = [r.event for r in agent.session.records[len(log) :]]
        assert repair[:2] == [StepEnd(turn=1, step=1), TurnEnd(turn=1, reason="interrupted")]
        # The prompt was entered before the crash; it is history now, not pending work: what
        # waits is the cut turn's re-run.
        (retry,) = agent.inbox.next_turn
        assert retry.source == CRASH_RETRY_SOURCE
        await rt.run("again", agent=agent)
        assert [(e.turn, e.message.text) for e in events(agent, UserMessageEvent)] == [
            (1, "hello"),
            (2, retry.text),
            (3, "again"),
        ]
        assert model.requests[0].call_index == 0  # the cut call consumed no response
    model.assert_complete()


async def test_repair_between_steps_and_of_partly_answered_calls(clock: FakeClock) -> None:
    prompt = user_message("go")
    answer = AssistantMessage(
        id=new_message_id(),
        content=(ToolCallBlock("a", "probe", "{}"), ToolCallBlock("b", "probe", "{}")),
    )
    done = ToolResultMessage(id=new_message_id(), call_id="a", name="probe", content="ok")
    log: list[SessionEvent] = [
        TurnStart(turn=4),
        StepStart(turn=4, step=1),
        UserMessageEvent(message=prompt, turn=4),
        AssistantMessageEvent(turn=4, step=1, message=answer),
        ToolCallEvent(turn=4, step=1, call_id="a", name="probe", arguments="{}"),
        ToolCallEvent(turn=4, step=1, call_id="b", name="probe", arguments="{}"),
        ToolResultEvent(turn=4, step=1, message=done),
    ]
    records = as_records(log, clock)
    closers = interrupted_turn_closers(records)
    assert [type(e).__name__ for e in closers] == ["ToolResultEvent", "StepEnd", "TurnEnd"]
    result = closers[0]
    assert isinstance(result, ToolResultEvent)
    assert (result.message.call_id, result.code) == ("b", ErrorCode.TOOL_OUTCOME_UNKNOWN)
    assert closers[1:] == [StepEnd(turn=4, step=1), TurnEnd(turn=4, reason="interrupted")]

    # Cut after a step closed and before the next one opened: only the turn needs closing.
    between = [*log, ToolResultEvent(turn=4, step=1, message=replace_id(done, "b"))]
    between.append(StepEnd(turn=4, step=1))
    assert interrupted_turn_closers(as_records(between, clock)) == [
        TurnEnd(turn=4, reason="interrupted")
    ]
    closed = [*between, TurnEnd(turn=4, reason="completed")]
    assert interrupted_turn_closers(as_records(closed, clock)) == []
    assert interrupted_turn_closers([]) == []


def replace_id(message: ToolResultMessage, call_id: str) -> ToolResultMessage:
    return ToolResultMessage(
        id=new_message_id(), call_id=call_id, name=message.name, content=message.content
    )


# -- running after a resume ------------------------------------------------------------------


async def test_after_resume_turns_continue_and_every_call_is_answered(clock: FakeClock) -> None:
    log, prompt, pending = crashed_mid_tools(clock)
    header = new_header(clock)
    store = await open_store(header, as_records(log, clock))
    model = scripted(SCRIPT, clock)
    async with restarted(store, model, clock, [probe]) as rt:
        agent = await rt.resume_agent(header.id)
        # The cut turn's re-run comes first, then input queued before the crash, in order.
        retry = agent.inbox.next_turn[0]
        assert agent.inbox.next_turn == (retry, pending)
        assert agent.turn_number == 1

        await agent.followup("continue")
        await agent.when_idle()
        assert [e.turn for e in events(agent, TurnStart)] == [1, 2, 3, 4]
        assert [(e.turn, e.reason) for e in events(agent, TurnEnd)] == [
            (1, "interrupted"),
            (2, "completed"),
            (3, "completed"),
            (4, "completed"),
        ]
        assert [(e.turn, e.message.text) for e in events(agent, UserMessageEvent)] == [
            (1, prompt.text),
            (2, retry.text),
            (3, pending.text),
            (4, "continue"),
        ]
        # The first request after the reload shows the model a valid history: every call of
        # the interrupted turn has its (repair) result right after it.
        first = model.requests[0]
        assert texts(first.messages) == [
            "user:check both probes",
            "call:c1",
            "call:c2",
            "assistant:Checking both.",
            f"tool:c1:{OUTCOME_UNKNOWN[:24]}",
            f"tool:c2:{NOT_STARTED[:24]}",
            f"user:{retry.text}",
        ]
        assert unanswered_calls(first.messages) == []
        assert unanswered_calls(agent.transcript) == []
        # The first header of the new loop instance says it is a resume.
        assert [h.reason for h in events(agent, RequestHeader)] == ["initial", "resume"]
        # The crashed response was index 0; the script continues at 1.
        assert [r.call_index for r in model.requests] == [1, 2, 3]
        assert [e.message.text for e in events(agent, AssistantMessageEvent)][1:] == [
            "Recovered after the crash.",
            "And the next one.",
            "And one more.",
        ]
    model.assert_complete()


async def test_wake_runs_work_left_pending_by_the_crash(clock: FakeClock) -> None:
    log, _, pending = crashed_mid_tools(clock)
    header = new_header(clock)
    store = await open_store(header, as_records(log, clock))
    model = scripted(
        "lead:\n  - calls: [{tool: probe}]\n  - text: carried on\n  - text: ran the queued one\n",
        clock,
    )
    async with restarted(store, model, clock, [probe]) as rt:
        agent = await rt.resume_agent(header.id)
        assert agent.status == "idle"
        assert agent.wake() is True
        await agent.when_idle()
        entered = [(e.turn, e.message) for e in events(agent, UserMessageEvent)][1:]
        assert [(turn, m.source) for turn, m in entered] == [
            (2, CRASH_RETRY_SOURCE),  # the cut turn, run again
            (3, pending.source),
        ]
        assert entered[1][1].text == pending.text
        assert events(agent, TurnEnd)[-1] == TurnEnd(turn=3, reason="completed")
        assert agent.wake() is False  # nothing left
    model.assert_complete()


async def test_scripted_position_survives_a_restart_like_a_live_agent() -> None:
    """docs/design.md §6.2: the position is the number of responses consumed, as the log shows them
    (answers, errors, interrupted prefixes); a call cut before any output consumed nothing."""
    clock = GatedClock()
    script = """
lead:
  - text: zero
  - error: one fails
  - {text: two, sleep: 5}
  - text: three
"""
    header = new_header(clock)
    store = await open_store(header)
    live = scripted(script, clock)
    async with AgentRuntime(model=live, store=store, clock=clock) as rt:
        # Resuming a session that has no events yet is an ordinary start.
        agent = await rt.resume_agent(header.id)
        await rt.run("a", agent=agent)  # index 0
        await rt.run("b", agent=agent)  # index 1, an error
        await agent.followup("c")  # index 2, cut while it sleeps
        await clock.next_sleeper()
        await agent.cancel("user")
        await agent.when_idle()
        assert [e.reason for e in events(agent, TurnEnd)] == ["completed", "error", "aborted"]
        live_next = agent.call_index
        records = await rt.store.read(header.id, tenant=TENANT)
    assert [r.call_index for r in live.requests] == [0, 1, 2]
    assert live_next == 2
    assert len([r for r in records if isinstance(r.event, ModelErrorEvent)]) == 1

    model = scripted(script, clock)
    async with restarted(await open_store(header, records), model, clock, []) as rt:
        agent = await rt.resume_agent(header.id)
        assert agent.call_index == live_next
        await agent.followup("d")
        gate = await clock.next_sleeper()
        gate.set()
        await agent.when_idle()
        await rt.run("e", agent=agent)
        assert [r.call_index for r in model.requests] == [2, 3]
        assert [e.message.text for e in events(agent, AssistantMessageEvent)][-2:] == [
            "two",
            "three",
        ]
    model.assert_complete()


async def test_resume_of_an_unknown_session_is_not_found(clock: FakeClock) -> None:
    store = await open_store(new_header(clock))
    async with restarted(store, scripted("lead: []\n", clock), clock, []) as rt:
        with pytest.raises(NotFoundError) as caught:
            await rt.resume_agent(new_session_id())
        assert caught.value.code == ErrorCode.NOT_FOUND
        assert rt.agents == {}
