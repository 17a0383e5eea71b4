"""`TreeView`: a stored tree folded record by record, for viewers in another process.

`subagents watch` and the web console follow a tree's log from the store (they never hold the
tree) and hand each new record to `TreeView.apply`, which keeps one small state per member:
status, usage, the tools it waits on, its turns and tool calls over time (the timeline) and
what its descriptor says of it. `rows` gives every member in pre-order with its full name.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core import (
    Inbox,
    RunResult,
    Status,
    is_held,
    replay_inbox,
    run_result,
    stored_status,
    usage_json,
)
from ..ids import SessionId
from ..names import ROOT_NAME, full_name, is_name
from ..sessions import (
    EventRecord,
    EventStore,
    RequestHeader,
    SandboxModeSet,
    SessionHeader,
    StatusProjection,
    StatusView,
    SubagentCatalog,
    SubagentDescriptor,
    ToolCallEvent,
    ToolResultEvent,
    TreeFollower,
    TurnEnd,
    TurnStart,
    UsageProjection,
    UsageView,
    UserMessageEvent,
)

__all__ = ["HOLDER_CHECK_SECONDS", "MemberRow", "Span", "TreeView", "WatchedTree", "duration"]

HOLDER_CHECK_SECONDS = 1.0
"""How often a viewer reads the holder's lease while nothing is committed. A live holder renews
its lease (a commit) every few seconds, and every commit makes the viewer read the lease again;
this only bounds how late it notices a holder that died without a word (SIGKILL)."""

PROMPT_CHARS = 200

_STATUS = StatusProjection()
_USAGE = UsageProjection()

Mode = Literal["root", "one-shot", "continuable"]


@dataclass(slots=True)
class Span:
    """A turn or a tool call over time (`end` None while it is open)."""

    start: float
    end: float | None
    label: str
    """`turn N` or the tool's name."""
    call_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "label": self.label, "call_id": self.call_id}


@dataclass(slots=True)
class _Member:
    """What a viewer knows of one session, folded record by record."""

    header: SessionHeader
    status: StatusView = field(default_factory=StatusView)
    usage: UsageView = field(default_factory=UsageView)
    inbox: Inbox = field(default_factory=lambda: replay_inbox(()))
    children: dict[str, SubagentCatalog] = field(default_factory=dict[str, SubagentCatalog])
    """Its catalog: the children it created, in creation order (the last entry counts)."""
    turn_start: float | None = None
    turn_end: float | None = None
    tools: dict[str, str] = field(default_factory=dict[str, str])
    """Tool calls dispatched and not answered yet: call id -> tool name."""
    turn_records: list[EventRecord] = field(default_factory=list[EventRecord])
    """Its records since its last `turn/start`: the lead's give the result line."""
    turns: list[Span] = field(default_factory=list[Span])
    calls: list[Span] = field(default_factory=list[Span])
    descriptor: SubagentDescriptor | None = None
    model: str | None = None
    sandbox: str | None = None
    prompt: str | None = None
    """The first message a user (or its parent) gave it, at most `PROMPT_CHARS` characters."""
    last_seq: int = -1
    revision: int = 0
    """Counts the records applied: a viewer sends a row again only when it moved."""

    def apply(self, record: EventRecord) -> None:
        self.revision += 1
        self.last_seq = record.seq
        # Usage counts the whole log, fork seed included, as `subagents tree` does.
        self.usage = _USAGE.apply(self.usage, record)
        if record.seq < self.header.seed_length:
            return  # the parent's events, copied at a fork: not this member's turns or input
        self.status = _STATUS.apply(self.status, record)
        self.inbox.replay((record,))
        self._track(record)
        self.turn_records.append(record)

    def _track(self, record: EventRecord) -> None:
        match record.event:
            case TurnStart(turn=turn):
                self.turn_start, self.turn_end = record.time, None
                self.tools.clear()
                self.turn_records = []
                self.turns.append(Span(record.time, None, f"turn {turn}"))
            case TurnEnd():
                self.turn_end = record.time
                self.tools.clear()
                for span in (*self.turns[-1:], *self.calls):
                    if span.end is None:
                        span.end = record.time  # a call the turn's end cut off ends with it
            case ToolCallEvent() | ToolResultEvent():
                self._track_call(record)
            case UserMessageEvent(message=message) if (
                self.prompt is None and message.source.kind in ("user", "parent")
            ):
                self.prompt = message.text[:PROMPT_CHARS]
            case SubagentCatalog() as entry:
                self.children[entry.child_id] = entry
            case SubagentDescriptor() as descriptor:
                self.descriptor = descriptor
            case RequestHeader(provider=provider, model=model):
                self.model = f"{provider}:{model}" if provider else model
            case SandboxModeSet(mode=mode):
                self.sandbox = mode
            case _:
                pass

    def _track_call(self, record: EventRecord) -> None:
        match record.event:
            case ToolCallEvent(call_id=call_id, name=name):
                self.tools[call_id] = name
                self.calls.append(Span(record.time, None, name, call_id))
            case ToolResultEvent(message=message):
                self.tools.pop(message.call_id, None)
                for span in reversed(self.calls):
                    if span.call_id == message.call_id and span.end is None:
                        span.end = record.time
                        break
            case _:
                pass

    @property
    def has_work(self) -> bool:
        """An open turn, or input waiting for a turn or a step."""
        return self.status.status == "running" or bool(self.inbox)


