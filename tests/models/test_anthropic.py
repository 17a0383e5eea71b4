"""`AnthropicModel` through the real `anthropic` SDK against a Messages API server on loopback:
streaming, what is sent (system, tools, cache breakpoints, thinking replay, tool results) and
usage. Errors and retries are in test_anthropic_errors.py."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import msgspec
import pytest
from messages_server import (
    MessagesServer,
    message_delta,
    message_start,
    message_stop,
    redacted_thinking_block,
    reply,
    stream_reply,
    text_block,
    thinking_block,
    tool_use_block,
)

from subagents.core import AgentRuntime
from subagents.ids import new_message_id
from subagents.messages import (
    AssistantMessage,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    Usage,
    user_message,
)
from subagents.models import (
    AnthropicModel,
    BlockAssembler,
    Finish,
    ModelChunk,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolSchema,
    UsageChunk,
)
from subagents.sessions import AssistantMessageEvent
from subagents.testing import InMemoryEventStore
from subagents.tools import tool

EPHEMERAL = {"type": "ephemeral"}
READ_FILE = ToolSchema(
    name="read_file",
    description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
GLOB = ToolSchema(
    name="glob",
    description="List files.",
    parameters={"type": "object", "properties": {"pattern": {"type": "string"}}},
)


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer() as running:
        yield running


async def open_adapter(server: MessagesServer, **options: Any) -> AnthropicModel:
    """Built in a worker thread: the SDK's client reads files (CA certificates, metadata) when
    it is made, which the event loop must not do."""
    return await asyncio.to_thread(
        lambda: AnthropicModel(
            "claude-test", base_url=server.base_url, api_key="test-key", **options
        )
    )


@pytest.fixture
async def model(server: MessagesServer) -> AsyncIterator[AnthropicModel]:
    adapter = await open_adapter(server)
    yield adapter
    await adapter.aclose()


def request(
    messages: Sequence[Message] = (),
    *,
    tools: Sequence[ToolSchema] = (),
    max_tokens: int | None = None,
    system: str = "You are terse.",
) -> ModelRequest:
    return ModelRequest(
        agent_name="lead",
        session_id="s-1",
        call_index=0,
        system=system,
        messages=messages or (user_message("hi"),),
        tools=tools,
        max_tokens=max_tokens,
    )


async def collect(
    model: AnthropicModel, req: ModelRequest | None = None
) -> tuple[list[ModelChunk], AssistantMessage]:
    assembler = BlockAssembler(provider=model.provider, model=model.name)
    chunks: list[ModelChunk] = []
    async for chunk in model.stream(req or request()):
        chunks.append(chunk)
        assembler.feed(chunk)
    return chunks, assembler.message()


async def test_text_streams_and_the_request_is_a_messages_call(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(reply(text_block(0, "Hel", "lo")))
    chunks, message = await collect(model)
    assert chunks == [
        TextDelta("Hel"),
        TextDelta("lo"),
        UsageChunk(Usage(input_tokens=10, output_tokens=5)),
        Finish("stop"),
    ]
    assert message.content == (TextBlock("Hello"),)
    assert (message.provider, message.model) == ("anthropic", "claude-test")
    assert message.replay_state is None  # no thinking: the message's own blocks say it all
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    # The key goes as `x-api-key` (older SDKs) or as a bearer token (2.16 and later).
    assert (
        sent.headers.get("x-api-key") == "test-key"
        or sent.headers.get("authorization") == "Bearer test-key"
    )
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", sent.headers["anthropic-version"])
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 8192,
        "stream": True,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}],
            }
        ],
    }


async def test_max_tokens_comes_from_the_request_or_the_constructor(
    server: MessagesServer,
) -> None:
    server.enqueue(reply(text_block(0, "a")), reply(text_block(0, "b")))
    async with await open_adapter(server, max_tokens=1000) as adapter:
        await collect(adapter, request(max_tokens=64))
        await collect(adapter)
    assert [body["max_tokens"] for body in server.bodies] == [64, 1000]


async def test_an_empty_system_prompt_is_not_sent(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(reply(text_block(0, "ok")))
    await collect(model, request(system=""))
    assert "system" not in server.bodies[0]


async def test_tool_use_streams_as_tool_calls_and_tools_are_cached(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(
        reply(
            text_block(0, "Reading."),
            tool_use_block(1, id="toolu_a", name="read_file", json_pieces=('{"pa', 'th": "a.py"}')),
            tool_use_block(2, id="toolu_b", name="glob", json_pieces=()),
            stop_reason="tool_use",
        )
    )
    chunks, message = await collect(model, request(tools=[READ_FILE, GLOB]))
    assert chunks[1:5] == [
        ToolCallDelta(index=1, id="toolu_a", name="read_file"),
        ToolCallDelta(index=1, arguments='{"pa'),
        ToolCallDelta(index=1, arguments='th": "a.py"}'),
        ToolCallDelta(index=2, id="toolu_b", name="glob"),
    ]
    assert chunks[-1] == Finish("tool-calls")
    assert message.text == "Reading."
    assert message.tool_calls == (
        ToolCallBlock(id="toolu_a", name="read_file", arguments='{"path": "a.py"}'),
        # no input_json_delta at all: the empty object, not an empty string
        ToolCallBlock(id="toolu_b", name="glob", arguments="{}"),
    )
    assert server.bodies[0]["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": READ_FILE.parameters,
        },
        {
            "name": "glob",
            "description": "List files.",
            "input_schema": GLOB.parameters,
            "cache_control": EPHEMERAL,  # the last tool closes the cached tool prefix
        },
    ]


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "max-tokens"),
        ("refusal", "refusal"),
    ],
)
async def test_stop_reasons_are_mapped(
    server: MessagesServer, model: AnthropicModel, stop_reason: str, finish: str
) -> None:
    server.enqueue(reply(text_block(0, "I can"), stop_reason=stop_reason))
    chunks, message = await collect(model)
    assert chunks[-1] == Finish(finish)  # pyright: ignore[reportArgumentType]
    assert message.text == "I can"


async def test_max_tokens_drops_a_truncated_tool_call(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(
        reply(
            text_block(0, "Let me"),
            tool_use_block(1, id="toolu_1", name="bash", json_pieces=('{"comm',)),
            stop_reason="max_tokens",
        )
    )
    chunks, message = await collect(model)
    assert chunks[-1] == Finish("max-tokens")
    assert message.content == (TextBlock("Let me"),)


async def test_usage_counts_cache_reads_and_writes_in_the_input(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(
        stream_reply(
            message_start(7, cache_read=1200, cache_write=300),
            text_block(0, "x"),
            message_delta("end_turn", 42),
            message_stop(),
        )
    )
    chunks, _ = await collect(model)
    expected = Usage(
        input_tokens=7 + 1200 + 300,
        output_tokens=42,
        cache_read_tokens=1200,
        cache_write_tokens=300,
    )
    assert chunks[-2:] == [UsageChunk(expected), Finish("stop")]


async def test_message_delta_usage_is_cumulative_and_wins(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(
        stream_reply(
            message_start(7, cache_read=100, cache_write=0),
            text_block(0, "x"),
            message_delta("end_turn", 30, input_tokens=9, cache_read=150, cache_write=20),
            message_stop(),
        )
    )
    chunks, _ = await collect(model)
    assert chunks[-2] == UsageChunk(
        Usage(
            input_tokens=9 + 150 + 20,
            output_tokens=30,
            cache_read_tokens=150,
            cache_write_tokens=20,
        )
    )


def test_usage_adds_cache_writes() -> None:
    total = Usage(10, 2, 4, 1, 3) + Usage(5, 1, 0, 0, 2)
    assert total == Usage(
        input_tokens=15,
        output_tokens=3,
        cache_read_tokens=4,
        reasoning_tokens=1,
        cache_write_tokens=5,
    )


THINKING = "The user wants a listing; glob it."
SIGNATURE = "EqQBCkgIARABGAIiQL2sig+/=="


async def test_thinking_streams_as_reasoning_and_goes_back_with_its_signature(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(
        reply(
            thinking_block(0, "The user wants a listing; ", "glob it.", signature=SIGNATURE),
            redacted_thinking_block(1, "opaque-redacted-data"),
            tool_use_block(2, id="toolu_1", name="glob", json_pieces=('{"pattern": "*"}',)),
            stop_reason="tool_use",
        ),
        reply(text_block(0, "Two files.")),
    )
    first = user_message("list files")
    chunks, turn = await collect(model, request([first], tools=[GLOB]))
    assert chunks[:2] == [ReasoningDelta("The user wants a listing; "), ReasoningDelta("glob it.")]
    assert turn.content == (
        ReasoningBlock(THINKING),
        ToolCallBlock(id="toolu_1", name="glob", arguments='{"pattern": "*"}'),
    )
    result = ToolResultMessage(id=new_message_id(), call_id="toolu_1", name="glob", content="a b")
    _, final = await collect(model, request([first, turn, result], tools=[GLOB]))
    assert final.text == "Two files."
    assert server.bodies[1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "list files"}]},
        {
            "role": "assistant",
            "content": [
                # unchanged and in their place: before the tool_use block
                {"type": "thinking", "thinking": THINKING, "signature": SIGNATURE},
                {"type": "redacted_thinking", "data": "opaque-redacted-data"},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "glob",
                    "input": {"pattern": "*"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "a b",
                    "cache_control": EPHEMERAL,
                }
            ],
        },
    ]
    # Sending it back did not mark the stored state with a cache breakpoint.
    assert "cache_control" not in json.dumps(turn.replay_state)


async def test_the_replay_state_survives_the_session_log_encoding(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(
        reply(
            thinking_block(0, "hmm", signature="sig-1"),
            text_block(1, "Answer."),
        )
    )
    _, turn = await collect(model)
    decoded = msgspec.json.decode(msgspec.json.encode(turn), type=AssistantMessage)
    assert decoded.replay_state == {
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
            {"type": "text", "text": "Answer."},
        ]
    }


async def test_thinking_budget_turns_thinking_on(server: MessagesServer) -> None:
    server.enqueue(reply(text_block(0, "ok")))
    async with await open_adapter(server, thinking_budget=2048) as adapter:
        await collect(adapter)
    assert server.bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def other_provider_turn() -> AssistantMessage:
    return AssistantMessage(
        id=new_message_id(),
        content=(
            ReasoningBlock("private thoughts"),
            TextBlock("Looking."),
            ToolCallBlock(id="call_1", name="glob", arguments='{"pattern": "*.py"}'),
            ToolCallBlock(id="call_2", name="read_file", arguments='{"path": "a.py"}'),
        ),
        provider="openai",
        model="gpt-test",
    )


async def test_another_providers_turn_is_plain_blocks_and_tool_results_merge(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(reply(text_block(0, "ok")))
    history: list[Message] = [
        user_message("look around"),
        other_provider_turn(),
        ToolResultMessage(id=new_message_id(), call_id="call_1", name="glob", content="a.py"),
        ToolResultMessage(
            id=new_message_id(),
            call_id="call_2",
            name="read_file",
            content="permission denied",
            is_error=True,
        ),
        user_message("also check the tests"),
    ]
    await collect(model, request(history))
    assert server.bodies[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "look around"}]},
        {
            "role": "assistant",
            "content": [  # the reasoning has no signature, so it stays behind
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "call_1", "name": "glob", "input": {"pattern": "*.py"}},
                {
                    "type": "tool_use",
                    "id": "call_2",
                    "name": "read_file",
                    "input": {"path": "a.py"},
                },
            ],
        },
        {
            "role": "user",  # one user turn: both results first, then the steering text
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "a.py"},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": "permission denied",
                    "is_error": True,
                },
                {"type": "text", "text": "also check the tests", "cache_control": EPHEMERAL},
            ],
        },
    ]


async def test_unparsable_arguments_go_back_as_an_object(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(reply(text_block(0, "ok")))
    bad = AssistantMessage(
        id=new_message_id(),
        content=(ToolCallBlock(id="call_1", name="glob", arguments='{"pattern": '),),
    )
    result = ToolResultMessage(
        id=new_message_id(), call_id="call_1", name="glob", content="bad JSON", is_error=True
    )
    await collect(model, request([user_message("go"), bad, result]))
    assistant = server.bodies[0]["messages"][1]
    assert assistant["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "glob", "input": {"arguments": '{"pattern": '}}
    ]


@tool(parallel_safe=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_an_agent_runs_a_tool_round_trip_with_thinking(server: MessagesServer) -> None:
    server.enqueue(
        reply(
            thinking_block(0, "Use the add tool.", signature="sig-add"),
            text_block(1, "Adding."),
            tool_use_block(2, id="toolu_add", name="add", json_pieces=('{"a": 2, ', '"b": 3}')),
            stop_reason="tool_use",
            start=message_start(20, cache_write=500),
        ),
        reply(text_block(0, "2 + 3 = 5"), start=message_start(4, cache_read=500, cache_write=30)),
    )
    model = await open_adapter(server)
    async with AgentRuntime(model=model, store=InMemoryEventStore(), tools=[add]) as runtime:
        lead = await runtime.create_agent()
        result = await runtime.run("What is 2 + 3?", agent=lead)
        records = lead.session.records
    assert result.output == "2 + 3 = 5"
    assert result.ok
    first, second = server.bodies
    assert first["tools"][-1]["name"] == "add"
    assert first["tools"][-1]["cache_control"] == EPHEMERAL
    assert first["system"][-1]["cache_control"] == EPHEMERAL
    assistant, results = second["messages"][-2:]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Use the add tool.", "signature": "sig-add"},
            {"type": "text", "text": "Adding."},
            {"type": "tool_use", "id": "toolu_add", "name": "add", "input": {"a": 2, "b": 3}},
        ],
    }
    [tool_result] = results["content"]
    assert tool_result["type"] == "tool_result"
    assert tool_result["tool_use_id"] == "toolu_add"
    assert "5" in json.dumps(tool_result["content"])
    assert tool_result["cache_control"] == EPHEMERAL
    # The log holds the replay state and the cache-aware usage of both calls.
    turns = [r.event for r in records if isinstance(r.event, AssistantMessageEvent)]
    assert [t.message.provider for t in turns] == ["anthropic", "anthropic"]
    assert turns[0].message.replay_state is not None
    assert [t.usage for t in turns] == [
        Usage(input_tokens=520, output_tokens=5, cache_write_tokens=500),
        Usage(input_tokens=534, output_tokens=5, cache_read_tokens=500, cache_write_tokens=30),
    ]


async def test_a_tool_call_dropped_at_max_tokens_is_not_replayed(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(
        reply(
            thinking_block(0, "Run it.", signature="sig-cut"),
            text_block(1, "Running"),
            tool_use_block(2, id="toolu_cut", name="bash", json_pieces=('{"comm',)),
            stop_reason="max_tokens",
        ),
        reply(text_block(0, "ok")),
    )
    _, turn = await collect(model)
    assert turn.tool_calls == ()
    await collect(model, request([user_message("hi"), turn, user_message("go on")]))
    assert server.bodies[1]["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Run it.", "signature": "sig-cut"},
            {"type": "text", "text": "Running"},
        ],
    }
