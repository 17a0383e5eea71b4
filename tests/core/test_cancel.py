"""Conformance tests for cancellation and disposal (docs/design.md §5.4).

A model call is held open in two ways. `GatedClock` blocks the scripted model's `sleep:` until
the test opens the gate: that holds a call *before* anything streamed. To hold a call *after*
text has streamed, `HeldModel` below is used instead; see its docstring for why the
`ScriptedModel` cannot do that.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import msgspec
import pytest

from subagents.core import Agent, AgentDisposed, AgentRuntime, replay_inbox
from subagents.errors import ClosedError, ErrorCode
from subagents.messages import (
    AssistantMessage,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolResultMessage,
    UserMessage,
)
from subagents.models import (
    Finish,
    Model,
    ModelChunk,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from subagents.sessions import (
    AssistantMessageEvent,
    InboxSpliced,
    SessionEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    UserMessageEvent,
)
from subagents.testing import (
    FakeClock,
    GatedClock,
    InMemoryEventStore,
    ScriptedModel,
)
from subagents.tools import ToolSpec, tool

E = TypeVar("E", bound=SessionEvent)

ABORTED = "Error: tool call aborted"
ABORTED_BEFORE_DISPATCH = "Error: tool call aborted before dispatch"


# -- helpers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hold:
    """A response that streams `chunks`, then stays open until released or cancelled."""

    chunks: tuple[ModelChunk, ...] = ()


class HeldModel:
    """A purpose-built `Model` that can hold a stream open *after* it has yielded chunks.

    Why not `ScriptedModel`: its `sleep:` runs (on the injected clock) before the response
    yields anything, and once it yields it produces every chunk of the response without a
    single suspension point in between. So a scripted call can only be held open before its
    first chunk, and a cancel can never land after text has streamed. Behaviour 13 (the
    interrupted prefix) needs exactly that window, so this model yields the `Hold`'s chunks,
    sets `holding`, and waits on `release`, an event the test controls.

    Responses are played in the order of the calls (not by `call_index`, so a call cut before
    any output does not replay its `Hold`); a plain string answers with that text.
    """

    provider = "held"
    name = "held-model"

    def __init__(self, responses: Sequence[Hold | str]) -> None:
        self.responses = list(responses)
        self.requests: list[ModelRequest] = []
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        self.requests.append(msgspec.structs.replace(request, messages=tuple(request.messages)))
        response = self.responses[len(self.requests) - 1]
        if isinstance(response, str):
            yield TextDelta(response)
            yield Finish("stop")
            return
        for chunk in response.chunks:
            yield chunk
        self.holding.set()
        await self.release.wait()
        yield Finish("stop")

    async def aclose(self) -> None:
        return None


def runtime(model: Model, clock: FakeClock, tools: Iterable[ToolSpec] = ()) -> AgentRuntime:
    return AgentRuntime(model=model, store=InMemoryEventStore(), tools=tools, clock=clock)


def kinds(agent: Agent) -> list[str]:
    return [r.kind for r in agent.session.records]


def events(agent: Agent, cls: type[E]) -> list[E]:
    return [r.event for r in agent.session.records if isinstance(r.event, cls)]


def entered(agent: Agent) -> list[tuple[int | None, str]]:
    return [(e.turn, e.message.text) for e in events(agent, UserMessageEvent)]


def texts(messages: Iterable[Message]) -> list[str]:
    out: list[str] = []
    for message in messages:
        match message:
            case UserMessage():
                out.append(f"user:{message.text}")
            case AssistantMessage():
                out.extend(f"call:{c.name}" for c in message.tool_calls)
                if message.text or message.reasoning:
                    out.append(f"assistant:{message.reasoning}{message.text}")
            case ToolResultMessage():
                out.append(f"tool:{message.content}")
    return out


ABORTED_STEP = ["step/end", "turn/end"]
TURN_HEAD = ["turn/start", "step/start", "user/message", "request/header"]


# -- cancelling a model call -----------------------------------------------------------------


async def test_cancel_while_streaming_keeps_the_interrupted_prefix(clock: FakeClock) -> None:
    model = HeldModel(
        [
            Hold(
                (
                    ReasoningDelta("Thinking. "),
                    TextDelta("Partial "),
                    TextDelta("answer"),
                    ToolCallDelta(0, id="c1", name="add", arguments='{"a":'),
                )
            ),
            "Final answer",
        ]
    )
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.followup("start")
        await model.holding.wait()
        await agent.cancel("user")
        await agent.when_idle()
        assert agent.status == "idle"
        assert kinds(agent) == [
            "agent/inbox/spliced",
            *TURN_HEAD,
            "assistant/message",
            *ABORTED_STEP,
        ]
        (partial,) = events(agent, AssistantMessageEvent)
        assert partial.interrupted is True
        assert (partial.turn, partial.step) == (1, 1)
        # The prefix the user saw, without the unfinished tool call.
        assert partial.message.content == (
            ReasoningBlock("Thinking. "),
            TextBlock("Partial answer"),
        )
        assert partial.message.tool_calls == ()
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="aborted", cause="user")]
        assert "tool/call" not in kinds(agent)

        await agent.followup("continue")
        await agent.when_idle()
        assert texts(model.requests[1].messages) == [
            "user:start",
            "assistant:Thinking. Partial answer",
            "user:continue",
        ]
        assert events(agent, TurnEnd)[1] == TurnEnd(turn=2, reason="completed")
        assert [r.call_index for r in model.requests] == [0, 1]


@pytest.mark.parametrize(
    "chunks",
    [
        pytest.param((), id="nothing"),
        pytest.param((TextDelta("  \n"), ReasoningDelta("\t")), id="whitespace"),
        pytest.param((ToolCallDelta(0, id="c1", name="add", arguments="{}"),), id="tool-only"),
    ],
)
async def test_cancel_before_visible_text_appends_no_message(
    clock: FakeClock, chunks: tuple[ModelChunk, ...]
) -> None:
    model = HeldModel([Hold(chunks), "answer"])
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.followup("start")
        await model.holding.wait()
        await agent.cancel("user")
        await agent.when_idle()
        assert kinds(agent) == ["agent/inbox/spliced", *TURN_HEAD, *ABORTED_STEP]
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="aborted", cause="user")]
        assert agent.transcript == [events(agent, UserMessageEvent)[0].message]


async def test_cancel_during_a_sleeping_scripted_call() -> None:
    clock = GatedClock()
    model = ScriptedModel.from_yaml(
        "lead:\n  - {text: too late, sleep: 30}\n  - {text: second try, sleep: 1}\n", clock=clock
    )
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        start = clock.now()
        await agent.followup("start")
        await clock.next_sleeper()  # never opened: the call is cancelled while it sleeps
        await agent.cancel("user")
        await agent.when_idle()
        assert clock.now() == start
        assert kinds(agent) == ["agent/inbox/spliced", *TURN_HEAD, *ABORTED_STEP]
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="aborted", cause="user")]

        # Nothing of the cut call reached the log, so it consumed no response: the next
        # request asks again for response 0, exactly as an agent resumed from this log would.
        await agent.followup("again")
        gate = await clock.next_sleeper()
        gate.set()
        await agent.when_idle()
        assert [e.message.text for e in events(agent, AssistantMessageEvent)] == ["too late"]
        assert agent.call_index == 1


# -- the inbox on cancel ---------------------------------------------------------------------


async def test_cancel_without_keep_inbox_durably_cancels_pending_items(clock: FakeClock) -> None:
    model = HeldModel([Hold()])
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.followup("A")
        await model.holding.wait()
        await agent.followup("B")
        await agent.inject("C")
        await agent.cancel("user")
        await agent.when_idle()
        assert kinds(agent) == [
            "agent/inbox/spliced",
            *TURN_HEAD,
            "agent/inbox/spliced",
            "agent/inbox/spliced",
            "agent/inbox/spliced",
            "agent/inbox/spliced",
            *ABORTED_STEP,
        ]
        assert events(agent, InboxSpliced)[3:] == [
            InboxSpliced(target="next-step", start=0, removed=1, outcome="canceled"),
            InboxSpliced(target="next-turn", start=0, removed=1, outcome="canceled"),
        ]
        assert agent.inbox.next_turn == ()
        assert agent.inbox.next_step == ()
        inbox = replay_inbox(agent.session.records)
        assert inbox.next_turn == ()
        assert inbox.next_step == ()
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="aborted", cause="user")]
        assert entered(agent) == [(1, "A")]


async def test_keep_inbox_cancel_runs_pending_next_turn_work_after_convergence(
    clock: FakeClock,
) -> None:
    model = HeldModel([Hold(), "second turn"])
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.followup("A")
        await model.holding.wait()
        await agent.followup("B")
        await agent.inject("C")
        await agent.cancel("user", keep_inbox=True)
        await agent.when_idle()
        # Our chosen rule (docs/design.md §5.4): pending next-turn work runs once the aborted
        # turn has closed; the pending next-step context enters that turn first.
        assert entered(agent) == [(1, "A"), (2, "C"), (2, "B")]
        assert [e.reason for e in events(agent, TurnEnd)] == ["aborted", "completed"]
        assert not any(e.outcome == "canceled" for e in events(agent, InboxSpliced))
        assert agent.inbox.next_turn == ()
        assert agent.inbox.next_step == ()


async def test_keep_inbox_cancel_with_only_injected_context_does_not_wake(
    clock: FakeClock,
) -> None:
    model = HeldModel([Hold(), "second turn"])
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.followup("A")
        await model.holding.wait()
        await agent.inject("C")
        await agent.cancel("user", keep_inbox=True)
        await agent.when_idle()
        assert [e.reason for e in events(agent, TurnEnd)] == ["aborted"]
        assert [m.text for m in agent.inbox.next_step] == ["C"]
        assert agent.status == "idle"

        await agent.followup("D")
        await agent.when_idle()
        assert entered(agent) == [(1, "A"), (2, "C"), (2, "D")]


async def test_cancel_on_idle_aborts_nothing_and_arms_nothing(clock: FakeClock) -> None:
    model = ScriptedModel.from_yaml("lead:\n  - text: fine\n  - text: still fine\n", clock=clock)
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.cancel("user")
        assert kinds(agent) == []

        kept = await agent.inject("kept")
        await agent.cancel("user", keep_inbox=True)
        assert kinds(agent) == ["agent/inbox/spliced"]
        assert agent.inbox.next_step == (kept,)

        await agent.cancel("user")  # without keep_inbox: pending input is discarded
        assert kinds(agent) == ["agent/inbox/spliced", "agent/inbox/spliced"]
        assert events(agent, InboxSpliced)[1] == InboxSpliced(
            target="next-step", start=0, removed=1, outcome="canceled"
        )
        assert agent.status == "idle"

        # A later turn is not cancelled by the earlier idle cancels.
        await agent.followup("work")
        await agent.when_idle()
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="completed")]
        await agent.cancel("parent")
        await agent.followup("more work")
        await agent.when_idle()
        assert [e.reason for e in events(agent, TurnEnd)] == ["completed", "completed"]
    model.assert_complete()


async def test_waking_send_after_the_abort_runs_as_the_next_turn(clock: FakeClock) -> None:
    model = HeldModel([Hold(), "after the abort"])
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.followup("A")
        await model.holding.wait()
        await agent.cancel("user")
        # The abort has fired but the turn has not closed yet: a steer is re-routed to
        # next-turn and runs as the next turn without a further wake.
        steering = await agent.steer("do this instead")
        assert events(agent, InboxSpliced)[-1] == InboxSpliced(
            target="next-turn", start=0, inserted=(steering,)
        )
        await agent.when_idle()
        assert [e.reason for e in events(agent, TurnEnd)] == ["aborted", "completed"]
        assert entered(agent) == [(1, "A"), (2, "do this instead")]
        assert events(agent, TurnEnd)[0].cause == "user"


async def test_the_first_cancel_cause_wins(clock: FakeClock) -> None:
    model = HeldModel([Hold(), "next"])
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.followup("A")
        await model.holding.wait()
        await agent.cancel("parent")
        await agent.cancel("user")
        await agent.cancel("hook")
        await agent.when_idle()
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="aborted", cause="parent")]
        assert kinds(agent).count("turn/end") == 1

        await agent.followup("B")
        await agent.when_idle()
        assert events(agent, TurnEnd)[1] == TurnEnd(turn=2, reason="completed")


# -- cancelling tool calls -------------------------------------------------------------------


async def test_cancel_while_a_tool_runs(clock: FakeClock) -> None:
    started = asyncio.Event()
    cancelled: list[str] = []
    ran: list[str] = []

    @tool
    async def slow(label: str) -> str:
        """Runs until cancelled."""
        ran.append(label)
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(label)
            raise
        return "unreachable"

    model = ScriptedModel.from_yaml(
        """
