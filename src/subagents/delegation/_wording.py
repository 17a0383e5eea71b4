"""Every text the delegation layer writes for a model to read, in one place.

Tool descriptions (by the provider's context contract), what a child is told, the notices a
parent receives, the texts of results, the structured-output texts and the results of the
delegation tools. Error messages stay beside the checks that raise them, and the
descriptions of the `@tool` tools are their docstrings.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence, Set
from typing import TYPE_CHECKING, Literal

from ..core import CONTEXT_SOURCE, AgentConfig
from ..policy import SandboxMode
from ..sessions import (
    AssistantMessageEvent,
    EventRecord,
    ModelErrorEvent,
    ToolResultEvent,
    TurnEnd,
    UserMessageEvent,
)

if TYPE_CHECKING:
    from ..definitions import AgentDefinition
    from ._background import TaskRecord
    from ._results import SubagentResult

__all__ = [
    "AGENT_PARAMETER_TEXT",
    "approval_wait_notice",
    "decided_text",
    "CANCELLED_TEXT",
    "CONTEXT_ORDER",
    "DELEGATION",
    "FILE_POLICY",
    "IDENTITY",
    "KILLED_BY_TASK_KILL",
    "LIMITS",
    "MAX_ENTRY_CHARS",
    "MISSING_DIAGNOSTIC",
    "NO_AGENTS_TEXT",
    "NO_OUTPUT_TEXT",
    "NO_TASKS_TEXT",
    "NO_TEAM_TASKS_TEXT",
    "OWNER_DISPOSED",
    "RECORDED_TEXT",
    "RUNTIME_CLOSED",
    "RUNTIME_GUIDANCE",
    "STRUCTURED_OUTPUT",
    "STRUCTURED_TOOL",
    "UNAVAILABLE_TEXT",
    "WAIT_TEXT",
    "agent_row_text",
    "agents_left_text",
    "continuable_started_text",
    "definitions_description",
    "delegation_statement",
    "diagnostic_line",
    "exhausted_guard_text",
    "failure_headline",
    "failure_text",
    "file_policy_statement",
    "identity_statement",
    "interrupt_description",
    "interrupt_requested_text",
    "invalid_diagnostic",
    "kill_finished_text",
    "kill_requested_text",
    "limits_statement",
    "message_queued_text",
    "no_agents_at_text",
    "notice_text",
    "prompt_description",
    "provider_unavailable_diagnostic",
    "recorded_guard_text",
    "render_result",
    "report_accepted_text",
    "report_notice_text",
    "rerun_notice_text",
    "settlement_line",
    "status_line",
    "structured_instruction",
    "task_failure_detail",
    "task_notice_text",
    "task_output_text",
    "task_row",
    "task_started_text",
    "team_task_result",
    "team_task_row",
    "told",
    "tool_description",
    "transcript_entries",
    "transcript_text",
    "with_recorded_prompt",
]

# -- tool descriptions: the `subagent` tool's, derived from its provider and definitions -------

_FRESH = (
    "Delegate a task to a new child agent with its own context; you get its final answer, not "
    "its steps. The prompt must stand alone: the child does not see this conversation. Calls "
    "in one message run at once."
)
_INHERITS = (
    "Delegate a task to a child agent that starts with this conversation's completed turns; "
    "you get its final answer, not its steps. Calls in one message run at once."
)


def tool_description(
    *,
    inherits: bool,
    background: bool,
    continuable: bool = False,
    offered: Set[str] = frozenset(),
) -> str:
    """The `subagent` tool's description, by context contract, background mode and scope.

    It names the tools that act on a background child only where the agent has them.
    """
    text = _INHERITS if inherits else _FRESH
    if background and continuable:
        text += (
            " With `run_in_background: true` it returns at once and you are notified when the "
            "child settles"
        )
        verbs = [
            f"{tool} {what}"
            for tool, what in (
                ("send_message", "gives it another turn"),
                ("interrupt_agent", "stops it"),
            )
            if tool in offered
        ]
        text += f"; {', '.join(verbs)}." if verbs else "."
    elif background:
        text += (
            " With `run_in_background: true` you get a task id at once and a notice when it "
            "finishes"
        )
        text += "; read it with task_output." if "task_output" in offered else "."
    return text


def definitions_description(definitions: Sequence[AgentDefinition], *, inherits: bool) -> str:
    """The tool description's list of the definitions this tool can start ("" if none)."""
    usable = [d for d in definitions if not (inherits and d.context == "spawn")]
    if not usable:
        return ""
    lines = [
        "",
        "",
        "Definitions for `agent` (their instructions and tools, never more than yours):",
    ]
    for d in usable:
        note = " (inherits this conversation)" if d.context == "fork" and not inherits else ""
        limits = " (foreground only)" if not d.background else ""
        lines.append(f"- {d.name}{note}{limits}: {d.description}")
    return "\n".join(lines)


