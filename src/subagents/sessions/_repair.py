"""Crash repair: close a turn that a crash cut open, with explicit results for its tool calls."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ErrorCode
from ..ids import new_message_id
from ..messages import ToolResultMessage
from ._events import (
    AssistantMessageEvent,
    EventRecord,
    SessionEvent,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
)

__all__ = ["TOOL_NOT_STARTED_TEXT", "TOOL_OUTCOME_UNKNOWN_TEXT", "interrupted_turn_closers"]

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


def interrupted_turn_closers(records: Sequence[EventRecord]) -> list[SessionEvent]:
    """The events that close the log's open final turn, or `[]` if no turn is open.

    Every tool call of the last assistant message gets a result: `TOOL_NOT_STARTED` when no
    `tool/call` was recorded, `TOOL_OUTCOME_UNKNOWN` when it was recorded without a result.
    Then `step/end` if a step is open, then `turn/end` with reason `interrupted`.
    """
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
            if call_id in answered:
                continue
            if call_id in started:
                code, text = ErrorCode.TOOL_OUTCOME_UNKNOWN, TOOL_OUTCOME_UNKNOWN_TEXT
            else:
                code, text = ErrorCode.TOOL_NOT_STARTED, TOOL_NOT_STARTED_TEXT
            result = ToolResultMessage(
                id=new_message_id(), call_id=call_id, name=name, content=text, is_error=True
            )
            closers.append(ToolResultEvent(turn=turn, step=step, message=result, code=str(code)))
        closers.append(StepEnd(turn=turn, step=step))
    closers.append(TurnEnd(turn=turn, reason="interrupted"))
    return closers


def _open_turn(records: Sequence[EventRecord]) -> tuple[int, int] | None:
    """(index, turn) of a `turn/start` with no `turn/end` after it."""
    for index in range(len(records) - 1, -1, -1):
        event = records[index].event
        if isinstance(event, TurnEnd):
            return None
        if isinstance(event, TurnStart):
            return index, event.turn
    return None
