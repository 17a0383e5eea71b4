"""`OpenAICompatModel` through the real `openai` SDK against a chat-completions server on
loopback. Error replies carry `retry-after-ms: 1` so the SDK's retries wait one millisecond."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
from chat_server import (
    ChatServer,
    HangReply,
    StreamReply,
    closed_port,
    error_reply,
    finish_chunk,
    reasoning_chunk,
    stream_reply,
    text_chunk,
    tool_chunk,
    usage_chunk,
)

from subagents.errors import ClosedError, ErrorCode, ModelError
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
    BlockAssembler,
    Finish,
    ModelChunk,
    ModelRequest,
    OpenAICompatModel,
    TextDelta,
    ToolSchema,
    UsageChunk,
)

NOW = {"retry-after-ms": "1"}


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


def open_adapter(
    server: ChatServer, *, max_retries: int = 2, reasoning_effort: str | None = None
) -> OpenAICompatModel:
    return OpenAICompatModel(
        "test-model",
        base_url=server.base_url,
        api_key="test-key",
        max_retries=max_retries,
        reasoning_effort=reasoning_effort,
    )


@pytest.fixture
async def model(chat_server: ChatServer) -> AsyncIterator[OpenAICompatModel]:
    adapter = open_adapter(chat_server)
    yield adapter
    await adapter.aclose()


async def collect(
    model: OpenAICompatModel, req: ModelRequest | None = None
) -> tuple[list[ModelChunk], AssistantMessage, BlockAssembler]:
    assembler = BlockAssembler(provider=model.provider, model=model.name)
    chunks: list[ModelChunk] = []
    async for chunk in model.stream(req or request()):
        chunks.append(chunk)
        assembler.feed(chunk)
    return chunks, assembler.message(), assembler


async def failure(model: OpenAICompatModel, req: ModelRequest | None = None) -> ModelError:
    with pytest.raises(ModelError) as info:
        await collect(model, req)
    return info.value


def answer(text: str = "ok") -> StreamReply:
    return stream_reply(text_chunk(text), finish_chunk("stop"), usage_chunk(3, 1))


async def test_text_streams_and_assembles(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(
        stream_reply(text_chunk("Hel"), text_chunk("lo"), finish_chunk("stop"), usage_chunk(11, 2))
    )
    chunks, message, assembler = await collect(model)
    assert chunks == [
        TextDelta("Hel"),
        TextDelta("lo"),
        UsageChunk(Usage(input_tokens=11, output_tokens=2)),
        Finish("stop"),
    ]
    assert message.content == (TextBlock("Hello"),)
    assert (message.provider, message.model) == ("openai", "test-model")
    assert assembler.finish == "stop"
    [sent] = chat_server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer test-key"
    assert sent.body["model"] == "test-model"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
    ]
    assert "tools" not in sent.body
    assert "max_tokens" not in sent.body


async def test_tool_calls_split_across_chunks(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(
        stream_reply(
            text_chunk("Reading."),
            tool_chunk(0, id="call_a", name="read_file", arguments='{"pa'),
            tool_chunk(0, arguments='th": "a.py"}'),
            tool_chunk(1, id="call_b", name="glob"),
            tool_chunk(1, arguments='{"pattern": "*.md"}'),
            finish_chunk("tool_calls"),
            usage_chunk(20, 9),
        )
    )
    schema = ToolSchema(
        name="read_file",
        description="Read a file.",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    _, message, assembler = await collect(model, request(tools=[schema], max_tokens=64))
    assert assembler.finish == "tool-calls"
    assert message.text == "Reading."
    assert message.tool_calls == (
        ToolCallBlock(id="call_a", name="read_file", arguments='{"path": "a.py"}'),
        ToolCallBlock(id="call_b", name="glob", arguments='{"pattern": "*.md"}'),
    )
    body = chat_server.bodies[0]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": schema.parameters,
            },
        }
    ]
    assert body["max_tokens"] == 64


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (usage_chunk(100, 40), Usage(100, 40, 0, 0)),
        (usage_chunk(100, 40, cached=64, reasoning=30), Usage(100, 40, 64, 30)),
        (usage_chunk(100, 40, cache_hit=96, reasoning=12), Usage(100, 40, 96, 12)),
    ],
    ids=["plain", "openai-details", "deepseek-cache-hit"],
)
async def test_usage_is_mapped(
    chat_server: ChatServer,
    model: OpenAICompatModel,
    usage: dict[str, object],
    expected: Usage,
) -> None:
    chat_server.enqueue(stream_reply(text_chunk("x"), finish_chunk("stop"), usage))
    chunks, _, assembler = await collect(model)
    assert assembler.usage == expected
    assert chunks[-2:] == [UsageChunk(expected), Finish("stop")]


async def test_reasoning_streams_and_is_sent_back(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(
        stream_reply(
            reasoning_chunk("The user wants "),
            reasoning_chunk("a listing."),
            tool_chunk(0, id="call_1", name="glob", arguments='{"pattern": "*"}'),
            finish_chunk("tool_calls"),
            usage_chunk(10, 20, reasoning=15),
        ),
        answer("Two files."),
    )
    first = user_message("list files")
    _, turn, _ = await collect(model, request([first]))
    assert turn.content == (
        ReasoningBlock("The user wants a listing."),
        ToolCallBlock(id="call_1", name="glob", arguments='{"pattern": "*"}'),
    )
    result = ToolResultMessage(id=new_message_id(), call_id="call_1", name="glob", content="a b")
    _, final, _ = await collect(model, request([first, turn, result]))
    assert final.text == "Two files."
    assert chat_server.bodies[1]["messages"][1:] == [
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "glob", "arguments": '{"pattern": "*"}'},
                }
            ],
            "reasoning_content": "The user wants a listing.",
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a b"},
    ]


async def test_assistant_text_without_reasoning_sends_no_reasoning(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(answer())
    earlier = AssistantMessage(id=new_message_id(), content=(TextBlock("Hello."),))
    await collect(model, request([user_message("hi"), earlier, user_message("again")]))
    assert chat_server.bodies[0]["messages"][2] == {"role": "assistant", "content": "Hello."}


async def test_length_is_max_tokens_and_drops_tool_calls(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(
        stream_reply(
            text_chunk("Let me"),
            tool_chunk(0, id="call_1", name="bash", arguments='{"comm'),
            finish_chunk("length"),
            usage_chunk(5, 64),
        )
    )
    chunks, message, _ = await collect(model)
    assert chunks[-1] == Finish("max-tokens")
    assert message.content == (TextBlock("Let me"),)


async def test_content_filter_is_refusal(chat_server: ChatServer, model: OpenAICompatModel) -> None:
    chat_server.enqueue(stream_reply(text_chunk("I can"), finish_chunk("content_filter")))
    chunks, message, _ = await collect(model)
    assert chunks[-1] == Finish("refusal")
    assert message.text == "I can"


async def test_stop_with_tool_calls_counts_as_tool_calls(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(
        stream_reply(tool_chunk(0, id="c", name="glob", arguments="{}"), finish_chunk("stop"))
    )
    chunks, _, _ = await collect(model)
    assert chunks[-1] == Finish("tool-calls")


@pytest.mark.parametrize("status", [500, 429])
async def test_transient_status_is_retried_by_the_sdk(
    chat_server: ChatServer, model: OpenAICompatModel, status: int
) -> None:
    chat_server.enqueue(error_reply(status, "busy", headers=NOW), answer("done"))
    _, message, _ = await collect(model)
    assert message.text == "done"
    assert len(chat_server.requests) == 2


async def test_exhausted_retries_raise_server(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(*[error_reply(503, "overloaded", headers=NOW)] * 3)
    error = await failure(model)
    assert error.code is ErrorCode.SERVER
    assert error.retryable is True
    assert error.fields["status"] == 503
    assert "after 2 retries" in error.message
    assert "overloaded" in error.message
    assert len(chat_server.requests) == 3


async def test_exhausted_rate_limit_raises_rate_limit(chat_server: ChatServer) -> None:
    chat_server.enqueue(*[error_reply(429, "slow down", headers=NOW)] * 2)
    async with open_adapter(chat_server, max_retries=1) as adapter:
        error = await failure(adapter)
    assert (error.code, error.retryable) == (ErrorCode.RATE_LIMIT, True)
    assert len(chat_server.requests) == 2


async def test_401_is_auth_and_not_retried(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(error_reply(401, "Incorrect API key provided", headers=NOW))
    error = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.AUTH, False)
    assert error.message == (
        f"model server at {chat_server.base_url} rejected the API key (401); set OPENAI_API_KEY"
    )
    assert len(chat_server.requests) == 1


async def test_403_is_auth(chat_server: ChatServer, model: OpenAICompatModel) -> None:
    chat_server.enqueue(error_reply(403, "model not allowed"))
    error = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.AUTH, False)
    assert "model not allowed" in error.message


async def test_context_length_400(chat_server: ChatServer, model: OpenAICompatModel) -> None:
    chat_server.enqueue(
        error_reply(
            400,
            "This model's maximum context length is 8192 tokens.",
            code="context_length_exceeded",
        )
    )
    error = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.CONTEXT_WINDOW_EXCEEDED, False)
    assert "shorten the conversation" in error.message
    assert len(chat_server.requests) == 1


@pytest.mark.parametrize("status", [400, 404, 422])
async def test_other_4xx_is_invalid_request(
    chat_server: ChatServer, model: OpenAICompatModel, status: int
) -> None:
    chat_server.enqueue(error_reply(status, "The model `nope` does not exist"))
    error = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.INVALID_REQUEST, False)
    assert f"({status})" in error.message
    assert "does not exist" in error.message


async def test_connection_refused_is_transport() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    async with OpenAICompatModel("m", base_url=url, api_key="k", max_retries=0) as adapter:
        error = await failure(adapter)
    assert (error.code, error.retryable) == (ErrorCode.TRANSPORT, True)
    assert error.message.startswith(f"could not reach {url}: connection refused")


async def test_no_answer_in_time_is_timeout(chat_server: ChatServer) -> None:
    chat_server.enqueue(HangReply())
    adapter = OpenAICompatModel(
        "m", base_url=chat_server.base_url, api_key="k", max_retries=0, timeout=0.2
    )
    async with adapter:
        error = await failure(adapter)
    assert (error.code, error.retryable) == (ErrorCode.TIMEOUT, True)
    assert "did not answer within 0.2s" in error.message


async def test_error_event_in_stream_is_server(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(
        stream_reply(text_chunk("par"), {"error": {"message": "upstream overloaded"}})
    )
    error = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.SERVER, True)
    assert error.message == (
        f"model server at {chat_server.base_url} failed while streaming: upstream overloaded;"
        " retry later"
    )
    assert len(chat_server.requests) == 1


async def test_malformed_chunk(chat_server: ChatServer, model: OpenAICompatModel) -> None:
    chat_server.enqueue(StreamReply(raw="data: {not json\n\ndata: [DONE]\n\n"))
    error = await failure(model)
    assert error.code is ErrorCode.MALFORMED_RESPONSE
    assert "chat-completions protocol" in error.message


async def test_stream_without_finish_is_malformed(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(stream_reply(text_chunk("cut"), done=False))
    error = await failure(model)
    assert error.code is ErrorCode.MALFORMED_RESPONSE
    assert "without a finish reason" in error.message


async def test_empty_answer_is_retried(chat_server: ChatServer, model: OpenAICompatModel) -> None:
    chat_server.enqueue(stream_reply(finish_chunk("stop"), usage_chunk(5, 0)), answer("late"))
    _, message, _ = await collect(model)
    assert message.text == "late"
    assert len(chat_server.requests) == 2


async def test_empty_answers_exhaust_to_empty_response(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(*[stream_reply(text_chunk(""), finish_chunk("stop"))] * 3)
    error = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.EMPTY_RESPONSE, True)
    assert len(chat_server.requests) == 3


async def test_reasoning_only_answer_is_empty_and_not_replayed(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(stream_reply(reasoning_chunk("hmm"), finish_chunk("stop")))
    error = await failure(model)
    assert error.code is ErrorCode.EMPTY_RESPONSE
    assert len(chat_server.requests) == 1


@pytest.mark.parametrize(
    ("effort", "extra"),
    [
        ("high", {"reasoning_effort": "high"}),
        ("off", {"thinking": {"type": "disabled"}}),
    ],
)
async def test_reasoning_effort_is_sent(
    chat_server: ChatServer, effort: str, extra: dict[str, object]
) -> None:
    chat_server.enqueue(answer())
    async with open_adapter(chat_server, reasoning_effort=effort) as adapter:
        await collect(adapter)
    body = chat_server.bodies[0]
    assert {key: body[key] for key in extra} == extra


async def test_consumer_stopping_early_closes_the_response(
    chat_server: ChatServer, model: OpenAICompatModel
) -> None:
    chat_server.enqueue(
        stream_reply(text_chunk("a"), text_chunk("b"), finish_chunk("stop")), answer("next")
    )
    stream = model.stream(request())
    async for chunk in stream:
        assert chunk == TextDelta("a")
        break
    await stream.aclose()
    _, message, _ = await collect(model)
    assert message.text == "next"


async def test_closed_model_refuses_to_stream(chat_server: ChatServer) -> None:
    adapter = open_adapter(chat_server)
    await adapter.aclose()
    await adapter.aclose()
    with pytest.raises(ClosedError, match="is closed"):
        await collect(adapter)
    assert chat_server.requests == []
