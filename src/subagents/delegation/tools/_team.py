"""The team task tools, over the shared board of the caller's tree (`_team_board.py`).

`team_task_create`, `team_task_claim`, `team_task_update` and `team_task_list`. None needs a
checkpoint: each effect is a `team/*` event written to the root's log.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import UNSET, Meta, UnsetType

from ...errors import ErrorCode, SubagentError
from ...tools import ToolContext, ToolSpec, tool
from .._team_board import Status, TeamBoards
from .._wording import NO_TEAM_TASKS_TEXT, team_task_result
from ._subagent import calling_agent

__all__ = ["team_tools"]

_TaskId = Annotated[str, Meta(min_length=1, description="The task id (T1, T2, ...).")]
_Subject = Annotated[str, Meta(min_length=1, description="What to do.")]
_Details = Annotated[str, Meta(description="Details.")]
_BlockedBy = Annotated[list[str], Meta(description="Ids of tasks that must be completed first.")]
# msgspec gives a Literal only its `enum` (sorted); the model also sees that it is a string.
_Status = Annotated[Status, Meta(extra_json_schema={"type": "string"})]
_Note = Annotated[str, Meta(description="A short note for the team.")]


def team_tools(boards: TeamBoards) -> list[ToolSpec]:
    """The four team task tools over one runtime's boards."""
    service = boards.service

    @tool(checkpoint=False)
    async def team_task_create(
        ctx: ToolContext,
        subject: _Subject,
        description: _Details | UnsetType = UNSET,
        blocked_by: _BlockedBy | UnsetType = UNSET,
    ) -> str:
        """Add a task to your team's shared board (everyone in this tree sees it)."""
        caller = calling_agent(service, ctx, "team_task_create")
        subject = subject.strip()
        if not subject:
            raise SubagentError("subject must not be empty", code=ErrorCode.USAGE)
        task = await boards.create(caller, subject, description or "", list(blocked_by or []))
        return team_task_result("created", await boards.render(task))

    @tool(checkpoint=False)
    async def team_task_claim(ctx: ToolContext, id: _TaskId) -> str:
        """Claim an unowned, unblocked task from the board; you become its owner."""
        caller = calling_agent(service, ctx, "team_task_claim")
        task = await boards.claim(caller, id)
        return team_task_result("claimed", await boards.render(task))

    @tool(checkpoint=False)
    async def team_task_update(
        ctx: ToolContext, id: _TaskId, status: _Status, note: _Note | UnsetType = UNSET
    ) -> str:
        """Set the status of a task you own (pending, in_progress, completed)."""
        caller = calling_agent(service, ctx, "team_task_update")
        task = await boards.update(caller, id, status, note or "")
        return team_task_result("updated", await boards.render(task))

    @tool(parallel_safe=True, checkpoint=False)
    async def team_task_list(ctx: ToolContext) -> str:
        """Show the team's task board: status, owner and blockers of each task."""
        caller = calling_agent(service, ctx, "team_task_list")
        _, board = await boards.board(caller)
        if not board:
            return NO_TEAM_TASKS_TEXT
        return "\n".join([await boards.render(task) for task in board.values()])

    return [team_task_create, team_task_claim, team_task_update, team_task_list]
