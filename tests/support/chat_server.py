"""A chat-completions server on loopback for testing the OpenAI-compatible adapter.

The server plays a queue of scripted replies, one per HTTP request, and records every request
it receives so that tests can assert on what the SDK sent. It speaks just enough of the
protocol for `client.chat.completions.create(stream=True)`: SSE streams of chunks ending in
`data: [DONE]`, and JSON error bodies with a status code and headers.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

from scripted_server import ErrorReply, HangReply, RecordedRequest, ScriptedHandler, ScriptedServer

__all__ = [
    "ChatServer",
    "ErrorReply",
    "HangReply",
    "RecordedRequest",
    "StreamReply",
    "closed_port",
    "error_reply",
    "finish_chunk",
    "reasoning_chunk",
    "stream_reply",
    "text_chunk",
    "tool_chunk",
    "usage_chunk",
]

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class StreamReply:
    """A 200 SSE response. `raw` replaces the encoded chunks verbatim (for malformed streams);
    `done` appends `data: [DONE]`."""

    chunks: tuple[JsonObject, ...] = ()
    raw: str | None = None
    done: bool = True


Reply = StreamReply | ErrorReply | HangReply


def _chunk(delta: JsonObject, finish_reason: str | None = None) -> JsonObject:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def text_chunk(text: str) -> JsonObject:
    return _chunk({"role": "assistant", "content": text})


def reasoning_chunk(text: str) -> JsonObject:
    """A DeepSeek-style `reasoning_content` delta."""
    return _chunk({"role": "assistant", "content": None, "reasoning_content": text})


def tool_chunk(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str = ""
) -> JsonObject:
    call: JsonObject = {"index": index, "function": {"arguments": arguments}}
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    if name is not None:
        call["function"]["name"] = name
    return _chunk({"tool_calls": [call]})


def finish_chunk(reason: str) -> JsonObject:
    return _chunk({}, finish_reason=reason)


def usage_chunk(
    prompt: int,
    completion: int,
    *,
    cached: int | None = None,
    cache_hit: int | None = None,
    reasoning: int | None = None,
) -> JsonObject:
    """The final usage chunk (empty `choices`). `cached` uses OpenAI's
    `prompt_tokens_details.cached_tokens`, `cache_hit` DeepSeek's `prompt_cache_hit_tokens`."""
    usage: JsonObject = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if cache_hit is not None:
        usage["prompt_cache_hit_tokens"] = cache_hit
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    chunk = _chunk({})
    chunk["choices"] = []
    chunk["usage"] = usage
    return chunk


def stream_reply(*chunks: JsonObject, done: bool = True) -> StreamReply:
    return StreamReply(chunks=chunks, done=done)


def error_reply(
    status: int,
    message: str,
    *,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> ErrorReply:
    """An OpenAI-style error body. Pass `{"retry-after-ms": "1"}` to make the SDK retry at once:
    it honours a server delay only when it is above zero, else it backs off from 0.5 s."""
    body = {"error": {"message": message, "type": "test_error", "code": code, "param": None}}
    return ErrorReply(status=status, body=body, headers=tuple((headers or {}).items()))


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class _Handler(ScriptedHandler):
    def stream_text(self, reply: StreamReply) -> str:
        if reply.raw is not None:
            return reply.raw
        text = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in reply.chunks)
        return text + "data: [DONE]\n\n" if reply.done else text


class ChatServer(ScriptedServer[Reply]):
    """A loopback chat-completions server; use as a context manager.

    `enqueue` scripts replies in order; `requests` lists what was received. A request that
    finds the queue empty gets a 500 with `x-should-retry: false` naming the problem.
    """

    what = "chat server"
    handler = _Handler

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def exhausted(self, message: str) -> Reply:
        return error_reply(500, message, headers={"x-should-retry": "false"})
