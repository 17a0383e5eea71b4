"""One live connection to an MCP server: its process (stdio) or HTTP client, and its session.

The SDK's session runs anyio task groups that must be entered and left by one task, so each
connection has an owner task (in the hub's `TaskOwner`) that opens the SDK `Client` (which
negotiates the protocol version: `server/discover` for current servers, the `initialize`
handshake for servers of an earlier revision), reports ready, and holds the session until the
connection is closed or the server's stdout ends. Calls run on that session from any task.

Every failure leaves as a one-line `ToolError` (or `ConfigError`) with a stable code: a dead
server names its exit status and the last lines of its stderr (`MCP_SERVER_FAILED`), garbage on
stdout or a URL that is not an MCP endpoint is `MCP_PROTOCOL`, a deadline is `MCP_TIMEOUT`.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from typing import Any, cast
from urllib.parse import urlsplit

import mcp_types
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from .._task_owner import TaskOwner
from ..errors import ErrorCode, SubagentsError, ToolError
from ..policy import ConfinedProcess, Limits, SandboxPolicy, spawn
from ._config import McpServerConfig
from ._stdio import StdioBridge

__all__ = ["Connection", "open_connection"]

log = logging.getLogger("subagents.mcp")

_CLIENT_INFO = mcp_types.Implementation(name="subagents", version="0.1.0")
_EXIT_GRACE = 5.0  # how long a failure report waits for a dead server's exit status
_CLOSE_GRACE = 5.0  # how long closing waits for the session to wind down before the kill
_MAX_PAGES = 1000  # a server whose tools/list never stops paginating is cut off here


def _one_line(exc: BaseException) -> str:
    """The first leaf of an exception (group), as one line."""
    exc = _leaf(exc)
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "…"


def _leaf(exc: BaseException) -> BaseException:
    """The first exception that is not a group (anyio wraps a task's failure in groups)."""
    while isinstance(exc, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", exc)
        exc = group.exceptions[0]
    return exc


def _status(code: int | None) -> str:
    if code is None:
        return "closed its stdout but did not exit"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _shown_url(url: str) -> str:
    """The URL without its query and credentials, which may carry a token."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


@asynccontextmanager
async def _http_streams(config: McpServerConfig) -> AsyncGenerator[TransportStreams]:
    assert config.url is not None
    # Building the client loads the CA certificates from disk: not on the event loop.
    http = await asyncio.to_thread(create_mcp_http_client, headers=dict(config.headers))
    async with http, streamable_http_client(config.url, http_client=http) as streams:
        yield streams


class Connection:
    """A connected MCP session with one server (see the module docstring)."""

    def __init__(self, config: McpServerConfig, *, process: ConfinedProcess | None = None) -> None:
        self.config = config
        self.name = config.name
        self.process = process
        self._end = asyncio.Event()  # the owner lets the session go: closed, or stdout ended
        self.bridge = (
            None if process is None else StdioBridge(process, name=self.name, ended=self._end)
        )
        self.client: Client | None = None
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None
        self._lost = False
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The pid of the server's main process (stdio only)."""
        return None if self.process is None else self.process.pid

    @property
    def alive(self) -> bool:
        """Whether calls can still go to this session."""
        ended = self.bridge is not None and self.bridge.closed.is_set()
        owner_gone = self._task is not None and self._task.done()
        return not (self._closed or self._lost or ended or owner_gone)

    def _transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        return _http_streams(self.config) if self.bridge is None else self.bridge.streams()

    async def _run(self) -> None:
        try:
            async with Client(
                self._transport(), mode="auto", cache=None, client_info=_CLIENT_INFO
            ) as client:
                self.client = client
                if self.bridge is not None:
                    self.bridge.handshake_done = True
                self._ready.set_result(None)
                await self._end.wait()
        except asyncio.CancelledError:
            if not self._ready.done():
                self._ready.cancel()
            raise
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            else:
                log.info("MCP session with %r ended: %s", self.name, _one_line(exc))

    def start(self, owner: TaskOwner) -> None:
        """Start the owner task (see `open_connection`)."""
        self._task = owner.spawn(self._run(), name=f"mcp-session:{self.name}")

    async def ready(self, timeout: float) -> None:  # noqa: ASYNC109 (the connect deadline)
        """Wait for the handshake; raises the one-line error of a failed connect."""
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._ready)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.name!r} did not complete the MCP handshake within "
                f"{timeout:g} s{self._stderr_note()}",
                code=ErrorCode.MCP_TIMEOUT,
                server=self.name,
            ) from None
        except Exception as exc:
            raise await self.connect_failure(exc) from None

    def _stderr_note(self) -> str:
        tail = "" if self.bridge is None else self.bridge.stderr_tail()
        return f"; stderr: {tail}" if tail else ""

    async def connect_failure(self, exc: BaseException) -> SubagentsError:
        """The error for a connect that raised `exc`."""
        leaf = _leaf(exc)
        if self.bridge is not None:
            return await self.failure()
        url = _shown_url(self.config.url or "")
        if isinstance(leaf, MCPError | ValueError):
            return ToolError(
                f"MCP server {self.name!r}: {url} is not an MCP endpoint: {_one_line(leaf)}",
                code=ErrorCode.MCP_PROTOCOL,
                server=self.name,
            )
        return ToolError(
            f"MCP server {self.name!r}: cannot connect to {url}: {_one_line(leaf)}",
            code=ErrorCode.MCP_SERVER_FAILED,
            server=self.name,
        )

    async def failure(self) -> ToolError:
        """The error for a session that ended: garbage on stdout, or the server's death."""
        bridge, process = self.bridge, self.process
        if bridge is None or process is None:
            self._lost = True
            return ToolError(
                f"MCP server {self.name!r}: the connection to {_shown_url(self.config.url or '')} "
                "was lost",
                code=ErrorCode.MCP_SERVER_FAILED,
                server=self.name,
            )
        if bridge.protocol_error is not None:
            return ToolError(
                f"MCP server {self.name!r} {bridge.protocol_error}",
                code=ErrorCode.MCP_PROTOCOL,
                server=self.name,
            )
        code: int | None = None
        with suppress(TimeoutError):
            async with asyncio.timeout(_EXIT_GRACE):
                code = await process.wait()
                await bridge.stderr_done.wait()
        return ToolError(
            f"MCP server {self.name!r} {_status(code)}{self._stderr_note()}",
            code=ErrorCode.MCP_SERVER_FAILED,
            server=self.name,
            exit_status=code,
        )

    def _session(self) -> Any:
        if self.client is None or not self.alive:
            raise ToolError(
                f"MCP server {self.name!r} is not connected", code=ErrorCode.MCP_SERVER_FAILED
            )
        return self.client.session

    async def _failed(self, exc: Exception, what: str) -> SubagentsError:
        if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED and self.alive:
            return ToolError(
                f"MCP server {self.name!r} refused {what}: {exc.message} (JSON-RPC error "
                f"{exc.code})",
                code=ErrorCode.MCP_TOOL_ERROR,
                server=self.name,
            )
        if isinstance(exc, MCPError) or not self.alive or self.bridge is None:
            return await self.failure()
        return ToolError(
            f"MCP server {self.name!r}: invalid answer to {what}: {_one_line(exc)}",
            code=ErrorCode.MCP_PROTOCOL,
            server=self.name,
        )

    async def list_tools(self, timeout: float) -> list[mcp_types.Tool]:  # noqa: ASYNC109
        """Every tool the server lists, following `nextCursor` across pages."""
        session = self._session()
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        try:
            async with asyncio.timeout(timeout):
                for _ in range(_MAX_PAGES):
                    params = (
                        None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
                    )
                    page: mcp_types.ListToolsResult = await session.list_tools(params=params)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None or cursor in seen:
                        break
                    seen.add(cursor)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.name!r} did not list its tools within {timeout:g} s",
                code=ErrorCode.MCP_TIMEOUT,
                server=self.name,
            ) from None
        except Exception as exc:
            raise await self._failed(exc, "tools/list") from None
        return tools

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float,  # noqa: ASYNC109
    ) -> mcp_types.CallToolResult:
        """Call `tool` on the shared session; every failure is a one-line `ToolError`."""
        session = self._session()
        try:
            async with asyncio.timeout(timeout):
                result: mcp_types.CallToolResult = await session.call_tool(tool, dict(arguments))
        except TimeoutError:
            raise ToolError(
                f"MCP tool {tool!r} of server {self.name!r} did not answer within {timeout:g} s; "
                "the call was cancelled",
                code=ErrorCode.MCP_TIMEOUT,
                server=self.name,
            ) from None
        except Exception as exc:
            raise await self._failed(exc, f"the call of {tool!r}") from None
        return result

    async def aclose(self) -> None:
        """End the session, then kill every process of the server; safe to repeat."""
        self._closed = True
        self._end.set()
        task = self._task
        if task is not None and not task.done():
            try:
                async with asyncio.timeout(_CLOSE_GRACE):
                    await asyncio.wait([task])
            except TimeoutError:
                task.cancel()
                await asyncio.wait([task])
        if self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # retrieved: a connect that failed after its deadline
        if self.process is not None:
            await self.process.kill()
            # Nobody reads the server's output any more: a pipe left holding what it wrote
            # last (a line too long to be a message) would keep the transport open.
            transport = getattr(self.process.process, "_transport", None)
            if isinstance(transport, asyncio.SubprocessTransport) and not transport.is_closing():
                transport.close()


async def open_connection(
    config: McpServerConfig,
    *,
    owner: TaskOwner,
    policy: SandboxPolicy,
    cwd: str,
    executable: str | None,
    env: Mapping[str, str],
    limits: Limits,
    readable: Sequence[str],
    connect_timeout: float,
) -> Connection:
    """Start the server (stdio: through `policy.spawn`) and complete the MCP handshake.

    Raises `SandboxUnavailable` when the policy cannot be enforced, and a one-line `ToolError`
    when the server does not come up; nothing of a failed start is left running.
    """
    process: ConfinedProcess | None = None
    if config.transport == "stdio":
        assert executable is not None
        process = await spawn(
            [executable, *config.args],
            policy=policy,
            cwd=cwd,
            limits=limits,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            readable=readable,
        )
    connection = Connection(config, process=process)
    try:
        connection.start(owner)
        await connection.ready(connect_timeout)
    except BaseException:
        if process is not None:  # first: a handshake that never ends cannot be waited out
            await process.kill()
        await connection.aclose()
        raise
    return connection
