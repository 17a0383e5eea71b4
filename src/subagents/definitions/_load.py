"""Agent definition files: Markdown with YAML frontmatter, read from three tiers.

```
---
name: reviewer
description: Reviews a change for bugs and unclear code.
tools: read_file, grep
max_depth: 0
---
You review code. ...
```

Tiers: tenant `default` reads, highest precedence first, the project tier
`<cwd>/.subagents/agents/*.md`, Claude Code's project files `<cwd>/.claude/agents/*.md`, the
user tier `$SUBAGENTS_HOME/agents/*.md` and Claude Code's user files
`$CLAUDE_CONFIG_DIR/agents/*.md` (default `~/.claude/agents`): a project's file wins over a
user's, and at one level ours win over Claude Code's. Claude Code files are read as they are
(its tool and model names mapped, `_claude.py`). Any other tenant reads only
`$SUBAGENTS_HOME/tenants/<tenant>/agents/*.md`: the other tiers belong to tenant `default`,
and a tenant never sees another tenant's files (fail closed). A caller may instead name one
folder of definition files (`load_definitions_folder`).

A file that cannot be used is reported as a `DefinitionProblem` (its path and line) and
skipped; loading never raises for a bad file and never drops one silently. Claude Code keys
this runtime does not use are ignored with a warning; any other unknown key is an error.
"""

from __future__ import annotations

import asyncio
import functools
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ..config import BUILTIN_ALIASES
from ..core import ApprovalPolicy, Budget
from ..errors import ConfigError
from ..ids import check_tenant_id
from ..messages import JsonObject
from ..names import name_error
from ._claude import map_tools
from ._frontmatter import BUDGET_KEYS, DefinitionProblem, Frontmatter, read_frontmatter

__all__ = [
    "AgentDefinition",
    "DefinitionProblem",
    "Tier",
    "aload_definitions",
    "check_definitions_folder",
    "claude_home",
    "definition_dirs",
    "load_definitions",
    "load_definitions_folder",
    "parse_definition",
    "subagents_home",
]

Tier: TypeAlias = Literal["project", "claude-project", "user", "claude-user", "tenant", "folder"]
"""Where a definition was read: a tenant's tiers, or a folder the caller named."""

