"""The guest protocol as hostile input (docs/design.md §9):
frame parsing, and real processes that break the protocol in each way.
"""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from workflow_support import guest_processes, open_engine, request, run_to_end

from subagents.workflows import GuestProcessRuntime, WorkflowResult
from subagents.workflows._protocol import (
    Call,
    Done,
    ProtocolError,
    decode_frame,
    encode_frame,
    read_frame,
)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\xff", "workflow guest sent a frame that is not JSON"),
        (b"[1]", "workflow guest sent a frame that is not an object"),
        (b'{"type": "call", "id": 1, "fn": "x", "arg": NaN}', "not JSON: NaN is not JSON"),
        (b'{"type": "hello"}', 'workflow guest sent an unknown frame type "hello"'),
        (b'{"type": "call", "id": -1, "fn": "begin"}', "call whose id is not a safe integer"),
        (b'{"type": "call", "id": true, "fn": "begin"}', "call whose id is not a safe integer"),
        (
            b'{"type": "call", "id": 1, "fn": "open"}',
            'workflow guest called an unknown binding "open"',
        ),
        (b'{"type": "done"}', "workflow guest sent done without a result"),
        (b"[" * 100_000, "workflow guest sent a frame that is not JSON"),
    ],
)
def test_a_bad_frame_is_a_protocol_error(body: bytes, message: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_frame(body)
    assert message in str(caught.value)


def test_good_frames_are_rebuilt() -> None:
    assert decode_frame(b'{"type": "call", "id": 2, "fn": "progress", "arg": [], "x": 1}') == Call(
        2, "progress", []
    )
    assert decode_frame(b'{"type": "done", "result": {"value": 1}}') == Done({"value": 1})


async def frames(data: bytes, *, max_bytes: int = 100) -> list[bytes | None]:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    found: list[bytes | None] = []
    while True:
        frame = await read_frame(reader, max_bytes=max_bytes)
        found.append(frame)
        if frame is None:
            return found


async def test_frames_are_length_prefixed() -> None:
    data = encode_frame({"a": "é"}) + encode_frame({"b": 1})
    assert await frames(data) == [b'{"a":"\xc3\xa9"}', b'{"b":1}', None]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (struct.pack(">I", 101) + b"x" * 101, "frame of 101 bytes exceeds the limit of 100 bytes"),
        (b"\x00\x00", "truncated frame header"),
        (struct.pack(">I", 10) + b"abc", "closed the channel in the middle of a frame"),
    ],
)
async def test_oversized_and_truncated_frames_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        await frames(data)
    assert message in str(caught.value)


GUEST_PRELUDE = """
import json, os, struct, sys
fd = int(sys.argv[1])
def frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data
def send(raw):
    os.write(fd, raw)
"""


async def run_fake_guest(tmp_path: Path, body: str, **runtime_args: Any) -> WorkflowResult:
    guest = tmp_path / "fake_guest.py"
    guest.write_text(GUEST_PRELUDE + body)
    runtime = GuestProcessRuntime(guest=str(guest), **runtime_args)
    async with open_engine(runtime=runtime) as (_, lead, engine, _):
        result = await run_to_end(engine.start(request(lead)))
    assert guest_processes() == []
    return result


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            "send(struct.pack('>I', 3) + b'abc')\nos.read(fd, 1)",
            "workflow execution failed (protocol): workflow guest sent a frame that is not JSON",
        ),
        (
            "send(struct.pack('>I', 1 << 30))\nos.read(fd, 1)",
            "workflow execution failed (protocol): workflow guest frame of 1073741824 bytes "
            "exceeds the limit of 8388608 bytes",
        ),
        (
            "send(frame({'type': 'shout'}))\nos.read(fd, 1)",
            "workflow execution failed (protocol): workflow guest sent an unknown frame type "
            '"shout"',
        ),
        (
            "send(frame({'type': 'call', 'id': 1, 'fn': 'eval', 'arg': 'x'}))\nos.read(fd, 1)",
            'workflow execution failed (protocol): workflow guest called an unknown binding "eval"',
        ),
        (
            "send(b''.join(frame({'type': 'call', 'id': i, 'fn': 'begin', 'arg': {}})"
            " for i in range(3)))\nos.read(fd, 1)",
            "workflow execution failed (protocol): workflow guest has more than 2 calls in flight",
        ),
        (
            "sys.stderr.write('guest trouble\\n')\nsys.exit(3)",
            "workflow execution failed (worker-exit): the workflow guest exited with code 3 "
            "before returning a result; its stderr ends with:\nguest trouble",
        ),
        (
            "send(frame({'type': 'done', 'result': {'stopReason': 'completed', "
            "'agentsStarted': 0}}))",
            "workflow result is missing its value",
        ),
    ],
)
async def test_a_guest_that_breaks_the_protocol_fails_the_run(
    tmp_path: Path, body: str, error: str
) -> None:
    result = await run_fake_guest(tmp_path, body, max_pending_calls=2)
    assert result.stop_reason == "error"
    assert result.error is not None
    assert result.error.startswith(error), result.error


async def test_a_rejected_call_is_answered_with_its_message(tmp_path: Path) -> None:
    body = """
send(frame({'type': 'call', 'id': 5, 'fn': 'childResult', 'arg': {'callId': 'x'}}))
buffer = b''
while len(buffer) < 4 or len(buffer) < 4 + struct.unpack('>I', buffer[:4])[0]:
    buffer += os.read(fd, 65536)
reply = json.loads(buffer[4:])
send(frame({'type': 'done', 'result': {'value': reply, 'stopReason': 'completed',
                                       'agentsStarted': 0}}))
"""
    result = await run_fake_guest(tmp_path, body)
    assert result.value == {
        "type": "reply",
        "id": 5,
        "error": {"message": "workflow child call id must be an integer"},
    }


def test_reply_frames_are_json() -> None:
    from subagents.workflows._protocol import reply_frame

    assert json.loads(reply_frame(3, value=[1])[4:]) == {"type": "reply", "id": 3, "value": [1]}