@dataclass(frozen=True, slots=True)
class MemberRow:
    """One member as a viewer shows it."""

    session_id: SessionId
    name: str
    parent: str | None
    depth: int
    mode: Mode
    status: Status
    elapsed: float | None
    """Seconds of its current turn (or of its last one); None before its first turn."""
    usage: UsageView
    tools: tuple[str, ...]
    """The tools it is waiting on now."""
    label: str = ""
    budget_tokens: int | None = None
    turn_start: float | None = None
    turn_end: float | None = None
    """When its current or last turn began and ended (epoch seconds; end None while open)."""
    revision: int = 0

    def text(self) -> str:
        """The plain-text line of this row (indented by depth)."""
        line = (
            f"{'  ' * self.depth}{self.name}  [{self.status}]  turn {duration(self.elapsed)}  "
            f"{self.usage.model_calls} model calls, tokens in/out "
            f"{self.usage.usage.input_tokens}/{self.usage.usage.output_tokens}"
        )
        return line + (f"  → {', '.join(self.tools)}" if self.tools else "")

    def to_json(self) -> dict[str, Any]:
        """The row as the web console's API gives it."""
        return {
            "session_id": self.session_id,
            "name": self.name,
            "parent": self.parent,
            "depth": self.depth,
            "mode": self.mode,
            "status": str(self.status),
            "turn_start": self.turn_start,
            "turn_end": self.turn_end,
            "usage": usage_json(self.usage),
            "tools": list(self.tools),
            "label": self.label,
            "budget_tokens": self.budget_tokens,
        }


