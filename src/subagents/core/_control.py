"""The wake-up line into a process that holds trees: a local socket whose path is in the lease.

The store is the truth: a command is a row another process wrote there (see
`sessions/_commands.py`). The socket only says "look now", so an idle holder costs nothing
(no poll) and a command is taken at once. The protocol is one line each way: the asking
process writes a command id, the holder serves every pending command of its trees and
answers with the same id. Anyone who can reach the socket (its directory is private to this
user) can only make the holder read its store once more; what it executes comes from the
store, checked there. There is no timer: a command whose sender died before waking anyone
runs at the next wake-up, or when the next process takes the tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from typing import Final

__all__ = ["ControlServer", "wake_holder"]

log = logging.getLogger("subagents.control")

_MAX_LINE: Final = 24
"""Longer than any command id: a longer line is not ours, and is refused unread."""
_MAX_CONNECTIONS: Final = 32
"""More connections at once than any set of senders needs; the rest are closed at once."""


_READ_SECONDS: Final = 10.0
"""How long a connection may stay silent before the holder hangs up (a stopped sender)."""
_SHORT_BASE: Final = "/tmp"
"""Where the socket's directory goes when the temporary directory's path is too long for a
Unix socket address (about 107 bytes)."""
_MAX_ADDRESS: Final = 100


class ControlServer:
    """Listens on a private Unix socket and calls `serve` when woken (no task while idle)."""

    def __init__(self, serve: Callable[[], Awaitable[None]]) -> None:
        self._serve = serve
        self._lock = asyncio.Lock()
        self._starting = asyncio.Lock()
        """Two first `start`s at once make one socket, not one each (the other would leak)."""
        self._server: asyncio.Server | None = None
        self._directory: str | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._closed = False
        self.address: str | None = None

    async def start(self) -> str | None:
        """Listen (once); returns the socket's path, or None when no socket can be made here.

        Without one, this process still holds its trees; other processes' commands to them
        are then refused with `LEASE_HELD`, as a holder's that takes none.
        """
        async with self._starting:
            if self.address is not None or self._closed:
                return self.address
            try:
                directory = await asyncio.to_thread(_private_directory)
                path = os.path.join(directory, "control")
                self._server = await asyncio.start_unix_server(
                    self._connected, path=path, limit=_MAX_LINE
                )
            except OSError as exc:
                log.warning(
                    "no control socket (%s); commands from other processes are refused", exc
                )
                return None
            self._directory, self.address = directory, path
            return path

    async def serve_now(self, serve: Callable[[], Awaitable[None]] | None = None) -> None:
        """Serve pending commands now (or run `serve`, a narrower pass).

        One pass at a time, so a command is executed once; none once closing.
        """
        async with self._lock:
            if not self._closed:
                await (serve or self._serve)()

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._writers) >= _MAX_CONNECTIONS or self._closed:
            writer.close()
            return
        self._writers.add(writer)
        try:
            while True:
                async with asyncio.timeout(_READ_SECONDS):
                    line = await reader.readline()
                if not line:
                    return
                asked = line.strip()
                if not asked.isdigit() or len(asked) > _MAX_LINE - 2:
                    writer.write(b"?\n")  # not a command id: say so and hang up
                    return
                await self.serve_now()
                writer.write(asked + b"\n")
                await writer.drain()
        except (
            TimeoutError,
            ValueError,
            ConnectionError,
            asyncio.LimitOverrunError,
            asyncio.IncompleteReadError,
        ):
            return  # silent too long, a line longer than the limit, or the peer went away
        except Exception:
            log.exception("serving control commands failed")
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def aclose(self) -> None:
        """Stop listening, wait for a pass in progress, hang up on everyone, remove the socket.

        A sender that comes later finds no one and waits for the lease to go.
        """
        self._closed = True
        if self._server is not None:
            self._server.close()
        async with self._lock:  # a pass in progress finishes (its command is marked done)
            pass
        for writer in list(self._writers):
            with contextlib.suppress(Exception):
                writer.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        if self._directory is not None:
            await asyncio.to_thread(shutil.rmtree, self._directory, True)
            self._directory = self.address = None


def _private_directory() -> str:
    """A new directory only this user may enter (mode 0700), short enough for a socket."""
    base = tempfile.gettempdir()
    if len(os.path.join(base, "subagents-xxxxxxxx", "control")) > _MAX_ADDRESS:
        base = _SHORT_BASE
    return tempfile.mkdtemp(prefix="subagents-", dir=base)


async def wake_holder(address: str, command_id: int, *, within: float) -> bool:
    """Wake the holder at `address` for `command_id`; True once it says it served it.

    False when it cannot be reached or does not answer within `within` seconds: the command
    stays in the store, and the caller decides (the holder may be gone).
    """
    try:
        async with asyncio.timeout(within):
            reader, writer = await asyncio.open_unix_connection(address, limit=_MAX_LINE)
            try:
                writer.write(b"%d\n" % command_id)
                await writer.drain()
                answer = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
    except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError):
        return False
    return answer.strip() == b"%d" % command_id
