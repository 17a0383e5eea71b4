"""Helpers shared by the workflow tests (tests/workflows).

Workflows run against the real subagent runtime with a scripted model (docs/design.md §6.2) and a
real guest process per run. A child is held at a known point with the `hold` tool of `Gates`;
the guest process is watched through `workflow/process` events and /proc, never by timing.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents import DelegationOptions
from subagents.core import Agent
from subagents.delegation import (
    Capability,
    DelegationRuntime,
    ResumeRequest,
    StartRequest,
    SubagentChild,
    SubagentResult,
)
from subagents.errors import SubagentError
from subagents.ids import SessionId, new_message_id
from subagents.messages import (
    AssistantMessage,
    JsonValue,
    TextBlock,
    ToolResultMessage,
    UserMessage,
)
from subagents.policy import Confinement, SandboxMode
from subagents.sessions import (
    AssistantMessageEvent,
    EventRecord,
    SessionEvent,
    StopReason,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
)
from subagents.testing import FakeClock, InMemoryEventStore, RecordingModel
from subagents.tools import ToolSpec, tool
from subagents.workflows import (
    RunOutcome,
    RunSpec,
    WorkflowEngine,
    WorkflowEvent,
    WorkflowOptions,
    WorkflowProcessStarted,
    WorkflowRequest,
    WorkflowRun,
)
from subagents.workflows._script_runtime import GUEST_PATH

META: dict[str, Any] = {"name": "host-test", "description": "workflow callbacks"}
FAST = WorkflowOptions(wall_seconds=30.0)
STRUCTURED_TOOL = "structured_output"
"""The tool a child answers a schema through (what its log records)."""

__all__ = [
    "COMPLETED",
    "ControlledRuntime",
    "FAST",
    "META",
    "Gates",
    "Recorder",
    "StubProvider",
    "StubRun",
    "descendants",
    "guest_processes",
    "open_engine",
    "pid_alive",
    "request",
    "result_records",
    "run_to_end",
    "tool_replies",
]


COMPLETED = RunOutcome(value={"value": None, "stopReason": "completed", "agentsStarted": 0})


class ControlledRuntime:
    """A script runtime the test scripts (note N0's `ControlledRuntime`): `execute` plays the
    guest against the real bindings."""

    language = "python"

    def __init__(
        self,
        execute: Callable[[RunSpec], Awaitable[RunOutcome]] | None = None,
        *,
        confined: bool = True,
    ) -> None:
        self.confined = confined
        self.execute = execute or self._completed
        self.specs: list[RunSpec] = []

    async def _completed(self, spec: RunSpec) -> RunOutcome:
        return COMPLETED

    def confinement(self) -> Confinement:
        if self.confined:
            return Confinement("bwrap", "full", "a test runtime")
        return Confinement(None, None, "this test runtime cannot confine")

    async def run(self, spec: RunSpec) -> RunOutcome:
        self.specs.append(spec)
        return await self.execute(spec)


class Gates:
    """The `hold(label)` tool: it blocks until the test releases `label`."""

    def __init__(self) -> None:
        self._started: dict[str, asyncio.Event] = {}
        self._release: dict[str, asyncio.Event] = {}
        self.cancelled: list[str] = []

    def started(self, label: str) -> asyncio.Event:
        return self._started.setdefault(label, asyncio.Event())

    def release(self, label: str) -> None:
        self._release.setdefault(label, asyncio.Event()).set()

    def tool(self) -> ToolSpec:
        gates = self

        @tool(name="hold", parallel_safe=True)
        async def hold(label: str) -> str:
            """Wait until the test releases `label`."""
            gates.started(label).set()
            try:
                await gates._release.setdefault(label, asyncio.Event()).wait()
            except asyncio.CancelledError:
                gates.cancelled.append(label)
                raise
            return f"released {label}"

        return hold


class Recorder:
    """Every `workflow/*` event in order, with a way to wait for one."""

    def __init__(self, engine: WorkflowEngine) -> None:
        self.events: list[WorkflowEvent] = []
        self._changed = asyncio.Event()
        engine.subscribe(self._on_event)

    def _on_event(self, event: WorkflowEvent) -> None:
        self.events.append(event)
        self._changed.set()

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def names(self) -> list[str]:
        return [e.event for e in self.events]

    async def wait_for(self, kind: type[Any], count: int = 1) -> list[Any]:
        while len(self.of(kind)) < count:
            self._changed.clear()
            await self._changed.wait()
        return self.of(kind)

    async def pid(self) -> int:
        [started] = await self.wait_for(WorkflowProcessStarted)
        return started.pid


def result_records(result: SubagentResult) -> list[EventRecord]:
    """A log that says `result`, as a child run elsewhere would have written it."""
    events: list[SessionEvent] = []
    if result.output:
        message = AssistantMessage(id=new_message_id(), content=(TextBlock(result.output),))
        events.append(AssistantMessageEvent(turn=1, step=1, message=message))
    if result.structured is not None:
        call = "call-structured"
        arguments = json.dumps(result.structured)
        events.append(
            ToolCallEvent(turn=1, step=1, call_id=call, name=STRUCTURED_TOOL, arguments=arguments)
        )
        answer = ToolResultMessage(
            id=new_message_id(), call_id=call, name=STRUCTURED_TOOL, content="recorded"
        )
        events.append(ToolResultEvent(turn=1, step=1, message=answer))
    reason: StopReason = "completed" if result.stop_reason == "completed" else "aborted"
    events.append(TurnEnd(turn=1, reason=reason))
    return [EventRecord(seq=i, time=0.0, event=e) for i, e in enumerate(events)]


@dataclass
class StubRun:
    """A child the test controls (run elsewhere): its result and its disposal are gates."""

    id: SessionId
    result: asyncio.Future[SubagentResult]
    dispose_gate: asyncio.Event | None = None
    disposals: int = 0
    disposing: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: asyncio.Event = field(default_factory=asyncio.Event)
    sent: list[UserMessage] = field(default_factory=list[UserMessage])

    @property
    def local_agent(self) -> Agent | None:
        return None

    @property
    def seed_length(self) -> int:
        return 0

    @property
    def running(self) -> bool:
        return not self.result.done()

    @property
    def pending(self) -> bool:
        return False

    async def send(self, message: UserMessage, *, durable: bool = True) -> UserMessage:
        self.sent.append(message)
        return message

    async def wake(self) -> None:
        return None

    async def interrupt(self, *, keep_inbox: bool = True) -> None:
        await self.kill(keep_inbox=keep_inbox)

    async def wait(self) -> None:
        self.waiting.set()
        await asyncio.shield(self.result)

    async def kill(self, *, keep_inbox: bool = False) -> None:
        self.disposals += 1
        self.disposing.set()
        if self.dispose_gate is not None:
            await self.dispose_gate.wait()
        if not self.result.done():
            self.result.set_result(SubagentResult(output="", stop_reason="aborted"))

    async def records(self) -> Sequence[EventRecord]:
        return result_records(self.result.result()) if self.result.done() else []


class StubProvider:
    """A provider whose `start` the test drives (N0's `startActivation` spy)."""

    name = "stub"
    capabilities: frozenset[Capability] = frozenset({"output_schema", "depth_limit"})
    inherits_parent_context = False

    def __init__(self) -> None:
        self.requests: list[StartRequest] = []
        self.runs: list[StubRun] = []
        self.entered = asyncio.Event()
        self.published = asyncio.Event()
        self.publication: asyncio.Future[None] | None = None
        self.make: Callable[[int], StubRun] = self._completed

    def _completed(self, index: int) -> StubRun:
        result: asyncio.Future[SubagentResult] = asyncio.get_running_loop().create_future()
        result.set_result(SubagentResult(output="", stop_reason="completed"))
        return StubRun(SessionId(f"stub-child-{index}"), result)

    async def start(self, request: StartRequest) -> SubagentChild:
        self.requests.append(request)
        self.entered.set()
        if self.publication is not None:
            await self.publication
        run = self.make(len(self.runs) + 1)
        self.runs.append(run)
        self.published.set()
        return run

    async def resume(self, request: ResumeRequest) -> SubagentChild:
        raise SubagentError(f"the stub provider cannot resume {request.full_name}")

    def list(self) -> list[SubagentChild]:
        return [run for run in self.runs if not run.result.done()]


def request(
    parent: Agent, script: str = "return None", *, args: JsonValue = None, meta: Any = META
) -> WorkflowRequest:
    return WorkflowRequest(script=script, meta=meta, parent=parent, args=args)


@asynccontextmanager
async def open_engine(
    script: str = '"*": [{text: done}]',
    *,
    options: WorkflowOptions = FAST,
    tools: Iterable[ToolSpec] = (),
    cwd: str | None = None,
    sandbox: SandboxMode = "danger-full-access",
    **engine_args: Any,
) -> AsyncGenerator[tuple[DelegationRuntime, Agent, WorkflowEngine, RecordingModel], None]:
    """A runtime (scripted model, in-memory store), its lead, and a workflow engine.

    The lead's file policy is `sandbox` (unconfined by default: quick guests; the policy
    tests confine theirs).
    """
    clock = FakeClock()
    model = RecordingModel.from_yaml(script, clock=clock)
    assert isinstance(model, RecordingModel)
    runtime = DelegationRuntime(
        model=model,
        store=InMemoryEventStore(),
        tools=tools,
        clock=clock,
        cwd=cwd,
        delegation=DelegationOptions(definitions={}),
        sandbox=sandbox,
    )
    async with runtime:
        lead = await runtime.create_agent()
        engine = WorkflowEngine(runtime.subagents, options, **engine_args)
        try:
            yield runtime, lead, engine, model
        finally:
            await engine.aclose()


async def run_to_end(run: WorkflowRun) -> Any:
    try:
        return await run.result
    finally:
        await run.dispose()


def pid_alive(pid: int) -> bool:
    return _state(pid) not in ("Z", "gone")


def _stat(pid: int | str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _state(pid: int) -> str:
    fields = _stat(pid)
    return fields[0] if fields else "gone"


def descendants(root: int) -> set[int]:
    """The live processes below `root` (other test runs on this machine are not ours)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(entry.name)
            if fields and fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    for pid in parents:
        chain: list[int] = []
        current = pid
        while current in parents and current not in found and current != root:
            chain.append(current)
            current = parents[current]
        if current == root or current in found:
            found.update(chain)
    return found


def guest_processes() -> list[int]:
    """Every live workflow guest this test process started (directly or not)."""
    found: list[int] = []
    for pid in sorted(descendants(os.getpid())):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if GUEST_PATH.encode() in cmdline:
            found.append(pid)
    return found


def tool_replies(agent: Agent, name: str = "workflow") -> list[tuple[str, bool]]:
    return [
        (r.event.message.content, r.event.message.is_error)
        for r in agent.session.records
        if isinstance(r.event, ToolResultEvent) and r.event.message.name == name
    ]