lead:
  - calls:
      - {tool: slow, args: {label: first}, id: c1}
      - {tool: slow, args: {label: second}, id: c2}
      - {tool: slow, args: {label: third}, id: c3}
""",
        clock=clock,
    )
    async with runtime(model, clock, [slow]) as rt:
        agent = await rt.create_agent()
        await agent.followup("go")
        await started.wait()
        await agent.cancel("user")
        await agent.when_idle()
        assert ran == ["first"]
        assert cancelled == ["first"]
        assert kinds(agent)[5:] == [
            "assistant/message",
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/result",
            *ABORTED_STEP,
        ]
        assert [(e.call_id, e.name) for e in events(agent, ToolCallEvent)] == [
            ("c1", "slow"),
            ("c2", "slow"),
            ("c3", "slow"),
        ]
        results = events(agent, ToolResultEvent)
        assert [(e.message.call_id, e.message.content, e.code) for e in results] == [
            ("c1", ABORTED, ErrorCode.ABORTED),
            ("c2", ABORTED_BEFORE_DISPATCH, ErrorCode.ABORTED_BEFORE_DISPATCH),
            ("c3", ABORTED_BEFORE_DISPATCH, ErrorCode.ABORTED_BEFORE_DISPATCH),
        ]
        assert all(e.message.is_error for e in results)
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="aborted", cause="user")]
    model.assert_complete()


async def test_cancel_during_a_parallel_wave(clock: FakeClock) -> None:
    blocked_started, fast_returned = asyncio.Event(), asyncio.Event()
    ran: list[str] = []

    @tool(parallel_safe=True)
    async def fast() -> str:
        """Finishes at once."""
        ran.append("fast")
        fast_returned.set()
        return "fast result"

    @tool(parallel_safe=True)
    async def blocked() -> str:
        """Runs until cancelled."""
        ran.append("blocked")
        blocked_started.set()
        await asyncio.Event().wait()
        return "unreachable"

    @tool
    async def later() -> str:
        """Exclusive; never reached."""
        ran.append("later")
        return "later"

    model = ScriptedModel.from_yaml(
        """
