"""`AnthropicModel`'s retries and error codes, through the real `anthropic` SDK against the
Messages API server on loopback and a closed port. Error replies carry `retry-after-ms: 1`
(`NOW`) so the SDK's retries wait one millisecond."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from chat_server import closed_port
from messages_server import (
    NOW,
    HangReply,
    MessagesServer,
    StreamReply,
    error_event,
    error_reply,
    message_delta,
    message_start,
    message_stop,
    reply,
    stream_reply,
    text_block,
    thinking_block,
)

from subagents.errors import ClosedError, ErrorCode, ModelError
from subagents.messages import user_message
from subagents.models import AnthropicModel, ModelChunk, ModelRequest, TextDelta

REQUEST = ModelRequest(
    agent_name="lead",
    session_id="s-1",
    call_index=0,
    system="You are terse.",
    messages=(user_message("hi"),),
)


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer() as running:
        yield running


async def open_adapter(base_url: str, **options: Any) -> AnthropicModel:
    """Built in a worker thread: the SDK's client reads files when it is made."""
    options.setdefault("max_retries", 2)
    return await asyncio.to_thread(
        lambda: AnthropicModel("claude-test", base_url=base_url, api_key="k", **options)
    )


@pytest.fixture
async def model(server: MessagesServer) -> AsyncIterator[AnthropicModel]:
    adapter = await open_adapter(server.base_url)
    yield adapter
    await adapter.aclose()


async def consume(model: AnthropicModel) -> list[ModelChunk]:
    return [chunk async for chunk in model.stream(REQUEST)]


async def failure(model: AnthropicModel) -> tuple[ModelError, list[ModelChunk]]:
    seen: list[ModelChunk] = []

    async def run() -> None:
        async for chunk in model.stream(REQUEST):
            seen.append(chunk)  # noqa: PERF401 - the chunks before the error are the point

    with pytest.raises(ModelError) as info:
        await run()
    assert "\n" not in info.value.message
    return info.value, seen


def texts(chunks: list[ModelChunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


async def test_429_is_retried_by_the_sdk_then_succeeds(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(
        error_reply(429, "rate_limit_error", "Number of requests exceeded", headers=NOW),
        reply(text_block(0, "done")),
    )
    assert texts(await consume(model)) == "done"
    retries = [r.headers["x-stainless-retry-count"] for r in server.requests]
    assert retries == ["0", "1"]


async def test_exhausted_rate_limit_is_rate_limit(server: MessagesServer) -> None:
    server.enqueue(*[error_reply(429, "rate_limit_error", "slow down", headers=NOW)] * 2)
    async with await open_adapter(server.base_url, max_retries=1) as adapter:
        error, _ = await failure(adapter)
    assert (error.code, error.retryable) == (ErrorCode.RATE_LIMIT, True)
    assert error.fields["status"] == 429
    assert len(server.requests) == 2


async def test_529_overloaded_is_retried_then_server(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(*[error_reply(529, "overloaded_error", "Overloaded", headers=NOW)] * 3)
    error, _ = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.SERVER, True)
    assert (error.fields["status"], error.fields["error_type"]) == (529, "overloaded_error")
    assert error.message == (
        f"Anthropic API at {server.base_url} failed (529) after 2 retries: Overloaded; "
        "the API is overloaded; retry later"
    )
    assert len(server.requests) == 3


async def test_529_then_success(server: MessagesServer, model: AnthropicModel) -> None:
    server.enqueue(
        error_reply(529, "overloaded_error", "Overloaded", headers=NOW), reply(text_block(0, "ok"))
    )
    assert texts(await consume(model)) == "ok"
    assert len(server.requests) == 2


async def test_401_is_auth_and_not_retried(server: MessagesServer, model: AnthropicModel) -> None:
    server.enqueue(error_reply(401, "authentication_error", "invalid x-api-key", headers=NOW))
    error, _ = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.AUTH, False)
    assert error.message == (
        f"Anthropic API at {server.base_url} rejected the API key (401); set ANTHROPIC_API_KEY"
    )
    assert len(server.requests) == 1


async def test_403_is_auth_with_the_servers_words(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(error_reply(403, "permission_error", "no access to this model"))
    error, _ = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.AUTH, False)
    assert "no access to this model" in error.message
    assert "'claude-test'" in error.message


async def test_prompt_too_long_is_context_window_exceeded(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(
        error_reply(
            400, "invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum"
        )
    )
    error, _ = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.CONTEXT_WINDOW_EXCEEDED, False)
    assert "212345 tokens" in error.message
    assert "shorten the conversation" in error.message
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "invalid_request_error"), (404, "not_found_error"), (413, "request_too_large")],
)
async def test_other_4xx_is_invalid_request(
    server: MessagesServer, model: AnthropicModel, status: int, kind: str
) -> None:
    server.enqueue(error_reply(status, kind, "model: claude-nope"))
    error, _ = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.INVALID_REQUEST, False)
    assert f"rejected the request ({status}): model: claude-nope;" in error.message
    assert len(server.requests) == 1


