"""The store's end of the socket to its writer process (`_Channel`), on a real socket pair.

What it must do that an asyncio transport does not: offer its backlog to the kernel again
with every write, so that a loop busy for a long stretch (which polls only at its end) still
hands the writer process its batches. Nothing here yields to the loop where that matters, and
nothing sleeps: the far end reads what the kernel holds, without blocking.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Generator

import pytest

from subagents.sessions._sqlite_link import _Channel
from subagents.sessions._sqlite_wire import Ready, encode_frame

_TOTAL = 4 << 20
"""More than a socket pair's kernel buffers hold by default (some 200 KiB each way)."""


class Far:
    """The writer's end: what the channel told us (replies, losses) and the raw socket."""

    def __init__(self, sock: socket.socket, replies_wanted: int = 0) -> None:
        self.sock = sock
        self.replies: list[object] = []
        self.lost: list[str] = []
        self.replies_in = asyncio.Event()
        self.lost_told = asyncio.Event()
        self._wanted = replies_wanted

    def reply(self, reply: object) -> None:
        self.replies.append(reply)
        if len(self.replies) >= self._wanted:
            self.replies_in.set()

    def lose(self) -> None:
        self.lost.append("lost")
        self.lost_told.set()


@contextlib.contextmanager
def channel_pair(replies_wanted: int = 0) -> Generator[tuple[_Channel, Far]]:
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    far = Far(theirs, replies_wanted)
    channel = _Channel(ours, asyncio.get_running_loop(), on_reply=far.reply, on_lost=far.lose)
    try:
        yield channel, far
    finally:
        channel.close()
        theirs.close()


def drain(sock: socket.socket) -> bytes:
    """Everything the kernel holds for `sock` now, without waiting for more."""
    parts: list[bytes] = []
    while True:
        try:
            data = sock.recv(1 << 20)
        except BlockingIOError:
            return b"".join(parts)
        if not data:
            return b"".join(parts)
        parts.append(data)


async def test_every_write_offers_the_backlog_again_without_the_loop_polling() -> None:
    payload = bytes(range(256)) * (_TOTAL // 256)
    with channel_pair() as (channel, far):
        channel.write(payload)  # far more than the kernel takes at once
        received = drain(far.sock)
        assert 0 < len(received) < len(payload)
        writes = 1
        # A busy loop's later writes, with no poll between them: each one sends on.
        while len(received) < len(payload) + writes - 1:
            before = len(received)
            channel.write(b"x")
            writes += 1
            received += drain(far.sock)
            assert len(received) > before, "a write left the backlog where it was"
        assert received == payload + b"x" * (writes - 1)


async def test_a_backlog_left_when_the_loop_idles_goes_out_as_the_socket_drains() -> None:
    loop = asyncio.get_running_loop()
    payload = b"y" * _TOTAL
    with channel_pair() as (channel, far):
        theirs = far.sock
        channel.write(payload)
        received = bytearray()
        while len(received) < len(payload):
            readable = loop.create_future()
            loop.add_reader(theirs.fileno(), readable.set_result, None)
            try:
                async with asyncio.timeout(30):
                    await readable
            finally:
                loop.remove_reader(theirs.fileno())
            received += drain(theirs)
        assert bytes(received) == payload


async def test_replies_arrive_whole_however_the_bytes_are_split() -> None:
    frames = b"".join(encode_frame(Ready(pid)) for pid in range(50))
    with channel_pair(replies_wanted=50) as (_, far):
        for start in range(0, len(frames), 7):
            far.sock.send(frames[start : start + 7])
        async with asyncio.timeout(30):
            await far.replies_in.wait()
        assert far.replies == [Ready(pid) for pid in range(50)]


@pytest.mark.parametrize("who", ["writer", "store"])
async def test_a_closed_socket_is_told_once_and_later_writes_go_nowhere(who: str) -> None:
    with channel_pair() as (channel, far):
        if who == "writer":
            far.sock.close()  # the writer process died
        else:
            channel.close()
        async with asyncio.timeout(30):
            await far.lost_told.wait()
        channel.write(b"after")  # neither raises nor reopens anything
        channel.close()
        assert far.lost == ["lost"]
