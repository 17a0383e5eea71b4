"""What an agent is offered of its MCP servers, with a search tool for the big ones.

Listing every tool of a server with dozens of them costs the model context on every turn, so
the tools of a server with more than `DEFERRED_TOOL_THRESHOLD` tools are deferred: not listed,
still callable by their full name, and found through one `mcp_search` tool that scores the
deferred tools' names and descriptions against keywords (deterministic, no embeddings) and
returns each hit's name, description and input schema. A server that fails to start is not an
error for the agent: its one-line problem is reported, so the caller can tell the agent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import ErrorCode, SubagentsError, ToolError
from ..messages import JsonObject, JsonValue
from ..tools import ToolContext, ToolResult, ToolSpec
from ._hub import McpHub, McpProblem

__all__ = [
    "DEFERRED_TOOL_THRESHOLD",
    "MCP_SEARCH_TOOL",
    "McpOffer",
    "offer_tools",
    "search_tools",
]

DEFERRED_TOOL_THRESHOLD = 20
"""A server with more tools than this has them deferred behind `mcp_search`."""
MCP_SEARCH_TOOL = "mcp_search"
_DEFAULT_LIMIT = 5
_MAX_LIMIT = 20
_WORD = re.compile(r"[A-Za-z][a-z]*|[A-Z]+(?![a-z])|\d+")


@dataclass(frozen=True, slots=True)
class McpOffer:
    """The MCP tools of one agent: listed, deferred behind `search`, and what failed."""

    listed: tuple[ToolSpec, ...]
    """Tools to list to the model as usual."""
    deferred: tuple[ToolSpec, ...]
    """Tools of big servers: callable by name, not listed; `search` finds them."""
    search: ToolSpec | None
    """The `mcp_search` tool (None when nothing is deferred)."""
    problems: tuple[McpProblem, ...]
    """Servers that failed to start and tools that were skipped, one line each."""

    @property
    def callable(self) -> tuple[ToolSpec, ...]:
        """Every tool the agent may call: listed, deferred and the search tool."""
        extra = () if self.search is None else (self.search,)
        return (*self.listed, *self.deferred, *extra)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _score(query: list[str], spec: ToolSpec) -> int:
    """Keyword score: a whole word of the name 3, part of the name 2, a description word 1."""
    name_words = set(_words(spec.name.split("__", 2)[-1]))
    name = spec.name.lower()
    described = set(_words(spec.description))
    score = 0
    for word in query:
        if word in name_words:
            score += 3
        elif word in name:
            score += 2
        if word in described:
            score += 1
    return score


def search_tools(
    specs: Sequence[ToolSpec], query: str, *, server: str | None = None, limit: int = 5
) -> list[ToolSpec]:
    """The best `limit` matches of `query` among `specs`, best first (ties by name)."""
    words = _words(query)
    prefix = None if server is None else f"mcp__{server}__"
    scored = [
        (score, spec.name, spec)
        for spec in specs
        if prefix is None or spec.name.startswith(prefix)
        if (score := _score(words, spec)) > 0
    ]
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [spec for _, _, spec in scored[:limit]]


_SEARCH_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "description": "Keywords naming what the tool should do (e.g. 'create issue').",
        },
        "server": {"type": "string", "description": "Search only this MCP server's tools."},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": _MAX_LIMIT,
            "default": _DEFAULT_LIMIT,
            "description": "How many tools to return at most.",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


def _search_spec(deferred: tuple[ToolSpec, ...], servers: Sequence[str]) -> ToolSpec:
    names = ", ".join(servers)

    async def handler(args: JsonObject, ctx: ToolContext) -> JsonValue | ToolResult:
        query, server = args.get("query"), args.get("server")
        limit = args.get("limit", _DEFAULT_LIMIT)
        assert isinstance(query, str)
        assert isinstance(limit, int)
        if server is not None and server not in servers:
            raise ToolError(
                f"no deferred MCP server {server!r}; search one of: {names}",
                code=ErrorCode.MCP_SERVER_UNKNOWN,
            )
        only = server if isinstance(server, str) else None
        hits = search_tools(deferred, query, server=only, limit=limit)
        if not hits:
            return f"No MCP tool matches {query!r}; try other keywords (servers: {names})."
        found = [
            {"name": s.name, "description": s.description, "input_schema": s.parameters}
            for s in hits
        ]
        return json.dumps(found, separators=(",", ":"), ensure_ascii=False)

    return ToolSpec(
        name=MCP_SEARCH_TOOL,
        description=(
            f"Find tools of the MCP servers {names}, which are not listed. Returns each "
            "match's full name, description and input schema as JSON; then call the tool by "
            "that name."
        ),
        parameters=_SEARCH_PARAMETERS,
        handler=handler,
        parallel_safe=True,
    )


async def offer_tools(
    hub: McpHub,
    servers: Sequence[str],
    *,
    threshold: int = DEFERRED_TOOL_THRESHOLD,
    allows: Callable[[str], bool] | None = None,
) -> McpOffer:
    """Start `servers` (in order) and split their tools into listed and deferred.

    Only tools whose full name `allows` accepts are offered (None: all). A server with more
    than `threshold` of them is deferred. A server that cannot start becomes a problem (its
    tools are missing) rather than an error. An unknown server name is the caller's
    configuration mistake and raises `ConfigError` (`MCP_SERVER_UNKNOWN`).
    """
    for name in servers:
        hub.config(name)  # unknown names fail before anything starts
    listed: list[ToolSpec] = []
    deferred: list[ToolSpec] = []
    big: list[str] = []
    problems: list[McpProblem] = []
    for name in servers:
        try:
            specs = await hub.tools(name)
        except SubagentsError as exc:
            problems.append(McpProblem(name, exc.code, exc.message))
            continue
        problems.extend(hub.problems(name))
        if allows is not None:
            specs = tuple(spec for spec in specs if allows(spec.name))
        if len(specs) > threshold:
            deferred.extend(specs)
            big.append(name)
        else:
            listed.extend(specs)
    frozen = tuple(deferred)
    search = _search_spec(frozen, big) if frozen else None
    return McpOffer(tuple(listed), frozen, search, tuple(problems))
