"""Live events: what a UI or an embedding program can watch while agents run.

Listeners are called synchronously; a failing listener is logged and affects nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..sessions import EventRecord

__all__ = [
    "AgentCreated",
    "AgentDisposed",
    "AgentFailed",
    "AgentStatusChanged",
    "EventBus",
    "LiveEvent",
    "SessionEventPosted",
]

log = logging.getLogger("subagents.bus")


@dataclass(frozen=True, slots=True)
class AgentCreated:
    agent_id: str
    name: str
    parent_id: str | None


@dataclass(frozen=True, slots=True)
class AgentDisposed:
    agent_id: str
    name: str


@dataclass(frozen=True, slots=True)
class AgentStatusChanged:
    agent_id: str
    name: str
    status: Literal["idle", "running"]


@dataclass(frozen=True, slots=True)
class AgentFailed:
    agent_id: str
    name: str
    turn: int
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class SessionEventPosted:
    agent_id: str
    name: str
    record: EventRecord


LiveEvent: TypeAlias = (
    AgentCreated | AgentDisposed | AgentStatusChanged | AgentFailed | SessionEventPosted
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
