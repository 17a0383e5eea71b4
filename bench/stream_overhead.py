"""`python -m bench.stream_overhead`: what streaming costs on S2 and S3.

Each measured run is a fresh `python -m bench.drive_subagents` process, as in `python -m bench`:
one with `runtime.run(...)`, one with `--stream`, which consumes `runtime.stream(...)` and
writes every event as a `--stream` line to /dev/null, one flushed write a line, as the
command line does. The two are interleaved run by run; the table gives the median, min and
max wall time of the lead run and the ratio of the medians. Both are validated as in
`python -m bench` (counts from the store), and the streamed run also wrote one line per stored
record and one delta per answer with text, or the row is `INVALID`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from ._cli import run_worker
from ._harness import SCENARIOS, WorkerReport

__all__ = ["main"]

STREAM_SCENARIOS = ("S2", "S3")
PLAIN = [sys.executable, "-m", "bench.drive_subagents"]
STREAMED = [*PLAIN, "--stream"]


@dataclass(slots=True)
class Row:
    """One scenario's runs of each mode, or why it has no numbers."""

    scenario: str
    size: int
    plain: list[float] = field(default_factory=list[float])
    streamed: list[float] = field(default_factory=list[float])
    problem: str = ""

    def add(self, outcome: WorkerReport | str, into: list[float], mode: str) -> None:
        if isinstance(outcome, str):
            self.problem = self.problem or f"{mode}: {outcome}"
        elif not outcome.ok:
            self.problem = self.problem or f"{mode}: {'; '.join(outcome.problems)}"
        else:
            into.append(outcome.wall_s * 1e3)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.stream_overhead",
        description="Time S2 and S3 with runtime.run and with runtime.stream (--stream lines).",
    )
    parser.add_argument("--quick", action="store_true", help="small K, 1 run (a smoke run)")
    parser.add_argument(
        "--runs", type=int, default=None, help="runs per mode and scenario (default 5; quick 1)"
    )
    args = parser.parse_args(argv)
    if args.runs is None:
        args.runs = 1 if args.quick else 5
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def measure(name: str, *, runs: int, quick: bool) -> Row:
    scenario = SCENARIOS[name]
    size = scenario.quick_size if quick else scenario.size
    row = Row(name, size)
    for run in range(1, runs + 1):
        for mode, command, into in (("run", PLAIN, row.plain), ("stream", STREAMED, row.streamed)):
            if row.problem:
                return row  # one invalid run voids the row
            outcome = run_worker(command, name, size, scenario.warm_size)
            row.add(outcome, into, mode)
            shown = (
                f"{outcome.wall_s * 1e3:,.1f} ms"
                if isinstance(outcome, WorkerReport) and outcome.ok
                else "INVALID"
            )
            print(f"[{name} run {run}/{runs}] {mode}: {shown}", file=sys.stderr)
    return row


def render(rows: list[Row], *, runs: int, quick: bool) -> str:
    lines = [
        "# stream overhead: subagents (SQLite, durable), scripted model; "
        f"{runs} run(s) per cell, each in a fresh process after one small warm-up"
        + ("; --quick sizes" if quick else ""),
        "",
        "| scenario | run ms (median, min-max) | stream ms (median, min-max) | stream / run |",
        "|---|---|---|---|",
    ]
    for row in rows:
        label = f"{row.scenario}, K={row.size}"
        if row.problem:
            lines.append(f"| {label} | INVALID | INVALID | {row.problem} |")
            continue
        plain, streamed = statistics.median(row.plain), statistics.median(row.streamed)
        lines.append(
            f"| {label} | {plain:,.1f} ({min(row.plain):,.1f}-{max(row.plain):,.1f}) "
            f"| {streamed:,.1f} ({min(row.streamed):,.1f}-{max(row.streamed):,.1f}) "
            f"| {streamed / plain:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows = [measure(name, runs=args.runs, quick=args.quick) for name in STREAM_SCENARIOS]
    print(render(rows, runs=args.runs, quick=args.quick))
    return 1 if any(row.problem for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
