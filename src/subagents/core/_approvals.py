"""Approval gates: which tool calls wait for a person, and the desk where their waits end.

A gated call is checked first (its tool exists, its arguments are valid, no guard refuses
it): a call that would fail anyway is not put to anyone. Its request is then made durable
(`tool/approval-requested`) and the turn waits on the desk, holding no model call and no
process. A decision (from this process, or carried by a control command from another) is
recorded in the member's own log (`tool/approval-decided`) before the wait ends, so it is
applied exactly once and survives a crash: a request decided while no process held the tree
is found decided when the turn takes its wait up again on resume.
"""

from __future__ import annotations

import asyncio
import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeGuard, cast

import msgspec

from .._task_owner import TaskOwner
from ..errors import ErrorCode, SubagentError, UsageError
from ..messages import ToolCallBlock
from ..sessions import (
    MAX_REASON,
    ApprovalDecided,
    ApprovalRequest,
    ApprovalRequested,
    approval_requests,
)
from ..tools import ToolOutcome

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = [
    "ApprovalDesk",
    "ApprovalPolicy",
    "ApprovalWaiting",
    "SANDBOX_ASK",
    "check_reason",
    "denied_outcome",
    "is_text",
    "pick_request",
]

SANDBOX_ASK: Final = "sandbox:ask"
"""The policy entry that makes a call needing a wider sandbox mode ask instead of failing."""
_PATTERN: Final = re.compile(r"[A-Za-z0-9_.*?\[\]-]{1,128}")


class ApprovalPolicy(msgspec.Struct, frozen=True, gc=False):
    """The tool-name patterns whose calls wait for a decision, and how long one may wait.

    `tools` holds `fnmatch` patterns (`bash`, `mcp__*`); `*` gates every call, and
    `sandbox:ask` (never a tool's name) makes a call that needs more than the agent's sandbox
    mode allows ask for it instead of failing. A child's policy is its parent's joined with
    its own (`join`): a child can add gates, never remove one, and its timeout is the shorter
    of the two.
    """

    tools: frozenset[str] = frozenset()
    timeout: float | None = None

    @classmethod
    def parse(
        cls,
        value: object,
        *,
        timeout: object = None,
        what: str = "approval",
        code: ErrorCode = ErrorCode.USAGE,
    ) -> ApprovalPolicy:
        """A policy from what a user wrote: `all`, `none`, `"bash,write_file"`, or a list of names.

        Raises:
            UsageError: `code`, naming what is wrong with `value` or `timeout`.
        """
        if isinstance(value, ApprovalPolicy):
            return value if timeout is None else cls(value.tools, _timeout(timeout, what, code))
        names: list[str]
        if value is None:
            names = []
        elif isinstance(value, str):
            names = [part.strip() for part in value.split(",")]
        elif isinstance(value, list | tuple | set | frozenset):
            names = []
            for item in cast("Iterable[object]", value):
                if not isinstance(item, str):
                    raise UsageError(f"{what} lists tool names; got {item!r}", code=code)
                names.append(item.strip())
        else:
            raise UsageError(
                f"{what} must be `all` or a list of tool names, got {type(value).__name__}",
                code=code,
            )
        tools: set[str] = set()
        for name in names:
            if name == "none":  # `approval: none` says so outright: nothing is gated
                continue
            if name == "all":
                name = "*"
            if name != SANDBOX_ASK and not _PATTERN.fullmatch(name):
                raise UsageError(
                    f"{what}: {name[:60]!r} is not a tool name or pattern (letters, digits, "
                    f"`_.-`, and the wildcards `*?[]`) nor {SANDBOX_ASK}",
                    code=code,
                )
            tools.add(name)
        return cls(frozenset(tools), _timeout(timeout, what, code))

    @property
    def empty(self) -> bool:
        return not self.tools

    @property
    def escalation(self) -> bool:
        """Whether a call needing a wider sandbox mode asks (`sandbox:ask`) instead of failing."""
        return SANDBOX_ASK in self.tools

    def gates(self, tool: str) -> str | None:
        """The pattern that gates calls of `tool`, or None when they run without asking."""
        for pattern in sorted(self.tools):
            if pattern != SANDBOX_ASK and fnmatch.fnmatchcase(tool, pattern):
                return pattern
        return None

    def join(self, other: ApprovalPolicy) -> ApprovalPolicy:
        """Both policies' gates, and the shorter timeout."""
        if not other.tools and other.timeout is None:  # what most children add to their gates
            return self
        timeouts = [t for t in (self.timeout, other.timeout) if t is not None]
        return ApprovalPolicy(self.tools | other.tools, min(timeouts) if timeouts else None)


