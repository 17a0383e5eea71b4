"""What the SQLite store hands its writer, and what the writer answers: plain, encodable data.

The writer runs in a process of its own by default (`_sqlite_process.py`), so a write is data
that crosses a socket as one msgpack frame, never a callable or a future: the store keeps its
waiters and matches the writer's answers to them in order. The same types go to an in-process
writer thread unencoded.
"""

from __future__ import annotations

import struct
from typing import Any, TypeAlias

import msgspec

from ..errors import (
    ClosedError,
    ConcurrencyConflict,
    DuplicateError,
    NotFoundError,
    SchemaVersionError,
    StoreError,
    SubagentsError,
)

__all__ = [
    "AcquireLease",
    "AppendRows",
    "Barrier",
    "CreateSession",
    "EventRow",
    "FinishCommand",
    "FrameReader",
    "Hello",
    "Open",
    "Ready",
    "ReleaseLease",
    "Request",
    "Result",
    "Stop",
    "SubmitCommand",
    "WireError",
    "WriteBatch",
    "WriteItem",
    "WriterFailed",
    "WrittenBatch",
    "decode_reply",
    "decode_request",
    "encode_frame",
    "error_from_wire",
    "error_to_wire",
]

EventRow = tuple[int, str, int, float, bytes]
"""One event of a session as stored: seq, kind, event version, time, payload (JSON)."""


class CreateSession(msgspec.Struct, tag="create", array_like=True, frozen=True):
    id: str
    tenant: str
    parent: str | None
    root: str
    created_at: float
    header: bytes
    seed_length: int


class AppendRows(msgspec.Struct, tag="append", array_like=True, frozen=True):
    session_id: str
    rows: list[EventRow]


class Barrier(msgspec.Struct, tag="barrier", array_like=True, frozen=True):
    """A flush: resolved with its batch, writes nothing."""


class AcquireLease(msgspec.Struct, tag="acquire", array_like=True, frozen=True):
    root: str
    holder: str
    pid: int
    now: float
    ttl: float
    address: str | None


class ReleaseLease(msgspec.Struct, tag="release", array_like=True, frozen=True):
    root: str
    holder: str


class SubmitCommand(msgspec.Struct, tag="command", array_like=True, frozen=True):
    root: str
    tenant: str
    target: str
    kind: str
    body: bytes
    now: float


class FinishCommand(msgspec.Struct, tag="finish", array_like=True, frozen=True):
    command_id: int
    state: str
    outcome: bytes
    now: float


WriteItem: TypeAlias = (
    CreateSession
    | AppendRows
    | Barrier
    | AcquireLease
    | ReleaseLease
    | SubmitCommand
    | FinishCommand
)


class WriteBatch(msgspec.Struct, tag="batch", array_like=True, frozen=True):
    """One loop iteration's writes, in submission order; `size` counts their records."""

    id: int
    items: list[WriteItem]
    size: int


class Stop(msgspec.Struct, tag="stop", array_like=True, frozen=True):
    """No more batches: write what is left and exit."""


class Open(msgspec.Struct, tag="open", array_like=True, frozen=True):
    """Open the store: the first request, sent once the writer said `Hello`.

    A writer touches the file only after it, so one its store no longer waits for (the store
    closed while it started) never does.
    """


Request: TypeAlias = WriteBatch | Stop | Open


class WireError(msgspec.Struct, tag="error", tag_field="t", frozen=True):
    """A `SubagentsError` as data: its class name and its JSON form.

    A map, not an array, so that a result can be one of these or a tuple.
    """

    cls: str
    data: dict[str, Any]


Result: TypeAlias = WireError | bool | int | tuple[Any, ...] | None
"""An item's outcome: None (written), an error, or what a lease or command call returns."""


class WrittenBatch(msgspec.Struct, tag="written", array_like=True, frozen=True):
    """The outcome of one batch: a result per item, in order.

    `forget` are sessions whose next seq the store must learn again (a failed or refused
    write), `created` the sessions created, `commits` the writer's transactions so far.
    """

    id: int
    results: list[Result]
    forget: list[str]
    created: list[str]
    commits: int
    failure: WireError | None = None
    """Set when the batch's transaction was rolled back (each item says why)."""


class Hello(msgspec.Struct, tag="hello", array_like=True, frozen=True):
    """The writer process has started (it has not touched the store)."""

    pid: int


class Ready(msgspec.Struct, tag="ready", array_like=True, frozen=True):
    """The writer process opened the store and waits for batches."""

    pid: int


class WriterFailed(msgspec.Struct, tag="failed", array_like=True, frozen=True):
    """The writer process cannot go on (it could not open the store, say)."""

    error: WireError


Reply: TypeAlias = WrittenBatch | Hello | Ready | WriterFailed

_ERRORS: dict[str, type[SubagentsError]] = {
    cls.__name__: cls
    for cls in (
        StoreError,
        NotFoundError,
        ConcurrencyConflict,
        DuplicateError,
        ClosedError,
        SchemaVersionError,
    )
}


def error_to_wire(error: SubagentsError) -> WireError:
    return WireError(type(error).__name__, error.to_json())


def error_from_wire(error: WireError) -> SubagentsError:
    return _ERRORS.get(error.cls, StoreError).from_json(error.data)


_HEADER = struct.Struct("!I")
_encoder = msgspec.msgpack.Encoder()
_requests = msgspec.msgpack.Decoder(Request)
_replies = msgspec.msgpack.Decoder(Reply)


def encode_frame(message: Request | Reply) -> bytes:
    """A message as one frame: its length (4 bytes, big-endian), then its msgpack."""
    body = _encoder.encode(message)
    return _HEADER.pack(len(body)) + body


def decode_request(body: bytes) -> Request:
    return _requests.decode(body)


def decode_reply(body: bytes) -> Reply:
    return _replies.decode(body)


class FrameReader:
    """Splits a byte stream into frame bodies."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes | memoryview) -> list[bytes]:
        """Add `data`; return the bodies of the frames it completed, in order."""
        buffer = self._buffer
        buffer += data
        bodies: list[bytes] = []
        start = 0
        size = _HEADER.size
        while len(buffer) - start >= size:
            (length,) = _HEADER.unpack_from(buffer, start)
            if len(buffer) - start - size < length:
                break
            bodies.append(bytes(buffer[start + size : start + size + length]))
            start += size + length
        if start:
            del buffer[:start]
        return bodies
