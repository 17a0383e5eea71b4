"""Continuable children: long-lived, addressable by name, resumable from the log.

A continuable child has one durable session and at most one live activation per process. Its
inbox is the only queue. An activation stays resident while it runs, while accepted messages
wait to be claimed, and while children it started are still resident (waiting); once it is
quiescent and owns nothing it settles: the activation is released child-first, the child's
direct parent gets a settlement notice naming it by full name, and the child stays `ready` in
storage, from where a later message cold-resumes it.

A child started from a definition with an output schema answers every activation through its
`structured_output` tool: the notice carries the value as JSON, a finish without it is an error.
The schema comes from the child's descriptor, so a resume never re-reads definition files.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from .._task_owner import TaskOwner
from ..core import Agent, AgentConfig, AgentRuntime
from ..errors import ErrorCode, NotFoundError, SubagentError
from ..ids import SessionId
from ..messages import JsonObject, MessageSource, UserMessage, user_message
from ..sessions import (
    SessionHeader,
    SubagentCatalog,
    SubagentSettled,
    interrupted_turn_closers,
)
from ._catalog import full_name_of
from ._continuable_log import (
    descriptor_mode,
    has_pending,
    last_settled,
    own_descriptor,
    restored_profile,
    unsettled,
)
from ._providers import ResumeRequest, StartRequest, SubagentChild
from ._results import SubagentResult, result_from_log
from ._service import (
    Admission,
    SubagentService,
    SubagentStarted,
    descriptor_for,
)
from ._structured import StructuredCapture
from ._wording import notice_text

__all__ = ["Activation", "ContinuableManager"]

log = logging.getLogger("subagents.continuable")


@dataclass(eq=False)
class Activation:
    """One residency epoch of a continuable child in this process."""

    child: SubagentChild
    started: SubagentStarted
    """Its `subagent/start`: who it is, whose child, which provider runs it, and the run id
    that pairs it with the `subagent/end` of its release."""
    epoch_start: int
    owner: Activation | None
    owned: set[Activation] = field(default_factory=set["Activation"])
    accepting: int = 0
    announced: bool = False
    closing: bool = False
    released: asyncio.Event = field(default_factory=asyncio.Event)
    poke: asyncio.Event = field(default_factory=asyncio.Event)
    structured: StructuredCapture | None = None
    """This epoch's structured-output state (a child with an output schema)."""

    @property
    def id(self) -> SessionId:
        return self.child.id

    @property
    def parent_id(self) -> SessionId:
        return SessionId(self.started.parent_id)

    @property
    def full_name(self) -> str:
        return self.started.name

    @property
    def admits_input(self) -> bool:
        """False once it is being released or its structured answer is decided."""
        return not self.closing and (self.structured is None or not self.structured.sealed)


