"""Claude Code's agent files as they are: its tool names and model names, mapped to ours.

A file written for Claude Code (`.claude/agents/*.md`) names tools `Read`, `Bash`, `Task`...
and models `sonnet`, `inherit` or a full `claude-...` id. Its tools map to the tools of this
runtime that do the same job; one with no equivalent here (`WebFetch`, say) is dropped with a
warning at load, so the agent still starts with what it can have. Claude Code's permission
forms (`Bash(git diff:*)`, `Agent(worker)`) narrow a tool to some arguments, which this
runtime cannot enforce per tool: in an allow list such a tool is dropped (never widened to the
whole tool), in a deny list the whole tool is denied. Both ways the agent gets less, never more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CLAUDE_TOOLS",
    "DELEGATION_TOOLS",
    "UNSUPPORTED_CLAUDE_TOOLS",
    "ToolMapping",
    "map_tools",
]

DELEGATION_TOOLS = (
    "subagent",
    "subagent_fork",
    "send_message",
    "list_agents",
    "interrupt_agent",
    "read_transcript",
)
"""What Claude Code's `Task`/`Agent` tool does here: start children and address them."""

CLAUDE_TOOLS: dict[str, tuple[str, ...]] = {
    "Read": ("read_file",),
    "Write": ("write_file",),
    "Edit": ("edit_file",),
    "MultiEdit": ("edit_file",),
    "Glob": ("glob",),
    "Grep": ("grep",),
    "LS": ("glob",),
    "Bash": ("bash",),
    "Task": DELEGATION_TOOLS,
    "Agent": DELEGATION_TOOLS,
}
"""Claude Code's tool names and the tools of this runtime that do the same job."""

UNSUPPORTED_CLAUDE_TOOLS = frozenset(
    {
        "AskUserQuestion",
        "BashOutput",
        "ExitPlanMode",
        "KillBash",
        "KillShell",
        "ListMcpResourcesTool",
        "NotebookEdit",
        "NotebookRead",
        "ReadMcpResourceTool",
        "Skill",
        "SlashCommand",
        "TaskOutput",
        "TaskStop",
        "TodoRead",
        "TodoWrite",
        "WebFetch",
        "WebSearch",
    }
)
"""Claude Code tools with no equivalent here: dropped with a warning wherever they appear."""

_PERMISSION_FORM = re.compile(r"^(?P<tool>[A-Za-z][A-Za-z0-9_]*)\s*\((?P<rule>.*)\)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ToolMapping:
    """Tool names as this runtime knows them, and what was changed on the way."""

    names: tuple[str, ...]
    warnings: tuple[str, ...] = ()


def map_tools(names: tuple[str, ...], *, deny: bool, claude_file: bool) -> ToolMapping:
    """Map a definition's `tools` (or, with `deny`, its `disallowed_tools`) to our names.

    Our own names and `mcp__...` names pass unchanged. In a Claude Code file any other name
    we do not map is dropped with a warning; in one of ours it is kept, so a typo is still
    refused when the agent starts.
    """
    mapped: list[str] = []
    warnings: list[str] = []

    def add(*found: str) -> None:
        mapped.extend(name for name in found if name not in mapped)

    for name in names:
        form = _PERMISSION_FORM.fullmatch(name)
        if form is not None:
            tool = form["tool"]
            targets = CLAUDE_TOOLS.get(tool)
            if deny and targets is not None:
                add(*targets)
                warnings.append(
                    f"`{name}`: argument rules are not supported; all of {tool} is denied"
                )
            else:
                warnings.append(
                    f"`{name}`: argument rules are not supported; the tool is not given"
                )
            continue
        if name in CLAUDE_TOOLS:
            add(*CLAUDE_TOOLS[name])
        elif name in UNSUPPORTED_CLAUDE_TOOLS:
            warnings.append(f"Claude Code tool `{name}` has no equivalent here; dropped")
        elif claude_file and not name.startswith("mcp__") and name[:1].isupper():
            warnings.append(f"unknown Claude Code tool `{name}`; dropped")
        else:
            add(name)
    return ToolMapping(tuple(mapped), tuple(warnings))