AGENT_PARAMETER_TEXT = "Start the child from this definition (default: a general-purpose child)."
"""The description of the `agent` parameter (its `enum` names the definitions)."""


def prompt_description(*, inherits: bool) -> str:
    """The description of the `prompt` parameter, by context contract."""
    if inherits:
        return "What is new: the child already sees this conversation's completed turns."
    return "The whole task: the child sees nothing else."


# -- what a child is told: its place in the tree and its file policy, in order ---------------


RUNTIME_GUIDANCE = (
    "You are an agent in a tree of agents. A runtime-context message tells you who you are "
    "in the tree, where you work, your file policy and your limits; the latest one applies.\n"
    "When you have the `subagent` tool, delegate separable work to a named child with a "
    "self-contained prompt (it does not see this conversation) and do small tasks yourself; "
    "start independent children together in one message, in the background when you can "
    "keep working meanwhile. You are notified when a background child settles: do not poll.\n"
    "Relative paths start at your working directory. A file access your policy refuses "
    "answers `[sandbox: file access denied under <mode> mode]` and changes nothing; do not "
    "retry it, say what you could not do. Your home directory, /proc and the runtime's store "
    "are never readable."
)
"""What the runtime tells every agent it runs before its instructions: the same text for
the whole tree, so the system prompt is one prefix a server's cache serves to every child."""


def interrupt_description(offered: Set[str]) -> str:
    """`interrupt_agent`'s description, naming `send_message` only where it is offered."""
    resume = ", and send_message continues it" if "send_message" in offered else ""
    return (
        "Stop the current turn of an agent below you; its queued messages and children "
        f"stay{resume}. An agent that already finished is left as it is."
    )


def identity_statement(*, full_name: str, parent: str | None) -> str:
    """Who an agent is in its tree: the one sentence of its runtime context that is its own."""
    if parent is None:
        return f'You are "{full_name}", the root agent: you answer the user.'
    return f'You are the delegated subagent "{full_name}", started by "{parent}".'


@functools.lru_cache(maxsize=64)
def delegation_statement(*, child: bool, depth: int, max_depth: int | None, cwd: str) -> str:
    """How an agent answers, where it works and how deep it may still delegate.

    The same for every agent at one depth of one tree, so a fan-out's children share one
    string (a fan-out of thousands held one copy each); who each is, `identity_statement`.
    """
    where = f"Working directory: {_quoted(cwd)}."
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
    if not child:
        return f"{budget} {where}"
    return (
        "Your final answer is returned to the agent that started you, and it does not see "
        "your intermediate steps, so make the answer self-contained. Your permission scope "
        "was fixed when you were started; when the task needs more, state the limitation in "
        f"your answer instead of retrying. {budget} {where}"
    )


def limits_statement(limits: str | None, max_tokens: int | None) -> str | None:
    """An agent's limits (`Budget.describe()` of its subtree, its response cap), or None."""
    parts: list[str] = []
    if limits:
        parts.append(f"Limits for you and every agent you start: {limits}.")
    if max_tokens is not None:
        parts.append(f"Each of your responses may be at most {max_tokens} tokens long.")
    return " ".join(parts) or None


_POLICY_OPENING = "Current file policy: "


