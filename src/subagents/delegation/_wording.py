"""Every text the delegation layer writes for a model to read, in one place.

Tool descriptions (by the provider's context contract), what a child is told, the notices a
parent receives, the texts of results, the structured-output texts and the results of the
delegation tools. Error messages stay beside the checks that raise them, and the
descriptions of the `@tool` tools are their docstrings.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from ..core import AgentConfig
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
    "CANCELLED_TEXT",
    "CONTEXT_ORDER",
    "DELEGATION",
    "FILE_POLICY",
    "KILLED_BY_TASK_KILL",
    "MAX_ENTRY_CHARS",
    "MISSING_DIAGNOSTIC",
    "NO_AGENTS_TEXT",
    "NO_OUTPUT_TEXT",
    "NO_TASKS_TEXT",
    "NO_TEAM_TASKS_TEXT",
    "OWNER_DISPOSED",
    "RECORDED_TEXT",
    "RUNTIME_CLOSED",
    "STRUCTURED_OUTPUT",
    "STRUCTURED_TOOL",
    "UNAVAILABLE_TEXT",
    "WAIT_TEXT",
    "agent_parameter_description",
    "agent_row_text",
    "agents_left_text",
    "continuable_started_text",
    "definitions_description",
    "delegation_statement",
    "exhausted_guard_text",
    "failure_headline",
    "failure_text",
    "file_policy_statement",
    "interrupt_requested_text",
    "invalid_diagnostic",
    "kill_finished_text",
    "kill_requested_text",
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
    """The `subagent` tool's description, by context contract and background mode."""
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
    """The description of the `agent` parameter, naming the definitions it accepts."""
    return (
        f"The agent definition to start the child from: one of {', '.join(names)}. Without "
        "it the child is a general-purpose agent. When `name` is omitted, the child is named "
        "after the definition (if that name is free)."
    )


def prompt_description(*, inherits: bool) -> str:
    """The description of the `prompt` parameter, by context contract."""
    if inherits:
        return (
            "The task for the subagent. It already sees this conversation's completed turns, so "
            "build on them and state only what is new."
        )
    return (
        "The complete, self-contained task for the subagent. It does not share this "
        "conversation's context, so include everything it needs."
    )


# -- what a child is told: its place in the tree and its file policy, in order ---------------


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
        opening += f"\nDiagnostic: {result.diagnostic}"
    if result.structured is not None:
        return f"{opening}\nIts structured result:\n{render_result(result)}"
    if result.output:
        return f"{opening}\nIts closing message:\n{result.output}"
    return f"{opening}\nIt left no closing message."


def rerun_notice_text(full_name: str, label: str, result: SubagentResult) -> str:
    """The notice a background task's creator gets when a crash made the task run again."""
    opening = (
        f"background subagent task {full_name} ({label}) was cut off by a crash and ran "
        f"again after the restart; it ended [status: {result.stop_reason}]."
    )
    if result.diagnostic:
        opening += f"\nDiagnostic: {result.diagnostic}"
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


def failure_text(stop_reason: str, diagnostic: str | None, output: str) -> str:
    """A foreground call's error for a non-completed child: headline, diagnostic, output."""
    text = failure_headline(stop_reason)
    if diagnostic:
        text += f"\nDiagnostic: {diagnostic}"
    if output:
        text += f"\nPartial output before the run ended:\n{output}"
    return text


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