class ContinuableManager:
    """The activations of one runtime."""

    def __init__(
        self,
        runtime: AgentRuntime,
        service: SubagentService,
        *,
        config_for: Callable[[str, int], AgentConfig],
        setup: Callable[[Agent], None],
    ) -> None:
        self.runtime = runtime
        self.service = service
        self._config_for = config_for
        self._setup = setup
        self._acts: dict[SessionId, Activation] = {}
        self._locks: dict[SessionId, asyncio.Lock] = {}
        self._tasks = TaskOwner("continuable children")
        self._closing = False

    def get(self, child_id: str) -> Activation | None:
        return self._acts.get(SessionId(child_id))

    def resident(self) -> list[Activation]:
        return list(self._acts.values())

    # -- starting -----------------------------------------------------------------------------

    async def start(self, admission: Admission) -> tuple[Activation, UserMessage]:
        """Create a continuable child and queue its first prompt (durably accepted)."""
        if self._closing:
            raise SubagentError(
                "continuable subagents are draining; the operation was not admitted",
                code=ErrorCode.DRAINING,
            )
        parent = admission.parent
        book = self.service.name_book(parent)
        provider = admission.provider
        try:
            model = await self.service.open_model(admission)
            descriptor = descriptor_for(admission)
            child = await provider.start(
                StartRequest(
                    parent=parent,
                    cwd=admission.cwd,
                    config=self._child_config(admission),
                    descriptor=descriptor,
                )
            )
            if child.local_agent is not None:
                child.local_agent.model = model
            if admission.model_spec is not None:
                self.service.model_specs[child.id] = admission.model_spec
            parent.record(
                SubagentCatalog(
                    child_id=child.id,
                    name=admission.name,
                    mode="continuable",
                    provider=provider.name,
                    label=admission.label,
                    created_at=self.runtime.clock.now(),
                )
            )
            book.commit(admission.name)
        except BaseException:
            if not book.committed(admission.name):
                self.service.cancel(admission)  # the name, the profile, the budget count
            raise
        finally:
            book.release(admission.name)
        act = await self._activate(
            child,
            parent.id,
            admission.full_name,
            provider.name,
            schema=descriptor.output_schema,
        )
        source = MessageSource(kind="parent", name=parent.name)
        act.accepting += 1
        try:
            message = await child.send(user_message(admission.prompt, source=source))
        finally:
            act.accepting -= 1
            act.poke.set()
        act.announced = True
        return act, message

    def _child_config(self, admission: Admission) -> AgentConfig:
        """A new continuable child's config: its parent's loop limits (its scope comes later)."""
        parent = admission.parent.config
        return dataclasses.replace(
            self._config_for(admission.full_name, admission.depth),
            instructions=parent.instructions,
            max_parallel_tools=parent.max_parallel_tools,
            max_tokens=parent.max_tokens,
        )

    async def _activate(
        self,
        child: SubagentChild,
        parent_id: SessionId,
        full_name: str,
        provider: str,
        *,
        epoch_start: int | None = None,
        schema: JsonObject | None = None,
    ) -> Activation:
        owner = self._acts.get(parent_id)
        if owner is not None and owner.closing:
            owner = None  # its release is past its children: its next epoch adopts this one
        if epoch_start is None:
            epoch_start = len(await child.records())
        act = Activation(
            child=child,
            started=SubagentStarted(
                run_id=self.service.next_run_id(),
                provider=provider,
                child_id=child.id,
                name=full_name,
                parent_id=parent_id,
                local=child.local_agent is not None,
            ),
            epoch_start=epoch_start,
            owner=owner,
        )
        if owner is not None:
            owner.owned.add(act)
        for orphan in self._acts.values():  # resident children resumed before their parent
            if orphan.parent_id == child.id and orphan.owner is None and not orphan.closing:
                orphan.owner = act
                act.owned.add(orphan)
        self._acts[child.id] = act
        agent = child.local_agent
        if agent is not None:  # a child run elsewhere is readied by the runtime it runs in
            self._setup(agent)
            if schema is not None:
                self._install_structured(act, agent, schema)
        self.runtime.work.begin()
        self.service.emit(act.started)
        self._tasks.spawn(self._watch(act), name=f"settle {full_name}")
        return act

    def _install_structured(self, act: Activation, agent: Agent, schema: JsonObject) -> None:
        """Give the activation its own capture, tool, guard and trailing instruction.

        A resumed epoch recovers what its own records already hold; a fresh one starts empty.
        """
        running = self.service.delegated_work

        def delegated_work(agent: Agent) -> bool:
            # Resident children still owe a notice; accepted input is not in the inbox yet.
            return bool(act.owned) or act.accepting > 0 or (running is not None and running(agent))

        act.structured = StructuredCapture(schema, delegated_work=delegated_work)
        act.structured.install_activation(agent, agent.session.records[act.epoch_start :])

    # -- settling -----------------------------------------------------------------------------

    async def _watch(self, act: Activation) -> None:
        """Wait until the activation is settled, then release it (with its notice)."""
        while True:
            await act.child.wait()
            act.poke.clear()
            if act.child.running:
                continue
            if act.accepting or act.owned:
                await act.poke.wait()
                continue
            break
        await self._release(act, notify=True, keep_inbox=False)

    async def _release(self, act: Activation, *, notify: bool, keep_inbox: bool) -> None:
        """Release `act` and what it owns, child-first; notify its parent; emit the end."""
        if act.closing:
            await act.released.wait()
            return
        act.closing = True
        result = SubagentResult(output="", stop_reason="error")
        try:
            await act.child.interrupt(keep_inbox=keep_inbox)
            for child in list(act.owned):
                await self._release(child, notify=notify, keep_inbox=keep_inbox)
            epoch = (await act.child.records())[act.epoch_start :]
            result = result_from_log(epoch)
            if act.structured is not None:
                result = act.structured.settle(result, epoch)
            try:
                await act.child.kill(keep_inbox=keep_inbox)
            except Exception as exc:
                log.exception("subagent %s failed to release", act.full_name)
                result = SubagentResult(output="", stop_reason="error", diagnostic=str(exc))
            if notify and act.announced and await self._notify_parent(act, result):
                # After the notice: a crash in between repeats the notice, never loses it;
                # a notice that was not delivered stays owed, so the next resume repeats it.
                await self._record_settled(act, result)
        finally:
            # Registered until its last write: a resume meanwhile waits for `released` instead
            # of loading a second copy of the session from a log that is not finished yet.
            if self._acts.get(act.id) is act:
                del self._acts[act.id]
            if act.owner is not None:
                act.owner.owned.discard(act)
                act.owner.poke.set()
            self.service.emit(act.started.ended(result.stop_reason, result.output or None))
            self.runtime.work.end()
            act.released.set()

    async def _record_settled(self, act: Activation, result: SubagentResult) -> None:
        """Write the settlement into the child's own log, once its activation is released."""
        event = SubagentSettled(run_id=act.started.run_id, stop_reason=result.stop_reason)
        agent = act.child.local_agent
        if agent is not None:
            await agent.append_after(event)  # after writes still in flight
        else:
            record = await self.runtime.append_stored(act.id, event)
            self.runtime.bus.post(act.id, act.full_name, record)

    async def _notify_parent(self, act: Activation, result: SubagentResult) -> bool:
        """Deliver `act`'s settlement notice to its parent; False when it was not delivered."""
        message = user_message(
            notice_text(act.full_name, result),
            source=MessageSource(kind="subagent-settled", name=act.full_name),
        )
        try:
            parent_act = self._acts.get(act.parent_id)
            if parent_act is not None and parent_act.closing and act.owner is not parent_act:
                # Not part of that release (it came after): the parent's next epoch takes it.
                await parent_act.released.wait()
            parent = self.runtime.get_agent(act.parent_id)
            parent_act = self._acts.get(act.parent_id)
            if parent is None and await self._resumable(act.parent_id):
                # A continuable parent that is not loaded is resumed to take the notice in.
                parent_act = await self._resident_or_resume(
                    await self.runtime.read_header(act.parent_id)
                )
                parent_act.accepting += 1
                try:
                    await parent_act.child.send(message)
                finally:
                    parent_act.accepting -= 1
                    parent_act.poke.set()
                return True
            if parent is None:
                # The root is not loaded: the notice waits in its log for its next resume.
                await self.runtime.deliver(act.parent_id, message, wake=False)
            elif parent_act is not None and parent_act.closing:
                await parent.inject(message)  # waking a parent being released buys nothing
            elif parent.status == "running":
                await parent.steer(message)  # joins its next step
            else:
                await parent.followup(message)  # one new turn
        except Exception:
            log.exception("the settlement notice of %s was not delivered", act.full_name)
            return False
        return True

    # -- messages -----------------------------------------------------------------------------

    async def send(
        self, caller: Agent, target: SessionId, text: str, *, source: MessageSource
    ) -> tuple[Activation, UserMessage]:
        """Deliver `text` as the target's next turn; only its exact live direct parent may.

        The message is in the child's log before this returns. A released child is
        cold-resumed from its own log first.
        """
        header = await self._header(target)
        if header.parent != caller.id:
            raise SubagentError(
                f'subagent "{target}" belongs to another parent session; only its direct '
                "parent can send it messages",
                code=ErrorCode.UNAUTHORIZED,
            )
        act = await self._resident_or_resume(header)
        act.accepting += 1
        try:
            message = await act.child.send(user_message(text, source=source))
        finally:
            act.accepting -= 1
            act.poke.set()
        return act, message

    async def deliver_as_user(
        self, target: SessionId, text: str | UserMessage, *, steer: bool = False
    ) -> tuple[Activation, UserMessage, bool]:
        """A person's message to any member of a stored tree (the user channel).

        `steer` enters it at the next step of the member's running turn where it can (an agent
        of this process that is running); otherwise it is its next turn. Returns the
        activation, the message and whether it joined the running turn.
        """
        header = await self._header(target)
        act = await self._resident_or_resume(header)
        message = (
            text
            if isinstance(text, UserMessage)
            else user_message(text, source=MessageSource(kind="user"))
        )
        act.accepting += 1
        try:
            agent = act.child.local_agent
            joined = steer and agent is not None and agent.takes_steering
            if joined and agent is not None:
                await agent.steer(message)
            else:
                await act.child.send(message)
        finally:
            act.accepting -= 1
            act.poke.set()
        return act, message, joined

    async def _resumable(self, session_id: SessionId) -> bool:
        """Whether a stored session is a continuable child this process may resume."""
        if self._closing:
            return False
        try:
            header = await self.runtime.read_header(session_id)
        except NotFoundError:
            return False
        if header.parent is None:
            return False
        records = await self.runtime.read_log(session_id)
        return descriptor_mode(records[header.seed_length :]) == "continuable"

    async def _header(self, target: SessionId) -> SessionHeader:
        try:
            return await self.runtime.read_header(target)
        except NotFoundError:
            raise SubagentError(
                f'subagent "{target}" is unavailable; list_agents shows your children',
                code=ErrorCode.NOT_RESUMABLE,
            ) from None

    async def _resident_or_resume(
        self, header: SessionHeader, *, for_input: bool = True
    ) -> Activation:
        """The activation that takes the caller's input (`for_input=False`: any live one)."""
        lock = self._locks.setdefault(header.id, asyncio.Lock())
        async with lock:
            while True:
                act = self._acts.get(header.id)
                if act is None:
                    act = await self._resume(header)
                if act.admits_input or not (for_input or act.closing):
                    return act
                # Being released, or its answer is decided: its next epoch takes the input.
                await act.released.wait()

    async def _resume(self, header: SessionHeader) -> Activation:
        """Cold-resume a stored continuable child from its own log (no provider involved)."""
        if self._closing:
            raise SubagentError(
                "continuable subagents are draining; the operation was not admitted",
                code=ErrorCode.DRAINING,
            )
        records = await self.runtime.read_log(header.id)
        own = records[header.seed_length :]
        descriptor = own_descriptor(own)
        if descriptor is None or descriptor.mode != "continuable":
            raise SubagentError(
                f'subagent "{header.id}" has no supported continuation state and cannot be '
                "resumed; do not retry send_message with this id",
                code=ErrorCode.NOT_RESUMABLE,
            )
        full_name = await full_name_of(self.runtime.read_log, self.runtime.read_header, header)
        restored = restored_profile(descriptor)
        if restored is not None:  # the scope it started with, from its own log
            self.service.profiles[header.id] = restored
        # The epoch starts after the last settlement its parent heard of (before any repair),
        # so a turn a crash cut off counts as stopped and an unannounced ending is announced.
        unannounced = max(header.seed_length, last_settled(records))
        epoch_start = unannounced if unsettled(own) else len(records)
        provider = self.service.get_provider(descriptor.provider)
        if provider is None:
            raise SubagentError(
                f'subagent "{header.id}" was started by provider "{descriptor.provider}", '
                "which this runtime does not have; it cannot be resumed here",
                code=ErrorCode.NOT_RESUMABLE,
            )
        child = await provider.resume(
            ResumeRequest(header=header, config=self._config_for(full_name, header.depth))
        )
        assert header.parent is not None
        act = await self._activate(
            child,
            header.parent,
            full_name,
            descriptor.provider,
            epoch_start=epoch_start,
            schema=descriptor.output_schema,
        )
        act.announced = True  # its next settlement is owed to its parent
        await child.wake()  # messages accepted before a crash run now
        return act

    async def resume_unsettled(self, root: SessionHeader) -> list[Activation]:
        """After a restart: reactivate the members a crash left unsettled.

        Every continuable member of `root`'s tree with a turn cut off or accepted messages
        never run is resumed, so it finishes its work and its parent hears how it ended.
        """
        headers = await self.runtime.store.list_headers(
            tenant=root.tenant, roots_only=False, root=root.id
        )
        resumed: list[Activation] = []
        try:
            for header in sorted(headers, key=lambda h: (h.depth, h.created_at)):
                try:
                    act = await self._resume_if_unsettled(header)
                except SubagentError as exc:
                    if exc.code != ErrorCode.NOT_RESUMABLE:
                        raise
                    # Its provider is not here: it stays unsettled in storage, for a runtime
                    # that has it; the rest of the tree resumes.
                    log.warning("%s", exc.message)
                    continue
                if act is not None:
                    # Held until the whole tree is back, so a parent resumed before its
                    # children owns them, takes in their notices and settles after them.
                    act.accepting += 1
                    resumed.append(act)
        finally:
            for act in resumed:
                act.accepting -= 1
                act.poke.set()
        return resumed

    async def _resume_if_unsettled(self, header: SessionHeader) -> Activation | None:
        """Reactivate one member a crash left unsettled; None when it needs nothing."""
        if header.parent is None or self._acts.get(header.id) is not None:
            return None
        records = await self.runtime.read_log(header.id)
        own = records[header.seed_length :]
        descriptor = own_descriptor(own)
        if descriptor is None or descriptor.mode != "continuable":
            return None
        if not (interrupted_turn_closers(records) or has_pending(own) or unsettled(own)):
            return None
        # A resumed epoch that had recorded its answer settles with it (no new epoch).
        return await self._resident_or_resume(header, for_input=False)

    # -- interrupts ---------------------------------------------------------------------------

    async def interrupt(self, caller: Agent, target: SessionId) -> None:
        """Stop the target's current turn; any live ancestor may.

        Its queue, its activation and its children stay. An unknown or settled target is an
        accepted no-op.
        """
        if target == caller.id:
            raise SubagentError(
                f'agent "{caller.name}" cannot interrupt itself', code=ErrorCode.UNAUTHORIZED
            )
        try:
            header = await self.runtime.read_header(target)
        except NotFoundError:
            return
        if not await self._is_ancestor(caller.id, header):
            raise SubagentError(
                f'subagent "{target}" is not a live descendant of agent "{caller.name}"',
                code=ErrorCode.UNAUTHORIZED,
            )
        await self.interrupt_any(target)

    async def interrupt_any(self, target: SessionId) -> bool:
        """Stop a resident continuable child's current turn, keeping its queue.

        False (an accepted no-op) when it is not resident, is being released, or is a one-shot
        child, which its waiting parent stops by being stopped itself.
        """
        act = self._acts.get(target)
        if act is None or act.closing:
            return False
        await act.child.interrupt(keep_inbox=True)
        return True

    async def _is_ancestor(self, ancestor: SessionId, header: SessionHeader) -> bool:
        current = header
        while current.parent is not None:
            if current.parent == ancestor:
                return True
            current = await self.runtime.read_header(current.parent)
        return False

    # -- teardown -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Release every activation child-first without notices; pending input stays."""
        self._closing = True
        for act in [a for a in self._acts.values() if a.owner is None]:
            await self._release(act, notify=False, keep_inbox=True)
        await self._tasks.aclose()
