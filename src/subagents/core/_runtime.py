"""`Runtime`: the composition root. It owns the store, the model, the tools and the agents."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from .._clock import Clock, SystemClock
from .._resource import AsyncResource
from ..errors import ClosedError, ConfigError, ErrorCode, LeaseHeld, SubagentError
from ..ids import SessionId, check_tenant_id, new_session_id
from ..messages import AssistantMessage, Usage, UserMessage
from ..models import Model, open_model
from ..policy import canonical_root, within
from ..sessions import (
    DEFAULT_CRASH_RETRIES,
    ApprovalDecided,
    ApprovalPolicySet,
    ApprovalRequest,
    AssistantMessageEvent,
    EventRecord,
    EventStore,
    InboxSpliced,
    InboxTarget,
    KnownOutcome,
    Session,
    SessionEndSeed,
    SessionEvent,
    SessionHeader,
    StatusProjection,
    StatusView,
    StopReason,
    TurnEnd,
    UsageProjection,
    approval_requests,
    crash_recovery,
    default_store_path,
    fold,
    interrupted_turn_closers,
    waiting_step,
)
from ..tools import ToolRegistry, ToolSpec
from ._agent import Agent, AgentConfig, check_max_tokens
from ._approvals import ApprovalDesk, ApprovalPolicy, pick_request
from ._bus import AgentCreated, AgentStatusChanged, CausalOrder, EventBus, SessionEventPosted
from ._control import ControlServer
from ._inbox import replay_inbox
from ._inspect import lease_alive
from ._stream import StreamEvent, stream_while

__all__ = ["AgentRuntime", "RunResult", "WorkTracker"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """What a run produced: the lead's last answer and how its last turn ended."""

    session_id: SessionId
    stop_reason: StopReason | None
    output: str
    usage: Usage
    error_code: str | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.stop_reason == "completed"


class WorkTracker:
    """Counts background work in flight (tasks, pending deliveries).

    The runtime uses it to tell when a whole tree is quiescent.
    """

    def __init__(self) -> None:
        self._active = 0
        self._changed = asyncio.Event()

    @property
    def active(self) -> int:
        return self._active

    def begin(self) -> None:
        self._active += 1
        self._changed.set()

    def end(self) -> None:
        self._active -= 1
        self._changed.set()

    async def wait_change(self) -> None:
        self._changed.clear()
        await self._changed.wait()


LEASE_TTL_SECONDS = 30.0


def _holder_name() -> str:
    return f"{os.getpid()}@{socket.gethostname()}"


