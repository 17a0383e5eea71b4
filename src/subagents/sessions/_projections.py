"""Projections: pure folds of a session's records (transcript, status, usage).

A projection is `init()` plus `apply(state, record)`; replaying the log from the start always
gives the same state, so a live cache and a cold rebuild agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol, TypeVar

import msgspec
from msgspec.structs import replace

from ..messages import Message, Usage
from ._events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageEvent,
    EventRecord,
    ModelErrorEvent,
    StopReason,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)

__all__ = [
    "Projection",
    "StatusProjection",
    "StatusView",
    "TranscriptProjection",
    "UsageProjection",
    "UsageView",
    "fold",
]

S = TypeVar("S")


class Projection(Protocol[S]):
    def init(self) -> S: ...

    def apply(self, state: S, record: EventRecord) -> S:
        """The state after `record`; the same object when the record does not concern it."""
        ...


def fold(projection: Projection[S], records: Iterable[EventRecord]) -> S:
    """Run `projection` over `records` from its initial state and return the final state."""
    state = projection.init()
    for record in records:
        state = projection.apply(state, record)
    return state


class TranscriptProjection:
    """The messages the model has seen, in order (interrupted prefixes included)."""

    def init(self) -> tuple[Message, ...]:
        return ()

    def apply(self, state: tuple[Message, ...], record: EventRecord) -> tuple[Message, ...]:
        match record.event:
            case UserMessageEvent(message=message):
                return (*state, message)
            case AssistantMessageEvent(message=message) if message.content:
                return (*state, message)
            case ToolResultEvent(message=message):
                return (*state, message)
            case _:
                return state


# Structs without GC tracking (not dataclasses): a listing of a big tree holds one of each per
# member, and tracked objects by the hundred thousand make the collector rescan them all.
class StatusView(msgspec.Struct, frozen=True, gc=False):
    """A session's status: whether a turn is open, the turns so far, how the last one ended."""

    status: Literal["idle", "running"] = "idle"
    turns: int = 0
    last_stop: StopReason | None = None
    last_error: str | None = None
    waiting: tuple[str, ...] = ()
    """The call ids of the open turn that wait for an approval decision."""


class StatusProjection:
    """Whether a turn is open, how many turns ran, how the last one ended, what it waits for."""

    def init(self) -> StatusView:
        return StatusView()

    def apply(self, state: StatusView, record: EventRecord) -> StatusView:
        match record.event:
            case TurnStart(turn=turn):
                return replace(state, status="running", turns=turn)
            case TurnEnd(reason=reason, error_message=error):
                return replace(state, status="idle", last_stop=reason, last_error=error, waiting=())
            case ApprovalRequested(call_id=call_id):
                return replace(state, waiting=(*state.waiting, call_id))
            case ApprovalDecided(call_id=call_id) if call_id in state.waiting:
                return replace(state, waiting=tuple(c for c in state.waiting if c != call_id))
            case ToolResultEvent(message=message) if message.call_id in state.waiting:
                waiting = tuple(c for c in state.waiting if c != message.call_id)
                return replace(state, waiting=waiting)
            case _:
                return state


class UsageView(msgspec.Struct, frozen=True, gc=False):
    """A session's token usage and the number of model calls it made."""

    usage: Usage = msgspec.field(default_factory=Usage)
    model_calls: int = 0


class UsageProjection:
    """Token usage and model calls (failed calls count as calls)."""

    def init(self) -> UsageView:
        return UsageView()

    def apply(self, state: UsageView, record: EventRecord) -> UsageView:
        match record.event:
            case AssistantMessageEvent(usage=usage):
                return UsageView(
                    state.usage + usage if usage is not None else state.usage,
                    state.model_calls + 1,
                )
            case ModelErrorEvent():
                return UsageView(state.usage, state.model_calls + 1)
            case _:
                return state
