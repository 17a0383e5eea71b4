"""Scenarios S4 and S5: operations on a stored tree, built once per invocation, reopened cold.

Standard library only (the parent process imports it before any worker runs). A setup process
(`python -m bench.drive_stored build`) builds and checks each tree once per `python -m bench`
invocation, under a temporary directory; every measured run is then a fresh process that
copies the stored tree and times one operation on it (`python -m bench.drive_stored run`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, cast

__all__ = [
    "STORED_SCENARIOS",
    "TREES",
    "BuiltTree",
    "StoredScenario",
    "TreeKind",
    "TreeSpec",
    "expand_scenarios",
    "read_built",
    "tree_shape",
    "write_built",
]

TreeKind = Literal["S4", "S5"]
Operation = Literal["tree-text", "send-leaf", "list-agents", "tree-json"]


@dataclass(frozen=True, slots=True)
class TreeSpec:
    """One stored tree: what `size` counts, and the sizes it is built at."""

    kind: TreeKind
    size: int
    """S4: members of the tree, the root included; S5: children of the root."""
    quick_size: int
    warm_size: int
    """The small tree of the same shape that each measured process warms up on."""
    unit: str


TREES: dict[TreeKind, TreeSpec] = {
    "S4": TreeSpec("S4", 1000, 100, 21, unit="members"),
    "S5": TreeSpec("S5", 10_000, 500, 20, unit="children"),
}


@dataclass(frozen=True, slots=True)
class StoredScenario:
    name: str
    tree: TreeKind
    operation: Operation
    title: str


STORED_SCENARIOS: dict[str, StoredScenario] = {
    s.name: s
    for s in (
        StoredScenario(
            "S4a", "S4", "tree-text", "open the store and list the tree (`subagents tree ROOT`)"
        ),
        StoredScenario(
            "S4b",
            "S4",
            "send-leaf",
            "open a Runtime, resolve a named leaf, cold-resume it until a message is accepted",
        ),
        StoredScenario(
            "S5a", "S5", "list-agents", "`list_agents` (first page) from the resumed root"
        ),
        StoredScenario("S5b", "S5", "tree-json", "`subagents tree ROOT --json`"),
    )
}


def expand_scenarios(names: list[str]) -> list[str]:
    """`S4` and `S5` stand for both of their operations (`S4a`, `S4b`...)."""
    out: list[str] = []
    for name in names:
        group = [s.name for s in STORED_SCENARIOS.values() if s.tree == name]
        for item in group or [name]:
            if item not in out:
                out.append(item)
    return out


def tree_shape(kind: TreeKind, size: int) -> tuple[int, ...]:
    """Children per member at each depth below the root.

    S5: `(size,)`, one parent with `size` children. S4: `(b1, b2)`: the root has b1 children
    and each of them b2, with `1 + b1 + b1 * b2 == size` (1000: 9 x 110; 100: 3 x 32; 21:
    1 x 19).

    Raises:
        ValueError: no such split of `size` exists.
    """
    if kind == "S5":
        if size < 1:
            raise ValueError(f"S5 needs at least one child, not {size}")
        return (size,)
    b1 = max(1, round(math.sqrt(size - 1) / 3.5)) if size > 2 else 1
    b2 = (size - 1 - b1) // b1
    if b2 < 1 or 1 + b1 + b1 * b2 != size:
        raise ValueError(f"an S4 tree of {size} members has no 1 + b1 + b1*b2 split (b1 = {b1})")
    return (b1, b2)


@dataclass(frozen=True, slots=True)
class BuiltTree:
    """A tree the setup process stored and checked (`tree.json` in the tree directory)."""

    kind: TreeKind
    size: int
    db: str
    """The database file, relative to the tree directory."""
    root: str
    """The root session id."""
    members: int
    """Sessions in the tree, the root included."""
    shape: list[int]
    leaf: str
    """The full name of the leaf S4b messages (the last one created)."""
    leaf_id: str
    build_s: float


def write_built(directory: Path, measured: BuiltTree, warm: BuiltTree) -> None:
    payload = {"measured": asdict(measured), "warm": asdict(warm)}
    (directory / "tree.json").write_text(json.dumps(payload, indent=2), encoding="utf-8")


def read_built(directory: Path) -> tuple[BuiltTree, BuiltTree]:
    """The measured and the warm-up tree of a tree directory."""
    data = cast("dict[str, dict[str, Any]]", json.loads((directory / "tree.json").read_text()))
    return BuiltTree(**data["measured"]), BuiltTree(**data["warm"])
