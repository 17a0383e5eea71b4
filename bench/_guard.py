"""The regression guard: this run's `subagents` rows against a committed baseline.

A timed test would fail on a loaded machine and pass on a fast one; a ratio to the floor
measured in the same run moves much less with load. So the guard compares, per scenario,
`subagents`' median divided by bare asyncio's median (for S4/S5, which the floor does not
run, the median itself) with the same figure in the baseline file, and fails when it grew by
more than the tolerance factor. Run by hand and before each release (bench/README.md); never
by the test suite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ._report import UNITS, Cell

__all__ = ["BASELINE_VERSION", "Regression", "check_baseline", "figures", "write_baseline"]

BASELINE_VERSION = 1
SYSTEM = "subagents"
FLOOR = "asyncio"


@dataclass(frozen=True, slots=True)
class Regression:
    """A scenario whose figure grew past the tolerance (or could not be compared)."""

    scenario: str
    baseline: float | None
    now: float | None
    basis: str

    def describe(self, tolerance: float) -> str:
        if self.baseline is None or self.now is None:
            return f"{self.scenario}: no valid figure to compare ({self.basis})"
        factor = self.now / self.baseline if self.baseline else float("inf")
        return (
            f"{self.scenario}: {self.basis} {self.now:,.2f} against a baseline of "
            f"{self.baseline:,.2f} ({factor:.2f}x; tolerance {tolerance:.2f}x)"
        )


def figures(cells: list[Cell]) -> dict[str, dict[str, Any]]:
    """Per scenario of `subagents`: the compared figure and what it is."""
    floors = {c.scenario: c.median for c in cells if c.system.key == FLOOR and c.valid}
    out: dict[str, dict[str, Any]] = {}
    for cell in cells:
        if cell.system.key != SYSTEM or not cell.valid:
            continue
        floor = floors.get(cell.scenario)
        if floor:
            out[cell.scenario] = {
                "figure": cell.median / floor,
                "basis": "x floor",
                "median": cell.median,
                "unit": UNITS[cell.scenario],
            }
        else:
            out[cell.scenario] = {
                "figure": cell.median,
                "basis": UNITS[cell.scenario],
                "median": cell.median,
                "unit": UNITS[cell.scenario],
            }
    return out


def write_baseline(path: Path, cells: list[Cell], meta: dict[str, Any]) -> None:
    """Save this run's figures as the baseline later runs are held to."""
    payload = {"version": BASELINE_VERSION, **meta, "scenarios": figures(cells)}
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def load_baseline(path: Path) -> dict[str, dict[str, Any]]:
    """The baseline's figures per scenario.

    Raises:
        ValueError: the file is missing, not JSON, or not a baseline of this version.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read the baseline {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"the baseline {path} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or cast("dict[str, Any]", data).get("version") != (
        BASELINE_VERSION
    ):
        raise ValueError(
            f"the baseline {path} is not a version-{BASELINE_VERSION} baseline; "
            "write a new one with --save-baseline"
        )
    scenarios = cast("dict[str, Any]", data).get("scenarios")
    if not isinstance(scenarios, dict):
        raise ValueError(f"the baseline {path} has no `scenarios` object")
    return cast("dict[str, dict[str, Any]]", scenarios)


def check_baseline(
    path: Path, cells: list[Cell], scenarios: list[str], *, tolerance: float
) -> list[Regression]:
    """Every scenario of this run that the baseline has and that got worse than `tolerance`.

    Raises:
        ValueError: the baseline cannot be read (see `load_baseline`).
    """
    baseline = load_baseline(path)
    now = figures(cells)
    regressions: list[Regression] = []
    for name in scenarios:
        before = baseline.get(name)
        if before is None:
            continue  # a scenario the baseline never measured holds nothing back
        basis = str(before.get("basis", ""))
        current = now.get(name)
        if current is None:
            regressions.append(Regression(name, float(before["figure"]), None, basis))
            continue
        if current["basis"] != basis:
            # The floor ran in one run and not in the other: the figures are not alike.
            regressions.append(Regression(name, None, None, f"basis {current['basis']} vs {basis}"))
            continue
        if float(current["figure"]) > float(before["figure"]) * tolerance:
            regressions.append(
                Regression(name, float(before["figure"]), float(current["figure"]), basis)
            )
    return regressions
