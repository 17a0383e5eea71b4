"""`subagents watch SESSION`: a tree drawn live from another process, reading only the store.

The process that runs the tree holds its lease and writes every event to the store's log; watch
follows that log (`sessions.TreeFollower`) and folds each new record into one row per member, so
it never writes, never talks to the holder and costs it nothing.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.text import Text
from rich.tree import Tree

from ..core import RunResult, Status, is_held, replay_inbox, run_result, stored_status, usage_json
from ..ids import SessionId
from ..names import ROOT_NAME, full_name, is_name
from ..sessions import (
    EventRecord,
    EventStore,
    SessionHeader,
    StatusProjection,
    StatusView,
    SubagentCatalog,
    ToolCallEvent,
    ToolResultEvent,
    TreeFollower,
    TurnEnd,
    TurnStart,
    UsageProjection,
    UsageView,
)
from ._common import (
    EXIT_FAILED,
    SESSION_HELP,
    check_tenant,
    fail,
    open_store,
    require_existing_store,
    resolve_root,
    run_async,
)
from ._options import JsonOpt, StoreOpt, TenantOpt
from ._render import result_json
from ._stream import event_line, line_text, result_line

__all__ = ["DEFAULT_INTERVAL", "TreeView", "WatchRow", "check_interval", "follow_tree", "watch"]

DEFAULT_INTERVAL = 0.05
"""Seconds between two checks of the store for new commits."""
MAX_INTERVAL = 5.0
HOLDER_CHECK_SECONDS = 1.0
"""How often the holder's lease is read while nothing is committed. A live holder renews its
lease (a commit) every few seconds, and every commit makes watch read the lease again; this
only bounds how late watch notices a holder that died without a word (SIGKILL)."""

_STATUS = StatusProjection()
_USAGE = UsageProjection()

Sleep = Callable[[float], Awaitable[object]]
Emit = Callable[[str, SessionHeader, EventRecord], None]


class _Member:
    """What watch knows of one session, folded record by record."""

    def __init__(self, header: SessionHeader) -> None:
        self.header = header
        self.status = StatusView()
        self.usage = UsageView()
        self.inbox = replay_inbox(())
        self.children: dict[str, SubagentCatalog] = {}
        """Its catalog: the children it created, in creation order (the last entry counts)."""
        self.turn_start: float | None = None
        self.turn_end: float | None = None
        self.tools: dict[str, str] = {}
        """Tool calls dispatched and not answered yet: call id -> tool name."""
        self.turn_records: list[EventRecord] = []
        """Its records since its last `turn/start`: the lead's give the result line."""

    def apply(self, record: EventRecord) -> None:
        # Usage counts the whole log, fork seed included, as `subagents tree` does.
        self.usage = _USAGE.apply(self.usage, record)
        if record.seq < self.header.seed_length:
            return  # the parent's events, copied at a fork: not this member's turns or input
        self.status = _STATUS.apply(self.status, record)
        self.inbox.replay((record,))
        match record.event:
            case TurnStart():
                self.turn_start, self.turn_end = record.time, None
                self.tools.clear()
                self.turn_records = []
            case TurnEnd():
                self.turn_end = record.time
                self.tools.clear()
            case ToolCallEvent(call_id=call_id, name=name):
                self.tools[call_id] = name
            case ToolResultEvent(message=message):
                self.tools.pop(message.call_id, None)
            case SubagentCatalog() as entry:
                self.children[entry.child_id] = entry
            case _:
                pass
        self.turn_records.append(record)

    @property
    def has_work(self) -> bool:
        """An open turn, or input waiting for a turn or a step."""
        return self.status.status == "running" or bool(self.inbox)


@dataclass(frozen=True, slots=True)
class WatchRow:
    """One member as watch shows it."""

    session_id: SessionId
    name: str
    depth: int
    status: Status
    elapsed: float | None
    """Seconds of its current turn (or of its last one); None before its first turn."""
    usage: UsageView
    tools: tuple[str, ...]
    """The tools it is waiting on now."""

    def text(self) -> str:
        """The plain-text line of this row (indented by depth)."""
        line = (
            f"{'  ' * self.depth}{self.name}  [{self.status}]  turn {_duration(self.elapsed)}  "
            f"{self.usage.model_calls} model calls, tokens in/out "
            f"{self.usage.usage.input_tokens}/{self.usage.usage.output_tokens}"
        )
        return line + (f"  → {', '.join(self.tools)}" if self.tools else "")


