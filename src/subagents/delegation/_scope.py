"""What an agent may do: its definition, tool scope and depth cap (spec 7.2, note N3).

A definition's tools resolve against the *host's* tools, the tools of the agent that starts
it, so a definition can narrow a scope but never widen it. A child started without a
definition keeps its parent's scope. The depth cap of a subtree only ever narrows too.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from ..core import Budget
from ..definitions import AgentDefinition
from ..errors import ConfigError, ErrorCode, SubagentError
from ._providers import ToolFilter

__all__ = [
    "AgentProfile",
    "DELEGATION_TAG",
    "check_definition_tools",
    "child_profile",
    "narrow",
    "pick_definition",
    "recorded_cap",
    "resolve_tools",
]


def resolve_tools(definition: AgentDefinition, host_tools: Set[str]) -> frozenset[str]:
    """The tools a definition gets: its allow list (None: every host tool) minus its deny list.

    An empty allow list (`tools: []`) gives no tools.

    Intersected with `host_tools`: a name the host does not expose is dropped, so the result
    is never wider than the host nor than the allow list.
    """
    allowed = frozenset(host_tools if definition.tools is None else definition.tools)
    return (allowed & frozenset(host_tools)) - frozenset(definition.disallowed_tools)


def narrow(first: ToolFilter | None, second: ToolFilter | None) -> ToolFilter | None:
    """Both filters at once: allow lists intersect, deny lists add up."""
    if first is None or second is None:
        return first or second
    if first.allow is None or second.allow is None:
        allow = first.allow if second.allow is None else second.allow
    else:
        allow = first.allow & second.allow
    return ToolFilter(allow=allow, deny=first.deny | second.deny)


DELEGATION_TAG = "delegation"
"""The tag of the tools that start or address children (`ToolSpec.tags`): an agent that may
not delegate any deeper is not offered them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentProfile:
    """What narrows one agent: the definition it runs, its tools and its subtree's depth cap."""

    definition: AgentDefinition | None = None
    tool_filter: ToolFilter | None = None
    depth_cap: int | None = None
    """The deepest any agent of its subtree may be (absolute; the root is depth 0)."""
    budget: Budget | None = None
    """Its own limits, already cut to what its parent had left when it started."""
    instructions: str | None = None
    """Instructions restored from the child's log (a resumed child whose definition is not
    loaded, or has changed since it started)."""
    max_tokens: int | None = None
    """A response cap restored from the child's log."""


def child_profile(
    parent: AgentProfile | None,
    definition: AgentDefinition | None,
    *,
    parent_tools: Set[str],
    depth: int,
) -> AgentProfile | None:
    """The profile of a child at `depth`; None when nothing narrows it."""
    inherited_cap = parent.depth_cap if parent is not None else None
    tool_filter = parent.tool_filter if parent is not None else None
    cap = inherited_cap
    if definition is not None:
        tool_filter = ToolFilter(allow=resolve_tools(definition, parent_tools))
        if definition.max_depth is not None:
            own = depth + definition.max_depth
            cap = own if cap is None else min(cap, own)
    if definition is None and tool_filter is None and cap is None:
        return None
    return AgentProfile(definition=definition, tool_filter=tool_filter, depth_cap=cap)


def check_definition_tools(definition: AgentDefinition, known: Set[str]) -> None:
    """Refuse a definition that names tools the runtime does not have at all (a typo).

    A tool the runtime has but the starting agent may not use is not an error: resolution
    drops it, which narrows the scope. MCP tools (`mcp__server__tool`) are not checked here:
    which exist is known only once their server runs.
    """
    named = (*(definition.tools or ()), *definition.disallowed_tools)
    unknown = [t for t in named if t not in known and not t.startswith("mcp__")]
    if unknown:
        raise ConfigError(
            f'agent definition "{definition.name}" ({definition.source}) names tools this '
            f"runtime does not have: {', '.join(unknown)}; the tools are: "
            f"{', '.join(sorted(known))}. Fix the definition's tools or disallowed_tools",
            code=ErrorCode.CONFIG,
            definition=definition.name,
            unknown=unknown,
        )


def pick_definition(
    definitions: Mapping[str, AgentDefinition],
    name: object,
    *,
    tool_name: str,
    inherits: bool,
    background: bool,
) -> AgentDefinition:
    """The definition a `subagent` call names, checked against the call; nothing starts here."""
    if not isinstance(name, str):
        raise SubagentError(
            f"invalid agent: expected a definition name, got {type(name).__name__}",
            code=ErrorCode.USAGE,
        )
    definition = definitions.get(name)
    if definition is None:
        available = ", ".join(definitions) if definitions else "none are loaded"
        raise SubagentError(
            f'unknown agent definition "{name}"; the definitions are: {available}',
            code=ErrorCode.UNKNOWN_DEFINITION,
            definition=name,
        )
    if inherits and definition.context == "spawn":
        raise SubagentError(
            f'agent definition "{name}" declares `context: spawn` (a fresh context), so '
            f"{tool_name} cannot start it; call subagent with a self-contained prompt",
            code=ErrorCode.USAGE,
            definition=name,
        )
    if background and not definition.background:
        raise SubagentError(
            f'agent definition "{name}" may not run in the background (`background: false`); '
            "call without run_in_background to wait for its answer",
            code=ErrorCode.BACKGROUND_DISABLED,
            definition=name,
        )
    return definition


def recorded_cap(profile: AgentProfile | None) -> int | None:
    """The response cap a profile carries: restored from a log, else its definition's."""
    if profile is None:
        return None
    if profile.max_tokens is not None:
        return profile.max_tokens
    return profile.definition.max_tokens if profile.definition is not None else None
