"""What a workflow run reports: its result, its `workflow/*` events, and their listeners.

Events are observe-only: they carry a `WorkflowRunInfo` snapshot, never the live run, so a
listener cannot cancel or dispose. A listener that raises (or returns an awaitable that fails)
is logged as `workflow: <event> listener threw|rejected: <error>` and changes nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

from .._task_owner import TaskOwner
from ..messages import JsonObject, JsonValue
from ._meta import WorkflowMeta

__all__ = [
    "AbortSignal",
    "AgentInfo",
    "AgentOutcome",
    "Listener",
    "Listeners",
    "StopReason",
    "WorkflowAgentEnded",
    "WorkflowAgentStarted",
    "WorkflowEnded",
    "WorkflowEvent",
    "WorkflowLogged",
    "WorkflowPhaseStarted",
    "WorkflowProcessStarted",
    "WorkflowResult",
    "WorkflowRunInfo",
    "WorkflowStarted",
]

log = logging.getLogger("subagents.workflows")

StopReason: TypeAlias = Literal["completed", "cancelled", "error"]
AgentOutcome: TypeAlias = Literal["completed", "failed", "cancelled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowResult:
    """How a run ended.

    `error` is set exactly when `stop_reason` is not `completed` (`value` is None then);
    `agents_started` counts the `agent()` calls the run accepted.
    """

    value: JsonValue
    stop_reason: StopReason
    agents_started: int
    error: str | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "value": self.value,
            "stopReason": self.stop_reason,
            "agentsStarted": self.agents_started,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True, slots=True)
class WorkflowRunInfo:
    """The identity of a run, as events show it."""

    id: str
    meta: WorkflowMeta


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentInfo:
    """One `agent()` call with a published child: its guest sequence number and display."""

    seq: int
    label: str
    child_id: str
    phase: str | None = None


@dataclass(frozen=True, slots=True)
class WorkflowStarted:
    event: ClassVar[str] = "workflow/start"
    info: WorkflowRunInfo


@dataclass(frozen=True, slots=True)
class WorkflowProcessStarted:
    """The guest process is running (not in the spec: the run's sandbox facts, for watchers)."""

    event: ClassVar[str] = "workflow/process"
    info: WorkflowRunInfo
    pid: int
    mode: str
    backend: str | None


@dataclass(frozen=True, slots=True)
class WorkflowPhaseStarted:
    event: ClassVar[str] = "workflow/phase"
    info: WorkflowRunInfo
    title: str


@dataclass(frozen=True, slots=True)
class WorkflowLogged:
    event: ClassVar[str] = "workflow/log"
    info: WorkflowRunInfo
    message: str


@dataclass(frozen=True, slots=True)
class WorkflowAgentStarted:
    event: ClassVar[str] = "workflow/agent-start"
    info: WorkflowRunInfo
    agent: AgentInfo


@dataclass(frozen=True, slots=True)
class WorkflowAgentEnded:
    event: ClassVar[str] = "workflow/agent-end"
    info: WorkflowRunInfo
    agent: AgentInfo
    outcome: AgentOutcome


@dataclass(frozen=True, slots=True)
class WorkflowEnded:
    """The run settled (no `value`: a listener never gets an alias of the holder's result)."""

    event: ClassVar[str] = "workflow/end"
    info: WorkflowRunInfo
    stop_reason: StopReason
    agents_started: int
    error: str | None = None


WorkflowEvent: TypeAlias = (
    WorkflowStarted
    | WorkflowProcessStarted
    | WorkflowPhaseStarted
    | WorkflowLogged
    | WorkflowAgentStarted
    | WorkflowAgentEnded
    | WorkflowEnded
)
Listener: TypeAlias = Callable[[WorkflowEvent], object]


def _render(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return "[unrenderable thrown value]"


class Listeners:
    """Event listeners, each contained: a failing one never starves its peers."""

    def __init__(self, owner: TaskOwner, forward: Callable[[object], None] | None = None) -> None:
        self._owner = owner
        self._forward = forward
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def emit(self, event: WorkflowEvent) -> None:
        for listener in tuple(self._listeners):
            try:
                returned = listener(event)
            except Exception as exc:
                log.warning("workflow: %s listener threw: %s", event.event, _render(exc))
                continue
            if inspect.isawaitable(returned):
                self._owner.spawn(self._settle(event.event, returned))
        if self._forward is not None:
            self._forward(event)

    async def _settle(self, name: str, returned: Awaitable[Any]) -> None:
        try:
            await returned
        except Exception as exc:
            log.warning("workflow: %s listener rejected: %s", name, _render(exc))


class AbortSignal:
    """A one-shot abort with a reason; the first reason wins."""

    def __init__(self) -> None:
        self._reason: str | None = None
        self._listeners: list[Callable[[str], None]] = []
        self._waiters: list[asyncio.Future[str]] = []

    @property
    def aborted(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        return self._reason

    def abort(self, reason: str) -> bool:
        """Abort with `reason`; False (and no effect) when already aborted."""
        if self._reason is not None:
            return False
        self._reason = reason
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(reason)
        self._waiters.clear()
        for listener in tuple(self._listeners):
            listener(reason)
        self._listeners.clear()
        return True

    def add_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call `listener(reason)` on abort (at once when already aborted); returns a remover."""
        if self._reason is not None:
            listener(self._reason)
            return lambda: None
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def future(self) -> asyncio.Future[str]:
        """A future resolved with the reason on abort (for `asyncio.wait`)."""
        waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        if self._reason is not None:
            waiter.set_result(self._reason)
            return waiter
        if len(self._waiters) >= 64:  # callers cancel the waiters they no longer need
            self._waiters = [w for w in self._waiters if not w.done()]
        self._waiters.append(waiter)
        return waiter
