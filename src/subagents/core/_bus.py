"""Live events: what a UI or an embedding program can watch while agents run.

Listeners are called synchronously; a failing listener is logged and affects nothing.

A session's records are posted once durable, after the write, while other events (an agent
going idle, a child's end, a piece of model output) are emitted at once. `CausalOrder` holds
those back for a listener until the records their session had submitted before them are
posted, so a listener sees a child's last message and `turn/end` before its `idle` and its
`SubagentEnded`, and a step's `step/start` before the deltas of its response.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Literal, TypeAlias

import msgspec

from ..sessions import EventRecord, Session

__all__ = [
    "AgentCreated",
    "AgentDisposed",
    "AgentFailed",
    "AgentReasoningDelta",
    "AgentStatusChanged",
    "AgentTextDelta",
    "CausalOrder",
    "EventBus",
    "LiveEvent",
    "SessionEventPosted",
]

log = logging.getLogger("subagents.bus")

_SETTLED = 1 << 62
"""The posted seq of a disposed agent's session: nothing more will be posted for it."""


class AgentCreated(msgspec.Struct, frozen=True, gc=False):
    """An agent was published: a new root or child, or one loaded again to resume."""

    agent_id: str
    name: str
    parent_id: str | None


class AgentDisposed(msgspec.Struct, frozen=True, gc=False):
    """An agent was released: its turn stopped and nothing more is posted for it."""

    agent_id: str
    name: str


class AgentStatusChanged(msgspec.Struct, frozen=True, gc=False):
    """An agent began running turns (`running`) or stopped (`idle`).

    It stops when no work is left, or after a turn that failed.
    """

    agent_id: str
    name: str
    status: Literal["idle", "running"]


class AgentFailed(msgspec.Struct, frozen=True, gc=False):
    """An agent's turn ended on an error: its code and one line of message."""

    agent_id: str
    name: str
    turn: int
    code: str
    message: str


class SessionEventPosted(msgspec.Struct, frozen=True, gc=False):
    """A record of an agent's session, once it is durable."""

    agent_id: str
    name: str
    record: EventRecord


class AgentTextDelta(msgspec.Struct, frozen=True, gc=False):
    """A piece of a model response's visible text as it streams in (live only, never stored).

    The pieces of one step join into the text of that step's `assistant/message` record.
    """

    agent_id: str
    name: str
    turn: int
    step: int
    text: str


class AgentReasoningDelta(msgspec.Struct, frozen=True, gc=False):
    """A piece of the model's reasoning as it streams in (live only, never stored)."""

    agent_id: str
    name: str
    turn: int
    step: int
    text: str


LiveEvent: TypeAlias = (
    AgentCreated
    | AgentDisposed
    | AgentStatusChanged
    | AgentFailed
    | SessionEventPosted
    | AgentTextDelta
    | AgentReasoningDelta
)
Listener: TypeAlias = Callable[[object], None]
"""Listeners receive every live event: the core's `LiveEvent`s and those of higher layers."""


