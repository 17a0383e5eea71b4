"""Which agent gets which MCP server's tools, and the shared servers behind them.

An agent's MCP scope is the servers it may use and which of their tools (`McpScope`). A new
root gets every server the runtime is configured with (or its definition's `mcp_servers`); a
child gets what its definition names, narrowed to its parent's scope, plus servers its
definition configures inline, else its parent's scope: never a configured server its parent
could not use. A definition's `tools` list narrows further: with one, only the MCP tools it
names (`mcp__github__get_issue`, or a whole server as `mcp__github`) are offered. The scope
is recorded in the agent's own log (`mcp/scope`), so a resume offers exactly the same.

Servers start on an agent's first model call that needs them (`offer`), once per runtime
and file policy: agents whose tools run under the same mode and workspace share one process
per server, and an agent under a narrower policy never reaches a server confined more widely
than itself. Every server is closed with the runtime.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Set as AbstractSet
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, cast

from ..core import Agent
from ..definitions import AgentDefinition
from ..errors import ConfigError, SubagentsError
from ..ids import SessionId
from ..mcp import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFERRED_TOOL_THRESHOLD,
    MCP_SEARCH_TOOL,
    McpHub,
    McpServerConfig,
    check_executable,
    offer_tools,
    parse_servers,
)
from ..policy import SandboxMode, SandboxPolicy
from ..sessions import McpScopeSet
from ._wording import told

__all__ = ["MCP", "McpOptions", "McpScope", "McpTools"]

MCP = "mcp"
"""The topic of what an agent is told about MCP servers it cannot use now."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpOptions:
    """The MCP servers of a runtime and how their tools are offered (docs/mcp.md)."""

    servers: Mapping[str, McpServerConfig] = field(default_factory=dict[str, McpServerConfig])
    """The configured servers by name (`subagents.mcp.parse_mcp_json`, `read_mcp_json`)."""
    search_threshold: int = DEFERRED_TOOL_THRESHOLD
    """A server with more tools than this is offered through `mcp_search`."""
    tool_timeout: float = DEFAULT_CALL_TIMEOUT
    """Seconds one MCP tool call may take before it is an `MCP_TIMEOUT` result."""
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    """Seconds a server may take to start and answer its handshake."""
    environ: Mapping[str, str] | None = None
    """Where servers' commands are looked up (`PATH`) and a definition's inline servers
    expand `${VAR}` (default: the process environment)."""

    def __post_init__(self) -> None:
        given = cast("object", self.servers)
        if not isinstance(given, Mapping) or not all(
            isinstance(c, McpServerConfig) for c in cast("Mapping[object, object]", given).values()
        ):
            raise ConfigError("McpOptions.servers must map names to McpServerConfig")
        threshold = cast("object", self.search_threshold)
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise ConfigError(f"search_threshold must be a whole number >= 0, not {threshold!r}")
        for name in ("tool_timeout", "connect_timeout"):
            value = cast("object", getattr(self, name))
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ConfigError(f"{name} must be a number of seconds > 0, not {value!r}")


def _server_of(tool: str) -> str:
    """`mcp__github__get_issue` -> `github` (and `mcp__github` -> `github`)."""
    return tool.removeprefix("mcp__").split("__", 1)[0]