class TreeView:
    """The members of one tree, folded incrementally from its followed records."""

    def __init__(self, root: SessionHeader) -> None:
        self.root = root
        self._members: dict[SessionId, _Member] = {root.id: _Member(root)}

    def apply(self, header: SessionHeader, record: EventRecord) -> None:
        member = self._members.get(header.id)
        if member is None:
            member = self._members[header.id] = _Member(header)
        member.apply(record)

    @property
    def has_work(self) -> bool:
        """Whether any member has an open turn or pending input."""
        return any(m.has_work for m in self._members.values())

    def name_of(self, session_id: SessionId) -> str | None:
        """A member's full name, or None while its creator's catalog does not list it yet.

        As `subagents tree` names members: a child without a catalog name (or below one) is
        named by its session id.
        """
        header = self._members[session_id].header
        if header.parent is None:
            return ROOT_NAME
        parent = self._members.get(header.parent)
        parent_name = None if parent is None else self.name_of(header.parent)
        if parent is None or parent_name is None:
            return None
        entry = parent.children.get(session_id)
        if entry is None:
            return None
        if entry.name is None or (parent_name != ROOT_NAME and not _named_path(parent_name)):
            return session_id
        return full_name(parent_name, entry.name)

    def rows(self, *, held: bool, now: float) -> list[WatchRow]:
        """Every member in pre-order (children in their creator's catalog order)."""
        by_parent: dict[SessionId, list[_Member]] = {}
        for member in self._members.values():
            if member.header.parent is not None:
                by_parent.setdefault(member.header.parent, []).append(member)
        rows: list[WatchRow] = []

        def visit(member: _Member, mode: str) -> None:
            rows.append(self._row(member, mode, held=held, now=now))
            order = {child_id: i for i, child_id in enumerate(member.children)}
            children = sorted(
                by_parent.get(member.header.id, []),
                key=lambda m: (
                    order.get(m.header.id, len(order)),
                    m.header.created_at,
                    m.header.id,
                ),
            )
            for child in children:
                entry = member.children.get(child.header.id)
                visit(child, entry.mode if entry is not None else "one-shot")

        visit(self._members[self.root.id], "root")
        return rows

    def _row(self, member: _Member, mode: str, *, held: bool, now: float) -> WatchRow:
        session_id = member.header.id
        elapsed = None
        if member.turn_start is not None:
            end = member.turn_end if member.status.status == "idle" else None
            elapsed = max((end if end is not None else now) - member.turn_start, 0.0)
        return WatchRow(
            session_id=session_id,
            name=self.name_of(session_id) or session_id,
            depth=member.header.depth,
            status=stored_status(member.status, held=held, continuable=mode == "continuable"),
            elapsed=elapsed,
            usage=member.usage,
            tools=tuple(member.tools.values()),
        )

    def result(self) -> RunResult:
        """The lead's last turn as `run` reports it."""
        return run_result(self.root.id, self._members[self.root.id].turn_records)

    def result_json(self) -> dict[str, Any]:
        """The object `run --json` prints for the lead's last turn (same keys: `result_json`)."""
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
        return result_json(self.result(), tree)


def _named_path(path: str) -> bool:
    return all(is_name(part) for part in path.split("/"))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


@dataclass(slots=True)
class _Emitter:
    """Hands each record to `emit` once its member's full name is known.

    A child's session (and its first records) commit before its creator's catalog entry names
    it, so a member's records wait here until then; `flush` gives what is left its session id.
    """

    view: TreeView
    emit: Emit
    waiting: list[tuple[SessionHeader, EventRecord]]

    def send(self, batch: Iterable[tuple[SessionHeader, EventRecord]]) -> None:
        pending = [*self.waiting, *batch]
        self.waiting = []
        unnamed: set[SessionId] = set()
        for header, record in pending:
            name = None if header.id in unnamed else self.view.name_of(header.id)
            if name is None:
                unnamed.add(header.id)  # later records of it wait too: its order is kept
                self.waiting.append((header, record))
            else:
                self.emit(name, header, record)

    def flush(self) -> None:
        for header, record in self.waiting:
            self.emit(self.view.name_of(header.id) or header.id, header, record)
        self.waiting = []


