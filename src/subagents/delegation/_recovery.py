"""Crash recovery of a tree: the one-shot children a crash cut off run again, deepest first.

A one-shot child has no activation to cold-resume it and nobody left to collect its ending:
its creator was waiting for it (a foreground call) or would have been told by a background
task, and both waits died with the process. So before the tree's root and its continuable
members resume, each one-shot member whose turn a crash cut off is resumed from its repaired
log and its turn re-run (core crash repair queues the re-run, bounded per turn); then its
answer goes where the dead wait would have put it:

- a foreground child's answer becomes the result of its creator's cut-off delegation call:
  the creator's repair records it instead of `TOOL_OUTCOME_UNKNOWN`, so the creator's re-run
  reads the real answer (a child that had finished before the crash is not re-run: its
  recorded answer is handed back the same way);
- a background task's ending reaches its creator as a notice carrying the output (the task
  registry that `task_output` reads died with the process).

Deeper members go first, so every creator hears its children before it runs again. A child
whose caller is unknown (a workflow's: the script that waited for it is gone) or whose
creator's call was closed meanwhile (an interrupt) is only closed, not re-run: nobody would
read its answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..core import Agent, AgentConfig, AgentRuntime
from ..errors import ErrorCode
from ..ids import SessionId
from ..messages import MessageSource, user_message
from ..sessions import (
    EventRecord,
    KnownOutcome,
    RequestHeader,
    SessionHeader,
    SubagentCatalog,
    SubagentDescriptor,
    ToolResultEvent,
    has_open_turn,
)
from ._catalog import full_name_of
from ._continuable_log import own_descriptor, restored_profile
from ._providers import ResumeRequest
from ._results import SubagentResult, result_from_log
from ._service import SubagentService
from ._structured import StructuredCapture
from ._wording import (
    STRUCTURED_OUTPUT,
    provider_unavailable_diagnostic,
    rerun_notice_text,
    structured_instruction,
    told,
    with_recorded_prompt,
)
from .tools import foreground_outcome

__all__ = ["TreeRecovery"]

log = logging.getLogger("subagents.recovery")

RECOVERY_SOURCE = MessageSource(kind="notice", name="tasks")
"""Notices of re-run background tasks come from where a live task's notices come from."""


@dataclass(frozen=True, slots=True)
class _Cut:
    """A one-shot member to recover, and where its answer goes."""

    header: SessionHeader
    descriptor: SubagentDescriptor
    call_id: str
    foreground: bool
    """True: its creator's call waits for the answer; False: a background task's notice."""
    label: str


