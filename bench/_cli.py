"""`python -m bench`: run every (system, scenario) pair in fresh processes and print the table."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

from ._guard import check_baseline, write_baseline
from ._harness import SCENARIOS, WorkerReport
from ._report import Cell, metric, render_json, render_table
from ._stored import STORED_SCENARIOS, TREES, TreeKind, expand_scenarios
from ._systems import PEERS, REPO_ROOT, System, SystemUnavailable, core_systems

__all__ = ["main"]

WORKER_TIMEOUT_S = 600
BUILD_TIMEOUT_S = 900
ALL_SCENARIOS = [*SCENARIOS, *STORED_SCENARIOS]
DEFAULT_TOLERANCE = 1.5
"""Run-to-run noise of a ratio on a loaded 2-core machine stays well inside 1.5x."""
NO_DURABLE_TREE = "no durable tree (as run here it persists nothing: no stored tree to reopen)"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "Benchmark subagents (durable SQLite store, scripted model) against bare asyncio "
            "and, with --peers, the peer frameworks of docs/benchmarks.md."
        ),
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(ALL_SCENARIOS),
        help=f"comma-separated subset of {','.join(ALL_SCENARIOS)}; S4 and S5 stand for "
        "S4a,S4b and S5a,S5b (default: all)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help="measured runs per (system, scenario), each in a fresh process "
        "(default 5; 1 with --quick)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small N and K for a smoke run (not comparable)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the results as JSON instead of the tables"
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also run the peer frameworks, each in its own venv under bench/.venvs/",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="FILE",
        help="fail (exit 2) when a subagents row's ratio to the floor grew by more than "
        "--tolerance against FILE (see bench/README.md: the regression guard)",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help=f"how much worse than the baseline a ratio may get (default {DEFAULT_TOLERANCE}x)",
    )
    parser.add_argument(
        "--save-baseline",
        type=Path,
        default=None,
        metavar="FILE",
        help="write this run's ratios to FILE as the new baseline",
    )
    args = parser.parse_args(argv)
    if args.tolerance < 1:
        parser.error("--tolerance must be at least 1 (1.5 = 50%% worse is allowed)")
    if args.baseline is not None and not args.baseline.is_file():
        parser.error(f"--baseline {args.baseline}: no such file (write one with --save-baseline)")
    names = expand_scenarios([s.strip() for s in str(args.scenarios).split(",") if s.strip()])
    unknown = [n for n in names if n not in ALL_SCENARIOS]
    if unknown or not names:
        parser.error(
            f"unknown scenario {unknown[0] if unknown else '(none)'}; "
            f"use {','.join(ALL_SCENARIOS)} (or S4, S5)"
        )
    args.scenarios = names
    if args.runs is None:
        args.runs = 1 if args.quick else 5
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def run_worker(command: list[str], scenario: str, size: int, warm_size: int) -> WorkerReport | str:
    """One fresh process: its report, or why it produced none."""
    argv = [*command, "--scenario", scenario, "--size", str(size), "--warm-size", str(warm_size)]
    return _run_report(argv)


def _run_report(argv: list[str]) -> WorkerReport | str:
    try:
        done = subprocess.run(
            argv,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=WORKER_TIMEOUT_S,
            check=False,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {WORKER_TIMEOUT_S} s"
    except OSError as exc:
        return f"cannot start the worker: {exc}"
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            try:
                data = cast("dict[str, Any]", json.loads(line))
                return WorkerReport(**data)
            except (ValueError, TypeError):
                break
    errors = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    detail = errors[-1] if errors else f"exit status {done.returncode}, no report"
    return f"worker failed: {detail}"


def build_tree(
    system: System, kind: TreeKind, *, quick: bool, trees_dir: Path
) -> tuple[Path | None, str]:
    """The setup process of a stored tree (untimed): its directory, or None and why not."""
    command = system.stored_command()
    assert command is not None
    spec = TREES[kind]
    size = spec.quick_size if quick else spec.size
    out = trees_dir / f"{system.key}-{kind}"
    argv = [
        *command,
        "build",
        "--tree",
        kind,
        "--size",
        str(size),
        "--warm-size",
        str(spec.warm_size),
        "--out",
        str(out),
    ]
    print(f"[{kind} setup] {system.label}: building {size:,} {spec.unit} ...", file=sys.stderr)
    try:
        done = subprocess.run(
            argv,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
    except subprocess.TimeoutExpired:
        return None, f"building the {kind} tree timed out after {BUILD_TIMEOUT_S} s"
    except OSError as exc:
        return None, f"cannot start the {kind} build: {exc}"
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            data = cast("dict[str, Any]", json.loads(line))
            if not data.get("ok"):
                problems = cast("list[str]", data.get("problems") or ["no reason given"])
                return None, f"building the {kind} tree failed: {'; '.join(problems)}"
            print(
                f"[{kind} setup] {system.label}: {data['members']:,} members built "
                f"in {data['build_s']:.1f} s and checked",
                file=sys.stderr,
            )
            return out, ""
    errors = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    detail = errors[-1] if errors else f"exit status {done.returncode}, no report"
    return None, f"building the {kind} tree failed: {detail}"


def measure(
    systems: list[System],
    scenarios: list[str],
    *,
    runs: int,
    quick: bool,
    trees_dir: Path,
) -> dict[str, list[Cell]]:
    """Run every pair `runs` times, interleaving systems run by run; cells per system key.

    A stored-tree scenario (S4, S5) first builds its tree once per system (a setup process,
    untimed) into `trees_dir`; systems without a durable tree get `n/a`.
    """
    cells: dict[str, list[Cell]] = {s.key: [] for s in systems}
    trees: dict[tuple[str, TreeKind], tuple[Path | None, str]] = {}
    commands = _worker_commands(systems, scenarios, cells, quick=quick)
    for name in scenarios:
        if name in STORED_SCENARIOS:
            _measure_stored(systems, commands, cells, trees, name, runs, quick, trees_dir)
        else:
            _measure_agents(systems, commands, cells, name, runs, quick)
    return cells


def _worker_commands(
    systems: list[System], scenarios: list[str], cells: dict[str, list[Cell]], *, quick: bool
) -> dict[str, list[str] | None]:
    """Each system's worker command; None (and `n/a` cells) where it cannot run here."""
    commands: dict[str, list[str] | None] = {}
    # Only the scenarios that run agents need a system's worker (a peer's venv, say).
    needs_worker = any(name in SCENARIOS for name in scenarios)
    for system in systems:
        if not needs_worker:
            commands[system.key] = []
            continue
        try:
            commands[system.key] = system.command()
        except SystemUnavailable as exc:
            commands[system.key] = None
            print(f"{system.label}: n/a: {exc}", file=sys.stderr)
            for name in scenarios:
                cell = Cell(system, name, _size(name, quick))
                cell.fail("n/a", str(exc))
                cells[system.key].append(cell)
    return commands