lead:
  - calls:
      - {tool: fast, id: c1}
      - {tool: blocked, id: c2}
      - {tool: later, id: c3}
""",
        clock=clock,
    )
    async with runtime(model, clock, [fast, blocked, later]) as rt:
        before = asyncio.all_tasks()
        agent = await rt.create_agent()
        await agent.followup("go")
        await blocked_started.wait()
        await fast_returned.wait()
        await agent.cancel("user")
        await agent.when_idle()
        assert sorted(ran) == ["blocked", "fast"]
        assert kinds(agent)[5:] == [
            "assistant/message",
            "tool/call",
            "tool/call",
            "tool/result",
            "tool/result",
            "tool/call",
            "tool/result",
            *ABORTED_STEP,
        ]
        results = events(agent, ToolResultEvent)
        assert [(e.message.call_id, e.message.content, e.code) for e in results] == [
            ("c1", "fast result", None),
            ("c2", ABORTED, ErrorCode.ABORTED),
            ("c3", ABORTED_BEFORE_DISPATCH, ErrorCode.ABORTED_BEFORE_DISPATCH),
        ]
        await agent.dispose()
        assert agent.live_tasks() == 0
        assert asyncio.all_tasks() <= before
    model.assert_complete()


async def test_a_tool_that_swallows_the_cancel_does_not_keep_the_turn_running(
    clock: FakeClock,
) -> None:
    started = asyncio.Event()
    ran: list[str] = []

    @tool
    async def stubborn(label: str) -> str:
        """Ignores cancellation (a badly written tool)."""
        ran.append(label)
        if label == "first":
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                return "finished anyway"
        return label

    model = ScriptedModel.from_yaml(
        """
