"""Conformance tests for the agent loop: inbox, turns and steps, endings, request headers,
derived transcripts and parallel tool dispatch (docs/design.md
§5.1-§5.3).

Everything is driven through public behaviour (`followup`, `steer`, `inject`, `send`) and
checked on the event log. Waiting is on conditions: `when_idle()`, asyncio events set by tool
handlers, and `GatedClock`, whose `sleep` (used by the scripted model's `sleep:`) blocks until
the test opens the gate, so a model call can be held open at a known point.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given, settings, strategies as st

from subagents.core import (
    CONTEXT_SOURCE,
    Agent,
    AgentConfig,
    AgentFailed,
    AgentRuntime,
    AgentStatusChanged,
    replay_inbox,
)
from subagents.core._agent import CONTEXT_CLEARED, CONTEXT_OPENING
from subagents.errors import ErrorCode, UsageError
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
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from subagents.sessions._projections import TranscriptProjection, fold
from subagents.testing import (
    FakeClock,
    GatedClock,
    InMemoryEventStore,
    RecordingModel,
    ScriptedModel,
)
from subagents.tools import ToolContext, ToolSpec, tool

E = TypeVar("E", bound=SessionEvent)

DEADLOCK_GUARD = 10.0
"""Seconds before a handshake that can never complete fails the test instead of hanging it.
It is a failure guard only: every passing path proceeds on events, never on elapsed time."""


# -- helpers ---------------------------------------------------------------------------------


def scripted(text: str, clock: FakeClock, *, source: str = "<yaml script>") -> RecordingModel:
    model = RecordingModel.from_yaml(text, clock=clock, source=source)
    assert isinstance(model, RecordingModel)
    return model


def runtime(model: ScriptedModel, clock: FakeClock, tools: Iterable[ToolSpec] = ()) -> AgentRuntime:
    return AgentRuntime(model=model, store=InMemoryEventStore(), tools=tools, clock=clock)


def kinds(agent: Agent) -> list[str]:
    return [r.kind for r in agent.session.records]


def events(agent: Agent, cls: type[E]) -> list[E]:
    return [r.event for r in agent.session.records if isinstance(r.event, cls)]


def turn_kinds(agent: Agent, turn: int) -> list[str]:
    """The kinds of one turn, from its `turn/start` to its `turn/end`."""
    records = agent.session.records
    start = next(i for i, r in enumerate(records) if r.event == TurnStart(turn=turn))
    end = next(
        i for i, r in enumerate(records) if isinstance(r.event, TurnEnd) and r.event.turn == turn
    )
    return [r.kind for r in records[start : end + 1]]


def entered(agent: Agent) -> list[tuple[int | None, str]]:
    """(turn, text) of every `user/message` in the log."""
    return [(e.turn, e.message.text) for e in events(agent, UserMessageEvent)]


def endings(agent: Agent) -> list[str]:
    return [e.reason for e in events(agent, TurnEnd)]


def answers(agent: Agent) -> list[str]:
    return [e.message.text for e in events(agent, AssistantMessageEvent)]


def texts(messages: Iterable[Message]) -> list[str]:
    """A compact view of messages: `user:...`, `assistant:...`, `call:name`, `tool:content`."""
    out: list[str] = []
    for message in messages:
        match message:
            case UserMessage():
                out.append(f"user:{message.text}")
            case AssistantMessage():
                out.extend(f"call:{c.name}" for c in message.tool_calls)
                if message.text:
                    out.append(f"assistant:{message.text}")
            case ToolResultMessage():
                out.append(f"tool:{message.content}")
    return out


@tool(parallel_safe=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


TEXT_TURN = [
    "turn/start",
    "step/start",
    "user/message",
    "assistant/message",
    "step/end",
    "turn/end",
]


# -- a turn, step by step --------------------------------------------------------------------


async def test_text_reply_event_order_and_status(clock: FakeClock) -> None:
    model = scripted("lead:\n  - text: Hello there.\n", clock)
    async with runtime(model, clock) as rt:
        statuses: list[str] = []

        def watch(event: object) -> None:
            if isinstance(event, AgentStatusChanged):
                statuses.append(event.status)

        rt.subscribe(watch)
        agent = await rt.create_agent()
        assert agent.status == "idle"
        message = await agent.followup("Hi")
        # Running from the moment waking input is accepted; the splice is already durable.
        assert agent.status == "running"
        assert statuses == ["running"]
        assert kinds(agent)[:1] == ["agent/inbox/spliced"]
        await agent.when_idle()
        assert agent.status == "idle"
        assert statuses == ["running", "idle"]
        assert kinds(agent) == [
            "agent/inbox/spliced",
            "turn/start",
            "step/start",
            "user/message",
            "request/header",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        (splice,) = events(agent, InboxSpliced)
        assert splice == InboxSpliced(target="next-turn", start=0, inserted=(message,))
        assert events(agent, UserMessageEvent) == [UserMessageEvent(message=message, turn=1)]
        (answer,) = events(agent, AssistantMessageEvent)
        assert (answer.turn, answer.step, answer.finish) == (1, 1, "stop")
        assert answer.message.content == (TextBlock("Hello there."),)
        assert (answer.message.provider, answer.message.model) == ("scripted", "<yaml script>")
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="completed")]
        assert agent.inbox.next_turn == ()
        assert agent.inbox.next_step == ()
    model.assert_complete()


async def test_tool_using_turn(clock: FakeClock) -> None:
    model = scripted(
        """
