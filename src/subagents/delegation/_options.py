"""How a runtime's agents may delegate (`DelegationOptions`), and the runtime's keywords."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Required, TypedDict, cast

from .._clock import Clock
from ..config import BUILTIN_ALIASES
from ..core import ApprovalPolicy, Budget, check_max_tokens
from ..definitions import AgentDefinition
from ..errors import ConfigError
from ..models import Model
from ..policy import SandboxMode
from ..sessions import EventStore
from ..tools import ToolSpec
from ._mcp import McpOptions

__all__ = ["DelegationOptions", "RuntimeOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationOptions:
    """How agents of a runtime may delegate."""

    max_depth: int | None = 3
    """The deepest a child may be (the root is depth 0); None leaves it to the provider."""
    background: bool = True
    """Whether `run_in_background` is offered."""
    task_capacity: int = 10
    """Background tasks one agent may have running at once."""
    max_consecutive_wakes: int = 3
    """Task notices that may wake an idle agent in a row before they wait for its next turn."""
    fork_tool: bool = True
    """Offer `subagent_fork` beside `subagent`."""
    background_mode: Literal["continuable", "one-shot"] = "continuable"
    """What `run_in_background: true` starts: a continuable child (the default) or a
    one-shot background task collected with `task_output`."""
    team_tools: bool = True
    """Offer the shared team task board."""
    definitions: Mapping[str, AgentDefinition] | str | os.PathLike[str] | None = None
    """The agent definitions `subagent(agent=...)` may start: a mapping by name, or a folder
    of definition files (`*.md`), read on entry (a folder that does not exist makes entering
    the runtime fail with a `ConfigError`, before the store is opened).

    None (the default) loads the tenant's files on entry: `<cwd>/.subagents/agents` and
    `$SUBAGENTS_HOME/agents` for tenant `default`, else
    `$SUBAGENTS_HOME/tenants/<tenant>/agents`.
    """
    budget: Budget | None = None
    """The run's budget: every root this runtime creates gets it, for its whole tree (a
    definition's own budget can only narrow it)."""
    max_tokens: int | None = None
    """The cap on each model response (`max_tokens`, sent on every call) of every agent this
    runtime runs; a definition's own cap, or a run's (`run(max_tokens=...)`), replaces it.
    None sends none: the server's default applies."""
    model_aliases: Mapping[str, str] = field(default_factory=lambda: dict(BUILTIN_ALIASES))
    """Aliases a definition's `model` may use (`sonnet`), as alias -> spec (`subagents config`
    shows a settings file's); Claude Code's three are built in."""

    def __post_init__(self) -> None:
        check_max_tokens(self.max_tokens, "max_tokens")
        # Refuse a bad value where it is written, not at the first delegation. A folder is
        # checked on entry, off the event loop (a stat here would block async callers).
        given = cast("object", self.definitions)  # what callers pass is not type-checked
        if given is None or isinstance(given, str | os.PathLike):
            return
        if not isinstance(given, Mapping) or not all(
            isinstance(d, AgentDefinition) for d in cast("Mapping[object, object]", given).values()
        ):
            raise ConfigError(
                "definitions must be a mapping of names to AgentDefinition or a folder path, "
                f"not {type(cast('object', given)).__name__}"
            )

    @property
    def definitions_folder(self) -> Path | None:
        """The folder `definitions` names, or None for a mapping or the tenant's tiers."""
        given = self.definitions
        return Path(given) if isinstance(given, str | os.PathLike) else None


class RuntimeOptions(TypedDict, total=False):
    """`DelegationRuntime`'s keyword arguments, for a runtime built on it (`model` required)."""

    model: Required[Model]
    store: EventStore | str | Path | None
    tools: Iterable[ToolSpec]
    clock: Clock | None
    tenant: str
    cwd: str | Path | None
    model_spec: str | None
    delegation: DelegationOptions | None
    model_factory: Callable[[str], Model] | None
    sandbox: SandboxMode
    workspace_tools: bool
    crash_retries: int
    approval: ApprovalPolicy | str | Iterable[str] | None
    approval_timeout: float | None
    mcp: McpOptions | None