def _measure_agents(
    systems: list[System],
    commands: dict[str, list[str] | None],
    cells: dict[str, list[Cell]],
    name: str,
    runs: int,
    quick: bool,
) -> None:
    scenario = SCENARIOS[name]
    size = _size(name, quick)
    live: list[tuple[Cell, list[str]]] = []
    for system in systems:
        command = commands[system.key]
        if command is not None:
            cell = Cell(system, name, size)
            cells[system.key].append(cell)
            live.append((cell, command))
    for run in range(1, runs + 1):
        for cell, command in live:
            if cell.status != "ok":
                continue  # one invalid run voids the cell: no number is printed for it
            outcome = run_worker(command, name, size, scenario.warm_size)
            _record(cell, outcome, name, run, runs)


def _record(cell: Cell, outcome: WorkerReport | str, name: str, run: int, runs: int) -> None:
    if isinstance(outcome, str):
        cell.fail("n/a", outcome)
        note = f"n/a: {outcome}"
    else:
        cell.add(outcome)
        note = (
            f"{metric(name, outcome.wall_s, outcome.size):,.1f}"
            if outcome.ok
            else "INVALID: " + "; ".join(outcome.problems)
        )
    print(f"[{name} run {run}/{runs}] {cell.system.label}: {note}", file=sys.stderr)