lead:
  - text: Let me add.
    calls:
      - {tool: add, args: {a: 1, b: 2}, id: c1}
  - text: It is 3.
""",
        clock,
    )
    async with runtime(model, clock, [add]) as rt:
        result = await rt.run("What is 1 + 2?")
        assert result.stop_reason == "completed"
        assert result.output == "It is 3."
        (agent,) = rt.agents.values()
        assert kinds(agent) == [
            "agent/inbox/spliced",
            "turn/start",
            "step/start",
            "user/message",
            "request/header",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        (result_event,) = events(agent, ToolResultEvent)
        assert (result_event.turn, result_event.step, result_event.code) == (1, 1, None)
        assert result_event.message.call_id == "c1"
        assert result_event.message.content == "3"
        first = events(agent, AssistantMessageEvent)[0]
        assert first.finish == "tool-calls"
        assert first.message.tool_calls == (ToolCallBlock("c1", "add", '{"a":1,"b":2}'),)
        # The second request shows the model its call and the result.
        assert texts(model.requests[1].messages) == [
            "user:What is 1 + 2?",
            "call:add",
            "assistant:Let me add.",
            "tool:3",
        ]
        assert [r.call_index for r in model.requests] == [0, 1]
    model.assert_complete()


async def test_steps_number_from_one_in_every_turn(clock: FakeClock) -> None:
    model = scripted(
        """
lead:
  - calls: [{tool: add, args: {a: 1, b: 1}}]
  - text: two
  - calls: [{tool: add, args: {a: 2, b: 2}}]
  - text: four
