"""Property tests for the pure parts: the event codec and replay-equals-fold."""

from __future__ import annotations

import asyncio
import json

from hypothesis import HealthCheck, given, settings, strategies as st

from subagents.core import AgentConfig, AgentRuntime
from subagents.messages import (
    AssistantMessage,
    MessageSource,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from subagents.sessions import (
    AssistantMessageEvent,
    InboxSpliced,
    SessionEvent,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    UserMessageEvent,
)
from subagents.sessions._events import decode_event, encode_event
from subagents.sessions._projections import TranscriptProjection, UsageProjection, fold
from subagents.testing import (
    FakeClock,
    InMemoryEventStore,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
)
from subagents.tools import tool

texts = st.text(max_size=40)
ids = st.uuids().map(str)
small = st.integers(min_value=0, max_value=10_000)

user_messages = st.builds(
    UserMessage,
    id=ids,
    content=st.lists(st.builds(TextBlock, texts), max_size=3).map(tuple),
    source=st.builds(MessageSource, kind=st.sampled_from(["user", "parent", "notice"])),
)
blocks = st.one_of(
    st.builds(TextBlock, texts),
    st.builds(ReasoningBlock, texts),
    st.builds(
        ToolCallBlock, id=ids, name=st.from_regex(r"[a-z]{1,8}", fullmatch=True), arguments=texts
    ),
)
assistant_messages = st.builds(
    AssistantMessage,
    id=ids,
    content=st.lists(blocks, max_size=4).map(tuple),
    provider=st.just("scripted"),
    model=texts,
)
usages = st.builds(Usage, small, small, small, small)

events: st.SearchStrategy[SessionEvent] = st.one_of(
    st.builds(StepStart, turn=small, step=small),
    st.builds(
        TurnEnd,
        turn=small,
        reason=st.sampled_from(["completed", "aborted", "error", "max-tokens", "refusal"]),
        cause=st.none() | texts,
        error_code=st.none() | texts,
    ),
    st.builds(UserMessageEvent, message=user_messages, turn=st.none() | small),
    st.builds(
        AssistantMessageEvent,
        turn=small,
        step=small,
        message=assistant_messages,
        usage=st.none() | usages,
        interrupted=st.booleans(),
    ),
    st.builds(ToolCallEvent, turn=small, step=small, call_id=ids, name=texts, arguments=texts),
    st.builds(
        ToolResultEvent,
        turn=small,
        step=small,
        message=st.builds(
            ToolResultMessage,
            id=ids,
            call_id=ids,
            name=texts,
            content=texts,
            is_error=st.booleans(),
        ),
        code=st.none() | texts,
    ),
    st.builds(
        InboxSpliced,
        target=st.sampled_from(["next-turn", "next-step"]),
        start=small,
        removed=small,
        inserted=st.lists(user_messages, max_size=2).map(tuple),
    ),
)


@given(events)
def test_codec_round_trips_every_event(event: SessionEvent) -> None:
    payload = encode_event(event)
    kind = json.loads(payload)["kind"]
    assert decode_event(kind, event.v, payload) == event


@tool(parallel_safe=True)
async def echo(value: str) -> str:
    """Echo a value."""
    return value


def _text(text: str) -> ScriptedResponse:
    return ScriptedResponse(text=text)


def _echo_calls(values: list[str]) -> ScriptedResponse:
    return ScriptedResponse(calls=tuple(ScriptedCall("echo", {"value": v}) for v in values))


responses = st.lists(
    st.one_of(
        st.text(min_size=1, max_size=20).map(_text),
        st.lists(st.text(max_size=10), min_size=1, max_size=3).map(_echo_calls),
        st.just(ScriptedResponse(error="boom")),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(responses, st.integers(min_value=1, max_value=3))
def test_live_caches_equal_a_fold_of_the_log(script: list[ScriptedResponse], prompts: int) -> None:
    """The transcript the loop keeps incrementally equals a fold of the committed log, and so
    does the model-call count, whatever the script does."""

    async def scenario() -> None:
        clock = FakeClock()
        model = ScriptedModel({"lead": script}, clock=clock)
        async with AgentRuntime(
            model=model, store=InMemoryEventStore(), tools=[echo], clock=clock
        ) as runtime:
            agent = await runtime.create_agent(config=AgentConfig())
            for n in range(prompts):
                await runtime.run(f"prompt {n}", agent=agent)
            records = agent.session.records
            assert agent.transcript == list(fold(TranscriptProjection(), records))
            assert agent.call_index == fold(UsageProjection(), records).model_calls
            assert [r.seq for r in records] == list(range(len(records)))
            stored = await runtime.store.read(agent.id, tenant="default")
            assert stored == records

    asyncio.run(scenario())