class TreeRecovery:
    """Recovers the one-shot members of trees a crash cut off, for one runtime."""

    def __init__(
        self,
        runtime: AgentRuntime,
        service: SubagentService,
        *,
        config_for: Callable[[str, int], AgentConfig],
        restore_scope: Callable[[Agent], None],
        delegated_work: Callable[[Agent], bool],
    ) -> None:
        self.runtime = runtime
        self.service = service
        self._config_for = config_for
        self._restore_scope = restore_scope
        self._delegated_work = delegated_work
        self._outcomes: dict[SessionId, dict[str, KnownOutcome]] = {}

    def outcomes_for(self, session_id: SessionId) -> Mapping[str, KnownOutcome]:
        """The real answers learned for `session_id`'s cut-off delegation calls, by call id."""
        return self._outcomes.get(session_id, {})

    async def recover(self, root: SessionHeader) -> None:
        """Re-run the tree's cut-off one-shot members child-first and route their answers.

        Call before resuming the root or its continuable members, whose repairs then carry
        the answers of their foreground children.
        """
        headers = await self.runtime.store.list_headers(
            tenant=root.tenant, roots_only=False, root=root.id
        )
        logs = {h.id: await self.runtime.read_log(h.id) for h in headers}
        members = [h for h in headers if h.parent is not None and h.parent in logs]
        for depth in sorted({h.depth for h in members}, reverse=True):
            jobs: list[_Cut] = []
            for header in (h for h in members if h.depth == depth):
                cut = await self._classify(header, logs)
                if cut is not None:
                    jobs.append(cut)
            if jobs:
                async with asyncio.TaskGroup() as group:
                    for cut in jobs:
                        group.create_task(self._rerun(cut))

    async def _classify(
        self, header: SessionHeader, logs: Mapping[SessionId, Sequence[EventRecord]]
    ) -> _Cut | None:
        """What to do with one member: re-run it, hand back its answer, close it, or nothing."""
        records = logs[header.id]
        descriptor = own_descriptor(records[header.seed_length :])
        if descriptor is None or descriptor.mode != "one-shot":
            return None  # continuable members resume through their own activations
        assert header.parent is not None
        creator = logs[header.parent]
        entry = next(
            (
                r.event
                for r in creator
                if isinstance(r.event, SubagentCatalog) and r.event.child_id == header.id
            ),
            None,
        )
        cut = has_open_turn(records)
        call_id = entry.call_id if entry is not None else None
        if call_id is None or (not cut and not _waits_for(creator, call_id)):
            if cut:
                await self._close(header)
            return None
        answer = _answer(creator, call_id)
        if answer is None and _waits_for(creator, call_id):
            foreground = True
        elif answer is not None and answer.code not in _REPAIR_CODES:
            foreground = False  # the call returned at once: a background task
        else:
            await self._close(header)  # its creator's call was closed meanwhile
            return None
        if not cut:
            # Finished before the crash, but its creator never recorded the answer.
            self._hand_back(header.parent, call_id, self._result(records[header.seed_length :]))
            return None
        label = entry.label if entry is not None else ""
        return _Cut(header, descriptor, call_id, foreground, label)

    async def _close(self, header: SessionHeader) -> None:
        """Close a cut-off turn nobody will read the answer of, without re-running it.

        A repair of the log only (no provider runs the child), by the tree's lease holder.
        """
        agent = await self.runtime.resume_agent(header.id, retry_cut_turn=False)
        await agent.dispose(keep_inbox=True)

    async def _rerun(self, cut: _Cut) -> None:
        header = cut.header
        full_name = await full_name_of(self.runtime.read_log, self.runtime.read_header, header)
        profile = restored_profile(cut.descriptor)
        if profile is not None:  # the scope it started with, from its own log
            self.service.profiles[header.id] = profile
        provider = self.service.get_provider(cut.descriptor.provider)
        if provider is None:
            # Its creator still hears how it ended (an error that says why), not nothing.
            diagnostic = provider_unavailable_diagnostic(cut.descriptor.provider)
            log.warning("subagent %s: %s", full_name, diagnostic)
            await self._close(header)
            result = SubagentResult(output="", stop_reason="error", diagnostic=diagnostic)
            await self._route(cut, full_name, result)
            return
        child = await provider.resume(
            ResumeRequest(header=header, config=self._config_for(full_name, header.depth))
        )
        capture = None
        agent = child.local_agent
        if agent is not None:  # a child run elsewhere is readied by the runtime it runs in
            self._restore_scope(agent)
            own = agent.session.records[header.seed_length :]
            system = next(
                (r.event.system for r in reversed(own) if isinstance(r.event, RequestHeader)),
                None,
            )
            if cut.descriptor.output_schema is not None:
                agent.config = told(agent.config, STRUCTURED_OUTPUT, structured_instruction())
            if system is not None and system != agent.config.system_prompt:
                # Exactly what it was told before the crash (its own instructions were its
                # parent's, which may not be loaded now).
                agent.config = with_recorded_prompt(agent.config, system)
            if cut.descriptor.output_schema is not None:
                capture = StructuredCapture(
                    cut.descriptor.output_schema, delegated_work=self._delegated_work
                )
                capture.restore(own)  # an answer recorded before the crash still counts
                capture.install(agent)
        try:
            await child.wake()  # the re-run crash repair queued (none once retries are spent)
            await child.wait()
        finally:
            await child.kill(keep_inbox=True)
        own = (await child.records())[header.seed_length :]
        await self._route(cut, full_name, self._result(own, capture))

    async def _route(self, cut: _Cut, full_name: str, result: SubagentResult) -> None:
        """Give a re-run's result to whoever the dead wait would have given it to."""
        creator = cut.header.parent
        assert creator is not None
        if cut.foreground:
            self._hand_back(creator, cut.call_id, result)
        else:
            await self._notify(creator, full_name, cut.label, result)

    @staticmethod
    def _result(
        records: Sequence[EventRecord], capture: StructuredCapture | None = None
    ) -> SubagentResult:
        result = result_from_log(records)
        if capture is None:
            descriptor = own_descriptor(records)
            if descriptor is not None and descriptor.output_schema is not None:
                capture = StructuredCapture(descriptor.output_schema)
                capture.restore(records)
        return capture.settle(result, records) if capture is not None else result

    def _hand_back(self, creator: SessionId, call_id: str, result: SubagentResult) -> None:
        self._outcomes.setdefault(creator, {})[call_id] = foreground_outcome(result)

    async def _notify(
        self, creator: SessionId, full_name: str, label: str, result: SubagentResult
    ) -> None:
        """Tell a background task's creator how its re-run ended (durably, loaded or not)."""
        body = rerun_notice_text(full_name, label, result)
        await self.runtime.deliver(creator, user_message(body, source=RECOVERY_SOURCE))


_REPAIR_CODES = frozenset({str(ErrorCode.TOOL_OUTCOME_UNKNOWN), str(ErrorCode.TOOL_NOT_STARTED)})
"""Results a repair wrote: the call was closed without its answer (an interrupt, say)."""


def _answer(records: Sequence[EventRecord], call_id: str) -> ToolResultEvent | None:
    return next(
        (
            r.event
            for r in records
            if isinstance(r.event, ToolResultEvent) and r.event.message.call_id == call_id
        ),
        None,
    )


def _waits_for(records: Sequence[EventRecord], call_id: str) -> bool:
    """Whether `call_id` is a call of the log's cut-off turn that has no result yet."""
    return has_open_turn(records) and _answer(records, call_id) is None
