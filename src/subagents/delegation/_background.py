"""Background tasks: work an agent started and collects later (kind `subagent` for now).

Tasks belong to the agent that started them: only it can read, wait for or kill them, and
disposing it kills and awaits them. The first outcome wins. When a task settles and nobody has
seen its outcome yet, its owner gets a notice: an idle owner is woken (a bounded number of
times in a row, reset by the next user message), a busy one sees it at its next step.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .._task_owner import TaskOwner
from ..core import Agent, AgentRuntime
from ..errors import ErrorCode, SubagentError
from ..ids import SessionId
from ..messages import MessageSource, user_message
from ..sessions import EventRecord, Session, UserMessageEvent
from ._wording import (
    KILLED_BY_TASK_KILL,
    OWNER_DISPOSED,
    RUNTIME_CLOSED,
    task_failure_detail,
    task_notice_text,
)

__all__ = ["TaskOutcome", "TaskRecord", "TaskRegistry", "TaskStatus"]

log = logging.getLogger("subagents.tasks")

TaskStatus: TypeAlias = Literal["running", "stopping", "completed", "failed", "killed"]
TERMINAL: frozenset[TaskStatus] = frozenset({"completed", "failed", "killed"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskOutcome:
    status: Literal["completed", "failed", "killed"]
    output: str = ""
    detail: str | None = None


@dataclass(slots=True, kw_only=True)
class TaskRecord:
    id: str
    kind: str
    label: str
    owner_id: SessionId
    started_at: float
    status: TaskStatus = "running"
    output: str = ""
    detail: str | None = None
    finished_at: float | None = None
    reported: bool = False
    waiters: int = 0
    kill_reason: str | None = None
    subject: SessionId | None = None
    """The session the task runs (a one-shot child), once it exists."""
    done: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class TaskRegistry:
    """Background tasks of one runtime, fenced per owner."""

    def __init__(
        self,
        runtime: AgentRuntime,
        *,
        capacity_per_owner: int = 10,
        max_consecutive_wakes: int = 3,
    ) -> None:
        if capacity_per_owner < 1:
            raise SubagentError("capacity_per_owner must be at least 1", code=ErrorCode.USAGE)
        self.runtime = runtime
        self.capacity_per_owner = capacity_per_owner
        self.max_consecutive_wakes = max_consecutive_wakes
        self._records: dict[str, TaskRecord] = {}
        self._counters: dict[str, itertools.count[int]] = {}
        self._owners: set[SessionId] = set()
        self._wakes: dict[SessionId, int] = {}
        self._tasks = TaskOwner("background tasks")

    # -- starting -----------------------------------------------------------------------------

    def start(
        self,
        *,
        kind: str,
        label: str,
        owner: Agent,
        run: Callable[[], Coroutine[Any, Any, TaskOutcome]],
    ) -> str:
        """Start `run` as a task of `owner`; checks everything before the work starts."""
        if not kind:
            raise SubagentError("invalid task kind: expected a non-empty string")
        if not label.strip():
            raise SubagentError(
                "invalid task label: expected a non-empty string", code=ErrorCode.USAGE
            )
        if owner.disposed or self.runtime.get_agent(owner.id) is not owner:
            raise SubagentError(
                f'agent "{owner.id}" is not the registered agent instance (a task owner must '
                "be live)",
                code=ErrorCode.UNAUTHORIZED,
            )
        live = sum(1 for r in self._records.values() if r.owner_id == owner.id and not r.terminal)
        if live >= self.capacity_per_owner:
            raise SubagentError(
                f"background task limit reached for this owner (limit: "
                f"{self.capacity_per_owner}); use task_kill to stop an unneeded task, wait "
                "for one to finish, then retry",
                code=ErrorCode.TASK_LIMIT,
            )
        self._attach_owner(owner)
        counter = self._counters.setdefault(kind, itertools.count(1))
        record = TaskRecord(
            id=f"{kind}-{next(counter)}",
            kind=kind,
            label=label,
            owner_id=owner.id,
            started_at=self.runtime.clock.now(),
        )
        self._records[record.id] = record
        self.runtime.work.begin()
        record.task = self._tasks.spawn(self._drive(record, run), name=f"task {record.id}")
        return record.id

    def _attach_owner(self, owner: Agent) -> None:
        if owner.id in self._owners:
            return
        self._owners.add(owner.id)
        owner_id = owner.id

        def on_record(session: Session, record: EventRecord) -> None:
            event = record.event
            if isinstance(event, UserMessageEvent) and event.message.source.kind == "user":
                self._wakes.pop(owner_id, None)  # a user message refills the wake budget

        owner.session.observe(on_record)

        async def release(_: Agent) -> None:
            owner.session.unobserve(on_record)
            await self._release_owner(owner_id)

        owner.add_disposer(release)

    async def _drive(
        self, record: TaskRecord, run: Callable[[], Coroutine[Any, Any, TaskOutcome]]
    ) -> None:
        try:
            try:
                outcome = await run()
            except asyncio.CancelledError:
                outcome = TaskOutcome(status="killed", detail=record.kill_reason)
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
            except Exception as exc:
                log.warning("task %s failed: %s", record.id, exc)
                outcome = TaskOutcome(status="failed", detail=task_failure_detail(exc))
            self._settle(record, outcome)
            if not record.reported:
                await self._notify(record)
        finally:
            self.runtime.work.end()

    def _settle(self, record: TaskRecord, outcome: TaskOutcome) -> None:
        if record.terminal:
            return  # the first outcome wins
        record.status = outcome.status
        record.output = outcome.output if outcome.status == "completed" else ""
        record.detail = outcome.detail
        record.finished_at = self.runtime.clock.now()
        if record.waiters:
            record.reported = True
        record.done.set()

    async def _notify(self, record: TaskRecord) -> None:
        owner = self.runtime.get_agent(record.owner_id)
        if owner is None:
            return
        text = task_notice_text(record)
        source = MessageSource(kind="notice", name="tasks")
        try:
            if owner.status == "running":
                await owner.steer(user_message(text, source=source))
                return
            used = self._wakes.get(owner.id, 0)
            if used < self.max_consecutive_wakes:
                self._wakes[owner.id] = used + 1
                await owner.followup(user_message(text, source=source))
            else:
                await owner.inject(user_message(text, source=source))
        except Exception:
            log.exception("the notice for task %s was not delivered", record.id)

    # -- reading and control ------------------------------------------------------------------

    def get(self, task_id: str, caller: SessionId) -> TaskRecord:
        record = self._records.get(task_id)
        if record is None:
            raise SubagentError(
                f"unknown task {task_id}; task_list shows yours", code=ErrorCode.UNKNOWN_TASK
            )
        if record.owner_id != caller:
            raise SubagentError(
                f"task {task_id} belongs to another session", code=ErrorCode.UNAUTHORIZED
            )
        return record

    def for_subject(self, subject: SessionId) -> TaskRecord | None:
        """The newest task running session `subject`, or None (the no-peek guard asks)."""
        found = [r for r in self._records.values() if r.subject == subject]
        return found[-1] if found else None

    def list(self, caller: SessionId) -> list[TaskRecord]:
        return [r for r in self._records.values() if r.owner_id == caller]

    def read(self, task_id: str, caller: SessionId) -> TaskRecord:
        record = self.get(task_id, caller)
        if record.terminal:
            record.reported = True
        return record

    async def wait(self, task_id: str, caller: SessionId, timeout_s: float) -> TaskRecord:
        """Wait until the task settles or `timeout_s` of the runtime clock passes."""
        record = self.get(task_id, caller)
        if not record.terminal:
            record.waiters += 1
            waiter = self._tasks.spawn(record.done.wait(), name=f"wait {task_id}")
            sleeper = self._tasks.spawn(self.runtime.clock.sleep(timeout_s), name="wait timer")
            try:
                await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                record.waiters -= 1
                waiter.cancel()
                sleeper.cancel()
        return self.read(task_id, caller)

    def kill(
        self, task_id: str, caller: SessionId, reason: str | None = None
    ) -> Literal["requested", "already-finished"]:
        record = self.get(task_id, caller)
        record.reported = True
        if record.terminal or record.status == "stopping":
            return "already-finished" if record.terminal else "requested"
        record.status = "stopping"
        record.kill_reason = reason or KILLED_BY_TASK_KILL
        if record.task is not None:
            record.task.cancel()
        return "requested"

    # -- teardown -----------------------------------------------------------------------------

    async def _release_owner(self, owner_id: SessionId) -> None:
        """Kill and await the owner's tasks (no notices), then forget them."""
        mine = [r for r in self._records.values() if r.owner_id == owner_id]
        for record in mine:
            record.reported = True
            if not record.terminal and record.task is not None:
                record.kill_reason = OWNER_DISPOSED
                record.status = "stopping"
                record.task.cancel()
        pending = [r.task for r in mine if r.task is not None and not r.task.done()]
        if pending:
            await asyncio.wait(pending)
        for record in mine:
            self._records.pop(record.id, None)
        self._owners.discard(owner_id)
        self._wakes.pop(owner_id, None)

    async def aclose(self) -> None:
        for record in self._records.values():
            record.reported = True
            record.kill_reason = record.kill_reason or RUNTIME_CLOSED
        await self._tasks.aclose()
        self._records.clear()

    def live_count(self) -> int:
        return sum(1 for r in self._records.values() if not r.terminal)
