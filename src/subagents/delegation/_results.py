"""What a child's run produced, read from its own log (`_wording.py` words its ending)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

import msgspec

from ..messages import JsonValue
from ..sessions import AssistantMessageEvent, EventRecord, InboxSpliced, TurnEnd

__all__ = ["ResultStop", "SubagentResult", "result_from_log"]

ResultStop: TypeAlias = Literal["completed", "aborted", "error", "max-tokens", "refusal", "budget"]


class SubagentResult(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A child's final answer: `output` is its last non-empty assistant text."""

    output: str
    stop_reason: ResultStop
    structured: JsonValue = None
    diagnostic: str | None = None
    """Why it did not complete, in one line: `CODE: reason` for a failure, what was spent
    for a budget."""
    retryable: bool | None = None
    """For a failure: whether trying again may succeed (None: the error did not say)."""


def result_from_log(records: Sequence[EventRecord]) -> SubagentResult:
    """Fold a child's own records (after any fork seed) into its result.

    The output is the last non-empty assistant text (an interrupted prefix counts when nothing
    better exists); the stop reason comes from the latest turn that ran.
    """
    output = ""
    end: TurnEnd | None = None
    dropped = False
    # From the end back: the latest turn end, a cancellation after it, the last answer.
    for record in reversed(records):
        event = record.event
        if type(event) is AssistantMessageEvent:
            text = event.message.text
            if text:
                output = text
                if end is not None:
                    break
        elif type(event) is TurnEnd:
            if end is None:
                end = event
                if output:
                    break
        elif (
            end is None
            and type(event) is InboxSpliced
            and event.outcome == "canceled"
            and not event.inserted
        ):
            dropped = True
    stop = _stop(end, dropped)
    # A spent budget says whose budget and how much was used, a failure why it failed (with
    # its stable code): the parent decides with that, without reading the child's log.
    diagnostic = None
    retryable = None
    if end is not None and stop == "budget":
        diagnostic = end.error_message
    elif end is not None and stop == "error" and end.error_message:
        code = f"{end.error_code}: " if end.error_code else ""
        diagnostic = f"{code}{one_line(end.error_message)}"
        retryable = end.retryable
    return SubagentResult(
        output=output, stop_reason=stop, diagnostic=diagnostic, retryable=retryable
    )


def one_line(text: str, limit: int = 300) -> str:
    """`text` as one line of at most `limit` characters (whitespace runs become one space)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else f"{flat[: limit - 1]}…"


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
