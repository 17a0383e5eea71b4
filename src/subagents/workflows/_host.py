"""The host bindings of one run (docs/design.md §9).

Five async bindings serve the guest: `begin`, `startChild`, `childResult`, `disposeChild` and
`progress`. Each validates its argument in the spec's order with the spec's messages (the
guest is hostile), then does the active check: once the run's abort signal fired, a binding
fails with the abort reason itself (`workflow settled` at settlement, else the cancel reason).

The host owns the run's children: call ids are allocated after validation (1-based, never
reused, counted even when the start fails: the host-observed `agentsStarted`); disposal is
memoized per child and removes it from the registry when it settles; a child published after
the abort is disposed and its start fails; caps on total and concurrent children are enforced
here too, not only in the guest. `settle` runs steps 4-7 of the settlement sequence.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, cast

from .._task_owner import TaskOwner
from ..errors import ErrorCode, SubagentsError, WorkflowError
from ..messages import JsonObject, JsonValue
from ._guest import NotJson, materialize, schema_subset_problem
from ._protocol import SAFE_INTEGER
from ._reports import (
    AbortSignal,
    AgentInfo,
    AgentOutcome,
    WorkflowAgentEnded,
    WorkflowAgentStarted,
    WorkflowEvent,
    WorkflowLogged,
    WorkflowPhaseStarted,
    WorkflowRunInfo,
)

__all__ = [
    "Binding",
    "ChildHandle",
    "ChildOutcome",
    "ChildRequest",
    "ChildStarter",
    "HostLimits",
    "WorkflowHost",
    "render_exception",
]

log = logging.getLogger("subagents.workflows")

Binding: TypeAlias = Callable[[JsonValue], Awaitable[JsonValue]]
_OUTCOMES: tuple[AgentOutcome, ...] = ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLimits:
    """The caps of one run, as `begin` hands them to the guest."""

    max_concurrent_agents: int
    max_total_agents: int
    max_items_per_call: int
    sync_timeout_ms: int

    def to_json(self) -> JsonObject:
        return {
            "maxConcurrentAgents": self.max_concurrent_agents,
            "maxTotalAgents": self.max_total_agents,
            "maxItemsPerCall": self.max_items_per_call,
            "syncTimeoutMs": self.sync_timeout_ms,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildRequest:
    """One validated `startChild` request."""

    prompt: str
    schema: JsonObject | None = None
    provider: str | None = None
    model: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildOutcome:
    """A child's result: its final text, how it stopped, and its structured value if any."""

    output: str
    stop_reason: str
    structured: JsonValue = None


class ChildHandle(Protocol):
    """A published child: `wait` for its result, `dispose` to stop and release it."""

    @property
    def child_id(self) -> str: ...

    async def wait(self) -> ChildOutcome: ...

    async def dispose(self) -> None: ...


class ChildStarter(Protocol):
    async def __call__(self, request: ChildRequest, *, call_id: int) -> ChildHandle: ...


def render_exception(exc: BaseException) -> str:
    """The message a binding failure carries to the guest."""
    if isinstance(exc, SubagentsError):
        return exc.message
    try:
        text = str(exc)
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    except Exception:
        return "[unrenderable thrown value]"


def _error(message: str, code: ErrorCode = ErrorCode.INVALID_ARGUMENT) -> WorkflowError:
    return WorkflowError(message, code=code)


def _object(value: object) -> JsonObject:
    if not isinstance(value, dict):
        raise _error("workflow binding requires an object")
    return cast("JsonObject", value)


def _text(fields: JsonObject, key: str, name: str | None = None) -> str:
    value = fields.get(key)
    if not isinstance(value, str):
        raise _error(f"workflow {name or key} must be a string")
    return value


def _snapshot(value: JsonValue) -> JsonValue:
    try:
        return materialize(value, "value")
    except NotJson:
        raise _error("workflow binding value must be lossless JSON") from None


Captured: TypeAlias = tuple[bool, Any]


async def _capture(coro: Awaitable[Any]) -> Captured:
    """Run `coro`, returning (True, value) or (False, exception): host tasks never raise."""
    try:
        return True, await coro
    except Exception as exc:
        return False, exc


