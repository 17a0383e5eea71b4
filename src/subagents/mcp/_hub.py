"""`McpHub`: the configured MCP servers of one runtime and tenant, started lazily and shared.

A server starts on the first `tools(name)` or call of one of its tools, exactly once even when
several agents ask at the same moment (a lock per server), and every agent's calls then share
its one session. A server that died is started again by the next call. `aclose()` ends every
session and kills every server process with its descendants.

A stdio server is started through `policy.spawn`, so it is confined like `bash` under
`read-only` and `workspace-write`, runs in its own session with a parent-death signal in every
mode (nothing survives a SIGKILL of the process holding the hub), and gets a scrubbed
environment: only the variables its config names, plus PATH (the hub's environ's) and the
run's own private HOME and TMPDIR.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._resource import AsyncResource
from .._task_owner import TaskOwner
from ..errors import ConfigError, ErrorCode, SubagentsError, ToolError, UsageError
from ..messages import JsonObject, JsonValue
from ..policy import Limits, SandboxPolicy
from ..tools import ToolContext, ToolHandler, ToolResult, ToolSpec
from ._config import McpServerConfig, check_executable
from ._naming import model_tool_name

if TYPE_CHECKING:  # the SDK takes most of a second to import: only once a server starts
    import mcp_types

    from ._connection import Connection

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "MCP_SERVER_LIMITS",
    "McpHub",
    "McpProblem",
]

DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds for a server to start, complete the MCP handshake and list its tools."""
DEFAULT_CALL_TIMEOUT = 300.0
"""Seconds one tool call may take before it is cancelled with `MCP_TIMEOUT`."""
MCP_SERVER_LIMITS = Limits(
    wall_seconds=None,  # a server lives as long as the hub
    cpu_seconds=1 << 30,  # no CPU-time limit in practice: a long-lived server accumulates it
    address_space_mb=16384,  # runtimes such as node reserve far more than they use
    open_files=1024,
    file_size_mb=1024,
    processes=64,
)
"""The rlimits of a stdio server's processes."""
_DEFAULT_PATH = "/usr/bin:/bin"


@dataclass(frozen=True, slots=True)
class McpProblem:
    """Something about a server the agent or user should know: a skipped tool, a failed start."""

    server: str
    code: ErrorCode
    message: str
    """One line, naming the server (and the tool)."""
    tool: str | None = None


@dataclass(slots=True)
class _Server:
    config: McpServerConfig
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    connection: Connection | None = None
    specs: tuple[ToolSpec, ...] | None = None
    problems: tuple[McpProblem, ...] = ()
    starts: int = 0


def _import_sdk() -> None:
    from . import _connection, _results

    del _connection, _results


async def _load_sdk() -> None:
    """Import the modules that use the SDK, on first use and off the event loop.

    The SDK takes most of a second to import and reads files while it does; once it is
    loaded this is a no-op.
    """
    if f"{__name__.rpartition('.')[0]}._results" not in sys.modules:
        await asyncio.to_thread(_import_sdk)


def server_files(config: McpServerConfig) -> tuple[str, ...]:
    """The folders of a server's own files, readable to it under a confined mode.

    A confined server sees what `bash` sees; it must also read its own program: the folder of
    each argument that is an existing file (`python /opt/servers/files.py`). Anything else it
    needs outside the workspace (a package cache under $HOME) needs danger-full-access.
    """
    found: list[str] = []
    for argument in config.args:
        path = os.path.abspath(argument)
        if os.path.isfile(path) and os.path.dirname(path) not in found:
            found.append(os.path.dirname(path))
    return tuple(found)