class EventBus:
    """Live events to listeners: all of them, or only the types a listener chose.

    A listener for rare events then costs nothing on the per-event hot path.
    """

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._typed: dict[type, list[Listener]] = {}

    def subscribe(self, listener: Listener, *, types: tuple[type, ...] = ()) -> Callable[[], None]:
        """Add a listener (for every event, or only `types`); returns its remover."""
        if types and isinstance(listener, CausalOrder):
            # It orders by the agents' lifecycle, whatever its own listener takes.
            listener.deliver_only(types)
            types = (*types, *(t for t in _LIFECYCLE if t not in types))
        targets = [self._typed.setdefault(t, []) for t in types] if types else [self._listeners]
        for target in targets:
            target.append(listener)

        def remove() -> None:
            for target in targets:
                if listener in target:
                    target.remove(listener)

        return remove

    def wants(self, event_type: type) -> bool:
        """Whether anyone listens for events of `event_type`."""
        return bool(self._listeners or self._typed.get(event_type))

    def post(self, agent_id: str, name: str, record: EventRecord) -> None:
        """Emit `SessionEventPosted` for a durable record, if anyone listens for it.

        The event is not even built otherwise: this runs for every record.
        """
        if self._listeners or self._typed.get(SessionEventPosted):
            self.emit(SessionEventPosted(agent_id, name, record))

    @property
    def active(self) -> bool:
        return bool(self._listeners)

    def emit(self, event: object) -> None:
        typed = self._typed.get(type(event))
        for listener in (*self._listeners, *typed) if typed else tuple(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("live event listener failed on %s", type(event).__name__)


_LIFECYCLE: tuple[type, ...] = (AgentCreated, AgentDisposed)
"""What a `CausalOrder` needs to see: an agent's first records, and that its last settled."""


def _subject(event: object) -> str | None:
    """The session an event is about: its agent's, or for a child's lifecycle, the child's."""
    for attribute in ("agent_id", "child_id"):
        value = getattr(event, attribute, None)
        if isinstance(value, str):
            return value
    return None


class CausalOrder:
    """A listener wrapper that delivers events in log order.

    `session_of(session_id)` is the session a live agent holds (None if none does). An event
    about a session waits until every record that session had submitted when the event was
    emitted is posted; events keep their emission order among themselves, and records are
    never held. `AgentDisposed` comes after the agent's last write settled (posted, or failed),
    so it releases whatever waits on that session. A session first heard of through an event
    has its earlier records taken as posted: they were written before this listener knew it.
    """

    def __init__(self, listener: Listener, session_of: Callable[[str], Session | None]) -> None:
        self._listener = listener
        self._session_of = session_of
        self._sessions: dict[str, Session] = {}
        """Sessions seen, kept past their agent's removal from the runtime (which comes
        before its last records are posted), until its `AgentDisposed`."""
        self._posted: dict[str, int] = {}
        """The highest seq posted per session, as far as this listener knows."""
        self._held: deque[tuple[object, str | None, int]] = deque()
        self._only: tuple[type, ...] = ()
        """The types the listener takes (empty: all); the others only move the barriers."""

    def deliver_only(self, types: tuple[type, ...]) -> None:
        """Pass on only events of `types`; the bus still brings this the agents' lifecycle."""
        self._only = types

    def __call__(self, event: object) -> None:
        if isinstance(event, SessionEventPosted):
            seq = event.record.seq
            if seq > self._posted.get(event.agent_id, -1):
                self._posted[event.agent_id] = seq
            self._deliver(event)
            self._release()
            return
        subject = _subject(event)
        barrier = (
            -1 if subject is None else self._barrier(subject, fresh=isinstance(event, AgentCreated))
        )
        if isinstance(event, AgentDisposed):
            self._sessions.pop(event.agent_id, None)
            self._posted[event.agent_id] = _SETTLED
        if self._only and not isinstance(event, self._only):
            if isinstance(event, AgentDisposed):
                self._release()
            return
        if self._held or not self._ready(subject, barrier):
            # Behind a held event even if ready itself: events keep their order.
            self._held.append((event, subject, barrier))
            return
        self._deliver(event)
        if isinstance(event, AgentDisposed):
            self._release()

    def _barrier(self, subject: str, *, fresh: bool) -> int:
        """The seq of the last record `subject` has submitted (-1: none we could wait for)."""
        session = None if fresh else self._sessions.get(subject)
        if session is None:
            session = self._session_of(subject)
            if session is None:
                return -1
            if fresh or subject not in self._posted:
                # First sight (or a reloaded agent): what it holds was written before. A
                # session whose records this listener has been taking is not new to it: what
                # it submitted since is still to be posted, and events wait for it.
                self._posted[subject] = max(session.next_seq - 1, -1)
            self._sessions[subject] = session
        return session.next_seq - 1

    def _ready(self, subject: str | None, barrier: int) -> bool:
        return subject is None or barrier <= self._posted.get(subject, barrier)

    def _release(self) -> None:
        while self._held:
            event, subject, barrier = self._held[0]
            if not self._ready(subject, barrier):
                return
            self._held.popleft()
            self._deliver(event)

    def _deliver(self, event: object) -> None:
        try:
            self._listener(event)
        except Exception:
            log.exception("live event listener failed on %s", type(event).__name__)
