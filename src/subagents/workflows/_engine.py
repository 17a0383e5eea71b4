"""`WorkflowEngine`: starts workflow runs; `WorkflowRun`: one run's handle and its driver.

`start` is synchronous and refuses a bad request before any run exists (meta, script parse,
provider route, per-run cap, args), in the spec's order (2.1). A run then, on a later tick:
selects its working directory once (every child uses it), resolves the parent session's
policy once, refuses to run when that policy cannot be enforced (`cannot enforce the <mode>
file policy`), runs the script under a wall-clock limit, and settles in the spec's order
(3.8): outcome, abort with `workflow settled`, dispose every child, let pending binding work
finish, synthesize missing agent ends, resolve `result`, emit `workflow/end`.

`result` never raises; `cancel(reason)` is first-wins and ignored once the outcome is chosen;
`dispose()` cancels with `workflow disposed` and resolves once everything is released.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .._clock import Clock, SystemClock
from .._task_owner import TaskOwner
from ..core import Agent
from ..delegation import SubagentService
from ..errors import ClosedError, ConfigError, ErrorCode, WorkflowError
from ..messages import JsonValue
from ..policy import ConfinedProcess, Limits, SandboxMode, SandboxPolicy, resolve_policy
from ..sessions import SandboxModeSet
from ._children import ServiceStarter
from ._guest import NotJson, ScriptParseError, compile_script, materialize
from ._host import HostLimits, WorkflowHost, render_exception
from ._meta import WorkflowMeta, parse_meta
from ._protocol import MAX_RESULT_BYTES, SAFE_INTEGER, terminal_result
from ._reports import (
    AbortSignal,
    Listener,
    Listeners,
    WorkflowEnded,
    WorkflowProcessStarted,
    WorkflowResult,
    WorkflowRunInfo,
    WorkflowStarted,
)
from ._script_runtime import GuestProcessRuntime, RunFailure, RunOutcome, RunSpec, ScriptRuntime

__all__ = ["WorkflowEngine", "WorkflowOptions", "WorkflowRequest", "WorkflowRun"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowOptions:
    """How an engine runs workflows (docs/design.md §9)."""

    provider: str = "spawn"
    """The subagent provider of every child (a run may pick another)."""
    max_concurrent_agents: int = 16
    """Children running at once; 0 means `min(16, max(1, cpu_count - 2))`."""
    max_total_agents: int = 200
    """`agent()` calls per run, and the ceiling of a run's own cap."""
    max_items_per_call: int = 4096
    sync_timeout_ms: int = 5000
    """The script's first synchronous slice (until it first awaits)."""
    wall_seconds: float | None = 600.0
    """A run's wall-clock limit (None: none)."""
    max_depth: int | None = 3
    """The deepest a child may be (as for the `subagent` tool)."""
    default_mode: SandboxMode = "workspace-write"
    """The file policy of a session that recorded no `sandbox/mode`."""
    limits: Limits = dataclasses.field(default_factory=Limits)
    """Resource limits of the guest process (its wall clock is `wall_seconds`)."""
    max_result_bytes: int = MAX_RESULT_BYTES
    """The largest return value a run may hand back (its JSON encoding)."""
    max_script_chars: int = 200_000
    """The longest script a run accepts (a script coordinates; the agents do the work)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowRequest:
    """One workflow to start (spec 2.1)."""

    script: str
    meta: object
    parent: Agent
    """The live agent every child is attributed to."""
    args: JsonValue = None
    signal: AbortSignal | None = None
    """Cancels the run when aborted."""
    subagent_provider: str | None = None
    max_total_agents: int | None = None
    """A lower cap for this run (at most the engine's)."""


def _invalid(message: str, code: ErrorCode = ErrorCode.INVALID_ARGUMENT) -> WorkflowError:
    return WorkflowError(message, code=code)


async def session_directory(parent: Agent) -> str:
    """The default directory selection: the parent session's directory, if it still exists."""
    cwd = parent.session.header.cwd
    if not await asyncio.to_thread(os.path.isdir, cwd):
        raise WorkflowError(
            f"the working directory {cwd} is unavailable (not an accessible directory)",
            code=ErrorCode.INVALID_CWD,
        )
    return cwd


class WorkflowEngine:
    """Runs workflow scripts whose children are started through `service`.

    `runtime` runs the scripts (default: a confined guest process per run); `directory`
    selects a run's working directory (default: the parent session's); `policy_for` resolves
    the parent's file policy (default: its last `sandbox/mode`, else `default_mode`);
    `clock` measures the wall-clock limit (default: real time).
    """

    def __init__(
        self,
        service: SubagentService,
        options: WorkflowOptions | None = None,
        *,
        runtime: ScriptRuntime | None = None,
        directory: Callable[[Agent], Awaitable[str]] = session_directory,
        policy_for: Callable[[Agent], SandboxPolicy] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.options = options = options or WorkflowOptions()
        self.runtime: ScriptRuntime = runtime or GuestProcessRuntime()
        if self.runtime.language != "python":
            raise ConfigError(
                "the workflow engine requires the Python script runtime (got a "
                f"{self.runtime.language!r} runtime)",
                code=ErrorCode.CONFIG,
            )
        for name in ("max_total_agents", "max_items_per_call", "sync_timeout_ms"):
            if getattr(options, name) < 1:
                raise ConfigError(f"workflow option {name} must be at least 1")
        self.service = service
        self.clock: Clock = clock or SystemClock()
        """The clock a run's wall-clock limit is measured on."""
        self.directory = directory
        self.policy_for = policy_for or self._session_policy
        self._owner = TaskOwner("workflow runs")
        self._listeners = Listeners(self._owner, forward=service.runtime.bus.emit)
        self._runs: set[WorkflowRun] = set()
        self._closed = False

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Watch every run's `workflow/*` events; returns the remover."""
        return self._listeners.subscribe(listener)

    def _session_policy(self, parent: Agent) -> SandboxPolicy:
        seeded = parent.session.header.seed_length  # a fork's seed holds its parent's modes
        modes = [
            r.event.mode
            for r in list(parent.session.records)[seeded:]
            if isinstance(r.event, SandboxModeSet)
        ]
        return resolve_policy(
            cwd=parent.session.header.cwd,
            session_modes=modes,
            default=self.options.default_mode,
            session_id=parent.id,
        )

    def start(self, request: WorkflowRequest) -> WorkflowRun:
        """Validate and start a run; raises `WorkflowError` before anything exists."""
        if self._closed:
            raise ClosedError("the workflow engine is closed; it starts no more runs")
        meta = parse_meta(request.meta)
        if not isinstance(request.script, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise _invalid("workflow script must be a string")
        if len(request.script) > self.options.max_script_chars:
            raise _invalid(
                f"workflow script is {len(request.script)} characters, over the limit of "
                f"{self.options.max_script_chars}; keep the script to coordination and pass "
                "data through args"
            )
        try:
            compile_script(request.script)
        except ScriptParseError as exc:
            raise _invalid(str(exc), ErrorCode.SCRIPT_PARSE) from None
        route = self.options.provider
        if request.subagent_provider is not None:
            route = request.subagent_provider
        if not route or route != route.strip():
            raise _invalid("workflow subagentProvider must be a non-empty normalized string")
        if self.service.get_provider(route) is None:
            raise _invalid(f'no subagent provider registered for "{route}"', ErrorCode.AGENT_START)
        cap = self._cap(request.max_total_agents)
        try:
            args = materialize(request.args, "args")
        except NotJson as exc:
            raise _invalid(f"workflow args must be plain JSON data — {exc}") from None
        concurrent = self.options.max_concurrent_agents or min(
            16, max(1, (os.cpu_count() or 1) - 2)
        )
        limits = HostLimits(
            max_concurrent_agents=concurrent,
            max_total_agents=cap,
            max_items_per_call=self.options.max_items_per_call,
            sync_timeout_ms=self.options.sync_timeout_ms,
        )
        run = WorkflowRun(self, request, meta=meta, route=route, limits=limits, args=args)
        self._runs.add(run)
        self._listeners.emit(WorkflowStarted(run.info))
        run._launch()  # pyright: ignore[reportPrivateUsage]
        return run

    def _cap(self, requested: object) -> int:
        ceiling = self.options.max_total_agents
        if requested is None:
            return ceiling
        if type(requested) is not int or not 1 <= requested <= SAFE_INTEGER:
            raise _invalid("workflow maxTotalAgents must be a positive safe integer")
        if requested > ceiling:
            raise _invalid(
                f"workflow maxTotalAgents {requested} exceeds the engine ceiling {ceiling}"
            )
        return requested

    def _spawn_driver(self, run: WorkflowRun) -> None:
        self._owner.spawn(run._drive(), name=f"workflow {run.id}")  # pyright: ignore[reportPrivateUsage]

    def _forget(self, run: WorkflowRun) -> None:
        self._runs.discard(run)

    async def aclose(self) -> None:
        """Dispose every live run, then stop; safe to call twice."""
        self._closed = True
        pending = [run.dispose() for run in list(self._runs)]
        for waiter in pending:
            await waiter
        await self._owner.aclose()


class WorkflowRun:
    """One run: `result` (never raises), `cancel(reason)`, `dispose()`."""

    def __init__(
        self,
        engine: WorkflowEngine,
        request: WorkflowRequest,
        *,
        meta: WorkflowMeta,
        route: str,
        limits: HostLimits,
        args: JsonValue,
    ) -> None:
        self.id = str(uuid.uuid4())
        self.meta = meta
        self.info = WorkflowRunInfo(self.id, meta)
        self.parent = request.parent
        self.process_id: int | None = None
        """The guest process's pid once it ran (for diagnostics)."""
        self._engine = engine
        self._signal = request.signal
        self._unhook: Callable[[], None] = lambda: None
        self._abort = AbortSignal()
        self._cancel_reason: str | None = None
        self._terminal = False
        loop = asyncio.get_running_loop()
        self._result: asyncio.Future[WorkflowResult] = loop.create_future()
        self._finished: asyncio.Future[None] = loop.create_future()
        self._starter = ServiceStarter(
            engine.service,
            parent=request.parent,
            provider=route,
            label_prefix=meta.name,
            max_depth=engine.options.max_depth,
        )
        self._host = WorkflowHost(
            info=self.info,
            body=request.script,
            args=args,
            limits=limits,
            starter=self._starter,
            abort=self._abort,
            emit=engine._listeners.emit,  # pyright: ignore[reportPrivateUsage]
        )

    @property
    def result(self) -> asyncio.Future[WorkflowResult]:
        """The run's result; resolves once every child is released. Never raises."""
        return asyncio.shield(self._result)

    @property
    def agents_started(self) -> int:
        return self._host.agents_started

    def cancel(self, reason: str = "workflow cancelled") -> None:
        """Stop the run (the first reason wins; ignored once its outcome is chosen)."""
        if self._terminal or self._cancel_reason is not None:
            return
        self._cancel_reason = reason
        self._abort.abort(reason)
        self._host.dispose_all()

    def dispose(self) -> asyncio.Future[None]:
        """Cancel (`workflow disposed`) and resolve once the run settled and released all."""
        self.cancel("workflow disposed")
        return asyncio.shield(self._finished)

    def _launch(self) -> None:
        if self._signal is not None:
            self._unhook = self._signal.add_listener(
                lambda reason: self.cancel("workflow signal aborted")
            )
        self._engine._spawn_driver(self)  # pyright: ignore[reportPrivateUsage]

    # -- the driver -------------------------------------------------------------------------

    async def _drive(self) -> None:
        try:
            result = await self._outcome()
        except Exception as exc:  # a bug here must still settle the run
            self._terminal = True
            result = self._error(f"workflow engine failed: {render_exception(exc)}")
        try:
            self._unhook()
            self._abort.abort("workflow settled")
            await self._host.settle()
        finally:
            self._result.set_result(result)
            self._engine._forget(self)  # pyright: ignore[reportPrivateUsage]
            self._engine._listeners.emit(  # pyright: ignore[reportPrivateUsage]
                WorkflowEnded(
                    self.info,
                    stop_reason=result.stop_reason,
                    agents_started=result.agents_started,
                    error=result.error,
                )
            )
            self._finished.set_result(None)

    def _error(self, message: str) -> WorkflowResult:
        return WorkflowResult(
            value=None,
            stop_reason="error",
            agents_started=self._host.agents_started,
            error=message,
        )

    async def _outcome(self) -> WorkflowResult:
        outcome = await self._execute()
        self._terminal = True
        if self._cancel_reason is not None:
            return WorkflowResult(
                value=None,
                stop_reason="cancelled",
                agents_started=self._host.agents_started,
                error=f"workflow run cancelled: {self._cancel_reason}",
            )
        if isinstance(outcome, str):
            return self._error(outcome)
        if outcome is None:  # cannot happen without a cancel; defensive
            return self._error("workflow run ended before it started")
        if outcome.failure is not None:
            failure = outcome.failure
            return self._error(f"workflow execution failed ({failure.kind}): {failure.message}")
        try:
            return terminal_result(
                outcome.value,
                host_count=self._host.agents_started,
                max_bytes=self._engine.options.max_result_bytes,
            )
        except WorkflowError as exc:
            return self._error(exc.message)

    async def _execute(self) -> RunOutcome | str | None:
        """Run the script; a str is an error decided before or around it."""
        engine = self._engine
        if self._abort.aborted:
            return None
        try:
            cwd = await engine.directory(self.parent)
        except Exception as exc:
            return render_exception(exc)
        if self._abort.aborted:
            return None
        try:
            policy = await asyncio.to_thread(engine.policy_for, self.parent)
        except Exception as exc:
            return f"cannot resolve the file policy of the run: {render_exception(exc)}"
        if policy.mode != "danger-full-access":
            confinement = await asyncio.to_thread(engine.runtime.confinement)
            if confinement.backend is None:
                return f"cannot enforce the {policy.mode} file policy: {confinement.detail}"
        if self._abort.aborted:
            return None
        self._starter.cwd = cwd
        spec = RunSpec(
            bindings=self._host.bindings,
            cwd=cwd,
            policy=policy,
            limits=dataclasses.replace(engine.options.limits, wall_seconds=None),
            abort=self._abort,
            on_launch=self._launched,
        )
        try:
            return await self._run_until_deadline(spec)
        except Exception as exc:
            return RunOutcome(failure=RunFailure("exception", render_exception(exc)))

    async def _run_until_deadline(self, spec: RunSpec) -> RunOutcome | str:
        """Run the script; past the wall-clock limit (on the engine's clock) stop it."""
        engine = self._engine
        wall = engine.options.wall_seconds
        owner = TaskOwner(f"workflow {self.id} run")
        try:
            run = owner.spawn(engine.runtime.run(spec), name=f"workflow {self.id} script")
            waits: set[asyncio.Task[Any]] = {run}
            if wall is not None:
                waits.add(owner.spawn(engine.clock.sleep(wall), name=f"workflow {self.id} wall"))
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if run.done():
                return run.result()
            run.cancel()  # the runtime kills every process of the run before it returns
            await asyncio.wait({run})
            return (
                f"workflow run exceeded its wall-clock limit of {wall:g} s; the script was "
                "stopped and every process of the run killed. Split the work into smaller "
                "workflows or raise the engine's wall_seconds"
            )
        finally:
            await owner.aclose()

    def _launched(self, pid: int, process: ConfinedProcess) -> None:
        self.process_id = pid
        facts = process.facts
        self._engine._listeners.emit(  # pyright: ignore[reportPrivateUsage]
            WorkflowProcessStarted(self.info, pid, facts.mode, facts.backend)
        )