class McpHub(AsyncResource):
    """The MCP servers one runtime and tenant may use (see the module docstring).

    `policy` confines stdio servers (spawn's rules: `SandboxUnavailable` when a confined mode
    cannot be enforced here), `cwd` is where they start (default: the workspace root),
    `environ` supplies PATH and the lookup of commands (default: the process environment),
    `readable` adds paths a confined server may read.
    """

    noun = "MCP hub"

    def __init__(
        self,
        servers: Mapping[str, McpServerConfig],
        *,
        policy: SandboxPolicy,
        cwd: str | None = None,
        environ: Mapping[str, str] | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        limits: Limits = MCP_SERVER_LIMITS,
        readable: Sequence[str] = (),
    ) -> None:
        for value, what in ((connect_timeout, "connect_timeout"), (call_timeout, "call_timeout")):
            if not value > 0:
                raise ConfigError(f"McpHub {what} must be above 0, got {value!r}")
        self._servers = {name: _Server(config) for name, config in servers.items()}
        self._policy = policy
        self._cwd = cwd or policy.workspace_root
        self._environ = dict(os.environ if environ is None else environ)
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._limits = limits
        self._readable = tuple(readable)
        self._owner = TaskOwner("mcp-hub")

    # -- what is configured and running ---------------------------------------------------

    @property
    def names(self) -> tuple[str, ...]:
        """The configured servers' names, in configuration order."""
        return tuple(self._servers)

    def config(self, name: str) -> McpServerConfig:
        """The configuration of server `name` (`MCP_SERVER_UNKNOWN` if there is none)."""
        return self._server(name).config

    def add(self, config: McpServerConfig) -> None:
        """Configure one more server (a definition's inline one), started on first use too.

        The same name again must be the same server (wherever it was written); another
        server under a configured name is `MCP_CONFIG_INVALID`.
        """
        self._check_open()
        known = self._servers.get(config.name)
        if known is None:
            self._servers[config.name] = _Server(config)
        elif dataclasses.replace(config, source=known.config.source) != known.config:
            raise ConfigError(
                f"MCP server {config.name!r} of {config.source} differs from the one of "
                f"{known.config.source}: give it another name",
                code=ErrorCode.MCP_CONFIG_INVALID,
                server=config.name,
            )

    def started(self, name: str) -> bool:
        """Whether server `name` has a live session now."""
        connection = self._server(name).connection
        return connection is not None and connection.alive

    def not_started(self) -> tuple[str, ...]:
        """The configured servers that have no live session (never started, or dead)."""
        return tuple(name for name in self._servers if not self.started(name))

    def starts(self, name: str) -> int:
        """How many times server `name` was started (restarts included)."""
        return self._server(name).starts

    def pid(self, name: str) -> int | None:
        """The pid of a live stdio server's main process; None when not running (or HTTP)."""
        connection = self._server(name).connection
        return connection.pid if connection is not None and connection.alive else None

    def problems(self, name: str) -> tuple[McpProblem, ...]:
        """What listing server `name`'s tools skipped (invalid schemas, clashing names)."""
        return self._server(name).problems

    def _server(self, name: str) -> _Server:
        server = self._servers.get(name)
        if server is None:
            known = ", ".join(self._servers) or "none"
            raise ConfigError(
                f"unknown MCP server {name!r} (configured: {known})",
                code=ErrorCode.MCP_SERVER_UNKNOWN,
                server=name,
            )
        return server

    # -- starting, listing, calling -------------------------------------------------------

    async def tools(self, name: str) -> tuple[ToolSpec, ...]:
        """Server `name`'s tools as `ToolSpec`s named `mcp__<server>__<tool>`.

        Starts the server on first use and lists its tools once; later calls return the same
        specs. Raises a one-line `SubagentsError` with an MCP code when the server cannot be
        started or listed (`ConfigError` for an unknown server or a command that is not
        executable, `SandboxUnavailable` for a policy that cannot be enforced).
        """
        server = self._server(name)
        self._check_open()
        if server.specs is not None:
            return server.specs
        async with server.lock:
            if server.specs is None:
                connection = await self._connect(server)
                listed = await connection.list_tools(self._connect_timeout)
                server.specs, server.problems = self._specs(server, listed)
            return server.specs

    async def check(self, name: str) -> tuple[ToolSpec, ...]:
        """Connect to server `name` and list its tools, raising its one-line error if it fails.

        For `subagents mcp check`: the same as `tools`, and the problems of the listing are in
        `problems(name)`.
        """
        return await self.tools(name)

    async def call(self, name: str, tool: str, arguments: JsonObject) -> str:
        """Call `tool` (the server's own name for it) of server `name` with `arguments`.

        Starts (or restarts) the server when it is not running. Every failure is a one-line
        `ToolError` (or `ConfigError`) with a stable code; the text of a result marked
        `isError` is a `ToolError` with `MCP_TOOL_ERROR`.
        """
        server = self._server(name)
        self._check_open()
        async with server.lock:
            connection = await self._connect(server)
        result = await connection.call(tool, arguments, self._call_timeout)
        await _load_sdk()
        from ._results import render_result

        return render_result(result, tool=tool)

    async def _connect(self, server: _Server) -> Connection:
        """The live connection of `server`, started (again) if needed; the caller holds its lock."""
        await _load_sdk()
        from ._connection import open_connection

        connection = server.connection
        if connection is not None and connection.alive:
            return connection
        if connection is not None:
            server.connection = None
            await connection.aclose()
        self._check_open()
        config = server.config
        executable = await asyncio.to_thread(check_executable, config, self._environ, cwd=self._cwd)
        env = {"PATH": self._environ.get("PATH") or _DEFAULT_PATH, **dict(config.env)}
        try:
            connection = await open_connection(
                config,
                owner=self._owner,
                policy=self._policy,
                cwd=self._cwd,
                executable=executable,
                env=env,
                limits=self._limits,
                readable=(*self._readable, *await asyncio.to_thread(server_files, config)),
                connect_timeout=self._connect_timeout,
            )
        except OSError as exc:
            raise ToolError(
                f"MCP server {config.name!r} could not be started: {exc.strerror or exc}",
                code=ErrorCode.MCP_SERVER_FAILED,
                server=config.name,
            ) from None
        server.starts += 1
        if self._state != "opened":  # closed while it started: aclose waits on this lock
            await connection.aclose()
            self._check_open()
        server.connection = connection
        return connection

    def _specs(
        self, server: _Server, listed: list[mcp_types.Tool]
    ) -> tuple[tuple[ToolSpec, ...], tuple[McpProblem, ...]]:
        name = server.config.name
        specs: dict[str, ToolSpec] = {}
        problems: list[McpProblem] = []
        for tool in listed:
            full = model_tool_name(name, tool.name)
            if full in specs:
                problems.append(
                    McpProblem(
                        name,
                        ErrorCode.MCP_SCHEMA_INVALID,
                        f"MCP server {name!r}: tool {tool.name!r} skipped: its name {full!r} "
                        "is already taken by another of its tools",
                        tool.name,
                    )
                )
                continue
            annotations = tool.annotations
            try:
                specs[full] = ToolSpec(
                    name=full,
                    description=tool.description or tool.title or f"{tool.name} ({name} MCP)",
                    parameters=dict(tool.input_schema),
                    handler=self._handler(name, tool.name),
                    # Calls of one response run at once only for tools that declare no effects.
                    parallel_safe=bool(annotations is not None and annotations.read_only_hint),
                )
            except UsageError as exc:
                detail = exc.message.split(": ", 1)[-1]
                problems.append(
                    McpProblem(
                        name,
                        ErrorCode.MCP_SCHEMA_INVALID,
                        f"MCP server {name!r}: tool {tool.name!r} skipped: {detail}",
                        tool.name,
                    )
                )
        return tuple(specs.values()), tuple(problems)

    def _handler(self, name: str, tool: str) -> ToolHandler:
        async def handler(args: JsonObject, ctx: ToolContext) -> JsonValue | ToolResult:
            try:
                return await self.call(name, tool, args)
            except SubagentsError:
                raise
            except Exception as exc:  # never an exception the agent loop has to survive
                raise ToolError(
                    f"MCP server {name!r}: the call of {tool!r} failed: {type(exc).__name__}: "
                    f"{' '.join(str(exc).split())[:300]}",
                    code=ErrorCode.MCP_SERVER_FAILED,
                    server=name,
                ) from exc

        return handler

    # -- lifecycle ------------------------------------------------------------------------

    async def _close(self) -> None:
        for server in self._servers.values():
            async with server.lock:  # a start in progress finishes, then is closed here
                connection, server.connection = server.connection, None
                if connection is not None:
                    await connection.aclose()
        await self._owner.aclose()