MAX_DEFINITION_BYTES = 1024 * 1024
"""A definition file larger than this (1 MiB) is refused as a problem, unread."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDefinition:
    """One agent definition file, parsed and checked."""

    name: str
    description: str
    body: str
    """The instructions (the Markdown below the frontmatter)."""
    tools: tuple[str, ...] | None = None
    """The allow list: None (no `tools` key) means every host tool that is not denied; an
    empty list (`tools: []`) means no tools at all."""
    disallowed_tools: tuple[str, ...] = ()
    model: str = "inherit"
    """`inherit`, or a model spec in canonical form."""
    context: Literal["spawn", "fork"] | None = None
    """The context boundary it declares; None leaves it to the tool that starts it."""
    max_depth: int | None = None
    """Levels of delegation allowed below an agent started from it (0: it may not delegate)."""
    max_tokens: int | None = None
    """The cap on each model response of an agent started from it (None: the runtime's)."""
    background: bool = True
    """Whether it may run in the background."""
    output_schema: JsonObject | None = None
    budget: Budget | None = None
    """Limits for agents started from it and their subtrees (narrowed by what is left above)."""
    approval: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    """The calls of agents started from it that wait for a person's decision (`approval`,
    `approval_timeout`), on top of the gates of the agent that starts it."""
    approver: Literal["person", "parent"] = "person"
    """Who may decide those calls besides a person: `parent` gives the agent that starts it
    an `approve_request` tool for its requests."""
    mcp_servers: tuple[str, ...] | None = None
    """The MCP servers agents started from it may use (None: those of the agent that starts
    it); names of configured servers or of `mcp_inline` ones."""
    mcp_inline: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """Servers the definition itself configures, as written (checked when started)."""
    source: str = ""
    """The file it was read from."""
    line: int = 1
    """The line of its `name` key in `source`."""
    tier: Tier = "project"


# -- one file ---------------------------------------------------------------------------------


def parse_definition(
    text: str,
    *,
    source: str,
    tier: Tier = "project",
    aliases: Mapping[str, str] = BUILTIN_ALIASES,
) -> tuple[AgentDefinition | None, list[DefinitionProblem]]:
    """Parse one file's text: the definition (None when unusable) and its problems.

    `aliases` resolve a model alias (`model: sonnet`) to its spec.
    """
    claude = tier in ("claude-project", "claude-user")
    found = read_frontmatter(text, path=source, claude=claude)
    if found.values is None:
        return None, found.problems()
    name = found.text("name", required=True)
    if name is not None and (problem := name_error(name)) is not None:
        found.error(found.line_of("name"), problem.replace("subagent name", "agent name"))
    description = found.text("description", required=True)
    context = found.choice("context", ("spawn", "fork"))
    boundary: Literal["spawn", "fork"] | None = (
        "fork" if context == "fork" else "spawn" if context == "spawn" else None
    )
    background = found.flag("background")
    limits = found.limits("budget", BUDGET_KEYS)
    mcp_names, mcp_inline = found.mcp_servers()
    definition = AgentDefinition(
        name=name or "",
        description=description or "",
        body=found.body,
        tools=_allow_list(found, claude=claude),
        disallowed_tools=_mapped(found, "disallowed_tools", deny=True, claude=claude),
        model=found.model(aliases, claude=claude),
        context=boundary,
        max_depth=found.integer("max_depth", minimum=0),
        max_tokens=found.integer("max_tokens", minimum=1),
        background=True if background is None else background,
        output_schema=found.schema("output_schema"),
        budget=None if limits is None else Budget(**limits),
        approval=found.approval(),
        approver="parent"
        if found.choice("approver", ("person", "parent")) == "parent"
        else "person",
        mcp_servers=mcp_names,
        mcp_inline=mcp_inline,
        source=source,
        line=found.line_of("name"),
        tier=tier,
    )
    if found.errors:
        return None, found.problems()
    return definition, found.problems()


def _allow_list(found: Frontmatter, *, claude: bool) -> tuple[str, ...] | None:
    """The `tools` key: None when absent or left blank (every tool), else its names."""
    given = None if found.values is None else found.values.get("tools")
    if given is None or given[1] is None:
        return None
    return _mapped(found, "tools", deny=False, claude=claude)


def _mapped(found: Frontmatter, key: str, *, deny: bool, claude: bool) -> tuple[str, ...]:
    """A tool list in our names (Claude Code's mapped), warning about what changed."""
    mapping = map_tools(found.tool_list(key), deny=deny, claude_file=claude)
    for warning in mapping.warnings:
        found.warn(found.line_of(key), f"`{key}`: {warning}")
    return mapping.names


# -- tiers ------------------------------------------------------------------------------------


def subagents_home(environ: Mapping[str, str] | None = None) -> Path:
    """`$SUBAGENTS_HOME`, else `~/.subagents`."""
    env = os.environ if environ is None else environ
    return Path(env.get("SUBAGENTS_HOME") or Path.home() / ".subagents")


def claude_home(environ: Mapping[str, str] | None = None) -> Path:
    """Claude Code's user folder: `$CLAUDE_CONFIG_DIR`, else `~/.claude`."""
    env = os.environ if environ is None else environ
    return Path(env.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def definition_dirs(
    cwd: str | Path, home: str | Path, tenant: str, *, claude: str | Path | None = None
) -> list[tuple[Tier, Path]]:
    """The directories a tenant reads, highest precedence first (`claude`: `claude_home()`)."""
    if tenant == "default":
        return [
            ("project", Path(cwd) / ".subagents" / "agents"),
            ("claude-project", Path(cwd) / ".claude" / "agents"),
            ("user", Path(home) / "agents"),
            ("claude-user", Path(claude if claude is not None else claude_home()) / "agents"),
        ]
    return [("tenant", Path(home) / "tenants" / tenant / "agents")]


def _unsafe_tenant(tenant: str) -> bool:
    try:
        check_tenant_id(tenant)
    except ConfigError:
        return True
    return False


def load_definitions(
    cwd: str | Path,
    home: str | Path,
    tenant: str,
    *,
    aliases: Mapping[str, str] = BUILTIN_ALIASES,
    claude: str | Path | None = None,
) -> tuple[dict[str, AgentDefinition], list[DefinitionProblem]]:
    """Read a tenant's definitions (blocking: from async code use `aload_definitions`).

    Returns the definitions by name (sorted) and every problem found, in reading order.
    `aliases` resolve model aliases; `claude` is Claude Code's user folder (`claude_home()`).
    """
    if _unsafe_tenant(tenant):
        where = str(Path(home) / "tenants")
        return {}, [
            DefinitionProblem(
                where,
                None,
                f"tenant {tenant!r} cannot name a directory; no definitions loaded",
                skipped=False,
            )
        ]
    chosen: dict[str, AgentDefinition] = {}
    problems: list[DefinitionProblem] = []
    for tier, directory in definition_dirs(cwd, home, tenant, claude=claude):
        for definition in _read_tier(tier, directory, problems, aliases):
            earlier = chosen.get(definition.name)
            if earlier is None:
                chosen[definition.name] = definition
            else:
                problems.append(
                    DefinitionProblem(
                        definition.source,
                        definition.line,
                        f'agent "{definition.name}" is also defined by the {earlier.tier} '
                        f"file {earlier.source}, which takes precedence",
                    )
                )
    return dict(sorted(chosen.items())), problems


async def aload_definitions(
    cwd: str | Path,
    home: str | Path,
    tenant: str,
    *,
    aliases: Mapping[str, str] = BUILTIN_ALIASES,
) -> tuple[dict[str, AgentDefinition], list[DefinitionProblem]]:
    """`load_definitions` off the event loop."""
    return await asyncio.to_thread(
        functools.partial(load_definitions, cwd, home, tenant, aliases=aliases)
    )


def check_definitions_folder(directory: str | os.PathLike[str]) -> Path:
    """`directory` as a `Path` if it is a folder that exists, else a one-line `ConfigError`."""
    path = Path(directory)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"definitions folder {str(path)!r} does not exist") from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"definitions folder {str(path)!r} cannot be read: {reason}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"definitions folder {str(path)!r} is not a directory")
    return path


def load_definitions_folder(
    directory: str | os.PathLike[str], *, aliases: Mapping[str, str] = BUILTIN_ALIASES
) -> tuple[dict[str, AgentDefinition], list[DefinitionProblem]]:
    """Read the `*.md` definition files of one folder (blocking), by name, with the problems.

    A folder that is gone by now is reported as a problem rather than raised: the caller
    checked it when it was named (`check_definitions_folder`).
    """
    path = Path(directory)
    problems: list[DefinitionProblem] = []
    if not path.is_dir():
        problems.append(
            DefinitionProblem(str(path), None, "the definitions folder is gone", skipped=False)
        )
        return {}, problems
    found = _read_tier("folder", path, problems, aliases)
    return dict(sorted((d.name, d) for d in found)), problems


def _read_tier(
    tier: Tier, directory: Path, problems: list[DefinitionProblem], aliases: Mapping[str, str]
) -> list[AgentDefinition]:
    if not directory.exists():
        return []
    try:
        paths = sorted(p for p in directory.iterdir() if p.suffix == ".md")
    except OSError as exc:
        problems.append(
            DefinitionProblem(
                str(directory), None, f"cannot list the directory: {exc.strerror}", skipped=False
            )
        )
        return []
    found: dict[str, AgentDefinition] = {}
    for path in paths:
        text = _read_definition_file(path, problems)
        if text is None:
            continue
        definition, found_problems = parse_definition(
            text, source=str(path), tier=tier, aliases=aliases
        )
        problems.extend(found_problems)
        if definition is None:
            continue
        first = found.get(definition.name)
        if first is not None:
            problems.append(
                DefinitionProblem(
                    str(path),
                    definition.line,
                    f'duplicate agent name "{definition.name}": {first.source} already defines '
                    "it in this tier",
                )
            )
            continue
        found[definition.name] = definition
    return list(found.values())


def _read_definition_file(path: Path, problems: list[DefinitionProblem]) -> str | None:
    """A definition file's text, or None with a problem recorded.

    Only a regular file of at most `MAX_DEFINITION_BYTES` is read: it is opened without
    blocking (a FIFO or device never hangs the listing) and checked on the open descriptor.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        problems.append(DefinitionProblem(str(path), None, f"cannot read: {exc.strerror}"))
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            problems.append(DefinitionProblem(str(path), None, "not a regular file"))
            return None
        if info.st_size > MAX_DEFINITION_BYTES:
            problems.append(
                DefinitionProblem(
                    str(path),
                    None,
                    f"the file is {info.st_size} bytes; a definition may be at most "
                    f"{MAX_DEFINITION_BYTES} bytes (1 MiB)",
                )
            )
            return None
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(MAX_DEFINITION_BYTES + 1)
    except OSError as exc:
        problems.append(DefinitionProblem(str(path), None, f"cannot read: {exc.strerror}"))
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_DEFINITION_BYTES:
        problems.append(
            DefinitionProblem(
                str(path), None, f"the file grew past {MAX_DEFINITION_BYTES} bytes while read"
            )
        )
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        problems.append(DefinitionProblem(str(path), 1, "not UTF-8 text"))
        return None