class AgentRuntime(AsyncResource):
    """Runs agents on one store and one model (the core, without delegation tools).

    ```python
    async with AgentRuntime(model=ScriptedModel.from_file("demo.yaml"), store="state.db") as rt:
        result = await rt.run("Review app.py")
    ```

    The runtime owns what it is given: it opens and closes the store and the model.
    `store` is an `EventStore`, a path or `sqlite:///` URL, or None for the default
    (`$SUBAGENTS_STORE`, else `$SUBAGENTS_HOME/state.db`). A process another runtime started
    to run a child of its tree passes that runtime's `holder` as `lease_from`.
    """

    def __init__(
        self,
        *,
        model: Model,
        store: EventStore | str | Path | None = None,
        tools: Iterable[ToolSpec] = (),
        clock: Clock | None = None,
        tenant: str = "default",
        cwd: str | Path | None = None,
        model_spec: str | None = None,
        model_factory: Callable[[str], Model] | None = None,
        crash_retries: int = DEFAULT_CRASH_RETRIES,
        lease_from: str | None = None,
        approval: ApprovalPolicy | str | Iterable[str] | None = None,
        approval_timeout: float | None = None,
    ) -> None:
        check_tenant_id(tenant)
        self.approval = ApprovalPolicy.parse(approval, timeout=approval_timeout)
        """The gates of the trees it starts: which calls wait for a person (`approve`)."""
        self.approval_desk = ApprovalDesk()
        if type(crash_retries) is not int or crash_retries < 0:  # a bool is not a count
            raise ConfigError(
                f"crash_retries must be a whole number >= 0, not {crash_retries!r}",
                code=ErrorCode.USAGE,
            )
        given = cast("object", lease_from)  # what callers pass is not type-checked
        if given is not None and (not isinstance(given, str) or not given):
            raise ConfigError(
                f"lease_from must be a runtime's holder name, not {lease_from!r}",
                code=ErrorCode.USAGE,
            )
        self.crash_retries = crash_retries
        """How many times in a row a turn cut off by a crash is run again on resume."""
        self.model = model
        self.model_spec = model_spec
        self._model_factory = model_factory or open_model
        self._models: dict[str, Model] = {}
        self._model_locks: dict[str, asyncio.Lock] = {}
        self.tools = ToolRegistry(list(tools))
        self.clock: Clock = clock or SystemClock()
        self.tenant = tenant
        self._cwd_arg = cwd
        self.cwd = ""  # resolved on entry, off the event loop
        self.bus = EventBus()
        self._store_arg = store
        self._store: EventStore | None = None
        self._agents: dict[SessionId, Agent] = {}
        self._running: dict[SessionId, Agent] = {}
        """The loaded agents whose status is running, kept from their status events: a
        runtime keeps every run's lead loaded, and looking through all of them for the
        running ones twice per run made a long-lived runtime's runs slower one by one."""
        self.bus.subscribe(self._status_changed, types=(AgentStatusChanged,))
        self._forget = self._forget_agent
        """One bound method for every agent's last disposer (not one closure each)."""
        self.work = WorkTracker()
        self.holder = f"{_holder_name()}/{uuid.uuid4().hex[:8]}"
        self._held: set[SessionId] = set()
        self.lease_from = lease_from
        """The `holder` of the runtime that started this process to run part of its trees:
        a tree that runtime holds is worked here under its lease, never taken or released."""
        self._borrowed: set[SessionId] = set()
        self.control = ControlServer(self.serve_commands)
        """The wake-up socket other processes use to reach the trees this runtime holds."""
        self._stored_locks: dict[SessionId, asyncio.Lock] = {}
        self._stack = AsyncExitStack()

    # -- lifecycle ----------------------------------------------------------------------------

    noun = "runtime"

    async def _open(self) -> None:
        self.cwd = await asyncio.to_thread(_resolve_cwd, self._cwd_arg)
        store = self._store_arg
        if store is None or isinstance(store, str | Path):
            from ..sessions import SqliteEventStore, parse_store_url

            store = SqliteEventStore(
                parse_store_url(str(store)) if store is not None else default_store_path()
            )
        self._stack.push_async_callback(self.model.aclose)
        self._store = await self._stack.enter_async_context(store)
        store.start_writer()  # a runtime writes: its writer starts while it prepares

    async def _close(self) -> None:
        """Release every agent (pending input stays in the log), then the store and model."""
        try:
            # First: a sender that finds no one while the lease stands waits for it to go.
            await self.control.aclose()
            await self.before_close()
            # Newest first: children were created after their parents, so they go first.
            for agent in reversed(list(self._agents.values())):
                await agent.dispose(keep_inbox=True)
            if self._store is not None and self._held:
                store = self._store
                async with asyncio.TaskGroup() as releases:  # one round trip, not one each
                    for root in list(self._held):
                        releases.create_task(store.release_lease(root, holder=self.holder))
        finally:
            await self._stack.aclose()

    async def before_close(self) -> None:
        """Extension hook: runs before agents are released."""

    takes_commands = False
    """Whether this runtime executes commands other processes send to its trees (`steer`,
    `send`, `interrupt` by name): only then does it listen for them."""

    async def serve_commands(self) -> None:
        """Execute the pending commands other processes left for the trees held here.

        Extension hook: the core addresses no member by name, so it has none to execute.
        """

    async def hold(self, root: SessionId) -> None:
        """Take the lease of `root`'s tree for this process; the store renews it while open.

        Raises `LeaseHeld` naming the process that holds it when another live process does.
        """
        if root in self._held or root in self._borrowed:
            return
        if self.lease_from is not None:
            await self._borrow(root)
            return
        address = await self.control.start() if self.takes_commands else None
        lease = await self.store.acquire_lease(
            root,
            holder=self.holder,
            pid=os.getpid(),
            now=time.time(),
            ttl=LEASE_TTL_SECONDS,
            address=address,
        )
        if lease.holder != self.holder and lease_alive(lease, now=time.time()):
            raise LeaseHeld(
                f"session {root} is held by process {lease.pid} ({lease.holder.split('/')[0]}); "
                "wait for it to finish or stop that process",
                code=ErrorCode.LEASE_HELD,
                pid=lease.pid,
            )
        if lease.holder != self.holder:  # its holder died without releasing: take it over
            await self.store.release_lease(root, holder=lease.holder)
            await self.store.acquire_lease(
                root,
                holder=self.holder,
                pid=os.getpid(),
                now=time.time(),
                ttl=LEASE_TTL_SECONDS,
                address=address,
            )
        self._held.add(root)

    async def _borrow(self, root: SessionId) -> None:
        """Work `root` under the lease of the runtime that started this process, or refuse.

        Read only: the lease stays its holder's to renew and release, whatever happens here.
        """
        lease = await self.store.get_lease(root)
        alive = lease is not None and lease_alive(lease, now=time.time())
        if alive and lease is not None and lease.holder == self.lease_from:
            self._borrowed.add(root)
            return
        raise LeaseHeld(
            f"session {root} is not held by the runtime that started this process "
            f"({self.lease_from}); it works only under that runtime's lease",
            code=ErrorCode.LEASE_HELD,
            pid=lease.pid if lease is not None else 0,
        )

    @property
    def store(self) -> EventStore:
        self._check_open()
        if self._store is None:
            raise ClosedError("the runtime has no store; use it inside `async with`")
        return self._store

    def subscribe(
        self, listener: Callable[[object], None], *, types: tuple[type, ...] = ()
    ) -> Callable[[], None]:
        """Watch live events (all, or only `types`); returns a function that unsubscribes.

        Events come in log order: an event about a session (an agent's status, a child's
        end) follows the records that session wrote before it, though records are posted
        only once durable. A listener that takes no records needs no ordering.
        """
        if types and SessionEventPosted not in types:
            return self.bus.subscribe(listener, types=types)

        def session_of(session_id: str) -> Session | None:
            agent = self._agents.get(SessionId(session_id))
            return None if agent is None else agent.session

        return self.bus.subscribe(CausalOrder(listener, session_of), types=types)

    # -- agents -------------------------------------------------------------------------------

    def get_agent(self, agent_id: str) -> Agent | None:
        """The exact live agent with this id, or None."""
        agent = self._agents.get(SessionId(agent_id))
        return agent if agent is not None and not agent.disposed else None

    @property
    def agents(self) -> dict[SessionId, Agent]:
        """The live (not disposed) agents by id."""
        return {k: a for k, a in self._agents.items() if not a.disposed}

    async def model_for(self, spec: str | None) -> Model:
        """The model a spec names: the runtime's own for None or its spec, else opened once.

        Opening runs off the event loop (it may read a script file); the runtime closes every
        model it opened. Raises `ConfigError` for a spec that cannot be opened.
        """
        if spec is None or spec == self.model_spec:
            return self.model
        model = self._models.get(spec)
        if model is not None:
            return model
        async with self._model_locks.setdefault(spec, asyncio.Lock()):
            model = self._models.get(spec)
            if model is None:
                model = await asyncio.to_thread(self._model_factory, spec)
                self._stack.push_async_callback(model.aclose)
                self._models[spec] = model
        return model

    async def create_agent(self, *, config: AgentConfig | None = None) -> Agent:
        """Start a new root session (named `lead`) and its agent."""
        header = SessionHeader(
            id=new_session_id(),
            tenant=self.tenant,
            created_at=self.clock.now(),
            cwd=self.cwd,
            model_spec=self.model_spec,
        )
        created = self.store.create(header)
        if self.lease_from is not None:  # a process working under another's lease
            self.store.flush()  # it goes now (a store may hold writes back to batch them)
            try:
                await self.hold(header.id)  # written after the header: one wait covers both
            finally:
                await created
        else:
            # A root created now has a new id, so no other process can hold its tree: its
            # lease is claimed with its header, and neither is waited for (the run's end,
            # or any acknowledged write after them, says both are durable).
            created.add_done_callback(_retrieved)
            address = await self.control.start() if self.takes_commands else None
            self.store.claim_lease(
                header.id,
                holder=self.holder,
                pid=os.getpid(),
                now=time.time(),
                ttl=LEASE_TTL_SECONDS,
                address=address,
            )
            self._held.add(header.id)
        return self._publish(Session(header, self.store, self.clock), config or AgentConfig())

    async def resume_agent(
        self,
        session_id: SessionId | str,
        *,
        config: AgentConfig | None = None,
        retry_cut_turn: bool = True,
    ) -> Agent:
        """Load a stored session, repair a turn a crash left open, and rebuild its agent.

        The cut-off turn is closed and, unless `retry_cut_turn` is False (an interrupt of a
        dead tree), its re-run is queued, bounded by `crash_retries`; `wake()` runs it. Calls
        whose real outcome was learned since (`recovered_outcomes`) get it as their result.
        """
        existing = self._agents.get(SessionId(session_id))
        if existing is not None and not existing.disposed:
            return existing
        header = await self.store.get_header(SessionId(session_id), tenant=self.tenant)
        await self.hold(header.root_id)
        records = await self.store.read(header.id, tenant=self.tenant)
        session = Session(header, self.store, self.clock, records)
        known = self.recovered_outcomes(header.id)
        waiting = waiting_step(records[header.seed_length :]) if retry_cut_turn else None
        if waiting is None:
            repair = (
                crash_recovery(records, known, max_retries=self.crash_retries)
                if retry_cut_turn
                else interrupted_turn_closers(records, known)
            )
            for event in repair:
                # Repair records reuse the last real timestamp: the downtime is not part of
                # the turn.
                await session.append(event, time=records[-1].time)
        agent = self._publish(session, config or AgentConfig())
        # A turn that waits for a decision is not cut off: its next run takes the wait up.
        agent.waiting = waiting
        return agent

    def recovered_outcomes(self, session_id: SessionId) -> Mapping[str, KnownOutcome]:
        """Real outcomes of `session_id`'s cut-off calls, by call id (extension hook).

        The core knows none; the delegation layer returns the answers of foreground children
        it re-ran first, so a parent's repair carries them instead of `TOOL_OUTCOME_UNKNOWN`.
        """
        return {}

    def confines_children(self, parent: Agent) -> bool:
        """Whether `parent`'s children must work inside its workspace (its session cwd).

        Extension hook. The core runtime always confines; a runtime whose file policy leaves
        `parent` unconfined (`danger-full-access`) returns False: it has no boundary to widen.
        """
        return True

    async def child_cwd(self, parent: Agent, cwd: str, *, asked: str | None = None) -> str:
        """The canonical working directory (and so workspace) of a new child of `parent`.

        `cwd` is resolved against the parent's cwd and made canonical off the event loop
        (symlinks resolved). Unless `confines_children(parent)` is False it must lie inside
        the parent's workspace (`CWD_OUTSIDE_WORKSPACE`); it must be an accessible directory
        (`INVALID_CWD`). `asked` is the caller's own spelling, for the refusal.
        """
        root = parent.session.header.cwd
        path, canonical, is_dir = await asyncio.to_thread(_inspect_dir, root, cwd)
        # The boundary is the parent's root as recorded, which is what its own sandbox
        # enforces; it is canonical from creation, and a symlink swapped in later must not
        # move it. The child records the canonical string checked here, not `cwd`, so no
        # later change on disk can turn the accepted directory into another one.
        if self.confines_children(parent) and not within(canonical, root):
            shown = asked if asked is not None else cwd
            raise SubagentError(
                f"cwd {shown!r} resolves to {canonical}, outside your workspace {root}; give "
                f"a directory inside {root} or omit cwd",
                code=ErrorCode.CWD_OUTSIDE_WORKSPACE,
                cwd=shown,
                resolved=canonical,
                workspace=root,
            )
        if not is_dir:
            raise SubagentError(
                f"cwd {path} is not an accessible directory; give an existing "
                "directory or omit cwd to use yours",
                code=ErrorCode.INVALID_CWD,
            )
        return canonical

    async def create_child(
        self,
        parent: Agent,
        *,
        config: AgentConfig,
        cwd: str | None = None,
        seed: Sequence[SessionEvent] = (),
        first_events: Sequence[SessionEvent] = (),
    ) -> Agent:
        """Create a child session below `parent` and publish its agent.

        The child's header records its parent, root, depth (parent's persisted depth + 1) and
        cwd (the parent's unless given). A fork passes the parent's completed turns as
        `seed`: they open the child's log, followed by `session/end-seed`. `first_events`
        (the child's descriptor) follow; all are written in one store append. A `cwd` other
        than the parent's is checked and made canonical by `child_cwd` first.
        """
        parent_header = parent.session.header
        if cwd is not None and cwd != parent_header.cwd:
            # Every start of a child ends here, whoever admitted it: the workspace rule holds
            # even for a caller that skipped the service's own check.
            cwd = await self.child_cwd(parent, cwd)
        events: list[SessionEvent] = list(seed)
        if seed:
            events.append(SessionEndSeed())
        header = SessionHeader(
            id=new_session_id(),
            tenant=parent_header.tenant,
            created_at=self.clock.now(),
            cwd=cwd or parent_header.cwd,
            parent=parent_header.id,
            root=parent_header.root_id,
            origin="subagent",
            depth=parent_header.depth + 1,
            model_spec=parent_header.model_spec,
            seed_length=len(events),
        )
        # Not awaited: the store commits in submission order, so the child's header and first
        # events are durable before anything the child or its parent writes later.
        self.store.create(header)
        session = Session(header, self.store, self.clock)
        events.extend(first_events)
        if events:
            session.submit_many(events)
        return self._publish(session, config)

    async def read_header(self, session_id: SessionId) -> SessionHeader:
        """A session's header: the loaded agent's, else the store's (tenant-checked)."""
        live = self._agents.get(session_id)
        if live is not None:
            return live.session.header
        return await self.store.get_header(session_id, tenant=self.tenant)

    async def read_log(self, session_id: SessionId) -> list[EventRecord]:
        """A session's records: the loaded agent's (with writes in flight), else the store's."""
        live = self._agents.get(session_id)
        if live is not None:
            return live.session.records
        return await self.store.read(session_id, tenant=self.tenant)

    async def read_statuses(self, session_ids: Sequence[SessionId]) -> dict[SessionId, StatusView]:
        """Sessions' status views: loaded agents' from their logs, the rest in one store read.

        Ids the store does not know for this tenant are left out.
        """
        statuses: dict[SessionId, StatusView] = {}
        stored: list[SessionId] = []
        for session_id in session_ids:
            live = self._agents.get(session_id)
            if live is None:
                stored.append(session_id)
            else:
                statuses[session_id] = fold(StatusProjection(), live.session.records)
        if stored:
            found = await self.store.summaries(stored, tenant=self.tenant)
            statuses.update((session_id, summary.status) for session_id, summary in found.items())
        return statuses

    async def deliver(
        self,
        session_id: SessionId,
        message: UserMessage,
        *,
        target: InboxTarget = "next-turn",
        wake: bool = True,
    ) -> None:
        """Put `message` into an agent's inbox, durably.

        The live agent's inbox, or else the stored session's log, where its next resume finds
        it pending: a mailbox for agents that are not loaded.
        """
        live = self.get_agent(session_id)
        if live is not None:
            await live.send(message, target=target, wake=wake)
            return
        async with self._stored_lock(session_id):
            header = await self.store.get_header(session_id, tenant=self.tenant)
            records = await self.store.read(header.id, tenant=self.tenant)
            pending = replay_inbox(records[header.seed_length :])
            start = len(pending.next_turn if target == "next-turn" else pending.next_step)
            session = Session(header, self.store, self.clock, records)
            await session.append(InboxSpliced(target=target, start=start, inserted=(message,)))

    async def append_stored(
        self,
        session_id: SessionId,
        event: SessionEvent,
        *,
        check: Callable[[Sequence[EventRecord]], None] | None = None,
    ) -> EventRecord:
        """Append to the log of a session no agent of this runtime has loaded (durably).

        Writers of unloaded sessions (mailbox deliveries, team boards) go through one lock per
        session, so their appends never race each other. `check` sees the log under that lock
        and may refuse (raise) the append.
        """
        async with self._stored_lock(session_id):
            header = await self.store.get_header(session_id, tenant=self.tenant)
            records = await self.store.read(header.id, tenant=self.tenant)
            if check is not None:
                check(records)
            return await Session(header, self.store, self.clock, records).append(event)

    def _stored_lock(self, session_id: SessionId) -> asyncio.Lock:
        return self._stored_locks.setdefault(session_id, asyncio.Lock())

    def _publish(self, session: Session, config: AgentConfig) -> Agent:
        agent = Agent(
            session=session,
            model=self.model,
            tools=self.tools.scope(),
            bus=self.bus,
            config=config,
            approvals=self.approval_desk,
        )
        self._fix_gates(agent)
        self._agents[agent.id] = agent
        agent.add_disposer(self._forget)  # first added, so it runs last
        self.setup_agent(agent)
        self.bus.emit(AgentCreated(agent.id, agent.name, session.header.parent))
        return agent

    async def _forget_agent(self, agent: Agent) -> None:
        """An agent's last disposer: the runtime no longer holds it."""
        if self._agents.get(agent.id) is agent:
            del self._agents[agent.id]
            self._running.pop(agent.id, None)
            self.release_agent(agent)

    def release_agent(self, agent: Agent) -> None:
        """Drop what the runtime kept for `agent` once it is released (extension hook).

        Only what a later load rebuilds from the log: a runtime that runs a child a second
        must not grow by one entry per child it ever ran.
        """

    def setup_agent(self, agent: Agent) -> None:
        """Install per-agent registrations before the agent is published (extension hook)."""

    def _fix_gates(self, agent: Agent) -> None:
        """An agent's gates are the last `approval/policy` of its own log (after any seed).

        A new root records the runtime's; a new child its parent's joined with its own
        (`own_gates`), so a child can add gates and never drop one.
        """
        header = agent.session.header
        recorded = [
            r.event
            for r in agent.session.records[header.seed_length :]
            if isinstance(r.event, ApprovalPolicySet)
        ]
        if recorded:
            last = recorded[-1]
            agent.gates = ApprovalPolicy(frozenset(last.tools), last.timeout)
            return
        parent = self._agents.get(header.parent) if header.parent is not None else None
        if header.parent is None:
            gates = self.approval.join(self.own_gates(agent))
        else:
            inherited = parent.gates if parent is not None else ApprovalPolicy()
            gates = inherited.join(self.own_gates(agent))
        if not gates.empty:
            agent.record(
                ApprovalPolicySet(
                    tools=tuple(sorted(gates.tools)),
                    timeout=gates.timeout,
                    source="runtime" if header.parent is None else "delegation",
                )
            )
        agent.gates = gates

    def add_gates(self, agent: Agent, policy: ApprovalPolicy) -> None:
        """Gate more of an agent's calls from now on (recorded; gates are never removed)."""
        joined = agent.gates.join(policy)
        if joined != agent.gates:
            agent.record(
                ApprovalPolicySet(
                    tools=tuple(sorted(joined.tools)),
                    timeout=joined.timeout,
                    source="runtime" if agent.session.header.parent is None else "delegation",
                )
            )
            agent.gates = joined

    async def decide_call(
        self,
        session_id: SessionId,
        call_id: str | None,
        *,
        approved: bool,
        by: str,
        reason: str | None = None,
        command: int | None = None,
        name: str | None = None,
    ) -> tuple[ApprovalRequest, ApprovalDecided, bool]:
        """Decide a request of a session of a tree held here: (request, decision, applied).

        `applied` is True when a turn here waited on it and now goes on; False when it was
        recorded in the log for the turn to find when it runs again (a tree resumed later).
        A `command` already applied (by a holder that died before marking it done) is not
        applied twice: its recorded decision is returned.

        Raises:
            SubagentError: `NOT_FOUND`, `ALREADY_DECIDED`, `NO_PENDING_REQUEST`,
                `AMBIGUOUS_REQUEST` (see `pick_request`); nothing is written then.
        """
        header = await self.read_header(session_id)
        shown = name or str(session_id)
        records = (await self.read_log(session_id))[header.seed_length :]
        requests = approval_requests(records)
        if command is not None:
            for request in requests:
                if request.decision is not None and request.decision.command == command:
                    return request, request.decision, False
        request = pick_request(requests, call_id, name=shown)
        decision = ApprovalDecided(
            call_id=request.call_id, approved=approved, by=by, reason=reason, command=command
        )
        if await self.approval_desk.decide(header.id, decision):
            return request, decision, True

        def still_pending(records: Sequence[EventRecord]) -> None:
            # Checked again where the decision is written: a concurrent one may have won.
            pick_request(
                approval_requests(records[header.seed_length :]), request.call_id, name=shown
            )

        live = self.get_agent(header.id)
        if live is not None:  # loaded, its wait not taken up yet: its run finds the decision
            still_pending(live.session.records)
            live.record(decision)
            await live.session.flush()
        else:
            await self.append_stored(header.id, decision, check=still_pending)
        return request, decision, False

    def own_gates(self, agent: Agent) -> ApprovalPolicy:
        """Gates a new agent adds to what it inherits (extension hook: a definition's)."""
        del agent
        return ApprovalPolicy()

    async def wait_quiescent(self) -> None:
        """Wait until no agent runs, no background work is in flight, and the log is durable.

        The flush matters to subscribers too: they see events once the records before them
        are posted, so after this returns they have been told everything.
        """
        while True:
            if self._running:
                await next(iter(self._running.values())).when_idle()
                continue
            if self.work.active:
                await self.work.wait_change()
                continue
            await self.store.flush()
            if self._running or self.work.active:
                continue  # a listener started work while the log caught up
            return

    def _status_changed(self, event: object) -> None:
        assert isinstance(event, AgentStatusChanged)
        agent_id = SessionId(event.agent_id)
        agent = self._agents.get(agent_id)
        if agent is not None and event.status == "running":
            self._running[agent_id] = agent
        else:
            self._running.pop(agent_id, None)

    async def run(
        self, prompt: str, *, agent: Agent | None = None, max_tokens: int | None = None
    ) -> RunResult:
        """Send `prompt` to `agent` (a new lead by default); return once the tree is quiescent.

        `max_tokens` caps each model response of the agent for this run (and of the children
        it starts meanwhile, which take their parent's cap); afterwards its own cap is back.
        """
        if not prompt.strip():
            raise ConfigError(
                "a prompt is required, for example: subagents run 'review app.py'",
                code=ErrorCode.USAGE,
            )
        cap = check_max_tokens(max_tokens, "max_tokens")
        agent = agent or await self.create_agent()
        agent.prepared()  # what it is told and offered is settled before the run changes it
        before = agent.config.max_tokens
        if cap is not None:
            self.set_max_tokens(agent, cap)
        first = agent.session.next_seq
        try:
            # Not acknowledged on its own: the run's end below, which waits for the whole
            # log to be durable, acknowledges the prompt with everything after it.
            await agent.send(prompt, target="next-turn", wake=True, durable=False)
            await self.wait_quiescent()
            await self.store.flush()
        finally:
            if cap is not None:
                self.set_max_tokens(agent, before)
        return run_result(agent.id, agent.session.records[first:])

    def stream(
        self, prompt: str, *, agent: Agent | None = None, max_tokens: int | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """`run`, as events: the tree's records as they commit, model output as it arrives.

        ```python
        async for event in runtime.stream("Review app.py"):
            match event:
                case AgentTextDelta(text=text):
                    print(text, end="")
                case RunFinished(result=result):
                    print(result.stop_reason)
        ```

        Nothing runs until the first iteration; stopping early stops the run (see
        `stream_while`, and docs/streaming.md for the order of the events).
        """
        return stream_while(self, lambda: self.run(prompt, agent=agent, max_tokens=max_tokens))

    def set_max_tokens(self, agent: Agent, cap: int | None) -> None:
        """Cap each model response of `agent` from its next call on (None: no cap)."""
        agent.config = dataclasses.replace(agent.config, max_tokens=cap)


def _retrieved(future: asyncio.Future[None]) -> None:
    """Mark a write nobody awaits as seen: its failure breaks the writes that are awaited."""
    if not future.cancelled():
        future.exception()


def run_result(session_id: SessionId, records: Iterable[EventRecord]) -> RunResult:
    """Fold an interval of a log into its result: the last non-empty answer, the last ending."""
    records = list(records)
    output = ""
    end: TurnEnd | None = None
    for record in records:
        match record.event:
            case AssistantMessageEvent(message=AssistantMessage() as message) if message.text:
                output = message.text
            case TurnEnd() as turn_end:
                end = turn_end
            case _:
                pass
    return RunResult(
        session_id=session_id,
        stop_reason=end.reason if end else None,
        output=output,
        usage=fold(UsageProjection(), records).usage,
        error_code=end.error_code if end else None,
        error_message=end.error_message if end else None,
    )


def _resolve_cwd(cwd: str | Path | None) -> str:
    return str(Path(cwd or os.getcwd()).resolve())


def _inspect_dir(root: str, cwd: str) -> tuple[str, str, bool]:
    """`cwd` from `root`: as spelled, canonical, and whether it is an accessible directory.

    Blocking (it touches the disk): run it in a worker thread.
    """
    path = os.path.normpath(os.path.join(root, cwd))
    canonical = canonical_root(path)
    return path, canonical, os.path.isdir(canonical)