lead:
  - calls:
      - {tool: stubborn, args: {label: first}, id: c1}
      - {tool: stubborn, args: {label: second}, id: c2}
  - text: must not be asked
""",
        clock=clock,
    )
    async with runtime(model, clock, [stubborn]) as rt:
        agent = await rt.create_agent()
        await agent.followup("go")
        await started.wait()
        await agent.cancel("user")
        await agent.when_idle()
        assert ran == ["first"]
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="aborted", cause="user")]
        results = events(agent, ToolResultEvent)
        assert [(e.message.call_id, e.code) for e in results] == [
            ("c1", ErrorCode.ABORTED),
            ("c2", ErrorCode.ABORTED_BEFORE_DISPATCH),
        ]
        assert len(events(agent, AssistantMessageEvent)) == 1


# -- disposal --------------------------------------------------------------------------------


async def test_dispose_aborts_the_turn_and_leaves_no_tasks(clock: FakeClock) -> None:
    model = HeldModel([Hold((TextDelta("half"),))])
    async with runtime(model, clock) as rt:
        disposed: list[str] = []

        def watch(event: object) -> None:
            if isinstance(event, AgentDisposed):
                disposed.append(event.agent_id)

        rt.subscribe(watch)
        before = asyncio.all_tasks()
        agent = await rt.create_agent()
        await agent.followup("A")
        await model.holding.wait()
        await agent.inject("an unclaimed notice")
        assert agent.live_tasks() > 0
        await agent.dispose()
        assert agent.disposed
        assert agent.live_tasks() == 0
        assert asyncio.all_tasks() <= before
        assert agent.status == "idle"
        assert agent.tools.closed
        assert disposed == [agent.id]
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="aborted", cause="disposed")]
        # The unclaimed notice was durably cancelled.
        assert events(agent, InboxSpliced)[-1] == InboxSpliced(
            target="next-step", start=0, removed=1, outcome="canceled"
        )
        assert events(agent, AssistantMessageEvent)[0].interrupted

        # Twice is safe and writes nothing.
        count = len(agent.session.records)
        await agent.dispose()
        assert len(agent.session.records) == count
        assert disposed == [agent.id]
        await agent.when_idle()


async def test_dispose_while_tools_run_leaves_no_tasks(clock: FakeClock) -> None:
    both_started = asyncio.Event()
    running: list[str] = []

    @tool(parallel_safe=True)
    async def wait_forever(label: str) -> str:
        """Never returns."""
        running.append(label)
        if len(running) == 2:
            both_started.set()
        await asyncio.Event().wait()
        return "unreachable"

    model = ScriptedModel.from_yaml(
        """
