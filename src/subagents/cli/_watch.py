"""`subagents watch SESSION`: a tree drawn live from another process, reading only the store.

The process that runs the tree holds its lease and writes every event to the store's log; watch
follows that log (`sessions.TreeFollower`) and folds each new record into one row per member, so
it never writes, never talks to the holder and costs it nothing.

`rich`, the tree's view and the stream's lines are imported by the functions that draw or
write them (startup time: the app imports this module for every command;
tests/cli/test_startup.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, TypeAlias

import typer

from ..ids import SessionId
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

if TYPE_CHECKING:
    from rich.tree import Tree

    from ..delegation import TreeView
    from ..sessions import EventRecord, EventStore, SessionHeader

__all__ = ["DEFAULT_INTERVAL", "check_interval", "follow_tree", "watch"]

DEFAULT_INTERVAL = 0.05
"""Seconds between two checks of the store for new commits."""
MAX_INTERVAL = 5.0
Sleep = Callable[[float], Awaitable[object]]
# Quoted: its record types are imported for type checking only.
Emit: TypeAlias = "Callable[[str, SessionHeader, EventRecord], None]"


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
    sleep: Sleep | None = None,
) -> tuple[TreeView, bool]:
    """Follow `root`'s tree until no live process holds it.

    Returns the view and whether work was left (an open turn or pending input: the holder
    died).

    Stopping needs the lease released, not only a quiet log: between a child's last turn and
    the notice its parent gets there is a moment with nothing open, and the holder (which
    runs until the tree is quiescent) lets go of the lease only after that.
    """
    import asyncio  # startup time: see the module's docstring

    from ..delegation import WatchedTree

    pause = asyncio.sleep if sleep is None else sleep
    watched = WatchedTree(store, root)
    emitter = _Emitter(watched.view, emit or (lambda name, header, record: None), [])
    while True:
        emitter.send(await watched.refresh())
        show(watched.view, watched.held)
        if not watched.held:
            emitter.flush()
            return watched.view, watched.view.has_work
        await pause(interval)


def _render(view: TreeView, held: bool) -> Tree:
    # Startup time: see the module's docstring.
    from rich.text import Text
    from rich.tree import Tree

    from ..delegation import duration

    tree = Tree(Text("agents", style="bold"))
    nodes: dict[int, Tree] = {-1: tree}
    for row in view.rows(held=held, now=time.time()):
        label = Text.assemble(
            (row.name, "bold"),
            " ",
            (str(row.status), "dim"),
            f"  turn {duration(row.elapsed)}  {row.usage.model_calls} model calls, "
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
    from ._stream import event_line, line_text  # startup time: see the module's docstring

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
    # Startup time: see the module's docstring.
    from rich.console import Console
    from rich.live import Live

    from ._stream import line_text, result_line

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
        result = view.result()
        rows = view.usage_rows()
        own = next((r["usage"] for r in rows if r["session_id"] == result.session_id), None)
        typer.echo(line_text(result_line(result_json(result, (own, rows[0]["total_usage"])))))
    elif not terminal:
        typer.echo("\n".join(row.text() for row in view.rows(held=False, now=time.time())))
    if died:
        typer.echo(
            "subagents: the process holding this tree died; resume it with: "
            f"subagents resume {view.root.id}",
            err=True,
        )
        raise typer.Exit(EXIT_FAILED)
