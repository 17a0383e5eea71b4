"""Conformance tests for catalogs, child headers and the stored tree (docs/design.md
§4.1, §7.4 and §7.6: descriptors, child headers, catalogs and full names).

A lead -> reviewer -> checker tree runs on a real SQLite file; the runtime is closed; then new
processes rebuild the names and the structure from the log alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from delegation_support import Lifecycle, make_runtime

from subagents.core._status import Status
from subagents.delegation._tree import load_tree, tree_json, tree_rows
from subagents.ids import SessionId
from subagents.sessions import (
    EventRecord,
    SessionEvent,
    SessionHeader,
    SqliteEventStore,
    StopReason,
    SubagentCatalog,
    TurnEnd,
    TurnStart,
)

SCRIPT = """
lead:
  - calls:
      - tool: subagent
        args: {name: reviewer, description: Review the code, prompt: Review app.py}
  - text: The reviewer approved app.py.
reviewer:
  - calls:
      - tool: subagent
        args: {name: checker, description: Check style, prompt: Check the style, cwd: src}
  - text: app.py looks correct.
reviewer/checker:
  - text: Style is clean.
"""

DUMP = """
import asyncio, json, sys
from subagents.sessions import SqliteEventStore, SubagentCatalog, SubagentDescriptor

async def main():
    out = {}
    async with SqliteEventStore(sys.argv[1]) as store:
        for h in await store.list_headers(tenant="default", roots_only=False):
            records = await store.read(h.id, tenant="default")
            out[h.id] = {
                "parent": h.parent, "root": h.root, "origin": h.origin, "depth": h.depth,
                "cwd": h.cwd, "seed_length": h.seed_length,
                "catalog": [
                    [e.v, e.name, e.child_id, e.mode, e.provider, e.label]
                    for e in (r.event for r in records) if isinstance(e, SubagentCatalog)
                ],
                "descriptor": [
                    [e.v, e.mode, e.provider, e.label]
                    for e in (r.event for r in records) if isinstance(e, SubagentDescriptor)
                ],
                "kinds": [r.kind for r in records],
            }
    print(json.dumps(out))

