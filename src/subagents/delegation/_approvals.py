"""Approvals across a tree: the requests that wait in it, and decisions addressed by name.

A person addresses a request by its tree, the member's full name and (when the member has
more than one) the call id; the runtime then decides it by session id (`decide_call`). What
is listed is read from the members' logs, so it is the same whether or not a process holds
the tree, and another tenant's trees are never read.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._task_owner import TaskOwner
from ..core import (
    Agent,
    ApprovalPolicy,
    ApprovalWaiting,
    check_reason,
    is_held,
    is_text,
    pick_request,
)
from ..errors import ErrorCode, UsageError
from ..messages import MessageSource, user_message
from ..sessions import (
    MAX_CALL_ID,
    MAX_DECIDER,
    ApprovalRequest,
    EventRecord,
    EventStore,
    SessionHeader,
    SubagentDescriptor,
    ToolResultEvent,
    approval_requests,
)
from ..tools import ToolSpec
from ._catalog import catalog_entries, full_name_of
from ._tree import load_tree
from ._wording import approval_wait_notice

if TYPE_CHECKING:
    from ._runtime import DelegationRuntime

__all__ = [
    "APPROVAL_NOTICE_SOURCE",
    "PendingApproval",
    "WaitNotices",
    "approver_of",
    "check_decision",
    "decide_here",
    "definition_gates",
    "list_approvals",
    "offer_approve_tool",
    "stored_request",
]

APPROVAL_NOTICE_SOURCE = MessageSource(kind="notice", name="approval")


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A request nobody decided yet, or decided but not yet acted on (its tree is down)."""

    root: str
    session_id: str
    name: str
    request: ApprovalRequest
    held: bool
    """Whether a live process holds the tree (else a resume applies the decision)."""
    approver: str = "person"
    """`parent`: its parent agent may decide it too (`approve_request`)."""

    @property
    def state(self) -> str:
        return self.request.state

    def to_json(self) -> dict[str, Any]:
        request = self.request
        decision = request.decision
        return {
            "root": self.root,
            "session_id": self.session_id,
            "name": self.name,
            "call_id": request.call_id,
            "tool": request.name,
            "arguments": request.arguments,
            "reason": request.reason,
            "requested_at": request.time,
            "deadline": request.deadline,
            "state": request.state,
            "decided_by": decision.by if decision is not None else None,
            "held": self.held,
            "approver": self.approver,
        }


async def list_approvals(
    runtime: DelegationRuntime, roots: list[SessionHeader]
) -> list[PendingApproval]:
    """The requests waiting in `roots`' trees, oldest first within each tree."""
    found: list[PendingApproval] = []
    for root in roots:
        held = await is_held(runtime.store, root.id, now=time.time())
        for member in await load_tree(runtime.store, root, held=held):
            header = member.row.header
            approver = approver_of(header, member.records)
            found.extend(
                PendingApproval(root.id, header.id, member.row.name, request, held, approver)
                for request in approval_requests(member.records[header.seed_length :])
                if request.outstanding
            )
    return found


async def stored_request(
    store: EventStore, member: SessionHeader, call_id: str | None, *, name: str
) -> ApprovalRequest:
    """The request a decision for `member` is for, picked from its stored log (`pick_request`).

    For a decision that travels elsewhere (a command, a console job): refused here, with the
    code the holder would give, before anything is written.
    """
    records = await store.read(member.id, tenant=member.tenant)
    return pick_request(approval_requests(records[member.seed_length :]), call_id, name=name)


def check_decision(call_id: object, by: object, reason: object) -> tuple[str | None, str]:
    """A decision's reason and decider as given, refused (`USAGE`) before anything is read."""
    if call_id is not None and (not is_text(call_id, MAX_CALL_ID) or not call_id.strip()):
        raise UsageError(
            f"a call id is a non-empty text of at most {MAX_CALL_ID} characters",
            code=ErrorCode.USAGE,
        )
    if not is_text(by, MAX_DECIDER) or not by.strip():
        raise UsageError(
            f"`by` names who decided, in at most {MAX_DECIDER} characters", code=ErrorCode.USAGE
        )
    return check_reason(reason), by.strip()


