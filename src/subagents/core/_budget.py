"""Usage budgets: limits on tokens, model calls and children that only narrow down a tree.

A `Ledger` counts what one agent's subtree has used. Every charge (a model call, a child
started) is added to the agent's ledger and to each ancestor's, so an ancestor's budget covers
its whole subtree, and a child's limits are cut to what its parent had left when it started.

Siblings run concurrently, so a check followed later by a charge could let several of them take
the same last call. Instead each model call is reserved on the whole chain before it starts
(`Ledger.reserve_call`, no await between the check and the reservation) and settled with its
real usage when it ends, or released when it never reached the model; a child start is reserved
the same way (`Ledger.reserve_child`). A refused reservation ends the turn `budget`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..messages import Usage

__all__ = ["Budget", "CallReservation", "Ledger"]


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


class CallReservation:
    """One model call held on a ledger chain from before it starts until it ends.

    `settle` counts the call with its real usage; `release` gives it back when the call never
    reached the model. Whichever comes first closes it, so calling `release` in a `finally`
    after `settle` is harmless.
    """

    __slots__ = ("_ledgers", "_open")

    def __init__(self, ledgers: tuple[Ledger, ...]) -> None:
        self._ledgers = ledgers
        self._open = True
        for ledger in ledgers:
            ledger.calls_in_flight += 1

    def settle(self, usage: Usage | None) -> None:
        """The call happened: count it and its tokens (none when it failed) on every ledger."""
        if not self._open:
            return
        self._open = False
        tokens = usage.input_tokens + usage.output_tokens if usage is not None else 0
        for ledger in self._ledgers:
            ledger.calls_in_flight -= 1
            ledger.model_calls += 1
            ledger.tokens += tokens

    def release(self) -> None:
        """The call never reached the model: it counts nowhere (a no-op once settled)."""
        if not self._open:
            return
        self._open = False
        for ledger in self._ledgers:
            ledger.calls_in_flight -= 1


class Ledger:
    """What one agent's subtree has used against its budget; charges reach every ancestor.

    What is guaranteed under concurrency (siblings calling the model at the same time):
    - model calls: settled plus reserved calls never exceed any limit on the chain, so the
      count recorded in the logs stays within the budget;
    - tokens: a call's tokens are known only when it ends, so the guarantee is that no call
      starts once the settled tokens reach a limit; calls already in flight then may take
      the total past it by their own usage.
    """

    __slots__ = (
        "calls_in_flight",
        "children",
        "limits",
        "model_calls",
        "owner",
        "parent",
        "tokens",
    )

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
        self.calls_in_flight = 0
        """Model calls reserved in this subtree and not yet settled or released."""

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
                used = ledger.model_calls + ledger.calls_in_flight
                calls = _min(calls, max(0, limits.model_calls - used))
            if limits.children is not None:
                children = _min(children, max(0, limits.children - ledger.children))
        return Budget(tokens=tokens, model_calls=calls, children=children)

    def charge_call(self, usage: Usage | None) -> None:
        """Count one model call and its tokens, here and in every ancestor (no reservation)."""
        CallReservation(tuple(self.chain())).settle(usage)

    def reserve_call(self) -> CallReservation | str:
        """Hold one model call on the whole chain before it starts, or say why it may not.

        The check and the reservation happen together, so concurrent siblings can never both
        take the last call; settle or release the reservation when the call ends.
        """
        spent = self.spent()
        if spent is not None:
            return spent
        return CallReservation(tuple(self.chain()))

    def spent(self) -> str | None:
        """Why no further model call is allowed (a spent token or call budget), else None.

        Calls in flight count against a call budget; their tokens are not known yet.
        """
        for ledger in self.chain():
            limits = ledger.limits
            used = ledger.model_calls + ledger.calls_in_flight
            if limits.model_calls is not None and used >= limits.model_calls:
                pending = ledger.calls_in_flight
                return (
                    f"the model-call budget of {ledger.owner} is spent "
                    f"({ledger.model_calls} of {limits.model_calls} calls used"
                    + (f", {pending} more in progress)" if pending else ")")
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