async def follow_tree(
    store: EventStore,
    root: SessionHeader,
    *,
    interval: float,
    show: Callable[[TreeView, bool], None],
    emit: Emit | None = None,
    sleep: Sleep = asyncio.sleep,
) -> tuple[TreeView, bool]:
    """Follow `root`'s tree until no live process holds it.

    Returns the view and whether work was left (an open turn or pending input: the holder
    died).

    Stopping needs the lease released, not only a quiet log: between a child's last turn and
    the notice its parent gets there is a moment with nothing open, and the holder (which
    runs until the tree is quiescent) lets go of the lease only after that.
    """
    follower = TreeFollower(store, tenant=root.tenant, root=root.id)
    view = TreeView(root)
    emitter = _Emitter(view, emit or (lambda name, header, record: None), [])
    held = False
    checked = -HOLDER_CHECK_SECONDS
    while True:
        if await follower.changed() or time.monotonic() - checked >= HOLDER_CHECK_SECONDS:
            # The lease first, then the log: a holder closes its turns before it releases,
            # so a released lease is never paired with turns it left open a moment ago.
            held = await is_held(store, root.id, now=time.time())
            checked = time.monotonic()
            batch = await follower.poll()
            for header, record in batch:
                view.apply(header, record)
            emitter.send(batch)
        show(view, held)
        if not held:
            emitter.flush()
            return view, view.has_work
        await sleep(interval)


def _render(view: TreeView, held: bool) -> Tree:
    tree = Tree(Text("agents", style="bold"))
    nodes: dict[int, Tree] = {-1: tree}
    for row in view.rows(held=held, now=time.time()):
        label = Text.assemble(
            (row.name, "bold"),
            " ",
            (str(row.status), "dim"),
            f"  turn {_duration(row.elapsed)}  {row.usage.model_calls} model calls, "
            f"tokens in/out {row.usage.usage.input_tokens}/{row.usage.usage.output_tokens}",
        )
        if row.tools:
            label.append(f"  → {', '.join(row.tools)}", style="cyan")
        parent = nodes.get(row.depth - 1, tree)
        nodes[row.depth] = parent.add(label)
    return tree


def check_interval(interval: float) -> float:
    """`interval`, or exit 2 with one line when it is not in (0, MAX_INTERVAL] seconds."""
    if not 0 < interval <= MAX_INTERVAL:  # also refuses nan
        fail(f"--interval {interval:g}: give seconds above 0 and at most {MAX_INTERVAL:g}")
    return interval


def _hidden(view: TreeView, held: bool) -> None:
    """Draws nothing: off a terminal the tree is printed once, at the end."""


def _write_line(name: str, header: SessionHeader, record: EventRecord) -> None:
    sys.stdout.write(line_text(event_line(name, header.id, record)) + "\n")
    sys.stdout.flush()


IntervalOpt = Annotated[
    float,
    typer.Option(
        "--interval", help="Seconds between two checks of the store (above 0, at most 5)."
    ),
]


def watch(
    session: Annotated[str, typer.Argument(help=SESSION_HELP)],
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
    interval: IntervalOpt = DEFAULT_INTERVAL,
) -> None:
    """Watch a tree another process runs, live, from its store, until it is quiescent.

    One row per member: status, time of its current (or last) turn, model calls, tokens and
    the tool it waits on; drawn live on a terminal, else printed once at the end. With
    --json: every event of the tree as newline-delimited JSON (from the beginning, then as
    it commits), and the result last. Reads the store only. Exits 0 once no live process
    holds the tree and nothing is left to run; 1 when its process died mid-turn.
    """
    check_tenant(tenant)
    check_interval(interval)
    require_existing_store(store)
    terminal = not as_json and sys.stdout.isatty()

    async def main() -> tuple[TreeView, bool]:
        async with open_store(store) as opened:
            header = await resolve_root(opened, tenant, session)
            if not terminal:
                emit = _write_line if as_json else None
                return await follow_tree(opened, header, interval=interval, show=_hidden, emit=emit)
            with Live(console=Console(), transient=False) as live:
                return await follow_tree(
                    opened, header, interval=interval, show=lambda v, h: live.update(_render(v, h))
                )

    view, died = run_async(main)
    if as_json:
        typer.echo(line_text(result_line(view.result_json())))
    elif not terminal:
        typer.echo("\n".join(row.text() for row in view.rows(held=False, now=time.time())))
    if died:
        typer.echo(
            "subagents: the process holding this tree died; resume it with: "
            f"subagents resume {view.root.id}",
            err=True,
        )
        raise typer.Exit(EXIT_FAILED)
