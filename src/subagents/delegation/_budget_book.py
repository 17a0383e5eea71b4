"""Budgets across a tree: each agent's ledger, built when it starts or restored from the logs.

A child's limits are its own (a definition's) cut to what its parent has left at that moment,
and its ledger charges its parent's too, so a budget covers a whole subtree and only narrows
going down. The limits are recorded in the agent's descriptor; on a resume its usage so far is
summed from its subtree's logs, so a restart neither forgets usage nor widens a budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from ..core import Budget, Ledger
from ..errors import ErrorCode, StoreError, SubagentError
from ..ids import SessionId
from ..sessions import EventRecord, SubagentDescriptor, UsageProjection, fold
from ._catalog import catalog_entries

if TYPE_CHECKING:  # annotations only: `subagents tree` reads budgets without the runtime
    from ..core import Agent, AgentRuntime

__all__ = ["BudgetBook", "combined", "recorded_budget", "with_budget"]


def combined(first: Budget | None, second: Budget | None) -> Budget | None:
    """Both budgets at once (the smaller limit of each count); None when nothing is limited."""
    if first is None:
        return second
    budget = first.narrowed(second)
    return None if budget.unlimited else budget


def with_budget(descriptor: SubagentDescriptor, budget: Budget | None) -> SubagentDescriptor:
    """`descriptor` recording `budget` (what `recorded_budget` reads back)."""
    if budget is None:
        return descriptor
    return msgspec.structs.replace(
        descriptor,
        budget_tokens=budget.tokens,
        budget_model_calls=budget.model_calls,
        budget_children=budget.children,
    )


def recorded_budget(records: Sequence[EventRecord]) -> Budget | None:
    """The limits an agent's descriptor recorded (None: it has none of its own)."""
    for record in records:
        event = record.event
        if isinstance(event, SubagentDescriptor):
            budget = Budget(
                tokens=event.budget_tokens,
                model_calls=event.budget_model_calls,
                children=event.budget_children,
            )
            return None if budget.unlimited else budget
    return None


class BudgetBook:
    """The ledgers of one runtime's agents, by session id."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime
        self._ledgers: dict[SessionId, Ledger | None] = {}
        """Ledgers of agents seen in this process (None: no budget on or above it); kept
        after an agent is released, so reloading it continues the same counts."""

    def limits_for_child(self, parent: Agent, own: Budget | None) -> Budget | None:
        """A new child's limits: its own, cut to what its parent has left; None when unlimited."""
        if parent.ledger is None:
            return own
        return combined(parent.ledger.remaining(), own)

    def reserve_child(self, parent: Agent) -> bool:
        """Count a child about to start against every budget above it; False when none applies.

        Raises `BUDGET_EXHAUSTED` (nothing counted) when a children budget is spent.
        """
        if parent.ledger is None:
            return False
        refused = parent.ledger.reserve_child()
        if refused is not None:
            raise SubagentError(
                f"{refused}; carry out the work directly instead of delegating",
                code=ErrorCode.BUDGET_EXHAUSTED,
            )
        return True

    def release_child(self, parent: Agent) -> None:
        """Give back a reservation whose child was never created."""
        if parent.ledger is not None:
            parent.ledger.release_child()

    def attach(self, agent: Agent, limits: Budget | None, *, parent: Agent | None) -> None:
        """Give a new agent its ledger (chained to its parent's) before its first model call."""
        parent_ledger = parent.ledger if parent is not None else None
        if limits is not None and limits.unlimited:
            limits = None
        if limits is None and parent_ledger is None:
            return  # no budget: nothing to keep (a reload finds none in the log either)
        ledger = Ledger(limits or Budget(), owner=agent.name, parent=parent_ledger)
        agent.ledger = ledger
        self._ledgers[agent.id] = ledger

    async def restore(self, agent: Agent) -> None:
        """Give a resumed agent its ledger: recorded limits, usage summed from its subtree."""
        agent.ledger = await self._ledger_of(agent.id, owner=agent.name)

    async def _ledger_of(self, session_id: SessionId, *, owner: str = "") -> Ledger | None:
        if session_id in self._ledgers:
            return self._ledgers[session_id]
        live = self._runtime.get_agent(session_id)
        if live is not None and live.ledger is not None:
            return live.ledger
        header = await self._runtime.read_header(session_id)
        records = await self._runtime.read_log(session_id)
        limits = recorded_budget(records[header.seed_length :])
        if limits is None:
            # A child of a budgeted parent always records limits (what its parent had left),
            # so without any there is no budget above it either: no need to read ancestors.
            self._ledgers[session_id] = None
            return None
        parent = await self._ledger_of(header.parent) if header.parent is not None else None
        tokens, calls, children = await self._subtree_usage(session_id)
        ledger = Ledger(
            limits or Budget(),
            owner=owner or (live.name if live is not None else str(session_id)),
            parent=parent,
            tokens=tokens,
            model_calls=calls,
            children=children,
        )
        self._ledgers[session_id] = ledger
        return ledger

    async def _subtree_usage(self, session_id: SessionId) -> tuple[int, int, int]:
        """Tokens, model calls and agents started in a session's subtree, from the logs."""
        tokens = calls = children = 0
        pending = [session_id]
        while pending:
            current = pending.pop()
            try:
                header = await self._runtime.read_header(current)
                records = await self._runtime.read_log(current)
            except StoreError:
                continue  # a child whose log is gone used nothing we can count
            own = records[header.seed_length :]
            view = fold(UsageProjection(), own)
            tokens += view.usage.input_tokens + view.usage.output_tokens
            calls += view.model_calls
            entries = catalog_entries(own)
            children += len(entries)
            pending.extend(SessionId(e.child_id) for e in entries)
        return tokens, calls, children