async def test_an_error_event_mid_stream_is_mapped_and_not_retried(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(
        stream_reply(
            message_start(), text_block(0, "par"), error_event("overloaded_error", "Overloaded")
        ),
        reply(text_block(0, "never sent")),
    )
    error, seen = await failure(model)
    assert seen == [TextDelta("par")]  # the answer had started: it cannot be replayed
    assert (error.code, error.retryable) == (ErrorCode.SERVER, True)
    assert error.fields["error_type"] == "overloaded_error"
    assert "status" not in error.fields  # the stream's own 200 says nothing
    assert error.message == (
        f"Anthropic API at {server.base_url} failed while streaming: Overloaded; "
        "the API is overloaded; retry later"
    )
    assert len(server.requests) == 1


async def test_a_rate_limit_event_in_the_stream_is_rate_limit(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(stream_reply(message_start(), error_event("rate_limit_error", "slow down")))
    error, _ = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.RATE_LIMIT, True)


async def test_connection_refused_fails_fast(caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    caplog.set_level(logging.DEBUG)
    # max_retries=5 would have the SDK back off for ~14 s before giving up.
    async with await open_adapter(url, max_retries=5) as adapter:
        error, _ = await failure(adapter)
    assert (error.code, error.retryable) == (ErrorCode.TRANSPORT, True)
    assert error.fields["reason"] == "connection-refused"
    assert error.message == (
        f"could not reach {url}: connection refused; start the model server or fix the base "
        "URL (ANTHROPIC_BASE_URL)"
    )
    # Our one quick retry happened; the SDK's backoff retries did not.
    assert [r.getMessage() for r in caplog.records if "quick retry" in r.getMessage()] == [
        f"connection refused at {url}/v1/messages; one quick retry"
    ]
    assert not [r for r in caplog.records if r.getMessage().startswith("Retrying request")]


async def test_no_answer_in_time_is_timeout(server: MessagesServer) -> None:
    server.enqueue(HangReply())
    async with await open_adapter(server.base_url, max_retries=0, timeout=0.2) as adapter:
        error, _ = await failure(adapter)
    assert (error.code, error.retryable) == (ErrorCode.TIMEOUT, True)
    assert "did not answer within 0.2s" in error.message


async def test_malformed_sse_is_malformed_response(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(StreamReply(raw="event: message_start\ndata: {not json\n\n"))
    error, _ = await failure(model)
    assert (error.code, error.retryable) == (ErrorCode.MALFORMED_RESPONSE, True)
    assert error.message.startswith(f"model 'claude-test' at {server.base_url} sent a malformed")
    assert "Anthropic Messages protocol" in error.message


async def test_a_delta_for_a_block_never_started_is_malformed(
    server: MessagesServer, model: AnthropicModel
) -> None:
    [start, delta, _stop] = text_block(3, "orphan")
    assert start[0] == "content_block_start"
    server.enqueue(stream_reply(message_start(), delta, message_delta("end_turn"), message_stop()))
    error, _ = await failure(model)
    assert error.code is ErrorCode.MALFORMED_RESPONSE
    assert "text_delta for content block 3, never started" in error.message


async def test_a_stream_without_a_stop_reason_is_malformed(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(stream_reply(message_start(), text_block(0, "cut")))
    error, seen = await failure(model)
    assert seen == [TextDelta("cut")]
    assert error.code is ErrorCode.MALFORMED_RESPONSE
    assert "without a stop reason" in error.message


async def test_an_empty_answer_is_retried(server: MessagesServer, model: AnthropicModel) -> None:
    server.enqueue(reply(), reply(text_block(0, "late")))
    assert texts(await consume(model)) == "late"
    assert len(server.requests) == 2


async def test_empty_answers_exhaust_to_empty_response(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(*[reply(text_block(0, ""))] * 3)
    error, seen = await failure(model)
    assert seen == []
    assert (error.code, error.retryable) == (ErrorCode.EMPTY_RESPONSE, True)
    assert "empty answer (no text, no tool calls) 3 times" in error.message
    assert len(server.requests) == 3  # max_retries=2: the first call and two more


async def test_a_thinking_only_answer_is_empty_and_not_replayed(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(reply(thinking_block(0, "hmm", signature="s")), reply(text_block(0, "no")))
    error, _ = await failure(model)
    assert error.code is ErrorCode.EMPTY_RESPONSE
    assert len(server.requests) == 1  # reasoning had streamed to the caller


async def test_consumer_stopping_early_closes_the_response(
    server: MessagesServer, model: AnthropicModel
) -> None:
    server.enqueue(reply(text_block(0, "a", "b")), reply(text_block(0, "next")))
    stream = model.stream(REQUEST)
    async for chunk in stream:
        assert chunk == TextDelta("a")
        break
    await stream.aclose()
    assert texts(await consume(model)) == "next"


async def test_a_closed_model_refuses_to_stream(server: MessagesServer) -> None:
    adapter = await open_adapter(server.base_url)
    await adapter.aclose()
    await adapter.aclose()
    with pytest.raises(ClosedError, match="is closed"):
        await consume(adapter)
    assert server.requests == []


class CuttingServer:
    """Answers 200 with the start of a streamed answer, promising more, then hangs up."""

    def __init__(self) -> None:
        self.cut = asyncio.Event()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        length = next(
            int(line.split(":", 1)[1])
            for line in head.split("\r\n")
            if line.lower().startswith("content-length:")
        )
        await reader.readexactly(length)
        events = stream_reply(message_start(), text_block(0, "par")[:2]).events
        body = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"content-length: 100000\r\n\r\n" + body.encode()
        )
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        self.cut.set()


async def test_a_stream_cut_after_it_started_is_server_not_could_not_reach() -> None:
    cutting = CuttingServer()
    async with cutting as url, await open_adapter(url) as adapter:
        error, seen = await failure(adapter)
    assert cutting.cut.is_set()
    assert seen == [TextDelta("par")]
    assert (error.code, error.retryable) == (ErrorCode.SERVER, True)
    assert error.fields["reason"] == "stream-cut"
    assert error.message.startswith(f"the stream from Anthropic API at {url} was cut after it")
    assert error.message.endswith("; retry later")
