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
    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add a listener; returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    @property
    def active(self) -> bool:
        return bool(self._listeners)

    def emit(self, event: object) -> None:
        for listener in tuple(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("live event listener failed on %s", type(event).__name__)
