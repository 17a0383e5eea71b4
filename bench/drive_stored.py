"""S4 and S5 for `subagents`: build a stored tree once, then time operations on it cold.

`python -m bench.drive_stored build --tree S5 --size 10000 --warm-size 20 --out DIR` (the
setup process, untimed) builds the measured tree and a small warm-up tree of the same shape
through the real delegation path, checks them from the store, and writes `DIR/tree.json`.

`python -m bench.drive_stored run --scenario S5a --tree-dir DIR` (one measured run, a fresh
process) copies both databases to a fresh temporary directory, runs the scenario's operation
on the warm-up tree, then times it on the measured tree and prints one `WorkerReport` line.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import shutil
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Generator, Sequence
from contextlib import AsyncExitStack, contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from importlib.metadata import version
from math import prod
from pathlib import Path
from typing import Any, cast

from typer.main import get_command

from subagents import Runtime
from subagents.cli import app
from subagents.core import replay_inbox
from subagents.core._loop import _execute
from subagents.delegation._catalog import catalog_entries
from subagents.delegation._tree import find_member
from subagents.ids import SessionId
from subagents.messages import ToolCallBlock
from subagents.models import ScriptedCall, ScriptedModel, ScriptedResponse
from subagents.sessions import (
    AssistantMessageEvent,
    EventRecord,
    InboxSpliced,
    SessionHeader,
    SqliteEventStore,
    SubagentDescriptor,
    TurnEnd,
)

from ._harness import (
    CHILD_ANSWER,
    CHILD_PROMPT,
    LEAD_ANSWER,
    LEAD_PROMPT,
    TOOL_DESCRIPTION,
    Stopwatch,
    WorkerReport,
)
from ._stored import (
    STORED_SCENARIOS,
    TREES,
    BuiltTree,
    StoredScenario,
    TreeKind,
    read_built,
    tree_shape,
    write_built,
)

TENANT = "default"
PARENT_ANSWER = "parent-done"
"""What a member with children (S4's middle level) answers after fanning out."""
BATCH = 500
"""Parallel `subagent` calls per lead response when building (S5: 20 responses of 500)."""
BACKGROUND_CALL = ScriptedCall(
    "subagent",
    {"description": TOOL_DESCRIPTION, "prompt": CHILD_PROMPT, "run_in_background": True},
)
LIST_DEFAULT_LIMIT = 50
"""`list_agents`'s default page size (`subagents.delegation.tools._control.DEFAULT_LIMIT`)."""

# -- building (untimed) ----------------------------------------------------------------------


def fan_out(children: int) -> list[ScriptedResponse]:
    """Responses that start `children` continuable children, at most BATCH per response."""
    sizes = [BATCH] * (children // BATCH) + ([children % BATCH] if children % BATCH else [])
    return [ScriptedResponse(calls=(BACKGROUND_CALL,) * n) for n in sizes]


def build_model(shape: Sequence[int]) -> ScriptedModel:
    """The script that grows a tree of `shape` (children per member at each depth).

    Every member with children fans out first, then answers every later turn (the settlement
    notices of its children) with a fixed text; leaves answer `child-answer` through `"*"`,
    and have a second answer for the message S4b sends them.
    """
    script: dict[str, list[ScriptedResponse]] = {
        "lead": fan_out(shape[0]) + [ScriptedResponse(text=LEAD_ANSWER)] * (shape[0] + 10),
        "*": [ScriptedResponse(text=CHILD_ANSWER)] * 2,
    }
    if len(shape) == 2:
        b1, b2 = shape
        middle = fan_out(b2) + [ScriptedResponse(text=PARENT_ANSWER)] * (b2 + 10)
        for i in range(1, b1 + 1):
            script[f"agent-{i}"] = middle
    return ScriptedModel(script)


def leaf_name(shape: Sequence[int]) -> str:
    """The leaf S4b messages, the last child of the last parent: `agent-9/agent-110` (9 x 110)."""
    return "/".join(f"agent-{n}" for n in shape)


async def build(kind: TreeKind, size: int, db: Path) -> BuiltTree:
    """Grow the tree through the real path: lead responses of parallel background `subagent`
    calls, with `DelegationOptions` defaults, then check it from the reopened store."""
    shape = tree_shape(kind, size)
    model = build_model(shape)
    started = time.perf_counter()
    async with Runtime(model=model, store=db) as rt:
        result = await rt.run(LEAD_PROMPT)
    build_s = time.perf_counter() - started
    problems: list[str] = []
    if result.stop_reason != "completed" or result.output != LEAD_ANSWER:
        problems.append(f"the lead run ended {result.stop_reason} with {result.output!r}")
    built, found = await check_tree(db, kind, size, shape, build_s)
    problems += found
    if problems or built is None:
        raise BuildFailed(f"{kind} tree of size {size}: " + "; ".join(problems[:5]))
    return built


class BuildFailed(Exception):
    pass


async def check_tree(
    db: Path, kind: TreeKind, size: int, shape: Sequence[int], build_s: float
) -> tuple[BuiltTree | None, list[str]]:
    """Every member of the stored tree is where the shape says, continuable, and settled."""
    problems: list[str] = []
    want_members = 1 + sum(prod(shape[: i + 1]) for i in range(len(shape)))
    async with SqliteEventStore(db) as store:
        roots = await store.list_headers(tenant=TENANT, roots_only=True)
        if len(roots) != 1:
            return None, [f"{len(roots)} root sessions, expected 1"]
        root = roots[0]
        headers = await store.list_headers(tenant=TENANT, roots_only=False, root=root.id)
        if len(headers) != want_members:
            problems.append(f"{len(headers)} members stored, expected {want_members}")
        children: dict[str | None, int] = {}
        for header in headers:
            children[header.parent] = children.get(header.parent, 0) + 1
        names: dict[str, str] = {root.id: "lead"}
        for header in sorted(headers, key=lambda h: h.depth):  # creators before their children
            records = await store.read(header.id, tenant=TENANT)
            problems += check_member(header, records, shape, children.get(header.id, 0))
            prefix = "" if header.parent is None else names.get(header.id, "?") + "/"
            for entry in catalog_entries(records):
                names[entry.child_id] = f"{prefix}{entry.name}"
        lease = await store.get_lease(root.id)
        if lease is not None:
            problems.append(f"the tree is still leased to {lease.holder}")
    leaf = leaf_name(shape)
    leaf_ids = [sid for sid, name in names.items() if name == leaf]
    if len(leaf_ids) != 1:
        problems.append(f"no single member is named {leaf!r}")
        return None, problems
    built = BuiltTree(
        kind=kind,
        size=size,
        db=db.name,
        root=root.id,
        members=len(headers),
        shape=list(shape),
        leaf=leaf,
        leaf_id=leaf_ids[0],
        build_s=build_s,
    )
    return built, problems


def check_member(
    header: SessionHeader, records: list[EventRecord], shape: Sequence[int], children: int
) -> list[str]:
    """One member: its children and catalog, its descriptor, its turns, nothing pending."""
    problems: list[str] = []
    own = records[header.seed_length :]
    depth = header.depth
    fanned = shape[depth] if depth < len(shape) else 0
    if children != fanned:
        problems.append(f"{header.id} (depth {depth}) has {children} children, not {fanned}")
    entries = catalog_entries(records)
    if len(entries) != fanned or any(e.mode != "continuable" for e in entries):
        problems.append(f"{header.id}: its catalog is not {fanned} continuable entries")
    if header.parent is not None:
        descriptor = next((r.event for r in own if isinstance(r.event, SubagentDescriptor)), None)
        if descriptor is None or descriptor.mode != "continuable":
            problems.append(f"{header.id}: no continuable descriptor")
    ends = [r.event.reason for r in own if isinstance(r.event, TurnEnd)]
    if not ends or any(reason != "completed" for reason in ends):
        problems.append(f"{header.id}: its turns ended {ends}")
    if replay_inbox(own):
        problems.append(f"{header.id}: input is still pending")
    if depth == len(shape):
        texts = [r.event.message.text for r in own if isinstance(r.event, AssistantMessageEvent)]
        if texts != [CHILD_ANSWER]:
            problems.append(f"leaf {header.id} answered {texts}")
    return problems


def build_main(kind: TreeKind, size: int, warm_size: int, out: Path) -> int:
    """Build the warm-up and the measured tree into `out`; print one JSON line."""
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"ok": False, "problems": []}
    try:
        warm = asyncio.run(build(kind, warm_size, out / "warm.db"))
        measured = asyncio.run(build(kind, size, out / "measured.db"))
        write_built(out, measured, warm)
        report |= {"ok": True, "members": measured.members, "build_s": measured.build_s}
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        report["problems"] = [f"{type(exc).__name__}: {exc}"]
    print(json.dumps(report))
    return 0


# -- measured operations -----------------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    watch: Stopwatch
    problems: list[str] = field(default_factory=list[str])


Operation = Callable[[BuiltTree, Path, "cProfile.Profile | None"], Outcome]
"""Runs one operation on a stored tree; times (and, given a profiler, profiles) only its
measured part."""


@contextmanager
def timed(profiler: cProfile.Profile | None) -> Generator[Stopwatch]:
    """The measured part: a `Stopwatch`, with `profiler` enabled inside it when given."""
    with Stopwatch() as watch:
        if profiler is not None:
            profiler.enable()
        try:
            yield watch
        finally:
            if profiler is not None:
                profiler.disable()


def tree_command(
    built: BuiltTree, db: Path, profiler: cProfile.Profile | None, *, as_json: bool
) -> Outcome:
    """`subagents tree ROOT --store DB [--json]`, run in this process; output captured.

    Timed: the whole command after argument parsing is set up (store open, root header,
    lease check, `list_tree`, `tree_json`, rendering, echo, store close).
    """
    command = get_command(app)
    argv = ["tree", built.root, "--store", str(db), *(["--json"] if as_json else [])]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), timed(profiler) as watch:
        code = command.main(args=argv, prog_name="subagents", standalone_mode=False)
    outcome = Outcome(watch)
    if code not in (None, 0) or err.getvalue().strip():
        outcome.problems.append(f"exit {code}: {err.getvalue().strip()[:200]}")
        return outcome
    text = out.getvalue()
    if as_json:
        rows = cast("list[dict[str, Any]]", json.loads(text))
        outcome.problems += check_rows(built, rows)
    else:
        outcome.problems += check_tree_text(built, text)
    return outcome


