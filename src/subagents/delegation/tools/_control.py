"""The control tools.

`send_message`, `interrupt_agent`, `list_agents`, and the child-only `report`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from msgspec import UNSET, Meta, UnsetType

from ...core import Agent, Status, live_status, stored_status
from ...errors import ErrorCode, SubagentError
from ...ids import SessionId
from ...messages import MessageSource, user_message
from ...names import full_name
from ...sessions import EventRecord, StatusProjection, fold
from ...tools import ToolContext, ToolSpec, tool
from .._catalog import catalog_entries
from .._continuable import ContinuableManager
from .._references import resolve_reference
from .._scope import DELEGATION_TAG
from .._wording import (
    NO_AGENTS_TEXT,
    UNAVAILABLE_TEXT,
    agent_row_text,
    agents_left_text,
    interrupt_description,
    interrupt_requested_text,
    message_queued_text,
    no_agents_at_text,
    report_accepted_text,
    report_notice_text,
)
from ._subagent import calling_agent
from ._transcript import AgentReference, transcript_tool

__all__ = ["AgentRow", "children_page", "control_tools", "list_rows", "report_tool"]

DEFAULT_LIMIT = 50
MAX_LIMIT = 500

_Message = Annotated[str, Meta(min_length=1, description="The message.")]
_Report = Annotated[str, Meta(min_length=1, description="What to report.")]
# msgspec gives a Literal only its `enum`; the model also sees that it is a string.
_Scope = Annotated[
    Literal["children", "descendants"],
    Meta(
        extra_json_schema={"type": "string"},
        description="children (default), or descendants: the whole tree below you.",
    ),
]
_Cursor = Annotated[
    int, Meta(ge=0, description="The row to continue from (the last page says it).")
]
_Limit = Annotated[
    int, Meta(ge=1, le=MAX_LIMIT, description=f"Rows per page (default {DEFAULT_LIMIT}).")
]


def _text(value: str, key: str) -> str:
    if not value.strip():
        raise SubagentError(f"{key} must not be empty", code=ErrorCode.USAGE)
    return value


@dataclass(frozen=True, slots=True)
class AgentRow:
    name: str
    status: str
    label: str
    parent: str | None = None
    depth: int = 1
    diagnostic: str | None = None

    def render(self, *, descendants: bool) -> str:
        """The row as `list_agents` shows it."""
        return agent_row_text(
            self.name,
            self.status,
            self.label,
            parent=self.parent,
            depth=self.depth,
            diagnostic=self.diagnostic,
            descendants=descendants,
        )


async def list_rows(manager: ContinuableManager, caller: Agent) -> list[AgentRow]:
    """All of the caller's descendants that are continuable, in pre-order, each log read.

    A child whose log cannot be read becomes a diagnostic row.
    """
    rows: list[AgentRow] = []
    runtime = manager.runtime

    async def visit(
        creator: SessionId, creator_name: str, depth: int, records: Sequence[EventRecord]
    ) -> None:
        for entry in catalog_entries(records):
            if entry.mode != "continuable":
                continue
            name = full_name(creator_name, entry.name) if entry.name else entry.child_id
            try:
                child_records = await runtime.read_log(SessionId(entry.child_id))
            except Exception:
                rows.append(AgentRow(entry.child_id, "", "", creator_name, depth, UNAVAILABLE_TEXT))
                continue
            agent = runtime.get_agent(entry.child_id)
            status = _stored(child_records) if agent is None else _live(agent)
            rows.append(AgentRow(name, status, entry.label, creator_name, depth))
            await visit(SessionId(entry.child_id), name, depth + 1, child_records)

    await visit(caller.id, caller.name, 1, caller.session.records)
    return rows


async def children_page(
    manager: ContinuableManager, caller: Agent, *, offset: int, limit: int
) -> tuple[list[AgentRow], int]:
    """One page of the caller's continuable children, and how many it has in all.

    Only the page's rows are built (a catalog of thousands is not read child by child): live
    children from their agents, stored ones from the store's summaries in one read. A child
    the store does not have becomes a diagnostic row.
    """
    runtime = manager.runtime
    entries = [e for e in catalog_entries(caller.session.records) if e.mode == "continuable"]
    page = entries[offset : offset + limit]
    statuses = await runtime.read_statuses([SessionId(e.child_id) for e in page])
    rows: list[AgentRow] = []
    for entry in page:
        name = full_name(caller.name, entry.name) if entry.name else entry.child_id
        agent = runtime.get_agent(entry.child_id)
        view = statuses.get(SessionId(entry.child_id))
        if agent is not None:
            rows.append(AgentRow(name, _live(agent), entry.label))
        elif view is None:
            rows.append(AgentRow(entry.child_id, "", "", diagnostic=UNAVAILABLE_TEXT))
        else:
            status = stored_status(view, held=False, continuable=True)
            rows.append(AgentRow(name, status, entry.label))
    return rows, len(entries)


def _live(agent: Agent) -> Status:
    view = fold(StatusProjection(), agent.session.records)
    return live_status(agent.status, view.last_stop, continuable=True, waiting=bool(view.waiting))


def _stored(records: Sequence[EventRecord]) -> Status:
    # Not loaded by this process: an open turn in its log was cut off by a process that died.
    return stored_status(fold(StatusProjection(), records), held=False, continuable=True)


def control_tools(manager: ContinuableManager) -> list[ToolSpec]:
    """`send_message`, `interrupt_agent` and `list_agents` over one manager."""
    runtime = manager.runtime

    @tool(
        description=(
            "Give a background child its next turn: the message waits behind a turn in "
            "progress, and a settled child resumes with its conversation. You get a receipt, "
            "not the answer; you are notified when the child settles."
        ),
        parallel_safe=True,
        checkpoint=False,
        tags={DELEGATION_TAG},
    )
    async def send_message(ctx: ToolContext, agent: AgentReference, message: _Message) -> str:
        caller = calling_agent(manager.service, ctx, "send_message")
        message = _text(message, "message")
        target = await resolve_reference(
            runtime, caller, agent, action="the message was not delivered"
        )
        try:
            act, accepted = await manager.send(
                caller, target, message, source=MessageSource(kind="parent", name=caller.name)
            )
        except SubagentError as exc:  # the model must know nothing was queued
            raise SubagentError(
                f"{exc.message} (the message was not delivered)", code=exc.code, **exc.fields
            ) from exc
        return message_queued_text(act.full_name, accepted.id)

    @tool(
        parallel_safe=True,
        checkpoint=False,
        tags={DELEGATION_TAG},
        describe=interrupt_description,
    )
    async def interrupt_agent(ctx: ToolContext, agent: AgentReference) -> str:
        caller = calling_agent(manager.service, ctx, "interrupt_agent")
        target = await resolve_reference(
            runtime, caller, agent, action="no interrupt was requested"
        )
        await manager.interrupt(caller, target)
        return interrupt_requested_text(agent)

    @tool(
        description=(
            "List your background children: name, status (running, idle, ready, failed, "
            "aborted, crashed, or cut-off: a crash cut its turn) and label. You are notified "
            "when one settles: do not poll."
        ),
        parallel_safe=True,
        checkpoint=False,
        tags={DELEGATION_TAG},
    )
    async def list_agents(
        ctx: ToolContext,
        scope: _Scope | UnsetType = UNSET,
        cursor: _Cursor | UnsetType = UNSET,
        limit: _Limit | UnsetType = UNSET,
    ) -> str:
        caller = calling_agent(manager.service, ctx, "list_agents")
        descendants = scope == "descendants"
        # int(): an integral float (5.0) passes the schema as an integer.
        offset = int(cursor or 0)
        page_size = int(limit or DEFAULT_LIMIT)
        if descendants:
            rows = await list_rows(manager, caller)
            page, total = rows[offset : offset + page_size], len(rows)
        else:
            page, total = await children_page(manager, caller, offset=offset, limit=page_size)
        if not total:
            return NO_AGENTS_TEXT
        lines = [row.render(descendants=descendants) for row in page]
        left = total - offset - len(page)
        if left > 0:
            lines.append(agents_left_text(left, offset + len(page)))
        return "\n".join(lines) if lines else no_agents_at_text(offset)

    return [send_message, interrupt_agent, list_agents, transcript_tool(manager)]


def report_tool(manager: ContinuableManager) -> ToolSpec:
    """`report`: a continuable child sends content to the agent that started it."""
    runtime = manager.runtime

    @tool(
        description=(
            "Send progress, a finding or your result to the agent that started you (only it "
            "receives it); it does not end your turn. Make it self-contained."
        ),
        parallel_safe=True,
        checkpoint=False,
    )
    async def report(ctx: ToolContext, message: _Report) -> str:
        act = manager.get(ctx.agent_id)
        if act is None or act.closing:
            raise SubagentError(
                f'agent "{ctx.agent_name}" is not a live continuable subagent and cannot report',
                code=ErrorCode.UNAUTHORIZED,
            )
        output = _text(message, "message")
        reported = user_message(
            report_notice_text(act.full_name, output),
            source=MessageSource(kind="subagent-report", name=act.full_name),
        )
        parent = runtime.get_agent(act.parent_id)
        if parent is None:
            await runtime.deliver(act.parent_id, reported, wake=False)
        else:
            await parent.steer(reported)
        return report_accepted_text(reported.id)

    return report