lead:
  - calls:
      - {tool: wait_forever, args: {label: a}}
      - {tool: wait_forever, args: {label: b}}
""",
        clock=clock,
    )
    async with runtime(model, clock, [wait_forever]) as rt:
        before = asyncio.all_tasks()
        agent = await rt.create_agent()
        await agent.followup("go")
        await both_started.wait()
        await agent.dispose()
        assert agent.live_tasks() == 0
        assert asyncio.all_tasks() <= before
        assert [e.code for e in events(agent, ToolResultEvent)] == [
            ErrorCode.ABORTED,
            ErrorCode.ABORTED,
        ]
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="aborted", cause="disposed")]
    model.assert_complete()


async def test_dispose_of_an_idle_agent_and_send_after_dispose(clock: FakeClock) -> None:
    model = ScriptedModel.from_yaml("lead:\n  - text: hi\n", clock=clock)
    async with runtime(model, clock) as rt:
        before = asyncio.all_tasks()
        agent = await rt.create_agent()
        await rt.run("hello", agent=agent)
        await agent.dispose()
        await agent.dispose()
        assert agent.live_tasks() == 0
        assert asyncio.all_tasks() <= before
        count = len(agent.session.records)
        for send in (agent.followup, agent.steer, agent.inject):
            with pytest.raises(ClosedError, match="is disposed") as caught:
                await send("too late")
            assert caught.value.code == ErrorCode.CLOSED
        assert len(agent.session.records) == count
        assert agent.status == "idle"
        # Cancelling a disposed agent is harmless.
        await agent.cancel("user")
        assert len(agent.session.records) == count
    model.assert_complete()


async def test_dispose_with_keep_inbox_leaves_pending_input_in_the_log(clock: FakeClock) -> None:
    model = HeldModel([Hold()])
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.followup("A")
        await model.holding.wait()
        await agent.followup("B")
        await agent.dispose(keep_inbox=True)
        assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="aborted", cause="disposed")]
        # Disposal never starts the pending turn; it stays in the log for a later resume.
        assert [m.text for m in replay_inbox(agent.session.records).next_turn] == ["B"]
        assert entered(agent) == [(1, "A")]
        assert agent.live_tasks() == 0


async def test_runtime_close_disposes_running_agents(clock: FakeClock) -> None:
    model = HeldModel([Hold()])
    before = asyncio.all_tasks()
    async with runtime(model, clock) as rt:
        agent = await rt.create_agent()
        await agent.followup("A")
        await model.holding.wait()
    assert agent.disposed
    assert agent.live_tasks() == 0
    assert asyncio.all_tasks() <= before
    assert events(agent, TurnEnd) == [TurnEnd(turn=1, reason="aborted", cause="disposed")]
