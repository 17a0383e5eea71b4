"""Model-facing wording of the delegation tools, by the provider's context contract."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core import AgentConfig
from ..policy import SandboxMode

if TYPE_CHECKING:
    from ..definitions import AgentDefinition

__all__ = [
    "CONTEXT_ORDER",
    "DELEGATION",
    "FILE_POLICY",
    "STRUCTURED_OUTPUT",
    "agent_parameter_description",
    "definitions_description",
    "delegation_statement",
    "file_policy_statement",
    "tool_description",
    "prompt_description",
    "told",
    "with_recorded_prompt",
]

_FRESH = (
    "Delegate a self-contained task to a subagent: a separate agent that works in its own "
    "context. Use it to offload focused, independent work (research, a scoped change, an "
    "analysis) without spending this conversation's context on it. You receive the subagent's "
    "final answer, not its intermediate steps. Give it a complete, standalone prompt: it does "
    "not see this conversation. Several subagent calls in one message run at the same time."
)
_INHERITS = (
    "Delegate a task to a subagent that inherits this conversation: a child agent seeded with "
    "all completed turns so far (not the turn in progress). Use it when the subtask builds on "
    "this conversation (a follow-up analysis, a review, a continuation) without spending this "
    "conversation's context on the work itself. You receive its final answer, not its "
    "intermediate steps."
)
_BACKGROUND = (
    " By default the call waits for the answer. Set `run_in_background: true` for independent "
    "work: you get a task id at once and keep working; you are notified when it finishes, "
    "collect the answer with `task_output` and stop it with `task_kill`."
)
_NAMES = (
    " Give the child a short `name` (lower-case letters, digits, '-') to refer to it later; "
    "without one it is called agent-N."
)


_CONTINUABLE = (
    " By default the call waits for the answer. For independent work set "
    "`run_in_background: true` and start several children in one message: each returns at "
    "once and keeps working on its own; when it settles you get a notice with its outcome and "
    "closing message. The child stays available by name: `send_message` gives it a later turn, "
    "`interrupt_agent` stops its current turn, `list_agents` shows your children."
)


def tool_description(*, inherits: bool, background: bool, continuable: bool = False) -> str:
    tail = (_CONTINUABLE if continuable else _BACKGROUND) if background else ""
    return (_INHERITS if inherits else _FRESH) + _NAMES + tail


def definitions_description(definitions: Sequence[AgentDefinition], *, inherits: bool) -> str:
    """The tool description's list of the definitions this tool can start ("" if none)."""
    usable = [d for d in definitions if not (inherits and d.context == "spawn")]
    if not usable:
        return ""
    lines = [
        "",
        "",
        "Agent definitions: set `agent` to one of these names to start a specialised child; "
        "it works with that definition's instructions and tools (never more tools than you "
        "have).",
    ]
    for d in usable:
        note = " (inherits this conversation)" if d.context == "fork" and not inherits else ""
        limits = " (foreground only)" if not d.background else ""
        lines.append(f"- {d.name}{note}{limits}: {d.description}")
    return "\n".join(lines)


def agent_parameter_description(names: Sequence[str]) -> str:
    return (
        f"The agent definition to start the child from: one of {', '.join(names)}. Without "
        "it the child is a general-purpose agent. When `name` is omitted, the child is named "
        "after the definition (if that name is free)."
    )


def prompt_description(*, inherits: bool) -> str:
    if inherits:
        return (
            "The task for the subagent. It already sees this conversation's completed turns, so "
            "build on them and state only what is new."
        )
    return (
        "The complete, self-contained task for the subagent. It does not share this "
        "conversation's context, so include everything it needs."
    )


def delegation_statement(*, full_name: str, depth: int, max_depth: int | None) -> str:
    """The runtime context every in-process child receives."""
    if max_depth is None:
        budget = "The delegation depth is managed by the provider."
    elif depth >= max_depth:
        budget = (
            f"Delegation depth: current {depth}, maximum {max_depth}; do not delegate further, "
            "carry out the work directly."
        )
    else:
        budget = (
            f"Delegation depth: current {depth}, maximum {max_depth}, "
            f"{max_depth - depth} level(s) left."
        )
    return (
        f'You are the delegated subagent "{full_name}". Your task is in the next message; your '
        "final answer is returned to the agent that started you, which does not see your "
        "intermediate steps, so make the answer self-contained. Your permission scope was fixed "
        "when you were started; when the task needs more, state the limitation in your answer "
        f"instead of retrying. {budget}"
    )


_POLICY_OPENING = "Current file policy: "


def file_policy_statement(mode: SandboxMode, workspace_root: str) -> str:
    """What the model is told of its file policy (one sentence per mode, capability-neutral)."""
    match mode:
        case "read-only":
            return (
                f"{_POLICY_OPENING}read-only. Files cannot be modified here; if the task needs "
                "a change, do not refuse it from this policy alone: try the tool and follow "
                "what its denial says."
            )
        case "workspace-write":
            return (
                f"{_POLICY_OPENING}workspace-write. You may modify files under the workspace "
                f"{json.dumps(workspace_root, ensure_ascii=False)}; some temporary areas of "
                "the platform may be writable too."
            )
        case "danger-full-access":
            return (
                f"{_POLICY_OPENING}danger-full-access. The file sandbox does not restrict "
                "modifications."
            )


DELEGATION = "delegation"
FILE_POLICY = "file-policy"
STRUCTURED_OUTPUT = "structured-output"
CONTEXT_ORDER = (DELEGATION, FILE_POLICY, STRUCTURED_OUTPUT)
"""The topics the runtime tells an agent about, in the order its instructions say them: where
it stands in the tree, its file policy, then how it must answer (which stays last)."""


def told(config: AgentConfig, topic: str, text: str) -> AgentConfig:
    """`config` telling `text` about `topic` (in place of what it said before), in order."""
    return config.with_context(topic, text, order=CONTEXT_ORDER)


def with_recorded_prompt(config: AgentConfig, system: str) -> AgentConfig:
    """`config` saying exactly `system`, a prompt recorded before a crash.

    When `system` ends with the paragraphs `config` still says, what precedes them is its own
    instructions (what its children inherit); otherwise the whole text is.
    """
    tail = "".join(f"\n\n{text}" for _, text in config.context)
    if tail and system.endswith(tail) and len(system) > len(tail):
        return dataclasses.replace(config, instructions=system[: -len(tail)])
    return dataclasses.replace(config, instructions=system, context=())