@dataclass(frozen=True, slots=True)
class McpScope:
    """The MCP servers an agent may use, and which of their tools."""

    servers: tuple[str, ...] = ()
    allow: frozenset[str] | None = None
    """Tool names and whole servers (`mcp__github`) it may use; None: every tool."""
    deny: frozenset[str] = frozenset()
    inline: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """Servers a definition configured itself, as written."""

    def allows(self, tool: str) -> bool:
        whole = f"mcp__{_server_of(tool)}"
        if tool in self.deny or whole in self.deny:
            return False
        return self.allow is None or tool in self.allow or whole in self.allow

    def narrowed(self, definition: AgentDefinition | None, *, root: bool = False) -> McpScope:
        """The scope of an agent started from `definition` by an agent with this scope.

        For a root (`root`), this scope is the runtime's and the definition's names choose
        among its servers the same way.
        """
        if definition is None:
            return self
        names = self.servers if definition.mcp_servers is None else definition.mcp_servers
        inline = {**self.inline, **definition.mcp_inline}
        servers = tuple(n for n in names if n in self.servers or n in definition.mcp_inline)
        del root  # a root narrows the runtime's servers exactly as a child does its parent's
        deny = self.deny | {t for t in definition.disallowed_tools if t.startswith("mcp__")}
        allow = self.allow
        if definition.tools is not None:
            named = {t for t in definition.tools if t.startswith("mcp__")}
            allow = frozenset(t for t in named if self._within(t))
            servers = tuple(s for s in servers if any(_server_of(t) == s for t in allow))
        return McpScope(
            servers=servers,
            allow=allow,
            deny=frozenset(deny),
            inline={n: inline[n] for n in servers if n in inline},
        )

    def _within(self, entry: str) -> bool:
        """Whether `entry` (a tool or a whole server) names nothing this scope does not allow."""
        whole = f"mcp__{_server_of(entry)}"
        if self.allow is None or whole in self.allow:
            return True
        return entry != whole and entry in self.allow

    def record(self, *, source: str) -> McpScopeSet:
        return McpScopeSet(
            servers=self.servers,
            allow=None if self.allow is None else tuple(sorted(self.allow)),
            deny=tuple(sorted(self.deny)),
            inline=dict(self.inline),
            source="delegation" if source == "delegation" else "runtime",
        )

    @staticmethod
    def recorded(event: McpScopeSet) -> McpScope:
        return McpScope(
            servers=event.servers,
            allow=None if event.allow is None else frozenset(event.allow),
            deny=frozenset(event.deny),
            inline=dict(event.inline),
        )


@dataclass(slots=True)
class _Offered:
    """What one agent has been offered so far."""

    scope: McpScope
    done: frozenset[str] = frozenset()
    """Servers whose tools it has (the others failed to start, or were not tried yet)."""
    tools: AbstractSet[str] = frozenset()
    """The names registered for it. Both are replaced, never changed in place: most agents
    are offered nothing, and an empty set each was two objects for the collector to walk."""


_NO_SCOPE = McpScope()
_NOTHING_OFFERED = _Offered(_NO_SCOPE)