def _measure_stored(
    systems: list[System],
    commands: dict[str, list[str] | None],
    cells: dict[str, list[Cell]],
    trees: dict[tuple[str, TreeKind], tuple[Path | None, str]],
    name: str,
    runs: int,
    quick: bool,
    trees_dir: Path,
) -> None:
    kind = STORED_SCENARIOS[name].tree
    size = _size(name, quick)
    live: list[tuple[Cell, list[str]]] = []
    for system in systems:
        if commands[system.key] is None:
            continue  # already n/a: the system cannot run here at all
        cell = Cell(system, name, size)
        cells[system.key].append(cell)
        command = system.stored_command()
        if command is None:
            cell.fail("n/a", NO_DURABLE_TREE)
            continue
        if (system.key, kind) not in trees:
            trees[system.key, kind] = build_tree(system, kind, quick=quick, trees_dir=trees_dir)
        tree_dir, reason = trees[system.key, kind]
        if tree_dir is None:
            cell.fail("invalid", reason)
            continue
        live.append((cell, [*command, "run", "--scenario", name, "--tree-dir", str(tree_dir)]))
    for run in range(1, runs + 1):
        for cell, argv in live:
            if cell.status != "ok":
                continue
            _record(cell, _run_report(argv), name, run, runs)


def _size(name: str, quick: bool) -> int:
    if name in STORED_SCENARIOS:
        spec = TREES[STORED_SCENARIOS[name].tree]
        return spec.quick_size if quick else spec.size
    scenario = SCENARIOS[name]
    return scenario.quick_size if quick else scenario.size


def _accounted(cell: Cell) -> bool:
    """A valid cell, or one that is `n/a` by design (no durable tree to reopen)."""
    return cell.valid or (cell.status == "n/a" and cell.reason == NO_DURABLE_TREE)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    runs: int = args.runs
    quick: bool = args.quick
    scenarios: list[str] = args.scenarios
    core = core_systems()
    peers = PEERS if args.peers else []
    with tempfile.TemporaryDirectory(prefix="subagents-bench-trees-") as trees_dir:
        cells = measure(
            [*core, *peers], scenarios, runs=runs, quick=quick, trees_dir=Path(trees_dir)
        )
    core_cells = [c for name in scenarios for s in core for c in cells[s.key] if c.scenario == name]
    peer_cells = [
        c for name in scenarios for s in peers for c in cells[s.key] if c.scenario == name
    ]
    machine = (
        f"subagents {version('subagents')}, CPython {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"
    )
    method = (
        f"{runs} run(s) per row, each in a fresh process after one small warm-up; "
        "median, min, max" + ("; --quick sizes, not comparable with full size" if quick else "")
    )
    if args.json:
        meta: dict[str, Any] = {
            "machine": machine,
            "runs": runs,
            "quick": quick,
            "durability": "subagents writes every event to a fresh SQLite file (WAL, NORMAL)",
        }
        payload = render_json(core_cells, core_cells, meta)
        if peers:
            payload["peers"] = render_json(peer_cells, core_cells, {})["results"]
        print(json.dumps(payload, indent=2))
    else:
        print(f"# {machine}")
        print(f"# {method}")
        print(
            "# subagents: scripted model, every event written to a fresh SQLite file "
            "(WAL, synchronous=NORMAL); the floor and peers persist nothing"
        )
        print()
        print(render_table(core_cells, core_cells, title="subagents vs bare asyncio"))
        if peers:
            print()
            print(
                render_table(peer_cells, core_cells, title="peers (x floor: vs bare asyncio above)")
            )
    valid = all(_accounted(c) for c in core_cells)
    if args.save_baseline is not None:
        write_baseline(
            args.save_baseline, core_cells, {"machine": machine, "runs": runs, "quick": quick}
        )
        print(f"baseline written to {args.save_baseline}", file=sys.stderr)
    if not valid:
        return 1
    if args.baseline is not None:
        return _guard(args.baseline, core_cells, scenarios, float(args.tolerance))
    return 0


def _guard(path: Path, cells: list[Cell], scenarios: list[str], tolerance: float) -> int:
    """The regression guard's verdict: 0 when nothing got worse than `tolerance`, else 2."""
    try:
        regressions = check_baseline(path, cells, scenarios, tolerance=tolerance)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for regression in regressions:
        print(f"REGRESSION {regression.describe(tolerance)}", file=sys.stderr)
    if regressions:
        return 2
    print(f"no regression against {path} (tolerance {tolerance:.2f}x)", file=sys.stderr)
    return 0
