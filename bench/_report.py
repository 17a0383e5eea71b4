"""Cells of the results table: statistics over runs, and the table and JSON renderings."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Literal

from ._harness import SCENARIOS, WorkerReport
from ._stored import STORED_SCENARIOS, TREES
from ._systems import System

__all__ = ["Cell", "render_json", "render_table"]

UNITS = {
    "S1": "us/delegation",
    "S1b": "us/run",
    "S2": "ms",
    "S3": "ms",
    **dict.fromkeys(STORED_SCENARIOS, "ms"),
}


def metric(scenario: str, wall_s: float, size: int) -> float:
    """The number docs/benchmarks.md reports: per delegation or per run for S1/S1b, else wall."""
    if scenario in ("S1", "S1b"):
        return wall_s / size * 1e6
    return wall_s * 1e3


@dataclass(slots=True)
class Cell:
    """One (system, scenario) pair: its runs, or why it has no number."""

    system: System
    scenario: str
    size: int
    reports: list[WorkerReport] = field(default_factory=list[WorkerReport])
    status: Literal["ok", "invalid", "n/a"] = "ok"
    reason: str = ""
    version: str = ""

    def add(self, report: WorkerReport) -> None:
        self.reports.append(report)
        self.version = report.version or self.version
        if not report.ok and self.status == "ok":
            self.status = "invalid"
            self.reason = "; ".join(report.problems) or "the run reported no result"

    def fail(self, status: Literal["invalid", "n/a"], reason: str) -> None:
        if self.status == "ok":
            self.status = status
            self.reason = reason

    @property
    def valid(self) -> bool:
        return self.status == "ok" and bool(self.reports)

    @property
    def values(self) -> list[float]:
        return [metric(self.scenario, r.wall_s, r.size) for r in self.reports]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def peak_rss_mib(self) -> float:
        return statistics.median(r.peak_rss_kib for r in self.reports) / 1024

    @property
    def full_collections(self) -> float:
        return statistics.median(r.full_collections for r in self.reports)

    @property
    def kib_per_child(self) -> float:
        return statistics.median(
            max(0, r.run_peak_rss_kib - r.start_rss_kib) / r.size for r in self.reports
        )


def _num(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _floors(cells: list[Cell]) -> dict[str, float]:
    return {c.scenario: c.median for c in cells if c.system.key == "asyncio" and c.valid}


def render_table(cells: list[Cell], floors: list[Cell], *, title: str) -> str:
    """An aligned text table: one row per (scenario, system)."""
    floor = _floors(floors)
    header = [
        "scenario",
        "system",
        "unit",
        "median",
        "min",
        "max",
        "x floor",
        "peak RSS MiB",
        "KiB/child",
        "full GCs",
    ]
    rows: list[list[str]] = []
    notes: dict[tuple[str, str, str], list[str]] = {}  # (system, mark, reason) -> scenarios
    for cell in cells:
        name = f"{cell.scenario} ({_size_label(cell)})"
        if not cell.valid:
            mark = "n/a" if cell.status == "n/a" else "INVALID"
            notes.setdefault((cell.system.label, mark, cell.reason), []).append(cell.scenario)
            rows.append(
                [name, cell.system.label, UNITS[cell.scenario], mark, "", "", "", "", "", ""]
            )
            continue
        values = cell.values
        ratio = floor.get(cell.scenario)
        rows.append(
            [
                name,
                cell.system.label,
                UNITS[cell.scenario],
                _num(cell.median),
                _num(min(values)),
                _num(max(values)),
                f"{cell.median / ratio:,.1f}" if ratio else "",
                f"{cell.peak_rss_mib:.1f}",
                f"{cell.kib_per_child:.1f}" if cell.scenario == "S3" else "",
                f"{cell.full_collections:g}",
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    numeric = {3, 4, 5, 6, 7, 8, 9}

    def line(row: list[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        return "  ".join(parts).rstrip()

    out = [title, line(header), line(["-" * w for w in widths])]
    previous = ""
    for row in rows:
        if previous and row[0] != previous:
            out.append("")
        previous = row[0]
        out.append(line(row))
    for (system, mark, reason), scenarios in notes.items():
        out.append(f"  {mark}: {system} ({', '.join(scenarios)}): {reason}")
    shown = dict.fromkeys(c.scenario for c in cells)
    out.extend(f"  {n}: {STORED_SCENARIOS[n].title}" for n in shown if n in STORED_SCENARIOS)
    return "\n".join(out)


def _size_label(cell: Cell) -> str:
    if cell.scenario in STORED_SCENARIOS:
        unit = TREES[STORED_SCENARIOS[cell.scenario].tree].unit
        return f"{cell.size:,} {unit}"
    scenario = SCENARIOS[cell.scenario]
    match scenario.shape:
        case "sequential":
            return f"N={cell.size}"
        case "runs":
            return f"{cell.size} runs"
        case "fanout":
            sleep = f", {scenario.child_sleep * 1000:.0f} ms" if scenario.child_sleep else ""
            return f"K={cell.size}{sleep}"


def render_json(cells: list[Cell], floors: list[Cell], meta: dict[str, Any]) -> dict[str, Any]:
    floor = _floors(floors)
    results: list[dict[str, Any]] = []
    for cell in cells:
        entry: dict[str, Any] = {
            "system": cell.system.key,
            "label": cell.system.label,
            "version": cell.version,
            "scenario": cell.scenario,
            "size": cell.size,
            "unit": UNITS[cell.scenario],
            "status": cell.status if cell.reports or cell.status != "ok" else "n/a",
            "reason": cell.reason,
        }
        if cell.valid:
            ratio = floor.get(cell.scenario)
            entry |= {
                "values": cell.values,
                "median": cell.median,
                "min": min(cell.values),
                "max": max(cell.values),
                "vs_floor": cell.median / ratio if ratio else None,
                "peak_rss_mib": cell.peak_rss_mib,
                "kib_per_child": cell.kib_per_child,
                "full_collections": cell.full_collections,
                "runs": [
                    {
                        "wall_s": r.wall_s,
                        "peak_rss_kib": r.peak_rss_kib,
                        "start_rss_kib": r.start_rss_kib,
                        "run_peak_rss_kib": r.run_peak_rss_kib,
                        "full_collections": r.full_collections,
                    }
                    for r in cell.reports
                ],
            }
        results.append(entry)
    return {**meta, "results": results}
