"""`python -m bench`: run every (system, scenario) pair in fresh processes and print the table."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any, cast

from ._harness import SCENARIOS, WorkerReport
from ._report import Cell, metric, render_json, render_table
from ._systems import PEERS, REPO_ROOT, System, SystemUnavailable, core_systems

__all__ = ["main"]

WORKER_TIMEOUT_S = 600


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "Benchmark subagents (durable SQLite store, scripted model) against bare asyncio "
            "and, with --peers, the peer frameworks of BENCHMARKS.md."
        ),
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated subset of {','.join(SCENARIOS)} (default: all)",
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
    args = parser.parse_args(argv)
    names = [s.strip() for s in str(args.scenarios).split(",") if s.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names:
        parser.error(
            f"unknown scenario {unknown[0] if unknown else '(none)'}; use {','.join(SCENARIOS)}"
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


def measure(
    systems: list[System], scenarios: list[str], *, runs: int, quick: bool
) -> dict[str, list[Cell]]:
    """Run every pair `runs` times, interleaving systems run by run; cells per system key."""
    cells: dict[str, list[Cell]] = {s.key: [] for s in systems}
    commands: dict[str, list[str] | None] = {}
    for system in systems:
        try:
            commands[system.key] = system.command()
        except SystemUnavailable as exc:
            commands[system.key] = None
            print(f"{system.label}: n/a: {exc}", file=sys.stderr)
            for name in scenarios:
                cell = Cell(system, name, _size(name, quick))
                cell.fail("n/a", str(exc))
                cells[system.key].append(cell)
    for name in scenarios:
        scenario = SCENARIOS[name]
        size = _size(name, quick)
        live: list[tuple[System, Cell, list[str]]] = []
        for system in systems:
            command = commands[system.key]
            if command is not None:
                cell = Cell(system, name, size)
                cells[system.key].append(cell)
                live.append((system, cell, command))
        for run in range(1, runs + 1):
            for system, cell, command in live:
                if cell.status != "ok":
                    continue  # one invalid run voids the cell: no number is printed for it
                outcome = run_worker(command, name, size, scenario.warm_size)
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
                print(f"[{name} run {run}/{runs}] {system.label}: {note}", file=sys.stderr)
    return cells


def _size(name: str, quick: bool) -> int:
    scenario = SCENARIOS[name]
    return scenario.quick_size if quick else scenario.size


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    runs: int = args.runs
    quick: bool = args.quick
    scenarios: list[str] = args.scenarios
    core = core_systems()
    peers = PEERS if args.peers else []
    cells = measure([*core, *peers], scenarios, runs=runs, quick=quick)
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
        "median, min, max" + ("; --quick sizes, not comparable with BENCHMARKS.md" if quick else "")
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
    valid = all(c.valid for c in core_cells)
    return 0 if valid else 1