async def decide_here(
    runtime: DelegationRuntime,
    member: SessionHeader,
    call_id: str | None,
    *,
    approved: bool,
    by: str,
    reason: str | None = None,
    command: int | None = None,
) -> dict[str, Any]:
    """Decide a member's request in a tree held here; the outcome a command reports."""
    name = await full_name_of(runtime.read_log, runtime.read_header, member)
    request, decision, applied = await runtime.decide_call(
        member.id,
        call_id,
        approved=approved,
        by=by,
        reason=reason,
        command=command,
        name=name,
    )
    return {
        "name": name,
        "call_id": request.call_id,
        "tool": request.name,
        "approved": decision.approved,
        "by": decision.by,
        "applied": applied,
    }


class WaitNotices:
    """Tells a background child's parent when one of the child's calls starts waiting.

    A foreground parent is itself waiting in the call that started the child, so it is told
    nothing: it keeps waiting, and its child's answer reaches it once the call is decided.
    """

    def __init__(self, runtime: DelegationRuntime) -> None:
        self._runtime = runtime
        self._tasks = TaskOwner("approval notices")
        self._unsubscribe = runtime.subscribe(self._on_event, types=(ApprovalWaiting,))

    def _on_event(self, event: object) -> None:
        if isinstance(event, ApprovalWaiting):
            self._tasks.spawn(self._notify(event), name=f"approval notice {event.name}")

    async def _notify(self, event: ApprovalWaiting) -> None:
        runtime = self._runtime
        agent = runtime.get_agent(event.agent_id)
        parent = agent.session.header.parent if agent is not None else None
        if parent is None:
            return
        records = await runtime.read_log(parent)
        entry = next((e for e in catalog_entries(records) if e.child_id == event.agent_id), None)
        if entry is None or (entry.mode == "one-shot" and not _answered(records, entry.call_id)):
            return  # a foreground child: its parent waits in the call that started it
        request = event.request
        to_parent = agent is not None and approver_of(agent.session.header, agent.session.records)
        text = approval_wait_notice(
            event.name,
            request.name,
            request.call_id,
            request.arguments,
            parent_decides=to_parent == "parent",
        )
        message = user_message(text, source=APPROVAL_NOTICE_SOURCE)
        await runtime.deliver(parent, message, target="next-step")

    async def aclose(self) -> None:
        self._unsubscribe()
        await self._tasks.aclose()


def _answered(records: Sequence[EventRecord], call_id: str | None) -> bool:
    """Whether the creator's call that started a one-shot child returned (a background task)."""
    return call_id is not None and any(
        isinstance(r.event, ToolResultEvent) and r.event.message.call_id == call_id for r in records
    )


def _descriptor(header: SessionHeader, records: Sequence[EventRecord]) -> SubagentDescriptor | None:
    """A child's descriptor: its own, never one a fork's seed copied from its parent."""
    own = records[header.seed_length :]
    return next((r.event for r in own if isinstance(r.event, SubagentDescriptor)), None)


def definition_gates(agent: Agent) -> ApprovalPolicy:
    """The gates a new child's definition adds, as its descriptor recorded them."""
    descriptor = _descriptor(agent.session.header, agent.session.records)
    if descriptor is None or not descriptor.approval:
        return ApprovalPolicy()
    return ApprovalPolicy(frozenset(descriptor.approval), descriptor.approval_timeout)


def approver_of(header: SessionHeader, records: Sequence[EventRecord]) -> str:
    """Who besides a person decides a member's requests: `parent` or `person`."""
    descriptor = _descriptor(header, records)
    return descriptor.approver if descriptor is not None else "person"


def offer_approve_tool(runtime: DelegationRuntime, agent: Agent, spec: ToolSpec) -> None:
    """Give `agent`'s parent `approve_request` when `agent` names it its approver."""
    parent_id = agent.session.header.parent
    if parent_id is None or approver_of(agent.session.header, agent.session.records) != "parent":
        return
    parent = runtime.get_agent(parent_id)
    if parent is not None and parent.tools.get(spec.name) is None:
        parent.tools.register(spec)