""",
        clock,
    )
    async with runtime(model, clock, [add]) as rt:
        agent = await rt.create_agent()
        await agent.followup("first")
        await agent.followup("second")
        await agent.when_idle()
        steps = [
            (r.event.turn, r.event.step)
            for r in agent.session.records
            if isinstance(r.event, AssistantMessageEvent)
        ]
        assert steps == [(1, 1), (1, 2), (2, 1), (2, 2)]
        assert endings(agent) == ["completed", "completed"]
    model.assert_complete()


# -- inbox -----------------------------------------------------------------------------------


async def test_followups_while_running_are_separate_fifo_turns() -> None:
    clock = GatedClock()
    model = scripted("lead:\n  - {text: one, sleep: 1}\n  - text: two\n  - text: three\n", clock)
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.followup("A")
        gate = await clock.next_sleeper()  # turn 1 is inside its model call
        await agent.followup("B")
        await agent.followup("C")
        assert [m.text for m in agent.inbox.next_turn] == ["B", "C"]

        async def idle_snapshot() -> list[str]:
            await agent.when_idle()
            return endings(agent)

        async with asyncio.TaskGroup() as tg:
            waiter = tg.create_task(idle_snapshot())
            gate.set()
        # when_idle resolved only once all three queued turns had ended.
        assert waiter.result() == ["completed", "completed", "completed"]
        assert entered(agent) == [(1, "A"), (2, "B"), (3, "C")]
        assert answers(agent) == ["one", "two", "three"]
        assert [turn_kinds(agent, n) for n in (2, 3)] == [TEXT_TURN, TEXT_TURN]
        assert agent.status == "idle"
    model.assert_complete()


async def test_quiescence_waits_for_the_running_agent_among_the_idle_leads_it_keeps() -> None:
    clock = GatedClock()
    model = scripted("lead:\n  - text: one\n  - {text: two, sleep: 1}\n", clock)
    async with runtime(model, clock) as rt:
        leads = [await rt.create_agent() for _ in range(5)]
        for lead in leads:
            await rt.run("go", agent=lead)  # each stays loaded, idle
        held = leads[2]
        await held.followup("again")
        gate = await clock.next_sleeper()  # its second turn is inside its model call
        # The runtime knows which of its agents run from their status events.
        assert rt._running == {held.id: held}

        async def quiescent() -> tuple[str, list[str]]:
            await rt.wait_quiescent()
            return held.status, endings(held)

        async with asyncio.TaskGroup() as tg:
            waiter = tg.create_task(quiescent())
            gate.set()
        assert waiter.result() == ("idle", ["completed", "completed"])
        assert rt._running == {}
        assert all(lead.status == "idle" for lead in leads)


async def test_when_idle_on_an_idle_agent_returns_at_once(clock: FakeClock) -> None:
    model = scripted("lead: []\n", clock)
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.when_idle()
        assert kinds(agent) == []


async def test_steer_while_a_tool_runs_enters_at_the_next_step_of_the_same_turn(
    clock: FakeClock,
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Wait for the test."""
        started.set()
        await release.wait()
        return "slow done"

    model = scripted("lead:\n  - calls: [{tool: slow}]\n  - text: I saw the steer.\n", clock)
    async with runtime(model, clock, [slow]) as rt:
        agent = await rt.create_agent()
        await agent.followup("go")
        await started.wait()
        steering = await agent.steer("also check the tests")
        release.set()
        await agent.when_idle()
        assert kinds(agent) == [
            "agent/inbox/spliced",
            "turn/start",
            "step/start",
            "user/message",
            "request/header",
            "assistant/message",
            "tool/call",
            "agent/inbox/spliced",
            "tool/result",
            "step/end",
            "step/start",
            "user/message",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        assert events(agent, InboxSpliced)[1] == InboxSpliced(
            target="next-step", start=0, inserted=(steering,)
        )
        assert entered(agent) == [(1, "go"), (1, "also check the tests")]
        assert texts(model.requests[1].messages) == [
            "user:go",
            "call:slow",
            "tool:slow done",
            "user:also check the tests",
        ]
        assert endings(agent) == ["completed"]
    model.assert_complete()


async def test_steer_on_an_idle_agent_starts_a_turn(clock: FakeClock) -> None:
    model = scripted("lead:\n  - text: steered\n", clock)
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.steer("now")
        assert agent.status == "running"
        await agent.when_idle()
        assert entered(agent) == [(1, "now")]
        assert endings(agent) == ["completed"]
    model.assert_complete()


async def test_inject_on_idle_waits_and_enters_before_the_next_prompt(clock: FakeClock) -> None:
    model = scripted("lead:\n  - text: ok\n", clock)
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.inject("context: the repo uses tabs")
        assert agent.status == "idle"
        await agent.when_idle()
        assert kinds(agent) == ["agent/inbox/spliced"]
        assert [m.text for m in agent.inbox.next_step] == ["context: the repo uses tabs"]
        assert model.requests == []

        await agent.followup("fix the indentation")
        await agent.when_idle()
        assert entered(agent) == [
            (1, "context: the repo uses tabs"),
            (1, "fix the indentation"),
        ]
        assert turn_kinds(agent, 1) == [
            "turn/start",
            "step/start",
            "user/message",
            "user/message",
            "request/header",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
    model.assert_complete()


async def test_wake_runs_next_step_input_an_idle_agent_holds(clock: FakeClock) -> None:
    """What a crash can leave: a steered message accepted, the turn it was for gone. `wake`
    (what a resume calls) opens a turn for it, as for pending next-turn work."""
    model = scripted("lead:\n  - text: took it in\n", clock)
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.inject("a child finished")
        assert agent.status == "idle"
        assert agent.wake() is True
        await agent.when_idle()
        assert entered(agent) == [(1, "a child finished")]
        assert agent.inbox.next_step == ()
        assert agent.wake() is False  # nothing left
    model.assert_complete()


async def test_first_step_claims_all_next_step_items_then_one_next_turn_item(
    clock: FakeClock,
) -> None:
    model = scripted("lead:\n  - text: first\n  - text: second\n", clock)
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.inject("i1")
        await agent.inject("i2")
        await agent.followup("f1")
        await agent.followup("f2")
        await agent.when_idle()
        assert entered(agent) == [(1, "i1"), (1, "i2"), (1, "f1"), (2, "f2")]
        assert turn_kinds(agent, 2) == TEXT_TURN
    model.assert_complete()


async def test_a_pending_message_id_cannot_be_queued_twice(clock: FakeClock) -> None:
    model = scripted("lead: []\n", clock)
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        message = user_message("once")
        await agent.inject(message)
        before = kinds(agent)
        for send in (agent.inject, agent.followup, agent.steer):
            with pytest.raises(UsageError) as caught:
                await send(message)
            assert caught.value.message == f'message "{message.id}" is already pending'
            assert caught.value.code == ErrorCode.DUPLICATE
        assert kinds(agent) == before
        assert agent.status == "idle"
        assert agent.inbox.next_step == (message,)
        assert agent.inbox.next_turn == ()


async def test_remove_and_clear_are_durable_cancellations(clock: FakeClock) -> None:
    model = scripted("lead:\n  - text: ran\n", clock)
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        s1 = await agent.inject("s1")
        s2 = await agent.inject("s2")
        t1 = await agent.send("t1", wake=False)
        t2 = await agent.send("t2", wake=False)
        assert agent.status == "idle"

        assert await agent.inbox.remove(s2.id) is True
        assert await agent.inbox.remove(s2.id) is False  # no longer pending
        assert await agent.inbox.remove(t1.id) is True
        assert agent.inbox.next_step == (s1,)
        assert agent.inbox.next_turn == (t2,)

        dropped = await agent.inbox.clear()
        assert dropped == [s1, t2]
        assert agent.inbox.next_step == ()
        assert agent.inbox.next_turn == ()
        assert events(agent, InboxSpliced)[4:] == [
            InboxSpliced(target="next-step", start=1, removed=1, outcome="canceled"),
            InboxSpliced(target="next-turn", start=0, removed=1, outcome="canceled"),
            InboxSpliced(target="next-step", start=0, removed=1, outcome="canceled"),
            InboxSpliced(target="next-turn", start=0, removed=1, outcome="canceled"),
        ]
        before = kinds(agent)
        assert await agent.inbox.clear() == []  # nothing pending: nothing written
        assert kinds(agent) == before

        # A claimed message is no longer pending and cannot be removed.
        ran = await agent.followup("run me")
        await agent.when_idle()
        assert await agent.inbox.remove(ran.id) is False
        assert entered(agent) == [(1, "run me")]
    model.assert_complete()


async def test_inbox_replay_equals_the_live_lists() -> None:
    clock = GatedClock()
    model = scripted(
        "lead:\n  - {text: one, sleep: 1}\n  - text: two\n  - text: three\n"
        "  - text: four\n  - text: five\n",
        clock,
    )
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()

        def check() -> None:
            inbox = replay_inbox(agent.session.records)
            assert inbox.next_turn == agent.inbox.next_turn
            assert inbox.next_step == agent.inbox.next_step

        await agent.inject("a")
        b = await agent.inject("b")
        await agent.send("c", wake=False)
        check()
        await agent.inbox.remove(b.id)
        check()
        await agent.followup("d")
        gate = await clock.next_sleeper()  # turn 1 claimed a and c; d waits
        check()
        await agent.followup("e")
        f = await agent.send("f", wake=False)
        g = await agent.send("g", wake=False)
        await agent.inbox.remove(f.id)
        await agent.inject("h")
        check()
        gate.set()
        await agent.when_idle()
        check()
        # h arrived during step 1, so turn 1 took a second step for it.
        assert entered(agent) == [(1, "a"), (1, "c"), (1, "h"), (2, "d"), (3, "e"), (4, "g")]
        assert agent.inbox.next_turn == ()
        assert agent.inbox.next_step == ()
        assert g.text == "g"
    model.assert_complete()


# -- how turns end ---------------------------------------------------------------------------


async def test_conclude_turn_ends_the_turn_after_that_step(clock: FakeClock) -> None:
    @tool
    async def submit(ctx: ToolContext, answer: str) -> str:
        """Submit the final answer."""
        ctx.conclude_turn()
        return f"submitted {answer}"

    model = scripted(
        """
lead:
  - calls:
      - {tool: add, args: {a: 1, b: 2}}
      - {tool: submit, args: {answer: "3"}}
""",
        clock,
    )
    async with runtime(model, clock, [add, submit]) as rt:
        result = await rt.run("answer and stop")
        assert result.stop_reason == "completed"
        (agent,) = rt.agents.values()
        assert turn_kinds(agent, 1) == [
            "turn/start",
            "step/start",
            "user/message",
            "request/header",
            "assistant/message",
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/result",
            "step/end",
            "turn/end",
        ]
        assert [(e.message.content, e.concludes_turn) for e in events(agent, ToolResultEvent)] == [
            ("3", False),
            ("submitted 3", True),
        ]
        assert len(model.requests) == 1
    model.assert_complete()


async def test_conclude_turn_still_runs_pending_next_step_work(clock: FakeClock) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def submit(ctx: ToolContext) -> str:
        """Submit and conclude."""
        ctx.conclude_turn()
        started.set()
        await release.wait()
        return "submitted"

    model = scripted("lead:\n  - calls: [{tool: submit}]\n  - text: noted\n", clock)
    async with runtime(model, clock, [submit]) as rt:
        agent = await rt.create_agent()
        await agent.followup("go")
        await started.wait()
        await agent.inject("one more thing")
        release.set()
        await agent.when_idle()
        assert entered(agent) == [(1, "go"), (1, "one more thing")]
        assert answers(agent) == ["", "noted"]
        assert endings(agent) == ["completed"]
        assert events(agent, TurnStart) == [TurnStart(turn=1)]
    model.assert_complete()


async def test_max_tokens_drops_tool_calls_and_ends_the_turn_max_tokens(
    clock: FakeClock,
) -> None:
    calls: list[str] = []

    @tool
    async def record(x: str) -> str:
        """Record x."""
        calls.append(x)
        return x

    model = scripted(
        """
lead:
  - text: Let me
    calls: [{tool: record, args: {x: truncated}}]
    stop: max-tokens
""",
        clock,
    )
    async with runtime(model, clock, [record]) as rt:
        result = await rt.run("go")
        assert result.stop_reason == "max-tokens"
        (agent,) = rt.agents.values()
        assert "tool/call" not in kinds(agent)
        assert calls == []
        (answer,) = events(agent, AssistantMessageEvent)
        assert answer.finish == "max-tokens"
        assert answer.message.content == (TextBlock("Let me"),)
    model.assert_complete()


async def test_max_tokens_is_sticky_when_a_later_step_completes() -> None:
    clock = GatedClock()
    model = scripted(
        """
lead:
  - calls: [{tool: add, args: {a: 1, b: 2}}]
    stop: max-tokens
    sleep: 1
  - text: finished normally
""",
        clock,
    )
    async with runtime(model, clock, [add]) as rt:
        agent = await rt.create_agent()
        await agent.followup("go")
        gate = await clock.next_sleeper()
        await agent.inject("a notice that arrived meanwhile")
        gate.set()
        await agent.when_idle()
        assert turn_kinds(agent, 1) == [
            "turn/start",
            "step/start",
            "user/message",
            "request/header",
            "agent/inbox/spliced",
            "assistant/message",
            "step/end",
            "step/start",
            "user/message",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        first, second = events(agent, AssistantMessageEvent)
        assert (first.finish, first.message.content) == ("max-tokens", ())
        assert second.finish == "stop"
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="max-tokens")]
        # The empty truncated message never reaches the model again.
        assert texts(model.requests[1].messages) == [
            "user:go",
            "user:a notice that arrived meanwhile",
        ]
    model.assert_complete()


async def test_refusal_ends_the_turn_refusal(clock: FakeClock) -> None:
    model = scripted("lead:\n  - {text: I will not do that., stop: refusal}\n", clock)
    async with runtime(model, clock) as rt:
        result = await rt.run("do something bad")
        assert result.stop_reason == "refusal"
        (agent,) = rt.agents.values()
        assert turn_kinds(agent, 1) == [
            *TEXT_TURN[:3],
            "request/header",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        assert events(agent, AssistantMessageEvent)[0].finish == "refusal"
    model.assert_complete()


async def test_model_error_ends_the_turn_error_and_the_agent_stays_usable(
    clock: FakeClock,
) -> None:
    model = scripted("lead:\n  - error: the provider is down\n  - text: back again\n", clock)
    async with runtime(model, clock) as rt:
        failures: list[AgentFailed] = []

        def watch(event: object) -> None:
            if isinstance(event, AgentFailed):
                failures.append(event)

        rt.subscribe(watch)
        agent = await rt.create_agent()
        await agent.followup("hello")
        await agent.when_idle()
        assert agent.status == "idle"
        assert kinds(agent) == [
            "agent/inbox/spliced",
            "turn/start",
            "step/start",
            "user/message",
            "request/header",
            "model/error",
            "step/end",
            "turn/end",
        ]
        assert events(agent, ModelErrorEvent) == [
            ModelErrorEvent(
                turn=1, step=1, code="MODEL_ERROR", message="the provider is down", retryable=False
            )
        ]
        assert events(agent, TurnEnd) == [
            TurnEnd(
                turn=1,
                reason="error",
                error_code="MODEL_ERROR",
                error_message="the provider is down",
                retryable=False,
            )
        ]
        assert [(f.turn, f.code, f.message) for f in failures] == [
            (1, "MODEL_ERROR", "the provider is down")
        ]

        result = await rt.run("again", agent=agent)
        assert result.stop_reason == "completed"
        assert result.output == "back again"
        assert turn_kinds(agent, 2) == TEXT_TURN
        assert [r.call_index for r in model.requests] == [0, 1]
    model.assert_complete()


async def test_after_an_error_queued_work_waits_for_the_next_wake() -> None:
    clock = GatedClock()
    model = scripted(
        "lead:\n  - {error: boom, sleep: 1}\n  - text: queued ran\n  - text: new ran\n", clock
    )
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.followup("A")
        gate = await clock.next_sleeper()
        await agent.followup("B")
        gate.set()
        await agent.when_idle()
        assert endings(agent) == ["error"]
        assert [m.text for m in agent.inbox.next_turn] == ["B"]

        await agent.followup("C")
        await agent.when_idle()
        assert entered(agent) == [(1, "A"), (2, "B"), (3, "C")]
        assert endings(agent) == ["error", "completed", "completed"]
        assert answers(agent) == ["queued ran", "new ran"]
    model.assert_complete()


async def test_script_exhaustion_ends_the_turn_error_naming_agent_and_script(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "short.yaml"
    path.write_text("lead:\n  - text: only answer\n", encoding="utf-8")
    model = ScriptedModel.from_file(path, clock=clock)
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await rt.run("one", agent=agent)
        result = await rt.run("two", agent=agent)
        assert result.stop_reason == "error"
        assert result.error_code == "SCRIPT_EXHAUSTED"
        assert result.error_message is not None
        assert "'lead'" in result.error_message
        assert str(path) in result.error_message
        assert turn_kinds(agent, 2)[-3:] == ["model/error", "step/end", "turn/end"]
        (error,) = events(agent, ModelErrorEvent)
        assert error.code == "SCRIPT_EXHAUSTED"
    model.assert_complete()


# -- requests --------------------------------------------------------------------------------


async def test_request_header_is_logged_initial_once_then_on_change(clock: FakeClock) -> None:
    model = scripted(
        "lead:\n  - text: a\n  - text: b\n  - text: c\n  - text: d\n  - text: e\n", clock
    )
    async with runtime(model, clock, [add]) as rt:
        agent = await rt.create_agent()

        def headers() -> list[tuple[str, tuple[str, ...]]]:
            return [(h.reason, h.tools) for h in events(agent, RequestHeader)]

        await rt.run("1", agent=agent)
        await rt.run("2", agent=agent)
        assert headers() == [("initial", ("add",))]
        (header,) = events(agent, RequestHeader)
        assert (header.provider, header.model) == ("scripted", "<yaml script>")
        assert header.system == AgentConfig().instructions

        @tool
        async def mine() -> str:
            """An agent-scoped tool."""
            return "mine"

        agent.tools.register(mine)
        await rt.run("3", agent=agent)
        assert headers() == [("initial", ("add",)), ("change", ("add", "mine"))]

        @tool
        async def later() -> str:
            """A global tool registered after the agent was created."""
            return "later"

        rt.tools.register(later)
        await rt.run("4", agent=agent)
        await rt.run("5", agent=agent)
        assert headers() == [
            ("initial", ("add",)),
            ("change", ("add", "mine")),
            ("change", ("add", "later", "mine")),
        ]
        assert [tuple(s.name for s in r.tools) for r in model.requests] == [
            ("add",),
            ("add",),
            ("add", "mine"),
            ("add", "later", "mine"),
            ("add", "later", "mine"),
        ]
    model.assert_complete()


async def test_derived_transcript_holds_only_surface_messages(clock: FakeClock) -> None:
    model = scripted(
        """
lead:
  - stop: refusal
  - error: transient
  - calls: [{tool: add, args: {a: 2, b: 3}}]
  - text: five
""",
        clock,
    )
    async with runtime(model, clock, [add]) as rt:
        agent = await rt.create_agent()
        for prompt in ("one", "two", "three"):
            await rt.run(prompt, agent=agent)
        assert endings(agent) == ["refusal", "error", "completed"]
        expected = ["user:one", "user:two", "user:three", "call:add", "tool:5", "assistant:five"]
        assert texts(agent.transcript) == expected
        # The live cache and a cold fold of the log agree.
        assert list(fold(TranscriptProjection(), agent.session.records)) == agent.transcript
        # The empty refusal and the failed call never reached a request.
        assert [texts(r.messages) for r in model.requests] == [
            ["user:one"],
            ["user:one", "user:two"],
            ["user:one", "user:two", "user:three"],
            expected[:-1],
        ]
        assert [r.call_index for r in model.requests] == [0, 1, 2, 3]
    model.assert_complete()


# -- parallel tool calls ---------------------------------------------------------------------


class Rendezvous:
    """Handlers that each wait for all the others: it completes only if they run at once."""

    def __init__(self, *names: str) -> None:
        self.arrived = {name: asyncio.Event() for name in names}

    async def meet(self, name: str) -> None:
        self.arrived[name].set()
        async with asyncio.timeout(DEADLOCK_GUARD):
            for event in self.arrived.values():
                await event.wait()


def call_lines(*calls: tuple[str, str]) -> str:
    return "\n".join(f"      - {{tool: {name}, args: {{label: {label}}}}}" for name, label in calls)


async def test_parallel_safe_calls_run_concurrently(clock: FakeClock) -> None:
    meeting = Rendezvous("ping", "pong")

    @tool(parallel_safe=True)
    async def meet(label: str) -> str:
        """Wait for the other call."""
        await meeting.meet(label)
        return f"{label} met"

    model = scripted(
        f"lead:\n  - calls:\n{call_lines(('meet', 'ping'), ('meet', 'pong'))}\n  - text: ok\n",
        clock,
    )
    async with runtime(model, clock, [meet]) as rt:
        result = await rt.run("go")
        assert result.stop_reason == "completed"
        (agent,) = rt.agents.values()
        assert [e.message.content for e in events(agent, ToolResultEvent)] == [
            "ping met",
            "pong met",
        ]
        assert turn_kinds(agent, 1)[5:9] == ["tool/call", "tool/call", "tool/result", "tool/result"]
    model.assert_complete()


async def test_results_are_committed_in_call_order_when_the_second_finishes_first(
    clock: FakeClock,
) -> None:
    fast_done = asyncio.Event()
    finished: list[str] = []

    @tool(parallel_safe=True)
    async def job(label: str) -> str:
        """First waits for second."""
        if label == "first":
            async with asyncio.timeout(DEADLOCK_GUARD):
                await fast_done.wait()
        else:
            fast_done.set()
        finished.append(label)
        return f"{label} result"

    model = scripted(
        f"lead:\n  - calls:\n{call_lines(('job', 'first'), ('job', 'second'))}\n  - text: ok\n",
        clock,
    )
    async with runtime(model, clock, [job]) as rt:
        await rt.run("go")
        (agent,) = rt.agents.values()
        assert finished == ["second", "first"]
        assert [(e.message.call_id, e.message.content) for e in events(agent, ToolResultEvent)] == [
            ("call_0_0", "first result"),
            ("call_0_1", "second result"),
        ]
        assert texts(model.requests[1].messages)[-2:] == ["tool:first result", "tool:second result"]
    model.assert_complete()


async def test_an_exclusive_call_runs_alone(clock: FakeClock) -> None:
    first_pair, second_pair = Rendezvous("p1", "p2"), Rendezvous("p3", "p4")
    active: set[str] = set()
    timeline: list[tuple[str, str, frozenset[str]]] = []

    @tool(parallel_safe=True)
    async def par(label: str) -> str:
        """Parallel-safe."""
        active.add(label)
        timeline.append(("start", label, frozenset(active)))
        await (first_pair if label in ("p1", "p2") else second_pair).meet(label)
        active.discard(label)
        return label

    @tool
    async def solo(label: str) -> str:
        """Exclusive (the default)."""
        timeline.append(("start", label, frozenset(active | {label})))
        return label

    calls = call_lines(("par", "p1"), ("par", "p2"), ("solo", "x"), ("par", "p3"), ("par", "p4"))
    model = scripted(f"lead:\n  - calls:\n{calls}\n  - text: ok\n", clock)
    async with runtime(model, clock, [par, solo]) as rt:
        await rt.run("go")
        (agent,) = rt.agents.values()
        # Nothing else was running when the exclusive call started, the first pair had
        # started (and met) before it, and the second pair only after it.
        x_start = timeline.index(("start", "x", frozenset({"x"})))
        assert {label for _, label, _ in timeline[:x_start]} == {"p1", "p2"}
        assert {label for _, label, _ in timeline[x_start + 1 :]} == {"p3", "p4"}
        assert turn_kinds(agent, 1)[5:15] == [
            "tool/call",
            "tool/call",
            "tool/result",
            "tool/result",
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/call",
            "tool/result",
            "tool/result",
        ]
        assert [e.message.content for e in events(agent, ToolResultEvent)] == [
            "p1",
            "p2",
            "x",
            "p3",
            "p4",
        ]
    model.assert_complete()


@pytest.mark.parametrize(("cap", "first_wave"), [(2, 2), (None, 3), (1, 1)])
async def test_max_parallel_tools_caps_a_wave(
    clock: FakeClock, cap: int | None, first_wave: int
) -> None:
    started: list[str] = []
    release = asyncio.Event()
    wave_started = asyncio.Event()
    peak = 0
    active = 0

    @tool(parallel_safe=True)
    async def par(label: str) -> str:
        """Parallel-safe; holds until released."""
        nonlocal peak, active
        started.append(label)
        active += 1
        peak = max(peak, active)
        if len(started) == first_wave:
            wave_started.set()
        await release.wait()
        active -= 1
        return label

    calls = call_lines(("par", "a"), ("par", "b"), ("par", "c"))
    model = scripted(f"lead:\n  - calls:\n{calls}\n  - text: ok\n", clock)
    async with runtime(model, clock, [par]) as rt:
        agent = await rt.create_agent(config=AgentConfig(max_parallel_tools=cap))
        await agent.followup("go")
        await wave_started.wait()
        # Every call of the wave was started in one scheduling round; by the time this test
        # task runs again, a call outside the cap would already have started too.
        assert started == ["a", "b", "c"][:first_wave]
        release.set()
        await agent.when_idle()
        assert peak == first_wave
        assert started == ["a", "b", "c"]
        assert [e.message.content for e in events(agent, ToolResultEvent)] == ["a", "b", "c"]
    model.assert_complete()


async def test_unknown_and_invalid_calls_are_answered_in_order(clock: FakeClock) -> None:
    model = scripted(
        """
lead:
  - calls:
      - {tool: add, args: {a: 1, b: 2}}
      - {tool: add, args: {a: 3}}
      - {tool: nope}
  - text: done
""",
        clock,
    )
    async with runtime(model, clock, [add]) as rt:
        result = await rt.run("go")
        assert result.stop_reason == "completed"
        (agent,) = rt.agents.values()
        outcomes = [(e.message.content, e.code) for e in events(agent, ToolResultEvent)]
        assert outcomes[0] == ("3", None)
        assert outcomes[1][0].startswith("Error: invalid arguments:")
        assert outcomes[1][1] == "INVALID_ARGS"
        assert outcomes[2] == ('Error: unknown tool "nope"', "UNKNOWN_TOOL")
        assert [e.message.is_error for e in events(agent, ToolResultEvent)] == [False, True, True]
    model.assert_complete()


# -- the runtime context ----------------------------------------------------------------------


async def test_the_runtime_context_is_a_message_entered_when_it_changes(clock: FakeClock) -> None:
    model = scripted("lead:\n  - text: one\n  - text: two\n  - text: three\n", clock)
    async with runtime(model, clock) as rt:
        told = AgentConfig(instructions="Be brief.").with_context("where", "You are here.")
        agent = await rt.create_agent(config=told)
        await rt.run("first", agent=agent)
        await rt.run("second", agent=agent)  # unchanged: not entered again
        agent.config = dataclasses.replace(agent.config, context=())
        await rt.run("third", agent=agent)
    first, second, third = model.requests_of("lead")
    # Never in the system prompt, so the prefix stays the same for every request.
    assert first.system == second.system == third.system == "Be brief."
    snapshot = f"{CONTEXT_OPENING}\n\nYou are here."
    assert texts(first.messages) == [f"user:{snapshot}", "user:first"]
    assert texts(third.messages)[-2:] == [f"user:{CONTEXT_CLEARED}", "user:third"]
    sources = [e.message.source for e in events(agent, UserMessageEvent)]
    assert sources.count(CONTEXT_SOURCE) == 2


def test_siblings_told_the_same_after_their_first_paragraph_share_its_block() -> None:
    rest = (("delegation", "Answer in full."), ("file-policy", "Read only."))
    one = AgentConfig(context=(("identity", "You are a."), *rest))
    two = AgentConfig(context=(("identity", "You are b."), *rest))
    assert one.context_text == f"{CONTEXT_OPENING}\n\nYou are a.\n\nAnswer in full.\n\nRead only."
    assert [b.text for b in one.context_blocks] == [
        f"{CONTEXT_OPENING}\n\nYou are a.",
        "\n\nAnswer in full.\n\nRead only.",
    ]
    # One object for every sibling: a fan-out holds the rest once, not once per child.
    assert one.context_blocks[1] is two.context_blocks[1]
    assert one.context_blocks[0] != two.context_blocks[0]
    assert AgentConfig().context_blocks == ()


@given(st.lists(st.tuples(st.text(max_size=3), st.text(max_size=8)), max_size=5))
def test_the_context_blocks_joined_are_the_opening_and_every_paragraph(
    context: list[tuple[str, str]],
) -> None:
    config = AgentConfig(context=tuple(context))
    paragraphs = [text for _, text in context]
    expected = "\n\n".join([CONTEXT_OPENING, *paragraphs]) if context else ""
    assert "".join(b.text for b in config.context_blocks) == config.context_text == expected
    assert len(config.context_blocks) == min(len(context), 2)


async def test_a_context_entered_in_one_block_is_not_entered_again_when_the_text_is_the_same(
    clock: FakeClock,
) -> None:
    # A log written when the context message was one block: the same text, cut differently.
    told = AgentConfig().context_saying([("who", "You are here."), ("rules", "Be brief.")])
    old = UserMessage(
        id=new_message_id(),
        content=(TextBlock(f"{CONTEXT_OPENING}\n\nYou are here.\n\nBe brief."),),
        source=CONTEXT_SOURCE,
    )
    header = SessionHeader(id=new_session_id(), tenant="default", created_at=clock.now(), cwd="/")
    store = InMemoryEventStore()
    model = scripted("lead:\n  - text: one\n  - text: two\n", clock)
    async with AgentRuntime(model=model, store=store, clock=clock) as rt:
        await store.create(header)
        await store.append(
            header.id,
            [
                EventRecord(0, clock.now(), UserMessageEvent(message=old, turn=1)),
                EventRecord(1, clock.now(), TurnEnd(turn=1, reason="completed")),
            ],
        )
        agent = await rt.resume_agent(header.id, config=AgentConfig(context=told))
        await rt.run("first", agent=agent)
        agent.config = agent.config.with_context("rules", "Be thorough.")
        await rt.run("second", agent=agent)
    first, second = model.requests_of("lead")
    told_context = [
        m for m in first.messages if isinstance(m, UserMessage) and m.source == CONTEXT_SOURCE
    ]
    assert told_context == [old]  # only the one logged before: not entered again
    changed = f"{CONTEXT_OPENING}\n\nYou are here.\n\nBe thorough."
    assert texts(second.messages)[-2:] == [f"user:{changed}", "user:second"]


_TOPICS = st.sampled_from(["delegation", "file-policy", "limits", "persona", "extra"])


def _told_one_by_one(
    context: tuple[tuple[str, str], ...], told: list[tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    """Each topic in turn: every paragraph of it out, the new one where its first one was."""
    for topic, text in told:
        kept = [(t, x) for t, x in context if t != topic]
        at = next((i for i, (t, _) in enumerate(context) if t == topic), len(kept))
        kept.insert(at, (topic, text))
        context = tuple(kept)
    return context


@settings(max_examples=300)
@given(
    st.lists(st.tuples(_TOPICS, st.text(max_size=3)), max_size=5),
    st.lists(st.tuples(_TOPICS, st.text(max_size=3)), max_size=4),
    st.lists(_TOPICS, max_size=3, unique=True),
)
def test_context_saying_tells_each_topic_as_if_told_one_by_one(
    start: list[tuple[str, str]], told: list[tuple[str, str]], order: list[str]
) -> None:
    config = AgentConfig(context=tuple(start))
    expected = _told_one_by_one(config.context, told)
    if order:
        rank = {name: index for index, name in enumerate(order)}
        expected = tuple(sorted(expected, key=lambda item: rank.get(item[0], len(rank))))
    assert config.context_saying(told, order=order) == expected
    if len(told) == 1:
        assert config.context_with(*told[0], order=order) == expected