class McpTools:
    """The MCP side of one runtime: agents' scopes, the shared hubs, the offers."""

    def __init__(
        self, options: McpOptions | None, *, policy_of: Callable[[Agent], SandboxPolicy]
    ) -> None:
        self.options = options or McpOptions()
        self._policy_of = policy_of
        self._agents: dict[SessionId, _Offered] = {}
        self._hubs: dict[tuple[SandboxMode, str], McpHub] = {}
        self._hub_lock = asyncio.Lock()
        self._stack = AsyncExitStack()

    @property
    def configured(self) -> bool:
        return bool(self.options.servers)

    async def check(self, cwd: str | None) -> None:
        """Refuse a stdio server that cannot run before anything starts (off the loop).

        `cwd` is where relative commands are found (None: the process's directory).
        """
        if self.options.servers:
            await asyncio.to_thread(self._check_all, cwd)

    def _check_all(self, cwd: str | None) -> None:
        root = cwd if cwd is not None else os.getcwd()
        for config in self.options.servers.values():
            check_executable(config, self.options.environ, cwd=root)

    def scope_of(self, agent_id: SessionId) -> McpScope:
        found = self._agents.get(agent_id)
        return found.scope if found is not None else McpScope()

    def settle(self, agent: Agent, definition: AgentDefinition | None) -> None:
        """Fix an agent's scope: the last `mcp/scope` of its own log, else a new one.

        A new root narrows the runtime's servers by its definition; a new child its parent's
        scope (a child whose parent is not loaded here, or that has no record, gets none).
        """
        header = agent.session.header
        recorded = [
            r.event
            for r in agent.session.records[header.seed_length :]
            if isinstance(r.event, McpScopeSet)
        ]
        if recorded:
            scope = McpScope.recorded(recorded[-1])
        elif header.parent is None:
            everything = McpScope(servers=tuple(self.options.servers))
            scope = everything.narrowed(definition, root=True)
            if self.configured:  # an empty scope too: a resume must not widen it
                agent.record(scope.record(source="runtime"))
        else:
            parent = self._agents.get(header.parent)
            scope = McpScope() if parent is None else parent.scope.narrowed(definition)
            if self.configured or scope.servers:
                agent.record(scope.record(source="delegation"))
        # Most agents may use no server: they share one entry, which `offer` never changes
        # (it returns at once for a scope without servers).
        self._agents[agent.id] = _NOTHING_OFFERED if scope == _NO_SCOPE else _Offered(scope)
        if scope.servers:
            agent.before_call = self.offer

    def forget(self, agent_id: SessionId) -> None:
        self._agents.pop(agent_id, None)

    async def offer(self, agent: Agent) -> None:
        """Before a model call: start the agent's servers not yet offered and add their tools.

        A server that cannot start is tried again before the agent's next step, and the agent
        is told why its tools are missing; its tools come once it starts. The hub keeps each
        server's tools, so offering again lists nothing twice.
        """
        offered = self._agents.get(agent.id)
        if offered is None or offered.done.issuperset(offered.scope.servers):
            return
        try:
            hub = await self._hub_for(agent)
        except SubagentsError as exc:
            pending = [s for s in offered.scope.servers if s not in offered.done]
            _tell(agent, _unavailable(pending, exc.message))
            return
        refused = self._add_inline(hub, offered.scope)
        known = set(hub.names)
        for name in offered.scope.servers:
            if name not in known and name not in refused:
                refused[name] = "it is not configured in this runtime any more"
        offer = await offer_tools(
            hub,
            [s for s in offered.scope.servers if s not in refused],
            threshold=self.options.search_threshold,
            allows=offered.scope.allows,
        )
        deferred = {spec.name for spec in offer.deferred}
        offered.tools = tools = set(offered.tools)
        for spec in (*offer.listed, *offer.deferred):
            if spec.name not in tools:
                agent.tools.register(spec, listed=spec.name not in deferred)
                tools.add(spec.name)
        if offer.search is not None:  # one search over every deferred tool so far
            if MCP_SEARCH_TOOL in tools:
                agent.tools.unregister(MCP_SEARCH_TOOL)
            agent.tools.register(offer.search)
            tools.add(MCP_SEARCH_TOOL)
        failed = [p for p in offer.problems if p.tool is None]
        offered.done = frozenset(offered.scope.servers) - {p.server for p in failed} - set(refused)
        lines = [f"{name}: {why}" for name, why in refused.items()]
        lines += [f"{p.server}: {p.message}" for p in failed]
        _tell(agent, _unavailable_lines(lines) if lines else None)

    async def _hub_for(self, agent: Agent) -> McpHub:
        """The hub of the agent's file policy (one per mode and workspace, opened once)."""
        # Shared by every agent of the same mode and workspace: no session, no one-call grant.
        runtime_policy = dataclasses.replace(self._policy_of(agent), session_id=None, granted=())
        key = (runtime_policy.mode, runtime_policy.workspace_root)
        async with self._hub_lock:
            hub = self._hubs.get(key)
            if hub is None:
                hub = McpHub(
                    self.options.servers,
                    policy=runtime_policy,
                    environ=self.options.environ,
                    connect_timeout=self.options.connect_timeout,
                    call_timeout=self.options.tool_timeout,
                )
                await self._stack.enter_async_context(hub)
                self._hubs[key] = hub
        return hub

    def _add_inline(self, hub: McpHub, scope: McpScope) -> dict[str, str]:
        """Add the scope's inline servers to `hub`, one by one; the refused ones, and why."""
        refused: dict[str, str] = {}
        for name, raw in scope.inline.items():
            try:
                (config,) = parse_servers(
                    {name: raw}, source="an agent definition", environ=self.options.environ
                ).values()
                hub.add(config)
            except SubagentsError as exc:
                refused[name] = exc.message
        return refused

    def hubs(self) -> list[McpHub]:
        """The hubs started so far (one per file policy in use)."""
        return list(self._hubs.values())

    async def aclose(self) -> None:
        """Close every hub: every server process is killed."""
        await self._stack.aclose()
        self._hubs.clear()


def _tell(agent: Agent, text: str | None) -> None:
    """Tell the agent which servers are missing, or stop saying it (None) once none is."""
    config = agent.config
    if text is not None:
        agent.config = told(config, MCP, text)
    elif any(topic == MCP for topic, _ in config.context):
        agent.config = dataclasses.replace(
            config, context=tuple((t, x) for t, x in config.context if t != MCP)
        )


def _unavailable(servers: list[str], reason: str) -> str:
    return _unavailable_lines([f"{s}: {reason}" for s in servers])


def _unavailable_lines(lines: list[str]) -> str:
    return (
        "These MCP servers could not start, so their tools are missing for now (they are "
        "tried again before your next step):\n" + "\n".join(f"- {line}" for line in lines)
    )
