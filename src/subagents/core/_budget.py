"""Usage budgets: limits on tokens, model calls and children that only narrow down a tree.

A `Ledger` counts what one agent's subtree has used. Every charge (a model call, a child
started) is added to the agent's ledger and to each ancestor's, so an ancestor's budget covers
its whole subtree, and a child's limits are cut to what its parent had left when it started.
The loop checks the chain before each model call; a spent budget ends the turn `budget`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..messages import Usage

__all__ = ["Budget", "Ledger"]


def _min(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Limits for an agent and everything below it; None means no limit on that count.

    `tokens` counts input plus output tokens of every model call, `model_calls` every call
    (failed ones too), `children` every agent started anywhere below.
    """

    tokens: int | None = None
    model_calls: int | None = None
    children: int | None = None

    @property
    def unlimited(self) -> bool:
        return self.tokens is None and self.model_calls is None and self.children is None

    def narrowed(self, other: Budget | None) -> Budget:
        """Both budgets at once: the smaller limit of each count."""
        if other is None:
            return self
        return Budget(
            tokens=_min(self.tokens, other.tokens),
            model_calls=_min(self.model_calls, other.model_calls),
            children=_min(self.children, other.children),
        )

    def describe(self) -> str:
        """`tokens 5000, model calls 10` (the limits that are set)."""
        parts = [
            f"{label} {value}"
            for label, value in (
                ("tokens", self.tokens),
                ("model calls", self.model_calls),
                ("children", self.children),
            )
            if value is not None
        ]
        return ", ".join(parts) or "unlimited"


class Ledger:
    """What one agent's subtree has used against its budget; charges reach every ancestor."""

    __slots__ = ("children", "limits", "model_calls", "owner", "parent", "tokens")

    def __init__(
        self,
        limits: Budget,
        *,
        owner: str,
        parent: Ledger | None = None,
        tokens: int = 0,
        model_calls: int = 0,
        children: int = 0,
    ) -> None:
        self.limits = limits
        self.owner = owner
        """The agent's full name, for messages."""
        self.parent = parent
        self.tokens = tokens
        self.model_calls = model_calls
        self.children = children

    def chain(self) -> Iterator[Ledger]:
        """This ledger, then each ancestor's."""
        ledger: Ledger | None = self
        while ledger is not None:
            yield ledger
            ledger = ledger.parent

    def remaining(self) -> Budget:
        """What is left for this subtree: the tightest of its own and its ancestors' limits."""
        tokens = calls = children = None
        for ledger in self.chain():
            limits = ledger.limits
            if limits.tokens is not None:
                tokens = _min(tokens, max(0, limits.tokens - ledger.tokens))
            if limits.model_calls is not None:
                calls = _min(calls, max(0, limits.model_calls - ledger.model_calls))
            if limits.children is not None:
                children = _min(children, max(0, limits.children - ledger.children))
        return Budget(tokens=tokens, model_calls=calls, children=children)

    def charge_call(self, usage: Usage | None) -> None:
        """Count one model call and its tokens, here and in every ancestor."""
        tokens = usage.input_tokens + usage.output_tokens if usage is not None else 0
        for ledger in self.chain():
            ledger.model_calls += 1
            ledger.tokens += tokens

    def spent(self) -> str | None:
        """Why no further model call is allowed (a spent token or call budget), else None."""
        for ledger in self.chain():
            limits = ledger.limits
            if limits.model_calls is not None and ledger.model_calls >= limits.model_calls:
                return (
                    f"the model-call budget of {ledger.owner} is spent "
                    f"({ledger.model_calls} of {limits.model_calls} calls used)"
                )
            if limits.tokens is not None and ledger.tokens >= limits.tokens:
                return (
                    f"the token budget of {ledger.owner} is spent "
                    f"({ledger.tokens} of {limits.tokens} tokens used)"
                )
        return None

    def reserve_child(self) -> str | None:
        """Count one more agent started below; returns why not when a budget forbids it.

        A spent token or call budget forbids it too: the child could not make a single call.
        """
        spent = self.spent()
        if spent is not None:
            return spent
        for ledger in self.chain():
            limit = ledger.limits.children
            if limit is not None and ledger.children >= limit:
                return (
                    f"the children budget of {ledger.owner} is spent "
                    f"({ledger.children} of {limit} started)"
                )
        for ledger in self.chain():
            ledger.children += 1
        return None

    def release_child(self) -> None:
        """Give back a reservation whose child was never created."""
        for ledger in self.chain():
            ledger.children = max(0, ledger.children - 1)
