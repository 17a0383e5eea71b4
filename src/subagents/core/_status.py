"""The one status vocabulary of every listing: `tree`, `sessions`, `list_agents`, the live view.

A member's status says where its work stands, told apart so that a person (or a model) knows
what to do next: a settled turn (`completed`, `failed`), a turn stopped on purpose (`aborted`:
Ctrl-C, `interrupt`, a parent's cancel), a turn whose process died (`crashed`: the turn is still
open in the log and no live process holds the tree) and a turn a crash cut off that repair has
closed (`cut-off`); `resume` runs the last two again. A turn whose tool call waits for a
person's decision is `waiting for approval`, whether or not a process holds its tree: the
decision is what moves it on (a resume then takes the wait up again).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, Protocol

from ..sessions import StopReason

__all__ = ["Status", "live_status", "settled_status", "stored_status"]


class Status(StrEnum):
    """Where a member's work stands; the values are what listings print."""

    RUNNING = "running"
    """A live process is running its turn."""
    WAITING = "waiting for approval"
    """Its turn waits for a decision on a gated tool call (`subagents approve` / `deny`)."""
    IDLE = "idle"
    """Loaded by a live process, between turns (or it never ran one)."""
    READY = "ready"
    """A stored continuable child whose last turn completed: a message starts its next turn."""
    COMPLETED = "completed"
    """Its last turn completed."""
    FAILED = "failed"
    """Its last turn ended with an error, `max-tokens`, a refusal or a spent budget."""
    ABORTED = "aborted"
    """Its last turn was stopped on purpose: Ctrl-C, `interrupt`, or an ancestor's cancel."""
    CRASHED = "crashed"
    """Its turn is open in the log but no live process holds the tree: the process died."""
    CUT_OFF = "cut-off"
    """Its turn was cut off by a crash and closed by repair; `resume` runs it again."""

    @property
    def meaning(self) -> str:
        """One sentence for the README table and help texts."""
        return _MEANINGS[self]


_MEANINGS = {
    Status.RUNNING: "a live process is running its turn",
    Status.WAITING: "a tool call of its turn waits for a decision: `approve` or `deny` it",
    Status.IDLE: "loaded by a live process, between turns",
    Status.READY: "a stored continuable child whose last turn completed; a message continues it",
    Status.COMPLETED: "its last turn completed",
    Status.FAILED: "its last turn ended with an error, `max-tokens`, a refusal or a spent budget",
    Status.ABORTED: "its last turn was stopped: Ctrl-C, `interrupt`, or a parent's cancel",
    Status.CRASHED: "its turn is open but no live process holds the tree: `resume` continues it",
    Status.CUT_OFF: "a crash cut its turn, which repair closed: `resume` runs it again",
}


def settled_status(reason: StopReason | None) -> Status:
    """The status after a turn that ended with `reason` (None: no turn ran yet)."""
    return _SETTLED.get(reason, Status.FAILED)


# A dict, not a `match`: a listing asks this of every member (10,000 in a big tree).
_SETTLED: dict[StopReason | None, Status] = {
    None: Status.IDLE,
    "completed": Status.COMPLETED,
    "aborted": Status.ABORTED,
    "interrupted": Status.CUT_OFF,  # written only by crash repair
}


class StoredFacts(Protocol):
    """What a stored status is told from: a `StatusView`, or a `ListingRow` (`waiting` a count)."""

    @property
    def status(self) -> Literal["idle", "running"]: ...

    @property
    def last_stop(self) -> StopReason | None: ...

    @property
    def waiting(self) -> tuple[str, ...] | int:
        """What its open turn waits for: none when falsy."""
        ...


def stored_status(view: StoredFacts, *, held: bool, continuable: bool = False) -> Status:
    """The status of a stored session, from its log's `StatusProjection`.

    An open turn is `running` only while a live process holds the tree (`held`); otherwise that
    process died and the member is `crashed`. A continuable child whose last turn completed is
    `ready`: it is resumable, not a result waiting to be collected.
    """
    if view.status == "running":
        if view.waiting:
            return Status.WAITING
        return Status.RUNNING if held else Status.CRASHED
    status = settled_status(view.last_stop)
    if continuable and (status is Status.COMPLETED or status is Status.IDLE):
        return Status.READY
    return status


def live_status(
    agent_status: Literal["idle", "running"],
    last_stop: StopReason | None,
    *,
    continuable: bool = False,
    waiting: bool = False,
) -> Status:
    """The status of a live agent: `running` (or waiting), else how its last turn ended.

    A continuable child between completed turns is `idle` (it may be waiting on agents it
    started, and a message continues it): for it `completed` would read as final.
    """
    if agent_status == "running":
        return Status.WAITING if waiting else Status.RUNNING
    status = settled_status(last_stop)
    if continuable and status is Status.COMPLETED:
        return Status.IDLE
    return status