def _timeout(value: object, what: str, code: ErrorCode) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UsageError(
            f"{what} timeout must be a positive number of seconds, got {value!r}", code=code
        )
    if value != value or value > 365 * 86_400:  # NaN, or longer than a year
        raise UsageError(f"{what} timeout must be at most a year, got {value!r}", code=code)
    return float(value)


class ApprovalWaiting(msgspec.Struct, frozen=True, gc=False):
    """Live event: a member's call now waits for a decision (its request is durable)."""

    agent_id: str
    name: str
    request: ApprovalRequest


def denied_outcome(decision: ApprovalDecided, tool: str) -> ToolOutcome:
    """What the model reads for a denied call: who denied it, why, and what to do instead."""
    reason = decision.reason or "no reason given"
    who = "no one decided in time" if decision.by == "timeout" else f"denied by {decision.by}"
    return ToolOutcome(
        f"Error: the {tool} call was not run: {who}: {reason}. Do not repeat the same call; "
        "carry on without it, try another way that needs no approval, or report that you "
        "need it and why.",
        is_error=True,
        code=ErrorCode.APPROVAL_DENIED,
    )


@dataclass(slots=True)
class _Wait:
    agent: Agent
    future: asyncio.Future[ApprovalDecided]
    deciding: bool = False


class ApprovalDesk:
    """The waits of one runtime's agents, by (session id, call id)."""

    def __init__(self) -> None:
        self._waits: dict[tuple[str, str], _Wait] = {}
        self._timers = TaskOwner("approval timeouts")

    def waiting(self, agent_id: str) -> list[str]:
        """The call ids `agent_id` waits on here now."""
        return [call for (agent, call) in self._waits if agent == agent_id]

    async def wait(
        self,
        agent: Agent,
        *,
        turn: int,
        step: int,
        call: ToolCallBlock,
        reason: str,
        request: ApprovalRequest | None = None,
        grant: str | None = None,
    ) -> ApprovalDecided:
        """Ask for a decision on `call` (or take up `request`, made before a restart).

        Returns the decision once it is durable in the agent's log. A decision already in
        the log (made while no process held the tree) is returned at once.
        """
        session = agent.session
        clock = session.clock
        if request is None:
            timeout = agent.gates.timeout
            event = ApprovalRequested(
                turn=turn,
                step=step,
                call_id=call.id,
                name=call.name,
                arguments=call.arguments,
                agent=agent.name,
                reason=reason,
                deadline=clock.now() + timeout if timeout is not None else None,
                grant=grant,
            )
            agent.record(event)
            await session.flush()
        decided = _decision_in(agent, call.id)
        if decided is not None:
            return decided
        found = _request_in(agent, call.id)
        loop = asyncio.get_running_loop()
        entry = _Wait(agent, loop.create_future())
        key = (str(agent.id), call.id)
        self._waits[key] = entry
        agent.bus.emit(ApprovalWaiting(agent.id, agent.name, found))
        timer: asyncio.Task[None] | None = None
        if found.deadline is not None:
            timer = self._timers.spawn(self._expire(entry, call.id, found.deadline))
        try:
            return await asyncio.shield(entry.future)
        finally:
            if timer is not None:
                timer.cancel()
            if self._waits.get(key) is entry:
                del self._waits[key]

    async def _expire(self, entry: _Wait, call_id: str, deadline: float) -> None:
        clock = entry.agent.session.clock
        left = deadline - clock.now()
        if left > 0:
            await clock.sleep(left)
        if not entry.deciding and not entry.future.done():
            reason = "the request timed out (approval_timeout) before anyone decided"
            await self._settle(
                entry, ApprovalDecided(call_id=call_id, approved=False, by="timeout", reason=reason)
            )

    def holds(self, agent_id: str, call_id: str) -> bool:
        """Whether a turn here waits on that call now."""
        return (agent_id, call_id) in self._waits

    async def decide(self, agent_id: str, decision: ApprovalDecided) -> bool:
        """End the wait on `decision.call_id` here; False when no turn here waits on it.

        Raises:
            SubagentError: `ALREADY_DECIDED` when another decision is being applied.
        """
        entry = self._waits.get((agent_id, decision.call_id))
        if entry is None:
            return False
        if entry.deciding or entry.future.done():
            raise SubagentError(
                f"call {decision.call_id} is already decided", code=ErrorCode.ALREADY_DECIDED
            )
        await self._settle(entry, decision)
        return True

    async def _settle(self, entry: _Wait, decision: ApprovalDecided) -> None:
        entry.deciding = True
        try:
            entry.agent.record(decision)
        except BaseException:
            entry.deciding = False  # nothing was written: the call can still be decided
            raise
        await entry.agent.session.flush()
        if not entry.future.done():
            entry.future.set_result(decision)


