"""The host side of the guest protocol: frames, and the validation of every inbound frame.

A frame is a 4-byte big-endian length, then that many bytes of UTF-8 JSON. The guest sends
`{"type": "call", "id", "fn", "arg"}` and one `{"type": "done", "result"}`; the host answers
each call with `{"type": "reply", "id", "value"}` or `{"type": "reply", "id", "error":
{"message"}}`. The guest is hostile: every inbound frame is rebuilt from checked parts, and
anything else is a `ProtocolError` (the run fails with kind `protocol`).
"""

from __future__ import annotations

import asyncio
import json
import struct
from dataclasses import dataclass
from typing import Any, cast

from ..errors import ErrorCode, WorkflowError
from ..messages import JsonObject, JsonValue
from ._guest import NotJson, materialize
from ._reports import StopReason, WorkflowResult

__all__ = [
    "BINDINGS",
    "Call",
    "Done",
    "MAX_FRAME_BYTES",
    "MAX_PENDING_CALLS",
    "MAX_ERROR_CHARS",
    "MAX_RESULT_BYTES",
    "ProtocolError",
    "SAFE_INTEGER",
    "decode_frame",
    "encode_frame",
    "read_frame",
    "reply_frame",
    "terminal_result",
]

BINDINGS = ("begin", "startChild", "childResult", "disposeChild", "progress")
MAX_FRAME_BYTES = 8 * 1024 * 1024
"""The largest frame either side accepts."""
MAX_PENDING_CALLS = 128
"""Calls the guest may have in flight at once (each child holds about two)."""
MAX_RESULT_BYTES = 4 * 1024 * 1024
"""The largest return value a run hands back (its JSON encoding)."""
SAFE_INTEGER = 2**53 - 1
MAX_ERROR_CHARS = 8000
"""A guest's error text is cut here (it goes to a model)."""
_STOP_REASONS: tuple[StopReason, ...] = ("completed", "error", "cancelled")
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The guest broke the protocol; the message says how."""


@dataclass(frozen=True, slots=True)
class Call:
    """A binding call from the guest."""

    id: int
    fn: str
    arg: JsonValue


@dataclass(frozen=True, slots=True)
class Done:
    """The guest's terminal result (validated separately, spec section 4)."""

    result: JsonValue


def encode_frame(message: JsonObject) -> bytes:
    data = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    return _HEADER.pack(len(data)) + data


def reply_frame(call_id: int, *, value: JsonValue = None, error: str | None = None) -> bytes:
    if error is not None:
        return encode_frame({"type": "reply", "id": call_id, "error": {"message": error}})
    return encode_frame({"type": "reply", "id": call_id, "value": value})


async def read_frame(
    reader: asyncio.StreamReader, *, max_bytes: int = MAX_FRAME_BYTES
) -> bytes | None:
    """The next frame's body, or None when the guest closed the channel between frames."""
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise ProtocolError("workflow guest sent a truncated frame header") from None
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        raise ProtocolError(
            f"workflow guest frame of {size} bytes exceeds the limit of {max_bytes} bytes"
        )
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise ProtocolError("workflow guest closed the channel in the middle of a frame") from None


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def decode_frame(body: bytes) -> Call | Done:
    """Parse and check one inbound frame."""
    try:
        frame: Any = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"workflow guest sent a frame that is not JSON: {exc}") from None
    if not isinstance(frame, dict):
        raise ProtocolError("workflow guest sent a frame that is not an object")
    fields = cast("JsonObject", frame)
    kind = fields.get("type")
    if kind == "done":
        if "result" not in fields:
            raise ProtocolError("workflow guest sent done without a result")
        return Done(fields["result"])
    if kind != "call":
        raise ProtocolError(f"workflow guest sent an unknown frame type {_short(kind)}")
    call_id = fields.get("id")
    if type(call_id) is not int or not 0 <= call_id <= SAFE_INTEGER:
        raise ProtocolError("workflow guest sent a call whose id is not a safe integer")
    fn = fields.get("fn")
    if fn not in BINDINGS:
        raise ProtocolError(f"workflow guest called an unknown binding {_short(fn)}")
    return Call(call_id, cast("str", fn), fields.get("arg"))


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:59] + "…"


def terminal_result(
    result: JsonValue, *, host_count: int, max_bytes: int = MAX_RESULT_BYTES
) -> WorkflowResult:
    """The run's result from the guest's terminal value, checked in the spec's order (4).

    Beyond dsh: `error` must be present exactly for non-completed runs, the value is re-checked
    as plain JSON and bounded, a non-completed run's value is None, and the count never drops
    below what the host observed.
    """
    if not isinstance(result, dict):
        raise _invalid("workflow binding requires an object")
    fields = cast("JsonObject", result)
    stop = fields.get("stopReason")
    if stop not in _STOP_REASONS:
        raise _invalid("invalid workflow stop reason")
    count = fields.get("agentsStarted")
    if type(count) is not int or not 0 <= count <= SAFE_INTEGER:
        raise _invalid("invalid workflow agent count")
    if "value" not in fields:
        raise _invalid("workflow result is missing its value")
    error = fields.get("error")
    if "error" in fields and not isinstance(error, str):
        raise _invalid("workflow error must be a string")
    if (stop == "completed") == isinstance(error, str):
        raise _invalid("workflow result error must be absent exactly for completed runs")
    value: JsonValue = None
    if stop == "completed":
        try:
            value = materialize(fields["value"], "workflow result")
        except NotJson as exc:
            raise _invalid(f"workflow result value is not plain JSON data — {exc}") from None
        size = len(json.dumps(value, ensure_ascii=False).encode())
        if size > max_bytes:
            raise _invalid(
                f"workflow result value is {size} bytes, over the limit of {max_bytes} bytes; "
                "return a smaller value (a summary, or where the details are)"
            )
    if isinstance(error, str) and len(error) > MAX_ERROR_CHARS:
        omitted = len(error) - MAX_ERROR_CHARS
        error = f"{error[:MAX_ERROR_CHARS]}… [truncated: {omitted} more characters]"
    return WorkflowResult(
        value=value,
        stop_reason=stop,
        agents_started=max(count, host_count),
        error=cast("str | None", error),
    )


def _invalid(message: str) -> WorkflowError:
    return WorkflowError(message, code=ErrorCode.WORKFLOW_FAILED)
