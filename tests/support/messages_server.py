"""An Anthropic Messages API server on loopback for testing the Anthropic adapter.

The server plays a queue of scripted replies, one per HTTP request, and records every request
it receives so that tests can assert on what the SDK sent. It speaks just enough of the
protocol for `client.messages.create(stream=True)`: SSE streams of named events
(`message_start`, `content_block_start`, `content_block_delta`, `content_block_stop`,
`message_delta`, `message_stop`, `error`), and JSON error bodies with a status and headers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from scripted_server import ErrorReply, HangReply, RecordedRequest, ScriptedHandler, ScriptedServer

__all__ = [
    "NOW",
    "ErrorReply",
    "HangReply",
    "MessagesServer",
    "RecordedRequest",
    "StreamReply",
    "error_event",
    "error_reply",
    "message_delta",
    "message_start",
    "message_stop",
    "redacted_thinking_block",
    "reply",
    "stream_reply",
    "text_block",
    "thinking_block",
    "tool_use_block",
]

JsonObject = dict[str, Any]
Event = tuple[str, JsonObject]
"""One SSE event: its `event:` name and its JSON `data:`."""

NOW: dict[str, str] = {"retry-after-ms": "1"}
"""Headers that make the SDK retry after a millisecond: it honours a server's delay only when
it is above zero (a `retry-after: 0` means its own backoff from 0.5 s)."""


@dataclass(frozen=True, slots=True)
class StreamReply:
    """A 200 SSE response. `raw` replaces the encoded events verbatim (for malformed streams)."""

    events: tuple[Event, ...] = ()
    raw: str | None = None


Reply = StreamReply | ErrorReply | HangReply


def message_start(
    input_tokens: int = 10, *, cache_read: int | None = None, cache_write: int | None = None
) -> Event:
    usage: JsonObject = {"input_tokens": input_tokens, "output_tokens": 1}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    message: JsonObject = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return ("message_start", {"type": "message_start", "message": message})


def _start(index: int, block: JsonObject) -> Event:
    return (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def _delta(index: int, delta: JsonObject) -> Event:
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def _stop(index: int) -> Event:
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def text_block(index: int, *pieces: str) -> list[Event]:
    return [
        _start(index, {"type": "text", "text": ""}),
        *(_delta(index, {"type": "text_delta", "text": piece}) for piece in pieces),
        _stop(index),
    ]


def thinking_block(index: int, *pieces: str, signature: str) -> list[Event]:
    """A thinking block whose signature arrives in two `signature_delta`s."""
    half = len(signature) // 2
    return [
        _start(index, {"type": "thinking", "thinking": "", "signature": ""}),
        *(_delta(index, {"type": "thinking_delta", "thinking": piece}) for piece in pieces),
        _delta(index, {"type": "signature_delta", "signature": signature[:half]}),
        _delta(index, {"type": "signature_delta", "signature": signature[half:]}),
        _stop(index),
    ]


def redacted_thinking_block(index: int, data: str) -> list[Event]:
    return [_start(index, {"type": "redacted_thinking", "data": data}), _stop(index)]


def tool_use_block(index: int, *, id: str, name: str, json_pieces: tuple[str, ...]) -> list[Event]:
    return [
        _start(index, {"type": "tool_use", "id": id, "name": name, "input": {}}),
        *(_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in json_pieces),
        _stop(index),
    ]


def message_delta(
    stop_reason: str | None,
    output_tokens: int = 5,
    *,
    input_tokens: int | None = None,
    cache_read: int | None = None,
    cache_write: int | None = None,
) -> Event:
    usage: JsonObject = {"output_tokens": output_tokens}
    if input_tokens is not None:
        usage["input_tokens"] = input_tokens
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    return (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": usage,
        },
    )


def message_stop() -> Event:
    return ("message_stop", {"type": "message_stop"})


def error_event(kind: str, message: str) -> Event:
    return ("error", {"type": "error", "error": {"type": kind, "message": message}})


def stream_reply(*events: Event | list[Event]) -> StreamReply:
    """Events in order; a list (a block's events) is spliced in."""
    flat: list[Event] = []
    for item in events:
        if isinstance(item, list):
            flat.extend(item)
        else:
            flat.append(item)
    return StreamReply(events=tuple(flat))


def reply(
    *blocks: list[Event], stop_reason: str = "end_turn", start: Event | None = None
) -> StreamReply:
    """A whole well-formed response: start, the blocks, the stop reason, stop."""
    return stream_reply(
        start or message_start(), *blocks, message_delta(stop_reason), message_stop()
    )


def error_reply(
    status: int, kind: str, message: str, *, headers: dict[str, str] | None = None
) -> ErrorReply:
    """An Anthropic error body: `{"type": "error", "error": {"type": KIND, "message": ...}}`."""
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return ErrorReply(status=status, body=body, headers=tuple((headers or {}).items()))


class _Handler(ScriptedHandler):
    def stream_text(self, reply: StreamReply) -> str:
        if reply.raw is not None:
            return reply.raw
        return "".join(
            f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in reply.events
        )


class MessagesServer(ScriptedServer[Reply]):
    """A loopback Messages API server; use as a context manager.

    `enqueue` scripts replies in order; `requests` lists what was received. A request that
    finds the queue empty gets a 500 with `x-should-retry: false` naming the problem.
    """

    what = "messages server"
    handler = _Handler

    @property
    def base_url(self) -> str:
        """The API root, as `ANTHROPIC_BASE_URL` takes it (the SDK appends `/v1/messages`)."""
        return f"http://127.0.0.1:{self.port}"

    def exhausted(self, message: str) -> Reply:
        return error_reply(500, "api_error", message, headers={"x-should-retry": "false"})
