"""`read_transcript`: a settled descendant's transcript, behind the no-peek guard.

A parent may read what a child below it did, but only once the child has settled
(docs/design.md §7.7): while a continuable child's activation is running or waiting, while a
one-shot background task is not terminal, or while a foreground child is still running, the
read fails with `cannot peek at in-flight task <id> (status=<status>); await settlement`
(`IN_FLIGHT`) and returns nothing of the child's log. Results reach a parent through the
settlement notice, `task_output` and `report`, never by watching a child work.

Only the caller's own descendants can be read; any other session (a sibling, an ancestor, the
caller itself, another tree or another tenant's id) reads as unknown. Reading writes nothing.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import UNSET, Meta, UnsetType

from ...core import Agent
from ...errors import ErrorCode, NotFoundError, SubagentError
from ...ids import SessionId
from ...sessions import SessionHeader, StatusProjection, fold
from ...tools import ToolContext, ToolSpec, tool
from .._background import TaskRegistry
from .._catalog import full_name_of
from .._continuable import ContinuableManager
from .._references import resolve_reference
from .._scope import DELEGATION_TAG
from .._wording import MAX_ENTRY_CHARS, transcript_entries, transcript_text
from ._subagent import calling_agent

__all__ = ["AgentReference", "in_flight_status", "transcript_tool"]

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
NOTHING_READ = "no transcript was read"

AgentReference = Annotated[
    str,
    Meta(
        min_length=1,
        description="A child's name, a path below you (`reviewer/checker`) or a session id.",
    ),
]
"""The `agent` parameter of the tools that address an agent below the caller."""
_Limit = Annotated[
    int,
    Meta(
        ge=1,
        le=MAX_LIMIT,
        description=f"How many of the most recent entries to show (default {DEFAULT_LIMIT}).",
    ),
]


def in_flight_status(
    manager: ContinuableManager, tasks: TaskRegistry | None, child: SessionId
) -> str | None:
    """The status that makes `child` unreadable (`running`, `waiting`, `stopping`), or None.

    A continuable child is in flight while its activation runs a turn or waits (on accepted
    input or on children it started); a one-shot background child while its task is not
    terminal; a one-shot child of either kind while its agent is loaded (its run has not
    ended). An idle activation, and anything settled and stored, reads fine.
    """
    act = manager.get(child)
    if act is not None:
        if act.child.running:
            return "running"
        if not act.closing and (act.accepting or act.owned or act.child.pending):
            return "waiting"
        return None
    if tasks is not None:
        record = tasks.for_subject(child)
        if record is not None and not record.terminal:
            return record.status
    if manager.runtime.get_agent(child) is not None:
        return "running"
    return None


def _unknown(reference: str, target: SessionId, *, by_name: bool) -> SubagentError:
    """Exactly what an unknown target reads as (the wording of `send_message`)."""
    if by_name:
        text = (
            f"no agent named {reference!r} among the agents you started; list_agents shows "
            "the names"
        )
    else:
        text = f'subagent "{target}" is unavailable; list_agents shows your children'
    return SubagentError(f"{text} ({NOTHING_READ})", code=ErrorCode.NOT_FOUND)


def transcript_tool(manager: ContinuableManager) -> ToolSpec:
    """`read_transcript` over one manager (and the runtime's task registry, if it has one)."""
    runtime = manager.runtime

    async def descendant_header(caller: Agent, target: SessionId) -> SessionHeader | None:
        """The target's header when it is below `caller` (in this tenant), else None."""
        try:
            header = await runtime.read_header(target)
            current = header
            while current.parent is not None:
                if current.parent == caller.id:
                    return header
                current = await runtime.read_header(current.parent)
        except NotFoundError:
            return None
        return None

    @tool(
        description=(
            "Read how a settled agent below you reached its result: its messages, tool calls "
            f"and results, each cut at {MAX_ENTRY_CHARS} characters. One still working cannot "
            "be read."
        ),
        parallel_safe=True,
        checkpoint=False,
        tags={DELEGATION_TAG},
    )
    async def read_transcript(
        ctx: ToolContext, agent: AgentReference, limit: _Limit | UnsetType = UNSET
    ) -> str:
        caller = calling_agent(manager.service, ctx, "read_transcript")
        reference = agent.strip()
        # An integral float (5.0) passes the schema as an integer; it gets the default.
        shown_limit = min(max(limit, 1), MAX_LIMIT) if isinstance(limit, int) else DEFAULT_LIMIT
        target = await resolve_reference(runtime, caller, reference, action=NOTHING_READ)
        header = await descendant_header(caller, target)
        if header is None:
            raise _unknown(reference, target, by_name=reference != target)
        registry = getattr(runtime, "tasks", None)  # the delegation runtime's background tasks
        tasks = registry if isinstance(registry, TaskRegistry) else None
        status = in_flight_status(manager, tasks, target)
        if status is not None:
            raise SubagentError(
                f"cannot peek at in-flight task {target} (status={status}); await settlement",
                code=ErrorCode.IN_FLIGHT,
                retryable=True,
                agent=target,
                status=status,
            )
        records = (await runtime.read_log(target))[header.seed_length :]
        name = await full_name_of(runtime.read_log, runtime.read_header, header)
        entries = transcript_entries(records)
        last = fold(StatusProjection(), records).last_stop
        return transcript_text(name, target, last, entries, shown_limit, MAX_LIMIT)

    return read_transcript
