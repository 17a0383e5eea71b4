"""What a child's run produced, read from its own log, and how its ending is worded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..messages import AssistantMessage, JsonValue
from ..sessions import AssistantMessageEvent, EventRecord, InboxSpliced, TurnEnd

__all__ = [
    "CANCELLED_TEXT",
    "NO_OUTPUT_TEXT",
    "ResultStop",
    "SubagentResult",
    "failure_headline",
    "result_from_log",
    "settlement_line",
]

NO_OUTPUT_TEXT = "subagent completed but returned no output"
"""What a parent reads for a child that completed without any text (never an empty result)."""
CANCELLED_TEXT = "subagent run was cancelled"
"""What a parent reads for a foreground child whose run was cancelled."""

ResultStop: TypeAlias = Literal["completed", "aborted", "error", "max-tokens", "refusal", "budget"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentResult:
    """A child's final answer: `output` is its last non-empty assistant text."""

    output: str
    stop_reason: ResultStop
    structured: JsonValue = None
    diagnostic: str | None = None


def result_from_log(records: Sequence[EventRecord]) -> SubagentResult:
    """Fold a child's own records (after any fork seed) into its result.

    The output is the last non-empty assistant text (an interrupted prefix counts when nothing
    better exists); the stop reason comes from the latest turn that ran.
    """
    output = ""
    end: TurnEnd | None = None
    dropped = False
    for record in records:
        match record.event:
            case AssistantMessageEvent(message=AssistantMessage() as message) if message.text:
                output = message.text
            case TurnEnd() as turn_end:
                end = turn_end
                dropped = False
            case InboxSpliced(outcome="canceled", inserted=()):
                dropped = True
            case _:
                pass
    stop = _stop(end, dropped)
    # A spent budget says whose budget and how much was used, a failure why it failed (with
    # its stable code): the parent decides with that, without reading the child's log.
    diagnostic = None
    if end is not None and stop == "budget":
        diagnostic = end.error_message
    elif end is not None and stop == "error" and end.error_message:
        code = f"{end.error_code}: " if end.error_code else ""
        diagnostic = f"{code}{end.error_message}"
    return SubagentResult(output=output, stop_reason=stop, diagnostic=diagnostic)


def _stop(end: TurnEnd | None, dropped: bool) -> ResultStop:
    if end is None:
        return "aborted" if dropped else "completed"
    match end.reason:
        case "completed":
            return "aborted" if dropped else "completed"
        case "aborted" | "interrupted":
            return "aborted"
        case "max-tokens" | "refusal" | "error" | "budget":
            return end.reason


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
