"""The provider contract and the in-process providers (`spawn` and `fork`).

A provider is one transport for running children. It declares the start-time capabilities it
can enforce and whether its child inherits the parent's completed turns; the service checks
both before any child exists. In-process providers create the child as an ordinary agent of the
same runtime, with its own durable session below the parent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from ..core import Agent, AgentConfig, AgentRuntime, Budget
from ..ids import SessionId
from ..messages import JsonObject
from ..sessions import EventRecord, SessionEvent, SubagentDescriptor, TurnEnd
from ._budget_book import with_budget
from ._results import SubagentResult, result_from_log
from ._structured import StructuredCapture

__all__ = [
    "Capability",
    "ContinuableProvider",
    "InProcessProvider",
    "InProcessRun",
    "StartRequest",
    "SubagentProvider",
    "SubagentRun",
    "ToolFilter",
    "completed_turns",
]

Capability: TypeAlias = Literal["output_schema", "depth_limit", "tool_filter", "agent_options"]
CAPABILITY_ORDER: tuple[Capability, ...] = (
    "output_schema",
    "depth_limit",
    "tool_filter",
    "agent_options",
)


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """Narrow the tools a child inherits: `allow` (None: all) minus `deny`."""

    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRequest:
    """One child to start. The service has validated it and reserved `name`."""

    parent: Agent
    prompt: str
    label: str
    name: str
    full_name: str
    cwd: str
    instructions: str
    tool_filter: ToolFilter | None = None
    output_schema: JsonObject | None = None
    """The object schema the child answers through `structured_output` (checked already)."""
    budget: Budget | None = None
    """The child's own budget limits, recorded in its descriptor (the service enforces them)."""
    model_spec: str | None = None
    """The model it runs when not its parent's, recorded in its descriptor."""
    descriptor: SubagentDescriptor | None = None
    """The child's identity as the service resolved it (scope, schema, model, budget): what
    its log records so a resume restores exactly this (None: built from the fields above)."""
    establish: Callable[[SessionId], Awaitable[None]] = field(repr=False)
    """Called once the child exists and before it receives its prompt (the catalog entry)."""


class SubagentRun(Protocol):
    """A started one-shot child.

    `wait` returns its result (for every child-level ending); `dispose` cancels what remains
    and waits until the child is released; both are idempotent.
    """

    @property
    def id(self) -> SessionId: ...

    @property
    def local_agent(self) -> Agent | None: ...

    async def wait(self) -> SubagentResult: ...

    async def dispose(self) -> None: ...


class SubagentProvider(Protocol):
    """One transport for running one-shot children, registered under its `name`.

    `capabilities` are the start-time options it enforces (the service refuses a start that
    needs one it lacks, before any child exists); `inherits_parent_context` says whether its
    child starts from the parent's completed turns. `start` creates the child, calls
    `request.establish` once it exists, gives it the prompt and returns its run.
    """

    @property
    def name(self) -> str: ...

    @property
    def capabilities(self) -> frozenset[Capability]: ...

    @property
    def inherits_parent_context(self) -> bool: ...

    async def start(self, request: StartRequest) -> SubagentRun: ...


@runtime_checkable
class ContinuableProvider(Protocol):
    """A provider whose children can be continuable: it has a `continuable_seed`."""

    @property
    def name(self) -> str: ...

    def continuable_seed(self, parent: Agent) -> list[SessionEvent]:
        """What a continuable child of `parent` starts with.

        Data only: the runtime creates the child.
        """
        ...


def completed_turns(records: Sequence[EventRecord]) -> list[SessionEvent]:
    """The parent's completed-turn prefix: everything up to its last `turn/end`.

    So a fork never inherits the in-flight turn or a dangling tool call.
    """
    for index in range(len(records) - 1, -1, -1):
        if isinstance(records[index].event, TurnEnd):
            return [r.event for r in records[: index + 1]]
    return []


class InProcessRun:
    """A child agent of this runtime, run for one result."""

    def __init__(self, agent: Agent, structured: StructuredCapture | None = None) -> None:
        self._agent = agent
        self._structured = structured
        self._result: SubagentResult | None = None
        self._disposed = False
        self._dispose_lock = asyncio.Lock()

    @property
    def id(self) -> SessionId:
        return self._agent.id

    @property
    def local_agent(self) -> Agent | None:
        return self._agent

    def _settle(self) -> SubagentResult:
        if self._result is None:
            seed = self._agent.session.header.seed_length
            records = self._agent.session.records[seed:]
            result = result_from_log(records)
            if self._structured is not None:
                result = self._structured.settle(result, records)
            self._result = result
        return self._result

    async def wait(self) -> SubagentResult:
        if self._result is None and not self._disposed:
            await self._agent.when_idle()
        return self._settle()

    async def dispose(self) -> None:
        async with self._dispose_lock:
            if self._disposed:
                return
            self._disposed = True
            await self._agent.dispose()
            self._settle()


class InProcessProvider:
    """Runs children as agents of the same runtime.

    `spawn` starts them with a fresh context, `fork` seeds them with the parent's completed
    turns.
    """

    capabilities: frozenset[Capability] = frozenset({"output_schema", "depth_limit", "tool_filter"})

    def __init__(
        self,
        runtime: AgentRuntime,
        *,
        name: str,
        inherits_parent_context: bool,
        delegated_work: Callable[[Agent], bool] | None = None,
    ) -> None:
        self._runtime = runtime
        self._name = name
        self._inherits = inherits_parent_context
        self._delegated_work = delegated_work
        """Whether an agent still has running children (refuses its structured output)."""

    @property
    def name(self) -> str:
        return self._name

    @property
    def inherits_parent_context(self) -> bool:
        return self._inherits

    @property
    def delegated_work(self) -> Callable[[Agent], bool] | None:
        """The check that refuses structured output while an agent's children still work."""
        return self._delegated_work

    def continuable_seed(self, parent: Agent) -> list[SessionEvent]:
        return completed_turns(parent.session.records) if self._inherits else []

    async def start(self, request: StartRequest) -> SubagentRun:
        seed = self.continuable_seed(request.parent)
        descriptor = request.descriptor or with_budget(
            SubagentDescriptor(
                mode="one-shot",
                provider=self._name,
                label=request.label,
                agent_model=request.model_spec,
            ),
            request.budget,
        )
        child = await self._runtime.create_child(
            request.parent,
            config=AgentConfig(
                name=request.full_name,
                instructions=request.instructions,
                max_parallel_tools=request.parent.config.max_parallel_tools,
                max_tokens=request.parent.config.max_tokens,
            ),
            cwd=request.cwd,
            seed=seed,
            first_events=(descriptor,),
        )
        structured = None
        if request.output_schema is not None:
            structured = StructuredCapture(
                request.output_schema, delegated_work=self._delegated_work
            )
        run = InProcessRun(child, structured)
        try:
            if structured is not None:
                structured.install(child)
            if request.tool_filter is not None:
                child.tools.restrict(allow=request.tool_filter.allow, deny=request.tool_filter.deny)
            await request.establish(child.id)
            await child.send(request.prompt, durable=False)
        except BaseException:
            await run.dispose()
            raise
        return run