def check_rows(built: BuiltTree, rows: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    if len(rows) != built.members:
        problems.append(f"the tree lists {len(rows)} members, expected {built.members}")
    if not rows or rows[0].get("name") != "lead":
        return [*problems, "the first row is not the root `lead`"]
    children = rows[1:]
    want = {f"agent-{i}" for i in range(1, built.shape[0] + 1)}
    if {r["name"] for r in children if r["parent"] == "lead"} != want:
        problems.append("the root's children are not agent-1 ... agent-N")
    bad = [r for r in children if (r["mode"], r["status"]) != ("continuable", "ready")]
    if bad:
        problems.append(f"{len(bad)} members are not continuable and ready, e.g. {bad[0]}")
    if built.leaf not in {r["name"] for r in rows}:
        problems.append(f"{built.leaf!r} is not listed")
    return problems


def check_tree_text(built: BuiltTree, text: str) -> list[str]:
    lines = text.rstrip("\n").split("\n")
    problems: list[str] = []
    if len(lines) != built.members + 1:  # a line per member, then the total
        problems.append(f"the tree printed {len(lines)} lines, expected {built.members + 1}")
    if not lines[0].startswith("lead  ["):
        problems.append(f"the first line is not the root: {lines[0][:80]!r}")
    members = sum("[ready]  continuable" in line for line in lines)
    if members != built.members - 1:
        problems.append(f"{members} lines show a ready continuable member")
    indent = "  " * len(built.shape)
    if not any(line.startswith(f"{indent}{built.leaf}  [") for line in lines):
        problems.append(f"{built.leaf!r} is not listed")
    if not lines[-1].startswith("total:"):
        problems.append("no total line")
    return problems


def send_leaf(built: BuiltTree, db: Path, profiler: cProfile.Profile | None) -> Outcome:
    return asyncio.run(_send_leaf(built, db, profiler))


async def _send_leaf(built: BuiltTree, db: Path, profiler: cProfile.Profile | None) -> Outcome:
    """What `subagents send ROOT LEAF MESSAGE` does until the message is durably accepted.

    Timed: `Runtime` open (store, tools), the tree's lease, `find_member` (catalogs along the
    path), `deliver_as_user` (the leaf's header and log, its full name, `resume_agent`, the
    activation, the durable inbox append). Untimed afterwards: the leaf runs the message and
    settles, the runtime closes, and the leaf's log is checked from the reopened store.
    """
    model = ScriptedModel({"*": [ScriptedResponse(text=CHILD_ANSWER)] * 2})
    text = f"bench message {uuid.uuid4().hex}"
    async with AsyncExitStack() as stack:
        with timed(profiler) as watch:
            rt = await stack.enter_async_context(Runtime(model=model, store=db))
            header = await rt.store.get_header(SessionId(built.root), tenant=TENANT)
            await rt.hold(header.id)
            target = await find_member(rt.store, header, built.leaf)
            act, accepted, _ = await rt.continuable.deliver_as_user(target.id, text)
        await rt.wait_quiescent()
        await rt.store.flush()
    outcome = Outcome(watch)
    if target.id != built.leaf_id or act.full_name != built.leaf:
        outcome.problems.append(f"{built.leaf!r} resolved to {target.id} ({act.full_name})")
    async with SqliteEventStore(db) as store:
        records = await store.read(SessionId(built.leaf_id), tenant=TENANT)
    queued = [
        m
        for r in records
        if isinstance(r.event, InboxSpliced)
        for m in r.event.inserted
        if m.id == accepted.id
    ]
    if len(queued) != 1 or queued[0].text != text:
        outcome.problems.append(f"the message is not in the leaf's log once ({len(queued)})")
    texts = [r.event.message.text for r in records if isinstance(r.event, AssistantMessageEvent)]
    ends = [r.event.reason for r in records if isinstance(r.event, TurnEnd)]
    if texts != [CHILD_ANSWER] * 2 or ends != ["completed"] * 2:
        outcome.problems.append(f"the leaf did not run the message: answers {texts}, ends {ends}")
    consumed: dict[str, int] = dict(model._consumed)  # no public accessor; checked by name
    # The leaf's settlement notice resumes its continuable parent to take it in (and so on
    # up to the root, which is not loaded): only the leaf and its ancestors may answer.
    segments = built.leaf.split("/")
    ancestors = {"/".join(segments[:n]) for n in range(1, len(segments))}
    if consumed.get(built.leaf) != 2 or not set(consumed) <= {built.leaf, *ancestors}:
        outcome.problems.append(
            f"model calls {consumed}, expected the leaf's second and its ancestors' notices"
        )
    return outcome


def list_agents(built: BuiltTree, db: Path, profiler: cProfile.Profile | None) -> Outcome:
    return asyncio.run(_list_agents(built, db, profiler))


async def _list_agents(built: BuiltTree, db: Path, profiler: cProfile.Profile | None) -> Outcome:
    """`list_agents` with no arguments, called by the resumed root through the tool pipeline.

    Untimed: `Runtime` open and `resume_agent` of the root. Timed: the call as the agent loop
    makes it (argument parsing, schema validation, guards, the handler: `children_page` over the
    root's catalog, the first page rendered).
    """
    model = ScriptedModel({})
    async with Runtime(model=model, store=db) as rt:
        agent = await rt.resume_agent(SessionId(built.root))
        call = ToolCallBlock(id="bench-list", name="list_agents", arguments="{}")
        with timed(profiler) as watch:
            result = await _execute(agent, call)
    outcome = Outcome(watch)
    if result.is_error:
        outcome.problems.append(f"list_agents failed: {result.content[:200]}")
        return outcome
    lines = result.content.split("\n")
    children = built.shape[0]
    rows = min(children, LIST_DEFAULT_LIMIT)
    want = [f"agent-{i} [ready]" for i in range(1, rows + 1)]
    got = [line.split(" — ")[0] for line in lines[:rows]]
    if got != want:
        first = next((g for g, w in zip(got, want, strict=False) if g != w), None)
        outcome.problems.append(f"the page's rows are not agent-1..agent-{rows} [ready] ({first})")
    left = children - rows
    more = lines[rows:]
    if left and (len(more) != 1 or f"{left} more" not in more[0]):
        outcome.problems.append(f"no '{left} more' line after the page: {more[:1]}")
    if not left and more:
        outcome.problems.append(f"unexpected lines after the page: {more[:1]}")
    if model._consumed:
        outcome.problems.append(f"the model was called: {model._consumed}")
    return outcome


OPERATIONS: dict[str, Operation] = {
    "tree-text": lambda built, db, profiler: tree_command(built, db, profiler, as_json=False),
    "tree-json": lambda built, db, profiler: tree_command(built, db, profiler, as_json=True),
    "send-leaf": send_leaf,
    "list-agents": list_agents,
}


def copy_store(tree_dir: Path, built: BuiltTree, into: Path) -> Path:
    """A private copy of a built tree's database (its WAL too, if one was left)."""
    source = tree_dir / built.db
    target = into / built.db
    shutil.copyfile(source, target)
    wal = source.with_name(source.name + "-wal")
    if wal.exists():
        shutil.copyfile(wal, target.with_name(target.name + "-wal"))
    return target


def run_main(scenario: StoredScenario, tree_dir: Path, profile: Path | None = None) -> int:
    """Warm up on the small tree, time the operation once on the measured one, report.

    With `profile`, the timed part of the measured run runs under cProfile (the main thread
    only: the store's reads show as waits for its worker threads) and the stats are dumped
    there; the time it reports then includes the profiler's overhead.
    """
    measured, warm = read_built(tree_dir)
    operation = OPERATIONS[scenario.operation]
    report = WorkerReport(
        "subagents",
        scenario.name,
        measured.size,
        ok=False,
        problems=[],
        version=version("subagents"),
    )
    try:
        with tempfile.TemporaryDirectory(prefix="subagents-bench-run-") as tmp:
            warm_db = copy_store(tree_dir, warm, Path(tmp))
            measured_db = copy_store(tree_dir, measured, Path(tmp))
            warmed = operation(warm, warm_db, None)
            if warmed.problems:
                report.problems = [f"warm-up: {p}" for p in warmed.problems]
                print(report.to_json())
                return 0
            profiler = cProfile.Profile() if profile is not None else None
            outcome = operation(measured, measured_db, profiler)
            if profiler is not None and profile is not None:
                profiler.dump_stats(profile)
        watch = outcome.watch
        report.wall_s = watch.wall_s
        report.full_collections = watch.full_collections
        report.peak_rss_kib = watch.peak_rss_kib
        report.start_rss_kib = watch.start_rss_kib
        report.run_peak_rss_kib = watch.run_peak_rss_kib
        report.problems = outcome.problems
        if watch.wall_s <= 0:
            report.problems.append("no wall time")
        report.ok = not report.problems
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        report.problems = [f"{type(exc).__name__}: {exc}"]
    print(report.to_json())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="S4/S5 of subagents: build a tree, or time one run"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build_p = sub.add_parser("build", help="build and check a stored tree (untimed setup)")
    build_p.add_argument("--tree", required=True, choices=sorted(TREES))
    build_p.add_argument("--size", type=int, required=True)
    build_p.add_argument("--warm-size", type=int, required=True)
    build_p.add_argument("--out", type=Path, required=True)
    run_p = sub.add_parser("run", help="one measured run on a built tree")
    run_p.add_argument("--scenario", required=True, choices=sorted(STORED_SCENARIOS))
    run_p.add_argument("--tree-dir", type=Path, required=True)
    run_p.add_argument(
        "--profile", type=Path, default=None, help="dump cProfile stats of the measured run here"
    )
    args = parser.parse_args(argv)
    if args.command == "build":
        kind = cast("TreeKind", args.tree)
        return build_main(kind, int(args.size), int(args.warm_size), Path(args.out))
    profile = Path(args.profile) if args.profile is not None else None
    return run_main(STORED_SCENARIOS[str(args.scenario)], Path(args.tree_dir), profile)


if __name__ == "__main__":
    raise SystemExit(main())
