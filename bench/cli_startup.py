"""CLI startup: the wall time of `subagents --help`, `sessions` and `tree`, each in a fresh process.

Not a test (pytest never collects it) and nothing asserts a time. It first writes a small store
in a temp dir (`subagents demo`, untimed), then runs each command N times, interleaved run by
run so that drift on the machine spreads evenly, next to the floor `python -c pass` in the same
run, and prints median, min and max in milliseconds per command, and the median CPU time (user
and system) the process took: on a loaded machine that figure is nearer what the command costs
on a quiet one than its wall time is. One untimed run of each comes
first, so that every module's bytecode is cached and the files are in the page cache, as they
are for a user's second command: the runs write their bytecode under the temp dir
(`PYTHONPYCACHEPREFIX`, whatever `PYTHONDONTWRITEBYTECODE` says), so a checkout whose
`__pycache__` is missing is not measured compiling every module on every run, and nothing is
written next to the sources.

    .venv/bin/python -m bench.cli_startup [--runs 10] [--json]

The commands run the installed console script (`subagents` next to this Python), as a user
does, with `SUBAGENTS_HOME` in the temp dir so that no settings file of this machine is read.
A command that exits non-zero or prints nothing makes its row `INVALID` and the exit status 1.
What is kept out of these commands' imports, and why, is in tests/cli/test_startup.py.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]

TIMEOUT_S = 120


def _entry_point() -> list[str]:
    """The console script of this environment, else `python -m subagents` (the same `main`)."""
    script = Path(sys.executable).parent / "subagents"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "subagents"]


def _cpu_s() -> float:
    """CPU seconds (user and system) of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, str | None]:
    """One fresh process: its wall and CPU time in ms, and why it is invalid (None: it is not)."""
    cpu = _cpu_s()
    started = time.perf_counter()
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return (time.perf_counter() - started) * 1000, 0.0, f"timed out after {TIMEOUT_S} s"
    wall_ms = (time.perf_counter() - started) * 1000
    cpu_ms = (_cpu_s() - cpu) * 1000
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.strip()]
        problem = f"exit status {done.returncode}: {errors[-1] if errors else 'no output'}"
        return wall_ms, cpu_ms, problem
    if argv[-2:] != ["-c", "pass"] and not done.stdout.strip():
        return wall_ms, cpu_ms, "printed nothing"
    return wall_ms, cpu_ms, None


def _build_store(entry: list[str], db: Path, env: dict[str, str]) -> str:
    """Write the demo's tree into `db` (untimed); its root session's id."""
    done = subprocess.run(
        [*entry, "demo", "--store", str(db), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"cli_startup: building the store failed: {done.stderr.strip()}")
    return str(json.loads(done.stdout)["session_id"])


def measure(runs: int) -> dict[str, Any]:
    """Every command `runs` times in fresh processes; the report `main` prints."""
    entry = _entry_point()
    with tempfile.TemporaryDirectory(prefix="subagents-cli-startup-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        env = {
            **os.environ,
            "SUBAGENTS_HOME": str(home),
            "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache"),
        }
        for name in ("SUBAGENTS_STORE", "PYTHONDONTWRITEBYTECODE"):
            env.pop(name, None)
        db = Path(tmp) / "store.db"
        root = _build_store(entry, db, env)
        commands: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "subagents --help": [*entry, "--help"],
            "subagents sessions --store DB": [*entry, "sessions", "--store", str(db)],
            "subagents tree ROOT --store DB": [*entry, "tree", root, "--store", str(db)],
        }
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        problems: dict[str, str] = {}
        for name, argv in commands.items():  # the untimed warm-up run
            *_, problem = _run(argv, env)
            if problem is not None:
                problems[name] = problem
        for _ in range(runs):
            for name, argv in commands.items():
                if name in problems:
                    continue
                wall_ms, cpu_ms, problem = _run(argv, env)
                if problem is not None:
                    problems[name] = problem
                walls[name].append(wall_ms)
                cpus[name].append(cpu_ms)
    rows: list[dict[str, Any]] = []
    for name, wall in walls.items():
        row: dict[str, Any] = {"command": name, "runs": len(wall), "problem": problems.get(name)}
        if wall and name not in problems:
            row |= {
                "median_ms": statistics.median(wall),
                "min_ms": min(wall),
                "max_ms": max(wall),
                "cpu_median_ms": statistics.median(cpus[name]),
            }
        rows.append(row)
    return {
        "entry_point": " ".join(entry),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "rows": rows,
    }


def render(report: dict[str, Any]) -> str:
    load = ", ".join(f"{x:.2f}" for x in report["load_average"])
    lines = [
        f"CLI startup ({report['entry_point']}; {report['cpus']} CPUs, load average {load} "
        "at the end)",
        f"{'command':34}  {'runs':>4}  {'median ms':>9}  {'min ms':>7}  {'max ms':>7}  "
        f"{'cpu ms':>7}",
    ]
    for row in report["rows"]:
        if row["problem"] is not None:
            lines.append(f"{row['command']:34}  {row['runs']:>4}  INVALID: {row['problem']}")
            continue
        lines.append(
            f"{row['command']:34}  {row['runs']:>4}  {row['median_ms']:>9.1f}  "
            f"{row['min_ms']:>7.1f}  {row['max_ms']:>7.1f}  {row['cpu_median_ms']:>7.1f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cli_startup",
        description="Wall time of `subagents --help`, `sessions` and `tree` in fresh processes, "
        "next to the floor `python -c pass`.",
    )
    parser.add_argument("--runs", type=int, default=10, help="timed runs per command (10)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    report = measure(args.runs)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 1 if any(row["problem"] is not None for row in report["rows"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