@functools.lru_cache(maxsize=256)
def _quoted(path: str) -> str:
    """`path` as a JSON string (unambiguous whatever it holds); a tree has few directories."""
    return json.dumps(path, ensure_ascii=False)


@functools.lru_cache(maxsize=64)
def file_policy_statement(mode: SandboxMode, workspace_root: str) -> str:
    """What the model is told of its file policy (one sentence per mode, capability-neutral).

    One string for every agent of a mode and workspace (a tree has few), not one each.
    """
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
                f"{_quoted(workspace_root)}; some temporary areas of "
                "the platform may be writable too."
            )
        case "danger-full-access":
            return (
                f"{_POLICY_OPENING}danger-full-access. The file sandbox does not restrict "
                "modifications."
            )


IDENTITY = "identity"
DELEGATION = "delegation"
FILE_POLICY = "file-policy"
LIMITS = "limits"
STRUCTURED_OUTPUT = "structured-output"
CONTEXT_ORDER = (IDENTITY, DELEGATION, FILE_POLICY, LIMITS, STRUCTURED_OUTPUT)
"""The topics of an agent's runtime context, in the order it says them: who it is, where it
stands in the tree, its file policy, its limits, then how it must answer (which stays last)."""


def told(config: AgentConfig, topic: str, text: str) -> AgentConfig:
    """`config` telling `text` about `topic` (in place of what it said before), in order."""
    return config.with_context(topic, text, order=CONTEXT_ORDER)


def with_recorded_prompt(config: AgentConfig, system: str) -> AgentConfig:
    """`config` saying exactly `system`, a system prompt recorded before a crash.

    The system prompt is the runtime's preamble, then the agent's own instructions (what its
    children inherit); what it is told of where it stands is a runtime-context message.
    """
    opening = f"{RUNTIME_GUIDANCE}\n\n"
    if system.startswith(opening):
        return dataclasses.replace(
            config, preamble=RUNTIME_GUIDANCE, instructions=system[len(opening) :]
        )
    return dataclasses.replace(config, preamble="", instructions=system)


# -- notices: what a parent is told, unasked, of the children it started ------------------------


def settlement_line(name: str, stop_reason: str) -> str:
    """The opening line of a settlement notice for a background child."""
    match stop_reason:
        case "completed":
            return (
                f"Background subagent {name} finished and will do no further work unless you "
                "send it more."
            )
        case "aborted":
            return f"Background subagent {name} was stopped before it finished."
        case "error":
            return f"Background subagent {name} failed before it finished."
        case "max-tokens":
            return f"Background subagent {name} ran out of room before it finished."
        case "refusal":
            return f"Background subagent {name} declined the task."
        case "budget":
            return (
                f"Background subagent {name} stopped before it finished: its usage budget ran out."
            )
        case _:
            return (
                f"Background subagent {name} ended abnormally ({stop_reason}) before it finished."
            )


def notice_text(full_name: str, result: SubagentResult) -> str:
    """The settlement notice a parent receives when a background child settles."""
    opening = settlement_line(full_name, result.stop_reason)
    if result.diagnostic:
        opening += f"\n{diagnostic_line(result.diagnostic, result.retryable)}"
    if result.structured is not None:
        return f"{opening}\nIts structured result:\n{render_result(result)}"
    if result.output:
        return f"{opening}\nIts closing message:\n{result.output}"
    return f"{opening}\nIt left no closing message."


def approval_wait_notice(
    full_name: str, tool: str, call_id: str, arguments: str, *, parent_decides: bool = False
) -> str:
    """What a background child's parent is told when one of the child's calls waits."""
    shown = " ".join(arguments.split())
    if len(shown) > 300:
        shown = shown[:299] + "…"
    if parent_decides:
        return (
            f"background subagent {full_name} is waiting for your approval of its {tool} call "
            f"{call_id} ({shown}). Decide with approve_request (approve: true to run it, or "
            "false with a reason); it makes no progress until you or a person decide."
        )
    return (
        f"background subagent {full_name} is waiting for a person to approve its {tool} call "
        f"{call_id} ({shown}). It makes no progress until someone decides; carry on with other "
        "work meanwhile, and tell the user if the answer you owe depends on it."
    )


