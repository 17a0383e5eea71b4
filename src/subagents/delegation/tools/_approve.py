"""`approve_request`: a parent decides a waiting call of a child that names it its approver.

Offered to an agent once it has such a child (`approver: parent` in the child's definition).
Only the caller's direct children, and only those, can be decided: a grandchild's requests
belong to its own parent, and a child without `approver: parent` waits for a person.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from msgspec import UNSET, Meta, UnsetType

from ...errors import ErrorCode, SubagentError
from ...tools import ToolContext, ToolSpec, tool
from .._approvals import approver_of, check_decision, decide_here
from .._references import resolve_reference
from .._scope import DELEGATION_TAG
from .._wording import decided_text
from ._subagent import calling_agent
from ._transcript import AgentReference

if TYPE_CHECKING:
    from .._runtime import DelegationRuntime

__all__ = ["APPROVE_TOOL", "approve_request_tool"]

APPROVE_TOOL = "approve_request"

_CallId = Annotated[
    str, Meta(min_length=1, description="The waiting call's id (needed when it has several).")
]
_Reason = Annotated[str, Meta(description="Why (a denial's reason reaches the child's model).")]


def approve_request_tool(runtime: DelegationRuntime) -> ToolSpec:
    """The tool over one runtime's trees."""

    @tool(
        name=APPROVE_TOOL,
        description=(
            "Approve or deny a tool call one of your children is waiting on, when its "
            "definition names you its approver (you are told when one waits). Approving runs "
            "the call; a denial gives the child your reason as the call's error."
        ),
        parallel_safe=True,
        checkpoint=False,
        tags={DELEGATION_TAG},
    )
    async def approve_request(
        ctx: ToolContext,
        agent: AgentReference,
        approve: bool,
        call_id: _CallId | UnsetType = UNSET,
        reason: _Reason | UnsetType = UNSET,
    ) -> str:
        by = f"agent:{ctx.agent_name}"
        checked_reason, by = check_decision(call_id or None, by, reason or None)
        caller = calling_agent(runtime.subagents, ctx, APPROVE_TOOL)
        target = await resolve_reference(runtime, caller, agent, action="nothing was decided")
        header = await runtime.read_header(target)
        if header.parent != caller.id:
            raise SubagentError(
                f"{agent.strip()!r} is not one of your own children: only its parent or a "
                "person decides its calls (nothing was decided)",
                code=ErrorCode.UNAUTHORIZED,
            )
        if approver_of(header, await runtime.read_log(target)) != "parent":
            raise SubagentError(
                f"{agent.strip()!r} does not name you its approver: a person decides its calls "
                "(nothing was decided)",
                code=ErrorCode.UNAUTHORIZED,
            )
        outcome = await decide_here(
            runtime,
            header,
            call_id or None,
            approved=approve,
            by=by,
            reason=checked_reason,
        )
        return decided_text(outcome["name"], outcome["tool"], outcome["call_id"], approve)

    return approve_request