class _Child:
    def __init__(self, call_id: int, handle: ChildHandle) -> None:
        self.call_id = call_id
        self.handle = handle
        self.disposal: asyncio.Task[Captured] | None = None
        self.watcher: asyncio.Task[Captured] | None = None
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class WorkflowHost:
    """The bindings, children and live-agent ledger of one run."""

    def __init__(
        self,
        *,
        info: WorkflowRunInfo,
        body: str,
        args: JsonValue,
        limits: HostLimits,
        starter: ChildStarter,
        abort: AbortSignal,
        emit: Callable[[WorkflowEvent], None],
    ) -> None:
        self.info = info
        self._body = body
        self._args = args
        self.limits = limits
        self._starter = starter
        self._abort = abort
        self._emit = emit
        self._calls = 0
        self._starting = 0
        self._begun = False
        self._children: dict[int, _Child] = {}
        self._ledger: dict[int, AgentInfo] = {}
        self._tasks = TaskOwner(f"workflow {info.id} bindings")
        self._pending: set[asyncio.Task[Captured]] = set()
        self._cleanup = TaskOwner(f"workflow {info.id} children")
        self.bindings: dict[str, Binding] = {
            "begin": self.begin,
            "startChild": self.start_child,
            "childResult": self.child_result,
            "disposeChild": self.dispose_child,
            "progress": self.progress,
        }

    @property
    def agents_started(self) -> int:
        """The host-observed count: call ids allocated so far."""
        return self._calls

    def _active(self) -> None:
        reason = self._abort.reason
        if reason is not None:
            raise _error(reason, ErrorCode.CANCELLED)

    def _track(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Captured]:
        task = self._tasks.spawn(_capture(coro), name=name)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task

    @staticmethod
    async def _join(task: asyncio.Future[Captured]) -> Any:
        ok, value = await asyncio.shield(task)
        if not ok:
            raise value
        return value

    # -- begin ------------------------------------------------------------------------------

    async def begin(self, request: JsonValue) -> JsonValue:
        """The script, its meta, args and limits (accepted once)."""
        self._active()
        if self._begun:
            raise _error("workflow begin may only be called once")
        self._begun = True
        payload: JsonObject = {
            "meta": self.info.meta.to_json(),
            "body": self._body,
            "limits": self.limits.to_json(),
        }
        if self._args is not None:
            payload["args"] = self._args
        return _snapshot(payload)

    # -- children ---------------------------------------------------------------------------

    async def start_child(self, request: JsonValue) -> JsonValue:
        """Start one child: `{callId, childId}`."""
        child = self._child_request(request)
        self._active()
        if self._calls >= self.limits.max_total_agents:
            raise _error(
                f"this run reached its total agent cap ({self.limits.max_total_agents}) — a "
                "runaway-loop backstop; raise the applicable maxTotalAgents limit if the scale "
                "is intentional",
                ErrorCode.AGENT_CAP,
            )
        if self._starting + len(self._children) >= self.limits.max_concurrent_agents:
            raise _error(
                f"this run reached its concurrency cap ({self.limits.max_concurrent_agents} "
                "agents at once); wait for running agents before starting more",
                ErrorCode.AGENT_CAP,
            )
        self._calls += 1
        call_id = self._calls
        return await self._join(self._track(self._publish(call_id, child), f"start {call_id}"))

    def _child_request(self, request: JsonValue) -> ChildRequest:
        fields = _object(request)
        prompt = _text(fields, "prompt")
        found: dict[str, str] = {}
        for key in ("provider", "model", "name"):
            if key in fields:
                found[key] = _text(fields, key)
        schema: JsonObject | None = None
        if "schema" in fields:
            schema = _object(fields["schema"])
            problem = schema_subset_problem(schema)
            if problem is not None:
                raise _error(
                    f"workflow schema is outside the supported subset — {problem}",
                    ErrorCode.UNSUPPORTED_SCHEMA,
                )
        return ChildRequest(prompt=prompt, schema=schema, **found)

    async def _publish(self, call_id: int, request: ChildRequest) -> JsonObject:
        self._starting += 1
        try:
            handle = await self._starter(request, call_id=call_id)
        finally:
            self._starting -= 1
        child = _Child(call_id, handle)
        self._children[call_id] = child
        if self._abort.aborted:
            await asyncio.shield(self._dispose(child))
            raise _error("workflow child started after cancellation", ErrorCode.CANCELLED)
        return {"callId": call_id, "childId": str(handle.child_id)}

    def _lookup(self, request: JsonValue) -> _Child:
        self._active()
        call_id = _object(request).get("callId")
        if type(call_id) is not int or abs(call_id) > SAFE_INTEGER:
            raise _error("workflow child call id must be an integer")
        child = self._children.get(call_id)
        if child is None:
            raise _error("workflow child call is not active")
        return child

    async def child_result(self, request: JsonValue) -> JsonValue:
        """The child's result projection, or the abort reason once the run is aborted."""
        child = self._lookup(request)
        return await self._join(self._track(self._result(child), f"result {child.call_id}"))

    async def _result(self, child: _Child) -> JsonValue:
        if child.watcher is None:
            child.watcher = self._cleanup.spawn(_capture(child.handle.wait()))
        abort = self._abort.future()
        try:
            await asyncio.wait(
                {child.watcher, abort, child.gone}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            abort.cancel()
        self._active()
        if not child.watcher.done():
            raise _error("workflow child disposed", ErrorCode.CANCELLED)
        ok, outcome = child.watcher.result()
        if not ok:
            raise outcome
        return _project(cast("ChildOutcome", outcome))

    async def dispose_child(self, request: JsonValue) -> JsonValue:
        """Join the child's (memoized) disposal; None once it has finished."""
        child = self._lookup(request)
        await asyncio.shield(self._dispose(child))
        return None

    def _dispose(self, child: _Child) -> asyncio.Task[Captured]:
        if child.disposal is None:
            if not child.gone.done():
                child.gone.set_result(None)
            child.disposal = self._cleanup.spawn(
                _capture(self._release(child)), name=f"dispose {child.call_id}"
            )
        return child.disposal

    async def _release(self, child: _Child) -> None:
        try:
            await child.handle.dispose()
        except Exception as exc:
            log.warning("workflow: child dispose failed: %s", render_exception(exc))
        finally:
            self._children.pop(child.call_id, None)

    def dispose_all(self) -> None:
        """Start disposing every published child (cancellation)."""
        for child in list(self._children.values()):
            self._dispose(child)

    # -- progress ---------------------------------------------------------------------------

    async def progress(self, request: JsonValue) -> JsonValue:
        """Validate the whole batch, then dispatch it in order (each after the active check)."""
        if not isinstance(request, list):
            raise _error("workflow progress requires an array of events")
        starting: set[int] = set()
        batch = [self._progress_event(item, starting) for item in cast("list[object]", request)]
        for kind, payload in batch:
            self._active()
            self._dispatch(kind, payload)
        return None

    def _progress_event(self, item: object, starting: set[int]) -> tuple[str, object]:
        event = _object(item)
        match event.get("type"):
            case "phase":
                return "phase", _text(event, "title", "phase")
            case "log":
                return "log", _text(event, "message", "log")
            case "agent-start":
                agent = _agent_info(_object(event.get("info")))
                if agent.seq in self._ledger or agent.seq in starting:
                    raise _error(f"workflow agent sequence {agent.seq} is already live")
                starting.add(agent.seq)
                return "agent-start", agent
            case "agent-end":
                info = _object(event.get("info"))
                outcome = info.get("outcome")
                if outcome not in _OUTCOMES:
                    raise _error("invalid workflow agent outcome")
                return "agent-end", (_agent_info(info), outcome)
            case _:
                raise _error("invalid workflow progress event")

    def _dispatch(self, kind: str, payload: object) -> None:
        if kind == "phase":
            self._emit(WorkflowPhaseStarted(self.info, cast("str", payload)))
        elif kind == "log":
            self._emit(WorkflowLogged(self.info, cast("str", payload)))
        elif kind == "agent-start":
            agent = cast("AgentInfo", payload)
            self._ledger[agent.seq] = agent
            self._emit(WorkflowAgentStarted(self.info, agent))
        else:
            ended, outcome = cast("tuple[AgentInfo, AgentOutcome]", payload)
            started = self._ledger.pop(ended.seq, None)
            if started is not None:  # a second end, or an end without a start, is dropped
                self._emit(WorkflowAgentEnded(self.info, started, outcome))

    # -- settlement -------------------------------------------------------------------------

    async def settle(self) -> None:
        """Steps 4-7 of the settlement sequence.

        Dispose every child, let pending binding work finish (a late start is disposed too),
        await every disposal, then end every agent still live as cancelled.
        """
        self.dispose_all()
        while self._pending:
            await asyncio.wait(set(self._pending))
        while self._children:
            self.dispose_all()
            disposals = {c.disposal for c in self._children.values() if c.disposal is not None}
            await asyncio.wait(disposals)
        await self._cleanup.aclose()
        await self._tasks.aclose()
        for agent in list(self._ledger.values()):
            self._emit(WorkflowAgentEnded(self.info, agent, "cancelled"))
        self._ledger.clear()


def _agent_info(info: JsonObject) -> AgentInfo:
    seq = info.get("seq")
    if type(seq) is not int or not 1 <= seq <= SAFE_INTEGER:
        raise _error("workflow agent sequence must be a positive integer")
    label = _text(info, "label", "agent label")
    child_id = _text(info, "childId", "child id")
    phase = _text(info, "phase", "agent phase") if "phase" in info else None
    return AgentInfo(seq=seq, label=label, child_id=child_id, phase=phase)


def _project(outcome: ChildOutcome) -> JsonValue:
    projection: JsonObject = {
        "output": [{"type": "text", "text": outcome.output}] if outcome.output else [],
        "stopReason": outcome.stop_reason,
    }
    if outcome.structured is not None:
        projection["structured"] = outcome.structured
    return _snapshot(projection)