def decided_text(full_name: str, tool: str, call_id: str, approved: bool) -> str:
    """`approve_request`'s receipt."""
    if approved:
        return f"approved: {full_name}'s {tool} call {call_id} runs now"
    return f"denied: {full_name}'s {tool} call {call_id} will not run; it reads your reason"


def rerun_notice_text(full_name: str, label: str, result: SubagentResult) -> str:
    """The notice a background task's creator gets when a crash made the task run again."""
    opening = (
        f"background subagent task {full_name} ({label}) was cut off by a crash and ran "
        f"again after the restart; it ended [status: {result.stop_reason}]."
    )
    if result.diagnostic:
        opening += f"\n{diagnostic_line(result.diagnostic, result.retryable)}"
    if result.structured is not None or result.output:
        return f"{opening}\nIts output:\n{render_result(result)}"
    return f"{opening}\nIt left no output."


def task_notice_text(record: TaskRecord) -> str:
    """The notice a task's owner gets when the task settles (finished, failed or killed)."""
    return (
        f"background task {record.id} ({record.kind}: {record.label}) finished "
        f"{status_line(record)}. Read its output with task_output."
    )


def report_notice_text(full_name: str, output: str) -> str:
    """What a parent receives when its continuable child calls `report`."""
    return f"Background subagent {full_name} reported:\n{output}"


# -- result texts: how a parent reads a child's ending, a task's status, a transcript ----------

NO_OUTPUT_TEXT = "subagent completed but returned no output"
"""What a parent reads for a child that completed without any text (never an empty result)."""
CANCELLED_TEXT = "subagent run was cancelled"
"""What a parent reads for a foreground child whose run was cancelled."""


def failure_headline(stop_reason: str) -> str:
    """The error headline a foreground call reports for a non-completed child."""
    match stop_reason:
        case "aborted":
            return CANCELLED_TEXT
        case "error":
            return "subagent run failed"
        case "max-tokens":
            return "subagent run hit its token limit before finishing"
        case "refusal":
            return "subagent declined the task"
        case "budget":
            return "subagent stopped: its usage budget ran out"
        case _:
            return f"subagent run ended abnormally ({stop_reason})"


def failure_text(
    stop_reason: str, diagnostic: str | None, output: str, retryable: bool | None = None
) -> str:
    """A foreground call's error for a non-completed child: headline, diagnostic, output."""
    text = failure_headline(stop_reason)
    if diagnostic:
        text += f"\n{diagnostic_line(diagnostic, retryable)}"
    if output:
        text += f"\nPartial output before the run ended:\n{output}"
    return text


def diagnostic_line(diagnostic: str, retryable: bool | None) -> str:
    """Why a child did not complete, and whether trying again may help when that is known."""
    match retryable:
        case True:
            hint = " (transient: retrying may help)"
        case False:
            hint = " (retrying will not help until the cause is fixed)"
        case None:
            hint = ""
    return f"Diagnostic: {diagnostic}{hint}"


def render_result(result: SubagentResult) -> str:
    """What a parent's model sees of a completed child: its structured value as JSON, else text."""
    if result.structured is not None:
        return json.dumps(result.structured, separators=(",", ":"), ensure_ascii=False)
    return result.output


def provider_unavailable_diagnostic(provider: str) -> str:
    """The diagnostic of a cut-off child whose provider is gone, so it was closed, not re-run."""
    return (
        f'its provider "{provider}" is not available in this runtime, '
        "so its cut-off turn was closed, not run again"
    )


KILLED_BY_TASK_KILL = "killed by task_kill"
"""The detail of a task stopped by `task_kill` without a reason."""
OWNER_DISPOSED = "owner disposed"
"""The detail of a task stopped because its owner was disposed."""
RUNTIME_CLOSED = "runtime closed"
"""The detail of a task stopped because its runtime closed."""


def task_failure_detail(exc: BaseException) -> str:
    """The detail of a task whose work raised `exc`."""
    return f"{type(exc).__name__}: {exc}"


