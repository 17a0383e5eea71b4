"""The task tools: `task_output`, `task_list`, `task_kill`."""

from __future__ import annotations

import json

from ...errors import ErrorCode, SubagentError
from ...ids import SessionId
from ...messages import JsonObject
from ...tools import ToolContext, ToolSpec
from .._background import TaskRecord, TaskRegistry, status_line

__all__ = ["task_tools"]

DEFAULT_WAIT_MS = 30_000
MAX_WAIT_MS = 600_000


def _render(record: TaskRecord) -> str:
    return f"{record.output or '(no new output)'}\n{status_line(record)}"


def _task_id(args: JsonObject) -> str:
    task_id = str(args["task_id"])
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

    async def output(args: JsonObject, ctx: ToolContext) -> str:
        task_id = _task_id(args)
        caller = SessionId(ctx.agent_id)
        if args.get("wait") is True:
            timeout = args.get("timeout_ms")
            millis = min(float(timeout) if timeout is not None else wait_ms, max_wait_ms)
            return _render(await registry.wait(task_id, caller, millis / 1000))
        return _render(registry.read(task_id, caller))

    async def listing(args: JsonObject, ctx: ToolContext) -> str:
        rows = registry.list(SessionId(ctx.agent_id))
        if not rows:
            return "(no background tasks)"
        return "\n".join(f"{r.id} [{r.kind}] {r.status} — {r.label}" for r in rows)

    async def kill(args: JsonObject, ctx: ToolContext) -> str:
        task_id = _task_id(args)
        reason = args.get("reason")
        caller = SessionId(ctx.agent_id)
        outcome = registry.kill(task_id, caller, str(reason) if reason is not None else None)
        if outcome == "requested":
            return f"requested cancellation of task {task_id}"
        return f"task {task_id} had already finished {status_line(registry.get(task_id, caller))}"

    task_id_schema = {
        "type": "string",
        "description": "The task id returned by the tool that started the background work.",
    }
    return [
        ToolSpec(
            name="task_output",
            description=(
                "Read a background task: its result once it has finished. Reads do not block "
                "unless `wait` is true. You are notified when a task finishes, so do not poll."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "task_id": task_id_schema,
                    "wait": {
                        "type": "boolean",
                        "description": (
                            "Block until the task finishes or the timeout passes; a timed-out "
                            "wait leaves the task running. Defaults to false."
                        ),
                    },
                    "timeout_ms": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "description": (
                            f"Longest wait in milliseconds with wait: true (default {wait_ms}, "
                            f"at most {max_wait_ms})."
                        ),
                    },
                },
                "required": ["task_id"],
            },
            handler=output,
            parallel_safe=True,
            checkpoint=False,
        ),
        ToolSpec(
            name="task_list",
            description="List your background tasks (running and finished) with their status.",
            parameters={"type": "object", "properties": {}},
            handler=listing,
            parallel_safe=True,
            checkpoint=False,
        ),
        ToolSpec(
            name="task_kill",
            description="Request cancellation of one of your running background tasks.",
            parameters={
                "type": "object",
                "properties": {
                    "task_id": task_id_schema,
                    "reason": {"type": "string", "description": "Why, for the record."},
                },
                "required": ["task_id"],
            },
            handler=kill,
            parallel_safe=True,
            checkpoint=False,
        ),
    ]