asyncio.run(main())
"""


@dataclass(frozen=True)
class StoredTree:
    path: Path
    cwd: Path
    lead: str
    reviewer: str
    checker: str


async def _build(path: Path, cwd: Path) -> StoredTree:
    rt, model = make_runtime(SCRIPT, store=SqliteEventStore(path), cwd=str(cwd))
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("Review app.py")
        assert result.output == "The reviewer approved app.py."
        reviewer, checker = (e.child_id for e in lifecycle.started)
        assert [e.name for e in lifecycle.started] == ["reviewer", "reviewer/checker"]
    model.assert_complete()
    return StoredTree(path, cwd, result.session_id, reviewer, checker)


@pytest.fixture
def stored(tmp_path: Path) -> StoredTree:
    """The tree, run to completion and closed: only the SQLite file remains."""
    cwd = tmp_path.resolve() / "project"
    (cwd / "src").mkdir(parents=True)
    return asyncio.run(_build(tmp_path / "state.db", cwd))


def run_python(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUBAGENTS_")}
    env["SUBAGENTS_HOME"] = str(cwd / "home")
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def cli_json(stored: StoredTree, *args: str) -> Any:
    done = run_python(
        "-m", "subagents", *args, "--json", "--store", str(stored.path), cwd=stored.cwd
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_new_process_rebuilds_the_names_and_structure_from_the_log(stored: StoredTree) -> None:
    rows = cli_json(stored, "tree", stored.lead)
    assert [
        (r["session_id"], r["name"], r["parent"], r["mode"], r["status"], r["depth"], r["label"])
        for r in rows
    ] == [
        (stored.lead, "lead", None, "root", "completed", 0, "lead"),
        (stored.reviewer, "reviewer", "lead", "one-shot", "completed", 1, "Review the code"),
        (
            stored.checker,
            "reviewer/checker",
            "reviewer",
            "one-shot",
            "completed",
            2,
            "Check style",
        ),
    ]
    assert [r["usage"]["model_calls"] for r in rows] == [2, 2, 1]

    checker = cli_json(stored, "log", "reviewer/checker", "--session", stored.lead)
    assert checker == cli_json(stored, "log", "/reviewer/checker", "--session", stored.lead)
    assert checker == cli_json(stored, "log", stored.checker)
    assert checker[0]["kind"] == "subagent/descriptor"
    assert checker[0]["payload"] == {
        "mode": "one-shot",
        "provider": "spawn",
        "label": "Check style",
        # What it started with, inherited from its parent: a resume needs neither.
        "instructions": "You are a helpful agent. Use the tools you have when they help.",
    }
    assert [e["kind"] for e in checker].count("subagent/descriptor") == 1
    answers = [
        block["text"]
        for e in checker
        if e["kind"] == "assistant/message"
        for block in e["payload"]["message"]["content"]
    ]
    assert answers == ["Style is clean."]

    reviewer = cli_json(stored, "log", "reviewer", "--session", stored.lead)
    catalog = [e["payload"] for e in reviewer if e["kind"] == "subagent/catalog"]
    assert [(c["child_id"], c["name"]) for c in catalog] == [(stored.checker, "checker")]


def test_headers_catalogs_and_descriptors_are_durable(stored: StoredTree) -> None:
    done = run_python("-c", DUMP, str(stored.path), cwd=stored.cwd)
    assert done.returncode == 0, done.stderr
    sessions = json.loads(done.stdout)
    assert set(sessions) == {stored.lead, stored.reviewer, stored.checker}
    lead, reviewer, checker = (sessions[s] for s in (stored.lead, stored.reviewer, stored.checker))

    def header(s: dict[str, Any]) -> tuple[Any, ...]:
        return (s["parent"], s["root"], s["origin"], s["depth"], s["cwd"], s["seed_length"])

    assert header(lead) == (None, None, "user", 0, str(stored.cwd), 0)
    assert header(reviewer) == (stored.lead, stored.lead, "subagent", 1, str(stored.cwd), 0)
    assert header(checker) == (
        stored.reviewer,
        stored.lead,
        "subagent",
        2,
        str(stored.cwd / "src"),
        0,
    )
    # The creator's log names the child (catalog v3); the child's own log has its descriptor.
    assert lead["catalog"] == [
        [3, "reviewer", stored.reviewer, "one-shot", "spawn", "Review the code"]
    ]
    assert reviewer["catalog"] == [
        [3, "checker", stored.checker, "one-shot", "spawn", "Check style"]
    ]
    assert checker["catalog"] == []
    assert lead["descriptor"] == []
    assert reviewer["descriptor"] == [[3, "one-shot", "spawn", "Review the code"]]
    assert checker["descriptor"] == [[3, "one-shot", "spawn", "Check style"]]
    # The descriptor is written before the child's first model request.
    assert checker["kinds"][0] == "subagent/descriptor"
    assert checker["kinds"].index("subagent/descriptor") < checker["kinds"].index("request/header")
    # The catalog entry is committed before the child's result comes back to the creator.
    assert reviewer["kinds"].index("subagent/catalog") < reviewer["kinds"].index("tool/result")


# -- one status vocabulary ------------------------------------------------------------------

ROOT_ID = "00000000-0000-4000-8000-000000000000"


def _member(n: int, *, parent: str | None = None) -> SessionHeader:
    session = ROOT_ID if parent is None else f"00000000-0000-4000-8000-00000000000{n}"
    return SessionHeader(
        id=SessionId(session),
        tenant="default",
        created_at=1_700_000_000.0 + n,
        cwd="/",
        parent=SessionId(parent) if parent else None,
        root=SessionId(parent) if parent else None,
        origin="subagent" if parent else "user",
        depth=0 if parent is None else 1,
    )


def _log(*events: SessionEvent) -> list[EventRecord]:
    return [EventRecord(i, 1_700_000_000.0 + i, event) for i, event in enumerate(events)]


def _turn(reason: StopReason) -> tuple[SessionEvent, SessionEvent]:
    return TurnStart(turn=1), TurnEnd(turn=1, reason=reason)


# (name, mode, the child's log) -> the status every listing shows for it
CHILDREN: list[tuple[str, Literal["one-shot", "continuable"], tuple[SessionEvent, ...], str]] = [
    ("done", "one-shot", _turn("completed"), "completed"),
    ("broke", "one-shot", _turn("error"), "failed"),
    ("capped", "one-shot", _turn("max-tokens"), "failed"),
    ("stopped", "one-shot", _turn("aborted"), "aborted"),
    ("cut", "one-shot", _turn("interrupted"), "cut-off"),
    ("dead", "one-shot", (TurnStart(turn=1),), "crashed"),
    ("helper", "continuable", _turn("completed"), "ready"),
    ("halted", "continuable", _turn("aborted"), "aborted"),
    ("orphan", "continuable", (TurnStart(turn=1),), "crashed"),
]


async def test_the_status_words_tell_settled_stopped_crashed_and_cut_off_apart(
    tmp_path: Path,
) -> None:
    root = _member(0)
    async with SqliteEventStore(tmp_path / "state.db") as store:
        await store.create(root)
        catalog: list[SessionEvent] = [TurnStart(turn=1)]  # the lead's turn is open too
        for n, (name, mode, events, _) in enumerate(CHILDREN, start=1):
            child = _member(n, parent=ROOT_ID)
            await store.create(child)
            await store.append(child.id, _log(*events))
            catalog.append(SubagentCatalog(child_id=child.id, name=name, mode=mode, label=name))
        await store.append(root.id, _log(*catalog))
        await store.flush()

        dead = tree_json(await load_tree(store, root, held=False))
        live = tree_json(await load_tree(store, root, held=True))
        # `subagents tree` reads the store's listing rows instead: the same rows.
        assert await tree_rows(store, root, held=False) == dead
        assert await tree_rows(store, root, held=True) == live
    expected = [("lead", "crashed"), *((name, status) for name, _, _, status in CHILDREN)]
    assert [(r.name, r.status) for r in dead] == expected
    # While a live process holds the tree, an open turn is running, not crashed.
    assert [(r.name, r.status) for r in live] == [
        (name, "running" if status == "crashed" else status) for name, status in expected
    ]
    assert {r.status for r in dead} <= set(Status)