def status_line(record: TaskRecord) -> str:
    """A task's status and detail, as the task tools and notices show it."""
    detail = f", {record.detail}" if record.detail else ""
    return f"[status: {record.status}{detail}]"


MAX_ENTRY_CHARS = 1_000
"""The characters of one transcript entry's content shown before it is clipped."""


def _clip(text: str, limit: int = MAX_ENTRY_CHARS) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def _speaker(event: UserMessageEvent) -> str:
    source = event.message.source
    if source.kind == "user":
        return "user"
    return f"user ({source.kind} {source.name})" if source.name else f"user ({source.kind})"


def transcript_entries(records: Sequence[EventRecord]) -> list[str]:
    """The entries of a log: messages in, assistant text, tool calls and results, failed turns.

    Each entry's content is clipped to `MAX_ENTRY_CHARS` characters.
    """
    entries: list[str] = []
    for record in records:
        event = record.event
        if isinstance(event, UserMessageEvent):
            if event.message.source != CONTEXT_SOURCE:  # the runtime's, not the child's work
                entries.append(f"{_speaker(event)}: {_clip(event.message.text)}")
        elif isinstance(event, AssistantMessageEvent):
            if event.message.text.strip():
                entries.append(f"assistant: {_clip(event.message.text)}")
            entries.extend(
                f"tool call {call.name}: {_clip(call.arguments)}"
                for call in event.message.tool_calls
            )
        elif isinstance(event, ToolResultEvent):
            kind = "tool error" if event.message.is_error else "tool result"
            entries.append(f"{kind} {event.message.name}: {_clip(event.message.content)}")
        elif isinstance(event, ModelErrorEvent):
            entries.append(f"model error {event.code}: {_clip(event.message)}")
        elif isinstance(event, TurnEnd) and event.reason != "completed":
            detail = f" ({_clip(event.error_message)})" if event.error_message else ""
            entries.append(f"turn {event.turn} ended: {event.reason}{detail}")
    return entries


def transcript_text(
    name: str,
    target: str,
    last: str | None,
    entries: Sequence[str],
    limit: int,
    max_limit: int,
) -> str:
    """What `read_transcript` returns: a heading, then the last `limit` entries, numbered."""
    shown = entries[-limit:]
    lines = [
        f"transcript of subagent {name} ({target}), last turn "
        f"{last or 'none'}: {len(shown)} of {len(entries)} entries, most recent last"
    ]
    if len(shown) < len(entries):
        lines.append(
            f"… {len(entries) - len(shown)} earlier entries left out; raise limit "
            f"(at most {max_limit}) to see them"
        )
    first = len(entries) - len(shown) + 1
    # An entry's own line breaks are indented, so each entry stays visibly one entry.
    lines.extend(f"[{first + i}] {entry}".replace("\n", "\n    ") for i, entry in enumerate(shown))
    return "\n".join(lines)


# -- structured output: the instruction, the tool's replies, the guard and the diagnostics -----

STRUCTURED_TOOL = "structured_output"
"""The name of the tool a child with an output schema answers through."""
WAIT_TEXT = (
    "Wait for all delegated child tasks to finish and process pending messages before "
    "submitting structured output."
)
"""Why a `structured_output` call is refused while the child still has work pending."""
RECORDED_TEXT = "Structured output recorded."
"""The result of an accepted `structured_output` call."""
MISSING_DIAGNOSTIC = "the subagent finished without calling structured_output"
"""The diagnostic of a child that finished without a structured answer."""


def structured_instruction() -> str:
    """The trailing instruction section of a child started with an output schema."""
    return (
        f"You must finish by calling the `{STRUCTURED_TOOL}` tool exactly once, with arguments "
        "that match its schema; that call is your answer and ends your run. A plain-text "
        "answer does not count."
    )


def recorded_guard_text(tool_name: str) -> str:
    """Why a tool call after the recorded structured answer is not executed."""
    return (
        f"structured output already recorded: the run is complete, so `{tool_name}` is not executed"
    )


