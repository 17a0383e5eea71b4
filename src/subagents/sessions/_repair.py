"""Crash repair: close a turn that a crash cut open, with explicit results for its tool calls.

`interrupted_turn_closers` only closes the turn (what an interrupt of a dead tree does);
`crash_recovery` also queues the turn's re-run: a retry message at the head of the next-turn
inbox, so the work the crash cut off runs again from the repaired prefix. Retries are counted
in the log (each retry message names its attempt), and a turn cut off `max_retries` times in a
row ends `error` instead of looping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import ErrorCode
from ..ids import new_message_id
from ..messages import MessageSource, ToolResultMessage, user_message
from ._events import (
    AssistantMessageEvent,
    EventRecord,
    InboxSpliced,
    SessionEvent,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)

__all__ = [
    "CRASH_RETRY_SOURCE",
    "DEFAULT_CRASH_RETRIES",
    "TOOL_NOT_STARTED_TEXT",
    "TOOL_OUTCOME_UNKNOWN_TEXT",
    "KnownOutcome",
    "crash_recovery",
    "has_open_turn",
    "interrupted_turn_closers",
]

DEFAULT_CRASH_RETRIES = 3
"""How many times in a row a turn cut off by a crash is run again before it ends `error`."""

CRASH_RETRY_SOURCE = MessageSource(kind="runtime", name="crash-retry")
"""The source of a retry message: what tells a re-run turn from an ordinary one."""

TOOL_NOT_STARTED_TEXT = (
    "The tool call was interrupted before the Harness recorded it as started. "
    "Retry it if it is still needed."
)
TOOL_OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)


@dataclass(frozen=True, slots=True)
class KnownOutcome:
    """The real result of a cut-off call, learned after the crash (a foreground child's answer)."""

    content: str
    is_error: bool = False
    code: str | None = None


def has_open_turn(records: Sequence[EventRecord]) -> bool:
    """Whether the log ends inside a turn (a crash cut it off)."""
    return _open_turn(records) is not None


def interrupted_turn_closers(
    records: Sequence[EventRecord], known: Mapping[str, KnownOutcome] | None = None
) -> list[SessionEvent]:
    """The events that close the log's open final turn, or `[]` if no turn is open.

    Every tool call of the last assistant message gets a result: its `known` outcome when the
    caller learned it (by call id), else `TOOL_NOT_STARTED` when no `tool/call` was recorded,
    `TOOL_OUTCOME_UNKNOWN` when it was recorded without a result. Then `step/end` if a step is
    open, then `turn/end` with reason `interrupted`.
    """
    known = known or {}
    turn_start = _open_turn(records)
    if turn_start is None:
        return []
    turn = turn_start[1]
    step: int | None = None
    calls: dict[str, str] = {}
    started: set[str] = set()
    answered: set[str] = set()
    for record in records[turn_start[0] :]:
        match record.event:
            case StepStart(step=n):
                step, calls, started, answered = n, {}, set(), set()
            case StepEnd():
                step = None
            case AssistantMessageEvent(message=message):
                calls = {c.id: c.name for c in message.tool_calls}
            case ToolCallEvent(call_id=call_id):
                started.add(call_id)
            case ToolResultEvent(message=message):
                answered.add(message.call_id)
            case _:
                pass
    closers: list[SessionEvent] = []
    if step is not None:
        for call_id, name in calls.items():
            if call_id not in answered:
                outcome = known.get(call_id) or _unanswered(started=call_id in started)
                result = ToolResultMessage(
                    id=new_message_id(),
                    call_id=call_id,
                    name=name,
                    content=outcome.content,
                    is_error=outcome.is_error,
                )
                closers.append(
                    ToolResultEvent(turn=turn, step=step, message=result, code=outcome.code)
                )
        closers.append(StepEnd(turn=turn, step=step))
    closers.append(TurnEnd(turn=turn, reason="interrupted"))
    return closers


def _unanswered(*, started: bool) -> KnownOutcome:
    """The result of a call the crash left without one: its outcome is unknown once started."""
    if started:
        return KnownOutcome(TOOL_OUTCOME_UNKNOWN_TEXT, True, str(ErrorCode.TOOL_OUTCOME_UNKNOWN))
    return KnownOutcome(TOOL_NOT_STARTED_TEXT, True, str(ErrorCode.TOOL_NOT_STARTED))


def crash_recovery(
    records: Sequence[EventRecord],
    known: Mapping[str, KnownOutcome] | None = None,
    *,
    max_retries: int = DEFAULT_CRASH_RETRIES,
) -> list[SessionEvent]:
    """What a resume appends to a log whose last turn a crash cut off (`[]`: none was cut).

    The turn is closed (`interrupted_turn_closers`) and, if it had entered its input, its
    re-run is queued first in the next-turn inbox. When the cut turn was already retry
    `max_retries`, it ends `error` (`CRASH_RETRIES_EXHAUSTED`) and nothing is queued: a turn
    that kills its process every time must not loop.
    """
    closers = interrupted_turn_closers(records, known)
    if not closers:
        return []
    if not _entered_input(records):
        return closers  # cut before it took its input, which is still pending: no re-run
    attempt = _retries_in_a_row(records) + 1
    if attempt > max_retries:
        end = closers[-1]
        assert isinstance(end, TurnEnd)
        closers[-1] = TurnEnd(
            turn=end.turn,
            reason="error",
            error_code=str(ErrorCode.CRASH_RETRIES_EXHAUSTED),
            error_message=(
                f"this turn was cut off by a crash {attempt} times in a row and is not run "
                "again; read its log to see what it was doing, then send a new message"
            ),
        )
        return closers
    retry = user_message(
        f"[runtime] Your previous turn was cut off when the process running it stopped "
        f"(re-run {attempt} of at most {max_retries}). Tool calls without a recorded result "
        "are marked above. Continue the task from where it stopped; do not redo work that "
        "already has a result.",
        source=CRASH_RETRY_SOURCE,
    )
    closers.append(InboxSpliced(target="next-turn", start=0, inserted=(retry,)))
    return closers


def _entered_input(records: Sequence[EventRecord]) -> bool:
    """Whether the open final turn entered any message (else nothing of it ran)."""
    for index in range(len(records) - 1, -1, -1):
        event = records[index].event
        if isinstance(event, UserMessageEvent):
            return True
        if isinstance(event, TurnStart):
            return False
    return False


def _retries_in_a_row(records: Sequence[EventRecord]) -> int:
    """How many of the turns ending the log (the open one included) were crash re-runs.

    A turn is a re-run when it entered a retry message; the count stops at the first turn
    that was not one, or that did not end cut off (`interrupted`), going backwards.
    """
    count = 0
    entered_retry = False
    closed_by_crash = True  # the open final turn
    for index in range(len(records) - 1, -1, -1):
        event = records[index].event
        match event:
            case UserMessageEvent(message=message) if message.source == CRASH_RETRY_SOURCE:
                entered_retry = True
            case TurnStart():
                if not (entered_retry and closed_by_crash):
                    return count
                count += 1
                entered_retry = False
                closed_by_crash = False
            case TurnEnd(reason=reason):
                closed_by_crash = reason == "interrupted"
            case _:
                pass
    return count


def _open_turn(records: Sequence[EventRecord]) -> tuple[int, int] | None:
    """(index, turn) of a `turn/start` with no `turn/end` after it."""
    for index in range(len(records) - 1, -1, -1):
        event = records[index].event
        if isinstance(event, TurnEnd):
            return None
        if isinstance(event, TurnStart):
            return index, event.turn
    return None
