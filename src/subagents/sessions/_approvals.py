"""What a log says about approvals: the requests it holds and the step a request holds open.

A gated call's request is written before the call runs and decided once (see `ApprovalRequested`
and `ApprovalDecided`). A request is pending while it has neither a decision nor a result; a
result without a decision closes it too (an interrupt, or a repair, closed the call before
anyone decided). A crash leaves the turn of a pending request open: `waiting_step` finds it,
so a resume can take up the wait for the same call instead of closing the turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..messages import ToolCallBlock
from ._events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageEvent,
    EventRecord,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
)

__all__ = ["ApprovalRequest", "WaitingStep", "approval_requests", "waiting_step"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One request of a session's log and what became of it."""

    call_id: str
    name: str
    arguments: str
    agent: str
    reason: str
    turn: int
    step: int
    seq: int
    time: float
    deadline: float | None
    grant: str | None = None
    """What an approval lets the call do beyond its sandbox mode (an escalation), if anything."""
    decision: ApprovalDecided | None = None
    started: bool = False
    """A `tool/call` followed the request: the call ran (or began to)."""
    closed: bool = False
    """The call has a result."""

    @property
    def pending(self) -> bool:
        """Nobody decided it and the call was not closed otherwise."""
        return self.decision is None and not self.closed

    @property
    def outstanding(self) -> bool:
        """Still to act on: pending, or decided while nobody could (a resume applies it)."""
        return self.pending or not (self.started or self.closed)

    @property
    def state(self) -> str:
        """`pending`, `approved`, `denied` or `closed` (closed undecided)."""
        if self.decision is not None:
            return "approved" if self.decision.approved else "denied"
        return "closed" if self.closed else "pending"


def approval_requests(records: Sequence[EventRecord]) -> list[ApprovalRequest]:
    """Every request in `records`, oldest first, with its decision and whether it ran."""
    found: dict[str, ApprovalRequest] = {}
    for record in records:
        match record.event:
            case ApprovalRequested() as event:
                found[event.call_id] = ApprovalRequest(
                    call_id=event.call_id,
                    name=event.name,
                    arguments=event.arguments,
                    agent=event.agent,
                    reason=event.reason,
                    turn=event.turn,
                    step=event.step,
                    seq=record.seq,
                    time=record.time,
                    deadline=event.deadline,
                    grant=event.grant,
                )
            case ApprovalDecided(call_id=call_id) as event if call_id in found:
                if found[call_id].decision is None:
                    found[call_id] = replace(found[call_id], decision=event)
            case ToolCallEvent(call_id=call_id) if call_id in found:
                found[call_id] = replace(found[call_id], started=True)
            case ToolResultEvent(message=message) if message.call_id in found:
                found[message.call_id] = replace(found[message.call_id], closed=True)
            case _:
                pass
    return list(found.values())


@dataclass(frozen=True, slots=True)
class WaitingStep:
    """An open step whose next call waits for a decision that it has not acted on yet.

    `calls` are the step's tool calls; the first `committed` have results, the call at
    `committed` is the request's, and none after it started.
    """

    turn: int
    step: int
    calls: tuple[ToolCallBlock, ...]
    committed: int
    request: ApprovalRequest


def waiting_step(records: Sequence[EventRecord]) -> WaitingStep | None:
    """The open step a request holds, or None: no open turn, or its crash needs repair.

    The log must end inside a step whose committed results are a prefix of its calls, and
    the first call without a result must be a request that has not started (decided while no
    process held the tree, or not decided at all).
    """
    start = _open_turn_start(records)
    if start is None:
        return None
    turn = records[start].event
    assert isinstance(turn, TurnStart)
    step, calls, answered, started = _last_step(records[start:])
    committed = len(answered)
    if step is None or committed >= len(calls):
        return None
    if [c.id for c in calls[:committed]] != answered:
        return None
    waiting = calls[committed]
    request = next((r for r in approval_requests(records[start:]) if r.call_id == waiting.id), None)
    if request is None or request.started or request.closed:
        return None
    if any(c.id in started for c in calls[committed:]):
        return None
    return WaitingStep(turn.turn, step, calls, committed, request)


def _open_turn_start(records: Sequence[EventRecord]) -> int | None:
    for index in range(len(records) - 1, -1, -1):
        event = records[index].event
        if isinstance(event, TurnEnd):
            return None
        if isinstance(event, TurnStart):
            return index
    return None


def _last_step(
    records: Sequence[EventRecord],
) -> tuple[int | None, tuple[ToolCallBlock, ...], list[str], set[str]]:
    """The open step of a turn (None if none is open): its calls, answered and started ids."""
    step: int | None = None
    calls: tuple[ToolCallBlock, ...] = ()
    answered: list[str] = []
    started: set[str] = set()
    for record in records:
        match record.event:
            case StepStart(step=n):
                step, calls, answered, started = n, (), [], set()
            case StepEnd():
                step = None
            case AssistantMessageEvent(message=message):
                calls = message.tool_calls
            case ToolCallEvent(call_id=call_id):
                started.add(call_id)
            case ToolResultEvent(message=message):
                answered.append(message.call_id)
            case _:
                pass
    return step, calls, answered, started
