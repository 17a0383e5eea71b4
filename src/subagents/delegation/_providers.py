"""The provider contract, and the in-process provider behind `spawn` and `fork`.

A provider is one transport for running children; every kind of child (one-shot or
continuable, in this process or elsewhere) goes through the same verbs:

- on the provider: `start` creates a child from a validated request, `resume` loads a stored
  one from its own log, `list` names the children it runs now;
- on the child it returns: `send` gives it a message (durably accepted), `wake` runs input its
  log already holds, `interrupt` stops its current turn, `wait` returns once it is idle, `kill`
  stops and releases it, `records` reads its log.

The lifecycle above (the one-shot run in `_service.py`, the activations in `_continuable.py`,
crash recovery) decides when to call which verb; a provider only moves a child. A provider
also declares the start-time capabilities it can enforce and whether its child inherits the
parent's completed turns; the service checks both before any child exists.
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, Literal, Protocol, TypeAlias

import msgspec

from ..core import Agent, AgentConfig, AgentRuntime
from ..ids import SessionId
from ..messages import UserMessage
from ..sessions import EventRecord, SessionEvent, SessionHeader, SubagentDescriptor, TurnEnd

__all__ = [
    "Capability",
    "InProcessChild",
    "InProcessProvider",
    "ResumeRequest",
    "StartRequest",
    "SubagentChild",
    "SubagentProvider",
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


class ToolFilter(msgspec.Struct, frozen=True, gc=False):
    """Narrow the tools a child inherits: `allow` (None: all) minus `deny`."""

    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()


class StartRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One child to create. The service has validated it and reserved its name."""

    parent: Agent
    cwd: str
    config: AgentConfig
    """Its full name, instructions, what it is told of where it stands, and loop limits."""
    descriptor: SubagentDescriptor
    """The child's identity as the service resolved it (mode, provider, scope, schema, model,
    budget): the first record of its own log, so a resume restores exactly this."""
    tool_filter: ToolFilter | None = None
    """The tools it may use of those it inherits (a provider with `tool_filter` enforces it)."""

    @property
    def full_name(self) -> str:
        """Its full name in the tree (`reviewer/checker`)."""
        return self.config.name

    @property
    def name(self) -> str:
        """Its name among its siblings (the last part of `full_name`)."""
        return self.full_name.rsplit("/", 1)[-1]


class ResumeRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One stored child to load from its own log."""

    header: SessionHeader
    config: AgentConfig
    """Its full name, instructions and what it is told of where it stands."""
    retry_cut_turn: bool = True
    """Queue the re-run of a turn a crash cut off (False: only close it)."""

    @property
    def full_name(self) -> str:
        """Its full name in the tree (`reviewer/checker`)."""
        return self.config.name


class SubagentChild(Protocol):
    """A child as its lifecycle drives it, whichever provider runs it.

    `send` returns once the message is durably accepted (with `durable=False`, once it is
    queued); `wait` returns once the child is idle (no turn running); `kill` is idempotent.
    """

    @property
    def id(self) -> SessionId: ...

    @property
    def local_agent(self) -> Agent | None:
        """Its agent when it runs in this runtime (None: it runs elsewhere)."""
        ...

    @property
    def seed_length(self) -> int:
        """How many records of its log it inherited (a fork's seed)."""
        ...

    @property
    def running(self) -> bool:
        """Whether a turn runs now."""
        ...

    @property
    def pending(self) -> bool:
        """Whether accepted input waits to run."""
        ...

    async def send(self, message: UserMessage, *, durable: bool = True) -> UserMessage: ...

    async def wake(self) -> None: ...

    async def interrupt(self, *, keep_inbox: bool = True) -> None: ...

    def wait(self) -> Awaitable[None]:
        """Wait until it is idle (an `async def` does; a provider may return a wait it has)."""
        ...

    async def kill(self, *, keep_inbox: bool = False) -> None: ...

    async def records(self) -> Sequence[EventRecord]:
        """Its whole log as far as it is written (seed included)."""
        ...


class SubagentProvider(Protocol):
    """One transport for running children, registered under its `name`.

    `capabilities` are the start-time options it enforces (the service refuses a start that
    needs one it lacks, before any child exists); `inherits_parent_context` says whether its
    child starts from the parent's completed turns.
    """

    @property
    def name(self) -> str: ...

    @property
    def capabilities(self) -> frozenset[Capability]: ...

    @property
    def inherits_parent_context(self) -> bool: ...

    async def start(self, request: StartRequest) -> SubagentChild:
        """Create the child below `request.parent`; it has no input yet."""
        ...

    async def resume(self, request: ResumeRequest) -> SubagentChild:
        """Load a stored child; input its log holds runs once it is woken."""
        ...

    def list(self) -> list[SubagentChild]:
        """The children it runs now."""
        ...


def completed_turns(records: Sequence[EventRecord]) -> list[SessionEvent]:
    """The parent's completed-turn prefix: everything up to its last `turn/end`.

    So a fork never inherits the in-flight turn or a dangling tool call.
    """
    for index in range(len(records) - 1, -1, -1):
        if isinstance(records[index].event, TurnEnd):
            return [r.event for r in records[: index + 1]]
    return []


class InProcessChild:
    """A child that is an agent of this runtime."""

    __slots__ = ("_agent",)  # one per running child: no dict each

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    @property
    def id(self) -> SessionId:
        return self._agent.id

    @property
    def local_agent(self) -> Agent:
        return self._agent

    @property
    def seed_length(self) -> int:
        return self._agent.session.header.seed_length

    @property
    def running(self) -> bool:
        return self._agent.status == "running"

    @property
    def pending(self) -> bool:
        return bool(self._agent.inbox)

    async def send(self, message: UserMessage, *, durable: bool = True) -> UserMessage:
        return await self._agent.send(message, durable=durable)

    async def wake(self) -> None:
        self._agent.wake()

    async def interrupt(self, *, keep_inbox: bool = True) -> None:
        await self._agent.cancel("parent", keep_inbox=keep_inbox)

    def wait(self) -> Coroutine[Any, Any, None]:
        return self._agent.when_idle()

    async def kill(self, *, keep_inbox: bool = False) -> None:
        await self._agent.dispose(keep_inbox=keep_inbox)

    async def records(self) -> Sequence[EventRecord]:
        return self._agent.session.records


class InProcessProvider:
    """Runs children as agents of the same runtime, each with its own session below its parent.

    `spawn` starts them with a fresh context, `fork` seeds them with the parent's completed
    turns.
    """

    capabilities: frozenset[Capability] = frozenset({"output_schema", "depth_limit", "tool_filter"})

    def __init__(self, runtime: AgentRuntime, *, name: str, inherits_parent_context: bool) -> None:
        self._runtime = runtime
        self._name = name
        self._inherits = inherits_parent_context
        self._children: dict[SessionId, InProcessChild] = {}
        self._forget = self._forget_child  # one bound method for every child's disposer

    @property
    def name(self) -> str:
        return self._name

    @property
    def inherits_parent_context(self) -> bool:
        return self._inherits

    async def start(self, request: StartRequest) -> SubagentChild:
        parent = request.parent
        agent = await self._runtime.create_child(
            parent,
            config=request.config,
            cwd=request.cwd,
            seed=completed_turns(parent.session.records) if self._inherits else [],
            first_events=(request.descriptor,),
        )
        if request.tool_filter is not None:
            agent.tools.restrict(allow=request.tool_filter.allow, deny=request.tool_filter.deny)
        return self._track(agent)

    async def resume(self, request: ResumeRequest) -> SubagentChild:
        agent = await self._runtime.resume_agent(
            request.header.id, config=request.config, retry_cut_turn=request.retry_cut_turn
        )
        return self._track(agent)

    def list(self) -> list[SubagentChild]:
        return list(self._children.values())

    def _track(self, agent: Agent) -> InProcessChild:
        child = self._children[agent.id] = InProcessChild(agent)
        agent.add_disposer(self._forget)
        return child

    async def _forget_child(self, agent: Agent) -> None:
        child = self._children.get(agent.id)
        if child is not None and child.local_agent is agent:
            del self._children[agent.id]