def _decision_in(agent: Agent, call_id: str) -> ApprovalDecided | None:
    for request in approval_requests(agent.session.records):
        if request.call_id == call_id:
            return request.decision
    return None


def _request_in(agent: Agent, call_id: str) -> ApprovalRequest:
    for request in approval_requests(agent.session.records):
        if request.call_id == call_id:
            return request
    raise AssertionError(f"no request for {call_id} in {agent.name}'s log")


def pick_request(
    requests: Iterable[ApprovalRequest], call_id: str | None, *, name: str
) -> ApprovalRequest:
    """The request a decision is for: `call_id`'s, or the member's only pending one.

    Raises:
        SubagentError: `NOT_FOUND` (no such request), `ALREADY_DECIDED` (it was decided or
            closed), `NO_PENDING_REQUEST` or `AMBIGUOUS_REQUEST` (no call id, and not exactly
            one pending request).
    """
    listed = list(requests)
    if call_id is None:
        pending = [r for r in listed if r.pending]
        if not pending:
            raise SubagentError(
                f"{name} has no pending approval request", code=ErrorCode.NO_PENDING_REQUEST
            )
        if len(pending) > 1:
            ids = ", ".join(r.call_id for r in pending)
            raise SubagentError(
                f"{name} has {len(pending)} pending requests ({ids}); name the call id",
                code=ErrorCode.AMBIGUOUS_REQUEST,
            )
        return pending[0]
    found = next((r for r in listed if r.call_id == call_id), None)
    if found is None:
        raise SubagentError(
            f"{name} has no approval request for call {call_id[:80]!r}",
            code=ErrorCode.NOT_FOUND,
        )
    if not found.pending:
        raise SubagentError(
            f"call {call_id} of {name} is already {found.state}; a decision is final",
            code=ErrorCode.ALREADY_DECIDED,
        )
    return found


def check_reason(reason: object) -> str | None:
    """A denial's reason as given (None: none), or `USAGE` for one that is not text."""
    if reason is None:
        return None
    if not is_text(reason, MAX_REASON):
        raise UsageError(
            f"the reason must be text of at most {MAX_REASON} characters", code=ErrorCode.USAGE
        )
    return reason.strip() or None


def is_text(value: object, limit: int) -> TypeGuard[str]:
    """Text a decision can carry: a str of at most `limit` characters that UTF-8 encodes."""
    if not isinstance(value, str) or len(value) > limit:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: it could never be written
        return False
    return True