class TreeView:
    """The members of one tree, folded incrementally from its followed records."""

    def __init__(self, root: SessionHeader) -> None:
        self.root = root
        self._members: dict[SessionId, _Member] = {root.id: _Member(root)}

    def add(self, header: SessionHeader) -> None:
        """Know of a member before its first record (its session exists in the store)."""
        if header.id not in self._members:
            self._members[header.id] = _Member(header)

    def apply(self, header: SessionHeader, record: EventRecord) -> None:
        self.add(header)
        self._members[header.id].apply(record)

    @property
    def has_work(self) -> bool:
        """Whether any member has an open turn or pending input."""
        return any(m.has_work for m in self._members.values())

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._members

    def __len__(self) -> int:
        return len(self._members)

    def last_seq(self, session_id: SessionId) -> int:
        """The seq of the member's last record folded in (-1: none yet)."""
        return self._members[session_id].last_seq

    def name_of(self, session_id: SessionId) -> str | None:
        """A member's full name, or None while its creator's catalog does not list it yet.

        As `subagents tree` names members: a child without a catalog name (or below one) is
        named by its session id.
        """
        chain: list[_Member] = []
        member = self._members[session_id]
        while member.header.parent is not None:  # up to the root, without recursion
            chain.append(member)
            parent = self._members.get(member.header.parent)
            if parent is None:
                return None
            member = parent
        name: str | None = ROOT_NAME
        creator = member
        for member in reversed(chain):
            name = _child_name(name, creator, member.header.id)
            if name is None:
                return None
            creator = member
        return name

    def rows(self, *, held: bool, now: float) -> list[MemberRow]:
        """Every member in pre-order (children in their creator's catalog order)."""
        by_parent: dict[SessionId, list[_Member]] = {}
        for member in self._members.values():
            if member.header.parent is not None:
                by_parent.setdefault(member.header.parent, []).append(member)
        rows: list[MemberRow] = []
        # An explicit stack, not recursion: a deep tree must not hit Python's recursion limit.
        # Names are made on the way down, from the parent's (a member's creator is its parent).
        root = self._members[self.root.id]
        stack: list[tuple[_Member, Mode, str | None, str]] = [(root, "root", None, ROOT_NAME)]
        while stack:
            member, mode, parent_name, name = stack.pop()
            rows.append(self._row(member, mode, parent_name, name, held=held, now=now))
            order = {child_id: i for i, child_id in enumerate(member.children)}
            children = sorted(
                by_parent.get(member.header.id, []),
                key=lambda m: (
                    order.get(m.header.id, len(order)),
                    m.header.created_at,
                    m.header.id,
                ),
            )
            for child in reversed(children):
                entry = member.children.get(child.header.id)
                child_name = _child_name(name, member, child.header.id) or child.header.id
                mode = entry.mode if entry is not None else "one-shot"
                stack.append((child, mode, name, child_name))
        return rows

    def row(self, session_id: SessionId, *, held: bool, now: float) -> MemberRow:
        """One member's row, as `rows` gives it, without listing the whole tree."""
        member = self._members[session_id]
        parent_id = member.header.parent
        if parent_id is None:
            return self._row(member, "root", None, ROOT_NAME, held=held, now=now)
        creator = self._members.get(parent_id)
        entry = creator.children.get(session_id) if creator is not None else None
        mode: Mode = entry.mode if entry is not None else "one-shot"
        parent_name = self.name_of(parent_id) if parent_id in self._members else None
        name = self.name_of(session_id) or session_id
        return self._row(member, mode, parent_name or parent_id, name, held=held, now=now)

    def _row(
        self,
        member: _Member,
        mode: Mode,
        parent: str | None,
        name: str,
        *,
        held: bool,
        now: float,
    ) -> MemberRow:
        session_id = member.header.id
        elapsed = None
        if member.turn_start is not None:
            end = member.turn_end if member.status.status == "idle" else None
            elapsed = max((end if end is not None else now) - member.turn_start, 0.0)
        descriptor = member.descriptor
        creator = self._members.get(member.header.parent) if member.header.parent else None
        entry = creator.children.get(session_id) if creator is not None else None
        return MemberRow(
            session_id=session_id,
            name=name,
            parent=parent,
            depth=member.header.depth,
            mode=mode,
            status=stored_status(member.status, held=held, continuable=mode == "continuable"),
            elapsed=elapsed,
            usage=member.usage,
            tools=tuple(member.tools.values()),
            label=entry.label if entry is not None else "",
            budget_tokens=descriptor.budget_tokens if descriptor is not None else None,
            turn_start=member.turn_start,
            turn_end=member.turn_end,
            revision=member.revision,
        )

    def details(self, session_id: SessionId) -> dict[str, Any]:
        """What the console's member view shows beside the transcript: definition and limits."""
        member = self._members[session_id]
        descriptor = member.descriptor
        budget = None
        if descriptor is not None:
            budget = {
                "tokens": descriptor.budget_tokens,
                "model_calls": descriptor.budget_model_calls,
                "children": descriptor.budget_children,
            }
        return {
            "session_id": session_id,
            "name": self.name_of(session_id) or session_id,
            "created_at": member.header.created_at,
            "cwd": member.header.cwd,
            "definition": descriptor.definition if descriptor is not None else None,
            "model": member.model or member.header.model_spec,
            "sandbox": member.sandbox,
            "budget": budget,
            "output_schema": descriptor.output_schema if descriptor is not None else None,
            "children": [
                {"session_id": e.child_id, "name": e.name, "mode": e.mode, "label": e.label}
                for e in member.children.values()
            ],
            "prompt": member.prompt,
            "last_seq": member.last_seq,
        }

    def timeline(self, *, held: bool, now: float) -> dict[str, Any]:
        """One lane per member (pre-order): its turns and tool calls; delegations as links.

        A link joins the parent's tool call that created a child (the catalog entry's
        `call_id`) to the child's lane at the child's creation. `now` is the reader's clock
        while a process holds the tree, else the tree's last recorded time.
        """
        lanes: list[dict[str, Any]] = []
        links: list[dict[str, Any]] = []
        for row in self.rows(held=held, now=now):
            member = self._members[row.session_id]
            lanes.append(
                {
                    "session_id": row.session_id,
                    "name": row.name,
                    "status": str(row.status),
                    "usage": usage_json(row.usage),
                    "turns": [s.to_json() for s in member.turns],
                    "calls": [s.to_json() for s in member.calls],
                }
            )
            for entry in member.children.values():
                child = self._members.get(SessionId(entry.child_id))
                if child is not None:
                    links.append(
                        {
                            "parent": row.session_id,
                            "child": entry.child_id,
                            "call_id": entry.call_id,
                            "at": child.header.created_at,
                        }
                    )
        if not held:
            # Nothing runs: the picture ends at the tree's last recorded moment, not at the
            # reader's clock (a tree settled an hour ago would be a sliver at the left).
            times = [self.root.created_at]
            for m in self._members.values():
                times.extend(t for s in (*m.turns, *m.calls) for t in (s.start, s.end) if t)
            now = max(times)
        return {"start": self.root.created_at, "now": now, "lanes": lanes, "links": links}

    def result(self) -> RunResult:
        """The lead's last turn as `run` reports it."""
        return run_result(self.root.id, self._members[self.root.id].turn_records)

    def usage_rows(self) -> list[dict[str, Any]]:
        """Each member's own usage (session id and `usage`), the root first, with the total."""
        members = list(self._members.values())
        tree: list[dict[str, Any]] = [
            {"session_id": m.header.id, "usage": usage_json(m.usage)} for m in members
        ]
        total = UsageView()
        for member in members:
            total = UsageView(
                total.usage + member.usage.usage, total.model_calls + member.usage.model_calls
            )
        tree[0]["total_usage"] = usage_json(total)
        return tree


