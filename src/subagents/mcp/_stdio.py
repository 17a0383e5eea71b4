"""The stdio transport over a confined process: JSON-RPC lines on its stdin and stdout.

The SDK's own `stdio_client` starts the server itself, unconfined and without a parent-death
signal; here the process comes from `policy.spawn` (its own session, PR_SET_PDEATHSIG, the
sandbox of its mode, every process killed by `kill()`), and this bridge only moves messages,
as the SDK's client does: one JSON-RPC message per line each way.

A server must write nothing but MCP messages on stdout. Before the handshake completes, a line
that is not JSON-RPC ends the connection at once with a protocol error (a server that prints a
banner or is not an MCP server at all fails fast, not at the connect timeout); after it, such a
line is dropped and logged, so one stray print does not kill a working server. The last lines
of stderr are kept for the error that reports a dead server.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, suppress

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from ..policy import ConfinedProcess

__all__ = ["STDERR_TAIL_LINES", "StdioBridge"]

log = logging.getLogger("subagents.mcp")

STDERR_TAIL_LINES = 20
"""How many of a server's last stderr lines an error about its death quotes."""
_MAX_LINE = 16 << 20  # one message larger than 16 MiB is a protocol error, not a buffer
_MAX_STDERR_LINE = 500
_CHUNK = 65536


class StdioBridge:
    """Moves SessionMessages between the SDK's streams and a confined server's pipes."""

    def __init__(
        self, process: ConfinedProcess, *, name: str, ended: asyncio.Event | None = None
    ) -> None:
        self.process = process
        self.name = name
        self.handshake_done = False
        self.protocol_error: str | None = None
        self.closed = asyncio.Event()
        """Set when stdout ended (the server exited or closed it) or spoke garbage."""
        self.stderr_done = asyncio.Event()
        self._ended = ended  # the session owner's event: it lets the session go on EOF
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)

    def stderr_tail(self) -> str:
        """The server's last stderr lines, joined by ` | ` (one line for an error message)."""
        return " | ".join(self._stderr)

    @asynccontextmanager
    async def streams(self) -> AsyncGenerator[TransportStreams]:
        """The (read, write) stream pair the SDK's session runs on, for as long as it is open."""
        incoming, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as group:
            group.start_soon(self._read_stdout, incoming)
            group.start_soon(self._write_stdin, outgoing)
            group.start_soon(self._drain_stderr)
            try:
                yield read, write
            finally:
                group.cancel_scope.cancel()
                for stream in (incoming, read, write, outgoing):
                    stream.close()

    def _bad_line(self, line: bytes, why: str) -> bool:
        """Record a line that is not a message; True when it ends the connection."""
        shown = line[:200].decode("utf-8", "replace")
        if self.handshake_done:
            log.warning("MCP server %r wrote a non-message line on stdout: %r", self.name, shown)
            return False
        self.protocol_error = (
            f"wrote {why} on stdout: {shown!r} (an MCP server may write only JSON-RPC there)"
        )
        return True

    async def _read_stdout(
        self, incoming: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        stdout = self.process.process.stdout
        assert stdout is not None
        buffer = b""
        try:
            async with incoming:
                while chunk := await stdout.read(_CHUNK):
                    *lines, buffer = (buffer + chunk).split(b"\n")
                    if len(buffer) > _MAX_LINE:
                        self.protocol_error = f"wrote a line longer than {_MAX_LINE} bytes"
                        # Say the connection ended, then read the pipe to its end: the server
                        # is killed for it, and a pipe left full would hold up its exit.
                        self.closed.set()
                        if self._ended is not None:
                            self._ended.set()
                        while await stdout.read(_CHUNK):
                            pass
                        return
                    for line in lines:
                        if await self._deliver(line.strip(), incoming):
                            return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # our own shutdown closed the session's end
        finally:
            self.closed.set()
            if self._ended is not None:
                self._ended.set()

    async def _deliver(
        self, line: bytes, incoming: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> bool:
        """Parse one line and hand it to the session; True when the connection must end."""
        if not line:
            return False
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            return self._bad_line(line, "a line that is not JSON-RPC")
        await incoming.send(SessionMessage(message))
        return False

    async def _write_stdin(self, outgoing: MemoryObjectReceiveStream[SessionMessage]) -> None:
        stdin = self.process.process.stdin
        assert stdin is not None
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            async with outgoing:
                async for item in outgoing:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    stdin.write(data.encode("utf-8") + b"\n")
                    await stdin.drain()

    async def _drain_stderr(self) -> None:
        stderr = self.process.process.stderr
        try:
            if stderr is None:
                return
            buffer = b""
            while chunk := await stderr.read(_CHUNK):
                *lines, buffer = (buffer + chunk).split(b"\n")
                buffer = buffer[-_MAX_LINE:]
                for line in lines:
                    self._keep(line)
            self._keep(buffer)
        finally:
            self.stderr_done.set()

    def _keep(self, line: bytes) -> None:
        text = line.decode("utf-8", "replace").strip()
        if text:
            self._stderr.append(text[:_MAX_STDERR_LINE])
