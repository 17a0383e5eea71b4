"""Read models of stored trees for listings: sessions, tree rows, statuses, usage."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec

from ..ids import SessionId
from ..messages import Usage
from ..sessions import (
    AssistantMessageEvent,
    EventRecord,
    EventStore,
    Lease,
    SessionHeader,
    StatusProjection,
    StatusView,
    TurnEnd,
    UsageView,
    UserMessageEvent,
    fold,
)
from ._status import Status, stored_status

__all__ = [
    "MessageTrace",
    "SessionRow",
    "TreeRow",
    "event_json",
    "is_held",
    "lease_alive",
    "list_sessions",
    "total_usage",
    "trace_message",
    "tree_status",
    "usage_json",
]


def tree_status(view: StatusView, *, held: bool = True) -> Status:
    """The status a listing shows for a stored session (see `stored_status`)."""
    return stored_status(view, held=held)


def iso(timestamp: float) -> str:
    """A POSIX timestamp as ISO 8601 in UTC with a `Z` suffix, as listings show times."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def event_json(record: EventRecord) -> dict[str, Any]:
    """One durable event as `subagents log --json` prints it: `seq`, `kind`, `time`, `payload`."""
    payload: dict[str, Any] = msgspec.to_builtins(record.event)
    payload.pop("kind", None)
    return {"seq": record.seq, "kind": record.kind, "time": iso(record.time), "payload": payload}


@dataclass(frozen=True, slots=True)
class SessionRow:
    header: SessionHeader
    status: Status

    def to_json(self) -> dict[str, object]:
        return {
            "session_id": self.header.id,
            "created_at": iso(self.header.created_at),
            "status": str(self.status),
            "tenant": self.header.tenant,
            "cwd": self.header.cwd,
            "model": self.header.model_spec,
        }


def lease_alive(lease: Lease, *, now: float) -> bool:
    """Whether a lease's holder may still be running.

    It must be unexpired and, on this host, a live process: a killed holder leaves its row
    behind.
    """
    if lease.expires <= now:
        return False
    holder_host = lease.holder.split("/")[0].partition("@")[2]
    if holder_host != socket.gethostname():
        return True  # another host: trust the expiry
    try:
        os.kill(lease.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def is_held(store: EventStore, root: SessionId, *, now: float) -> bool:
    """Whether a live process holds `root`'s tree."""
    lease = await store.get_lease(root)
    return lease is not None and lease_alive(lease, now=now)


async def list_sessions(store: EventStore, *, tenant: str, now: float) -> list[SessionRow]:
    """Root sessions of `tenant`, newest first, with their status."""
    rows: list[SessionRow] = []
    headers = await store.list_headers(tenant=tenant, roots_only=True)
    summaries = await store.summaries([h.id for h in headers], tenant=tenant)
    for header in headers:
        summary = summaries.get(header.id)
        if summary is None:  # unreadable: reading the log raises the store's error
            view = fold(StatusProjection(), await store.read(header.id, tenant=tenant))
        else:
            view = summary.status
        held = await is_held(store, header.id, now=now)
        rows.append(SessionRow(header, tree_status(view, held=held)))
    return rows


def usage_json(view: UsageView) -> dict[str, int]:
    """A usage view in the JSON form every command prints (`input_tokens`, ...)."""
    return {
        "input_tokens": view.usage.input_tokens,
        "output_tokens": view.usage.output_tokens,
        "model_calls": view.model_calls,
    }


class TreeRow(msgspec.Struct, frozen=True, gc=False):
    """One member of a tree listing (a Struct untracked by the GC: listings hold thousands)."""

    header: SessionHeader
    name: str
    parent: str | None
    mode: Literal["root", "one-shot", "continuable"]
    status: Status
    label: str
    usage: UsageView

    def to_json(self) -> dict[str, object]:
        return {
            "session_id": self.header.id,
            "name": self.name,
            "parent": self.parent,
            "mode": self.mode,
            "status": str(self.status),
            "label": self.label,
            "depth": self.header.depth,
            "usage": usage_json(self.usage),
        }


def total_usage(rows: Sequence[TreeRow]) -> UsageView:
    """The usage of a whole tree: the sum over its rows."""
    usage = Usage()
    calls = 0
    for row in rows:
        usage = usage + row.usage.usage
        calls += row.usage.model_calls
    return UsageView(usage, calls)


@dataclass(frozen=True, slots=True)
class MessageTrace:
    """What became of one accepted message: the turn that entered it and how that ended."""

    message_id: str
    turn: int | None
    stop_reason: str | None
    answer: str


def trace_message(records: Sequence[EventRecord], message_id: str) -> MessageTrace:
    """Follow a message id through a log to the turn that handled it.

    Gives that turn's ending and its last answer; a message still queued (or cancelled) has
    no turn.
    """
    turn: int | None = None
    stop: str | None = None
    answer = ""
    for record in records:
        match record.event:
            case UserMessageEvent(message=message, turn=entered) if message.id == message_id:
                turn = entered
            case AssistantMessageEvent(turn=n, message=message) if n == turn and message.text:
                answer = message.text
            case TurnEnd(turn=n, reason=reason) if n == turn:
                stop = reason
            case _:
                pass
    return MessageTrace(message_id, turn, stop, answer)