class WatchedTree:
    """A `TreeView` kept up to date from the store, with whether a live process holds the tree.

    `refresh` reads only what is new: one cheap query when nothing was committed, and the lease
    at least every `HOLDER_CHECK_SECONDS` (on `clock`) to notice a holder that died.
    """

    def __init__(
        self,
        store: EventStore,
        root: SessionHeader,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._follower = TreeFollower(store, tenant=root.tenant, root=root.id)
        self._clock = clock
        self._checked: float | None = None
        self.view = TreeView(root)
        self.held = False
        self.version = 0
        """Counts the refreshes that changed something (records or the holder's lease)."""

    async def refresh(self) -> list[tuple[SessionHeader, EventRecord]]:
        """Fold what was committed since the last refresh; returns those records."""
        now = self._clock()
        stale = self._checked is None or now - self._checked >= HOLDER_CHECK_SECONDS
        if not (await self._follower.changed() or stale):
            return []
        # The lease first, then the log: a holder closes its turns before it releases, so a
        # released lease is never paired with turns it left open a moment ago.
        held = await is_held(self._store, self.view.root.id, now=time.time())
        self._checked = now
        known = len(self.view)
        batch = await self._follower.poll()
        for header in self._follower.members:
            self.view.add(header)
        for header, record in batch:
            self.view.apply(header, record)
        if batch or held != self.held or len(self.view) != known:
            self.version += 1
        self.held = held
        return batch


def _child_name(parent_name: str, creator: _Member, child: SessionId) -> str | None:
    """A child's full name from its creator's catalog; None while the catalog lacks it.

    Named by its session id when its entry has no name, or when its parent is itself named
    by a session id (a session id is no child name, so the path stops being one).
    """
    entry = creator.children.get(child)
    if entry is None:
        return None
    # A parent's name is `lead`, a path of names, or a bare session id: its last part tells.
    unnamed_parent = parent_name != ROOT_NAME and not is_name(parent_name.rpartition("/")[2])
    if entry.name is None or unnamed_parent:
        return child
    return full_name(parent_name, entry.name)


def duration(seconds: float | None) -> str:
    """`12.3s`, `4m05s`, `2h07m`, or `-` for None."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
