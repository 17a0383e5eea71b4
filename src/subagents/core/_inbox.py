"""The inbox: two ordered sequences of pending user messages, a projection of durable splices.

`next-turn` holds prompts, each the sole ordinary message of its own turn; `next-step` holds
input for the nearest step boundary (steering, injected context, notices). Every mutation is
recorded as an `agent/inbox/spliced` event; a claim is recorded by the `user/message` event
that enters the message, so claiming costs no extra write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ..errors import ErrorCode, UsageError
from ..ids import MessageId
from ..messages import UserMessage
from ..sessions import EventRecord, InboxSpliced, InboxTarget, SessionEvent, UserMessageEvent

__all__ = ["Inbox", "replay_inbox"]


class InboxLog(Protocol):
    """Where an inbox records its splices: its agent's session."""

    def submit(self, event: SessionEvent) -> EventRecord: ...

    async def flush(self) -> None: ...


class Inbox:
    """Pending input of one agent.

    A mutation submits its splice and changes the lists in one synchronous step (so
    concurrent senders record the positions they really took), then waits until the splice is
    durable.
    """

    __slots__ = ("_log", "next_step", "next_turn")  # one per agent: no dict each

    def __init__(self, log: InboxLog) -> None:
        self._log = log
        """Its session itself, not its two bound methods: an agent has one inbox, and a
        fan-out holds thousands of agents (two objects each for the collector to walk)."""
        self.next_turn: tuple[UserMessage, ...] = ()
        self.next_step: tuple[UserMessage, ...] = ()
        """Tuples, replaced on change: an inbox is short, and an empty one (most of them, most
        of the time) is the one empty tuple rather than two lists per agent."""

    def _queue(self, target: InboxTarget) -> tuple[UserMessage, ...]:
        return self.next_turn if target == "next-turn" else self.next_step

    def _set(self, target: InboxTarget, items: tuple[UserMessage, ...]) -> None:
        if target == "next-turn":
            self.next_turn = items
        else:
            self.next_step = items

    def pending_ids(self) -> set[MessageId]:
        return {m.id for m in self.next_turn} | {m.id for m in self.next_step}

    def __bool__(self) -> bool:
        return bool(self.next_turn or self.next_step)

    async def append(
        self, message: UserMessage, target: InboxTarget, *, durable: bool = True
    ) -> None:
        """Queue `message` at the end of `target`; durable on return unless `durable` is False."""
        if message.id in self.pending_ids():
            raise UsageError(f'message "{message.id}" is already pending', code=ErrorCode.DUPLICATE)
        items = self._queue(target)
        self._log.submit(InboxSpliced(target=target, start=len(items), inserted=(message,)))
        self._set(target, (*items, message))
        if durable:
            await self._log.flush()

    async def remove(self, message_id: str) -> bool:
        """Durably cancel one pending message; False when it is no longer pending."""
        for target in _TARGETS:
            items = self._queue(target)
            for index, message in enumerate(items):
                if message.id == message_id:
                    self._log.submit(
                        InboxSpliced(target=target, start=index, removed=1, outcome="canceled")
                    )
                    self._set(target, items[:index] + items[index + 1 :])
                    await self._log.flush()
                    return True
        return False

    async def clear(self) -> list[UserMessage]:
        """Durably cancel everything pending (next-step first); returns what was dropped."""
        dropped: list[UserMessage] = []
        for target in _TARGETS:
            items = self._queue(target)
            if items:
                self._log.submit(
                    InboxSpliced(target=target, start=0, removed=len(items), outcome="canceled")
                )
                dropped.extend(items)
                self._set(target, ())
        if dropped:
            await self._log.flush()
        return dropped

    def claim(self, first_step: bool) -> list[UserMessage]:
        """Take the batch for a step: all of next-step, then (first step only) one next-turn.

        The caller must append a `user/message` for each claimed message, which is what makes
        the claim durable.
        """
        batch = list(self.next_step)
        self.next_step = ()
        if first_step and self.next_turn:
            batch.append(self.next_turn[0])
            self.next_turn = self.next_turn[1:]
        return batch

    def replay(self, records: Iterable[EventRecord]) -> None:
        """Rebuild the lists from a log: splices insert and cancel, entered messages leave."""
        for record in records:
            match record.event:
                case InboxSpliced(target=target, start=start, removed=removed, inserted=inserted):
                    items = list(self._queue(target))
                    items[start : start + removed] = inserted
                    self._set(target, tuple(items))
                case UserMessageEvent(message=message):
                    self._drop(message.id)
                case _:
                    pass

    def _drop(self, message_id: str) -> None:
        for target in _TARGETS:
            items = self._queue(target)
            for index, message in enumerate(items):
                if message.id == message_id:
                    self._set(target, items[:index] + items[index + 1 :])
                    return


_TARGETS: tuple[InboxTarget, ...] = ("next-step", "next-turn")


class _ReadOnly:
    """The log of a replayed inbox, which is never changed."""

    def submit(self, event: SessionEvent) -> EventRecord:
        raise AssertionError("a replayed inbox is read-only")

    async def flush(self) -> None:
        raise AssertionError("a replayed inbox is read-only")


_READ_ONLY = _ReadOnly()


def replay_inbox(records: Iterable[EventRecord]) -> Inbox:
    """The pending input a log holds (records after any fork seed), as a read-only inbox."""
    inbox = Inbox(_READ_ONLY)
    inbox.replay(records)
    return inbox
