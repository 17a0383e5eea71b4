"""Sessions: durable event kinds, the store protocol and its backends, projections."""

from ._events import (
    AssistantMessageEvent as AssistantMessageEvent,
    EventRecord as EventRecord,
    InboxSpliced as InboxSpliced,
    ModelErrorEvent as ModelErrorEvent,
    RequestHeader as RequestHeader,
    SessionEndSeed as SessionEndSeed,
    SessionEvent as SessionEvent,
    SessionHeader as SessionHeader,
    StepEnd as StepEnd,
    StepStart as StepStart,
    StopReason as StopReason,
    SubagentCatalog as SubagentCatalog,
    SubagentDescriptor as SubagentDescriptor,
    ToolCallEvent as ToolCallEvent,
    ToolResultEvent as ToolResultEvent,
    TurnEnd as TurnEnd,
    TurnStart as TurnStart,
    UserMessageEvent as UserMessageEvent,
)
from ._memory import InMemoryEventStore as InMemoryEventStore
from ._sqlite import SqliteEventStore as SqliteEventStore, parse_store_url as parse_store_url
from ._store import EventStore as EventStore, Lease as Lease

__all__ = [
    "AssistantMessageEvent",
    "EventRecord",
    "EventStore",
    "InMemoryEventStore",
    "InboxSpliced",
    "Lease",
    "ModelErrorEvent",
    "RequestHeader",
    "SessionEndSeed",
    "SessionEvent",
    "SessionHeader",
    "SqliteEventStore",
    "StepEnd",
    "StepStart",
    "StopReason",
    "SubagentCatalog",
    "SubagentDescriptor",
    "ToolCallEvent",
    "ToolResultEvent",
    "TurnEnd",
    "TurnStart",
    "UserMessageEvent",
    "parse_store_url",
]
