"""The task tools: `task_output`, `task_list`, `task_kill`."""

# No `from __future__ import annotations`: the `timeout_ms` parameter's description names the
# registry's wait limits, so its annotation must be evaluated where `task_tools` runs.

import json
from typing import Annotated

from msgspec import UNSET, Meta, UnsetType

from ...errors import ErrorCode, SubagentError
from ...ids import SessionId
from ...tools import ToolContext, ToolSpec, tool
from .._background import TaskRegistry
from .._scope import DELEGATION_TAG
from .._wording import (
    NO_TASKS_TEXT,
    kill_finished_text,
    kill_requested_text,
    task_output_text,
    task_row,
)

__all__ = ["task_tools"]

DEFAULT_WAIT_MS = 30_000
MAX_WAIT_MS = 600_000

_TaskId = Annotated[
    str,
    Meta(description="The id the starting tool returned."),
]
_Wait = Annotated[
    bool,
    Meta(description="Block until it finishes or `timeout_ms` passes (default false)."),
]
_Reason = Annotated[str, Meta(description="Why, for the record.")]


def _task_id(task_id: str) -> str:
    if not task_id.strip():
        raise SubagentError(
            f"invalid task_id: expected a non-empty string, got {json.dumps(task_id)}",
            code=ErrorCode.USAGE,
        )
    return task_id


def task_tools(
    registry: TaskRegistry, *, wait_ms: int = DEFAULT_WAIT_MS, max_wait_ms: int = MAX_WAIT_MS
) -> list[ToolSpec]:
    """The three task tools over one registry."""
    timeout_text = f"Longest wait in milliseconds (default {wait_ms}, at most {max_wait_ms})."

    @tool(
        description=(
            "Read a background task's result once it has finished; it blocks only with `wait`. "
            "You are notified when a task finishes: do not poll."
        ),
        parallel_safe=True,
        checkpoint=False,
        tags={DELEGATION_TAG},
    )
    async def task_output(
        ctx: ToolContext,
        task_id: _TaskId,
        wait: _Wait | UnsetType = UNSET,
        timeout_ms: Annotated[float, Meta(gt=0, description=timeout_text)] | UnsetType = UNSET,
    ) -> str:
        task_id = _task_id(task_id)
        caller = SessionId(ctx.agent_id)
        if wait is True:
            millis = min(wait_ms if timeout_ms is UNSET else float(timeout_ms), max_wait_ms)
            return task_output_text(await registry.wait(task_id, caller, millis / 1000))
        return task_output_text(registry.read(task_id, caller))

    @tool(parallel_safe=True, checkpoint=False, tags={DELEGATION_TAG})
    async def task_list(ctx: ToolContext) -> str:
        """List your background tasks (running and finished) with their status."""
        rows = registry.list(SessionId(ctx.agent_id))
        if not rows:
            return NO_TASKS_TEXT
        return "\n".join(task_row(r) for r in rows)

    @tool(parallel_safe=True, checkpoint=False, tags={DELEGATION_TAG})
    async def task_kill(
        ctx: ToolContext, task_id: _TaskId, reason: _Reason | UnsetType = UNSET
    ) -> str:
        """Request cancellation of one of your running background tasks."""
        task_id = _task_id(task_id)
        caller = SessionId(ctx.agent_id)
        outcome = registry.kill(task_id, caller, None if reason is UNSET else reason)
        if outcome == "requested":
            return kill_requested_text(task_id)
        return kill_finished_text(task_id, registry.get(task_id, caller))

    return [task_output, task_list, task_kill]