def exhausted_guard_text(invalid: int, tool_name: str) -> str:
    """Why a tool call after the last allowed invalid `structured_output` is not executed."""
    return (
        f"{STRUCTURED_TOOL} was called with invalid arguments {invalid} times, so "
        f"the run has failed: `{tool_name}` is not executed"
    )


def invalid_diagnostic(invalid: int) -> str:
    """The diagnostic of a child that spent its invalid `structured_output` attempts."""
    return (
        f"{STRUCTURED_TOOL} was called with invalid arguments {invalid} "
        "times; the subagent did not produce a valid structured result"
    )


# -- tool results: what the delegation tools return when they succeed --------------------------


def continuable_started_text(full_name: str, name: str) -> str:
    """`subagent` started a continuable child in the background."""
    return (
        f'started background subagent "{full_name}": it works on its own and you '
        "will be notified when it settles; continue it with send_message(agent="
        f'"{name}") once it has, or stop it with interrupt_agent'
    )


def task_started_text(task_id: str, full_name: str) -> str:
    """`subagent` started a one-shot child as a background task."""
    return (
        f"started background subagent task {task_id} ({full_name}); you will be "
        "notified when it finishes"
    )


def task_output_text(record: TaskRecord) -> str:
    """What `task_output` returns: the task's output (if any), then its status line."""
    return f"{record.output or '(no new output)'}\n{status_line(record)}"


NO_TASKS_TEXT = "(no background tasks)"
"""What `task_list` returns when the caller has no tasks."""


def task_row(record: TaskRecord) -> str:
    """One row of `task_list`."""
    return f"{record.id} [{record.kind}] {record.status} — {record.label}"


def kill_requested_text(task_id: str) -> str:
    """`task_kill` asked a running task to stop."""
    return f"requested cancellation of task {task_id}"


def kill_finished_text(task_id: str, record: TaskRecord) -> str:
    """`task_kill` found the task already finished."""
    return f"task {task_id} had already finished {status_line(record)}"


def message_queued_text(full_name: str, message_id: str) -> str:
    """`send_message` queued the message as the child's next turn."""
    return (
        f"message queued as the next turn for subagent {full_name} "
        f"(message {message_id}); you will be notified when it settles"
    )


def interrupt_requested_text(agent: str) -> str:
    """`interrupt_agent` requested the stop."""
    return f"interrupt requested for agent {agent}"


NO_AGENTS_TEXT = "(no subagents)"
"""What `list_agents` returns when the caller has no subagents."""
UNAVAILABLE_TEXT = "unavailable"
"""The diagnostic of a `list_agents` row whose log cannot be read."""


def agent_row_text(
    name: str,
    status: str,
    label: str,
    *,
    parent: str | None,
    depth: int,
    diagnostic: str | None,
    descendants: bool,
) -> str:
    """One row of `list_agents` (with parent and depth in the descendants scope)."""
    where = f" parent={parent} depth={depth}" if descendants else ""
    if diagnostic is not None:
        return f"{name} [diagnostic: {diagnostic}]{where}"
    return f"{name} [{status}]{where} — {label}"


def agents_left_text(left: int, cursor: int) -> str:
    """The last line of a `list_agents` page that more rows follow."""
    return f"… {left} more; call list_agents with cursor {cursor} for the next page"


def no_agents_at_text(cursor: int) -> str:
    """What `list_agents` returns for a cursor past the last row."""
    return f"(no subagents at cursor {cursor})"


def report_accepted_text(message_id: str) -> str:
    """`report` delivered the content to the parent."""
    return f"report accepted by the agent that started you as message {message_id}"


def team_task_row(
    task_id: str, status: str, subject: str, owner: str, blocked_by: Sequence[str]
) -> str:
    """One task of the team board, as the team tools show it."""
    blocked = f" blocked by {', '.join(blocked_by)}" if blocked_by else ""
    return f"{task_id} [{status}] {subject} — owner {owner}{blocked}"


def team_task_result(action: Literal["created", "claimed", "updated"], row: str) -> str:
    """What a team tool returns after changing a task: what it did, then the task's row."""
    return f"{action} {row}"


NO_TEAM_TASKS_TEXT = "(no team tasks)"
"""What `team_task_list` returns for an empty board."""
