"""The OpenAI-compatible adapter when the server cannot be reached, cuts a stream, or 404s
(issue 11), against real loopback sockets: a closed port, a server that drops the connection
part-way through a streamed answer, and the chat-completions test server."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

import pytest
from chat_server import ChatServer, closed_port, error_reply

from subagents.errors import ErrorCode, ModelError
from subagents.messages import user_message
from subagents.models import ModelRequest, OpenAICompatModel, TextDelta

REQUEST = ModelRequest(
    agent_name="lead",
    session_id="s-1",
    call_index=0,
    system="You are terse.",
    messages=(user_message("hi"),),
)


async def failure(model: OpenAICompatModel) -> tuple[ModelError, list[object]]:
    seen: list[object] = []

    async def consume() -> None:
        async for chunk in model.stream(REQUEST):
            seen.append(chunk)  # noqa: PERF401 - the chunks before the error are the point

    with pytest.raises(ModelError) as info:
        await consume()
    return info.value, seen


async def test_connection_refused_fails_fast_with_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    caplog.set_level(logging.DEBUG)
    # max_retries=5 would have the SDK back off for ~14 s before giving up.
    async with OpenAICompatModel("m", base_url=url, api_key="k", max_retries=5) as adapter:
        error, _ = await failure(adapter)
    assert (error.code, error.retryable) == (ErrorCode.TRANSPORT, True)
    assert error.fields["reason"] == "connection-refused"
    assert error.message == (
        f"could not reach {url}: connection refused; start the model server or fix the base URL"
    )
    assert "\n" not in error.message
    # Our one quick retry happened; the SDK's backoff retries did not.
    assert [r.getMessage() for r in caplog.records if "quick retry" in r.getMessage()] == [
        f"connection refused at {url}/chat/completions; one quick retry"
    ]
    assert not [r for r in caplog.records if r.getMessage().startswith("Retrying request")]


class CuttingServer:
    """Answers 200 with one streamed chunk, promising more, then closes the connection."""

    def __init__(self) -> None:
        self.cut = asyncio.Event()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

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
        chunk = {
            "id": "c-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "par"}, "finish_reason": None}],
        }
        body = f"data: {json.dumps(chunk)}\n\n".encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"content-length: 100000\r\n\r\n" + body
        )
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        self.cut.set()


@pytest.fixture
async def cutting_server() -> AsyncIterator[tuple[CuttingServer, str]]:
    server = CuttingServer()
    async with server as url:
        yield server, url


async def test_a_stream_cut_after_it_started_is_not_could_not_reach(
    cutting_server: tuple[CuttingServer, str],
) -> None:
    server, url = cutting_server
    async with OpenAICompatModel("m", base_url=url, api_key="k", max_retries=2) as adapter:
        error, seen = await failure(adapter)
    assert server.cut.is_set()
    assert seen == [TextDelta("par")]  # the answer had started
    assert (error.code, error.retryable) == (ErrorCode.SERVER, True)
    assert error.fields["reason"] == "stream-cut"
    assert error.message.startswith(
        f"the stream from model server at {url} was cut after it started: "
    )
    assert "could not reach" not in error.message
    assert error.message.endswith("; retry later")
    assert "\n" not in error.message


async def open_adapter(server: ChatServer) -> OpenAICompatModel:
    return OpenAICompatModel("qwen-7b", base_url=server.base_url, api_key="k", max_retries=0)


async def test_a_404_without_a_model_complaint_names_the_base_url(
    chat_server: ChatServer,
) -> None:
    chat_server.enqueue(error_reply(404, "File Not Found"))
    async with await open_adapter(chat_server) as adapter:
        error, _ = await failure(adapter)
    assert (error.code, error.retryable) == (ErrorCode.INVALID_REQUEST, False)
    assert error.fields["status"] == 404
    assert error.message == (
        f"model server at {chat_server.base_url} rejected the request (404): File Not Found; "
        f"check the base URL {chat_server.base_url}: it must be the API root the "
        "chat-completions path is appended to (often ending in /v1)"
    )
    assert "qwen-7b" not in error.message


async def test_a_404_saying_the_model_is_unknown_keeps_the_model_name(
    chat_server: ChatServer,
) -> None:
    chat_server.enqueue(error_reply(404, "The model `qwen-7b` does not exist"))
    async with await open_adapter(chat_server) as adapter:
        error, _ = await failure(adapter)
    assert (error.code, error.retryable) == (ErrorCode.INVALID_REQUEST, False)
    assert error.message == (
        f"model server at {chat_server.base_url} rejected the request (404): "
        "The model `qwen-7b` does not exist; the server does not know model 'qwen-7b': "
        f"check the model name (and that {chat_server.base_url} is the server you meant)"
    )
