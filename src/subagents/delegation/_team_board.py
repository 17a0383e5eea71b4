"""Team tasks: a task board shared by one tree, stored as `team/*` events in the root's log.

Storage keeps owners' session ids; results name them by full name. A claim is atomic: the
board checks and records it in one synchronous step, so of two claimers exactly one wins.
The model-facing `team_task_*` tools over it are in `tools/_team.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..core import Agent, AgentRuntime
from ..errors import ErrorCode, SubagentError
from ..ids import SessionId
from ..sessions import EventRecord, SessionEvent, TeamTaskClaimed, TeamTaskCreated, TeamTaskUpdated
from ._catalog import full_name_of
from ._service import SubagentService
from ._wording import team_task_row

__all__ = ["Status", "TeamBoards", "TeamTask", "fold_board"]

Status = Literal["pending", "in_progress", "completed"]


@dataclass(slots=True)
class TeamTask:
    id: str
    subject: str
    description: str
    blocked_by: tuple[str, ...]
    status: Status = "pending"
    owner: str | None = None
    notes: list[str] = field(default_factory=list[str])


def fold_board(records: list[EventRecord]) -> dict[str, TeamTask]:
    board: dict[str, TeamTask] = {}
    for record in records:
        match record.event:
            case TeamTaskCreated(task_id=task_id, subject=subject, description=d, blocked_by=b):
                board[task_id] = TeamTask(task_id, subject, d, b)
            case TeamTaskClaimed(task_id=task_id, owner=owner) if task_id in board:
                board[task_id].owner = owner
                board[task_id].status = "in_progress"
            case TeamTaskUpdated(task_id=task_id, status=status, note=note) if task_id in board:
                board[task_id].status = status
                if note:
                    board[task_id].notes.append(note)
            case _:
                pass
    return board


class TeamBoards:
    """The boards of the trees this runtime has loaded, each folded once from its root's log."""

    def __init__(self, runtime: AgentRuntime, service: SubagentService) -> None:
        self.runtime = runtime
        self.service = service
        self._boards: dict[SessionId, dict[str, TeamTask]] = {}

    async def board(self, caller: Agent) -> tuple[SessionId, dict[str, TeamTask]]:
        root = caller.session.header.root_id
        board = self._boards.get(root)
        if board is None:
            board = self._boards[root] = fold_board(list(await self.runtime.read_log(root)))
        return root, board

    async def _record(self, root: SessionId, event: SessionEvent) -> None:
        try:
            live = self.runtime.get_agent(root)
            if live is not None:
                live.record(event)
            else:
                await self.runtime.append_stored(root, event)
        except BaseException:
            self._boards.pop(root, None)  # the board may no longer match the log: refold it
            raise

    async def owner_name(self, owner: str | None) -> str:
        if owner is None:
            return "nobody"
        live = self.runtime.get_agent(owner)
        if live is not None:
            return live.name
        header = await self.runtime.read_header(SessionId(owner))
        return await full_name_of(self.runtime.read_log, self.runtime.read_header, header)

    async def create(
        self, caller: Agent, subject: str, description: str, blocked_by: list[str]
    ) -> TeamTask:
        root, board = await self.board(caller)
        unknown = [b for b in blocked_by if b not in board]
        if unknown:
            raise SubagentError(
                f"unknown blocking task(s): {', '.join(unknown)}; team_task_list shows the ids",
                code=ErrorCode.UNKNOWN_TASK,
            )
        task = TeamTask(f"T{len(board) + 1}", subject, description, tuple(blocked_by))
        board[task.id] = task
        await self._record(
            root,
            TeamTaskCreated(
                task_id=task.id,
                subject=subject,
                description=description,
                blocked_by=task.blocked_by,
                created_by=caller.id,
            ),
        )
        return task

    def _get(self, board: dict[str, TeamTask], task_id: str) -> TeamTask:
        task = board.get(task_id)
        if task is None:
            raise SubagentError(
                f"unknown team task {task_id}; team_task_list shows the ids",
                code=ErrorCode.UNKNOWN_TASK,
            )
        return task

    async def claim(self, caller: Agent, task_id: str) -> TeamTask:
        root, board = await self.board(caller)
        task = self._get(board, task_id)
        if task.owner is not None:
            raise SubagentError(
                f"team task {task_id} is already claimed by {await self.owner_name(task.owner)}",
                code=ErrorCode.DUPLICATE,
            )
        open_blockers = [b for b in task.blocked_by if board[b].status != "completed"]
        if open_blockers:
            raise SubagentError(
                f"team task {task_id} is blocked by {', '.join(open_blockers)}; claim it once "
                "they are completed",
                code=ErrorCode.USAGE,
            )
        # Checked and taken without an await in between: of two claimers one wins.
        task.owner = caller.id
        task.status = "in_progress"
        await self._record(root, TeamTaskClaimed(task_id=task_id, owner=caller.id))
        return task

    async def update(self, caller: Agent, task_id: str, status: Status, note: str) -> TeamTask:
        root, board = await self.board(caller)
        task = self._get(board, task_id)
        if task.owner is not None and task.owner != caller.id:
            raise SubagentError(
                f"team task {task_id} belongs to {await self.owner_name(task.owner)}; only its "
                "owner updates it",
                code=ErrorCode.UNAUTHORIZED,
            )
        task.status = status
        if note:
            task.notes.append(note)
        await self._record(
            root, TeamTaskUpdated(task_id=task_id, status=status, note=note, by=caller.id)
        )
        return task

    async def render(self, task: TeamTask) -> str:
        owner = await self.owner_name(task.owner)
        return team_task_row(task.id, task.status, task.subject, owner, task.blocked_by)
