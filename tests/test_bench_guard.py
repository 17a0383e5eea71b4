"""The benchmark's regression guard compares ratios to the floor with a committed baseline.

No time is asserted: the unit tests build cells from chosen wall times, and the smoke run
checks the exit statuses against baselines doctored to be far better or far worse than any
real run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench._guard import check_baseline, figures, write_baseline
from bench._harness import WorkerReport
from bench._report import Cell
from bench._systems import core_systems

REPO = Path(__file__).resolve().parents[1]


def cells(subagents_s: float, floor_s: float | None, scenario: str = "S1") -> list[Cell]:
    ours, floor = core_systems()
    out: list[Cell] = []
    for system, wall in ((ours, subagents_s), (floor, floor_s)):
        if wall is None:
            continue
        cell = Cell(system, scenario, 200)
        cell.add(WorkerReport(system.key, scenario, 200, ok=True, problems=[], wall_s=wall))
        out.append(cell)
    return out


def test_the_figure_is_the_ratio_to_the_floor_of_the_same_run(tmp_path: Path) -> None:
    assert figures(cells(0.02, 0.001))["S1"]["figure"] == pytest.approx(20.0)
    baseline = tmp_path / "baseline.json"
    write_baseline(baseline, cells(0.02, 0.001), {"machine": "test"})
    # Twice as slow on a machine twice as slow: the ratio is the same, nothing regressed.
    assert check_baseline(baseline, cells(0.04, 0.002), ["S1"], tolerance=1.5) == []
    # Twice as slow against the same floor: regressed, and the message says by how much.
    (regression,) = check_baseline(baseline, cells(0.04, 0.001), ["S1"], tolerance=1.5)
    assert regression.describe(1.5) == (
        "S1: x floor 40.00 against a baseline of 20.00 (2.00x; tolerance 1.50x)"
    )


def test_a_scenario_without_a_floor_compares_its_median(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    write_baseline(baseline, cells(0.010, None, "S5b"), {})
    assert check_baseline(baseline, cells(0.014, None, "S5b"), ["S5b"], tolerance=1.5) == []
    (regression,) = check_baseline(baseline, cells(0.016, None, "S5b"), ["S5b"], tolerance=1.5)
    assert regression.basis == "ms"


def test_a_row_that_has_no_valid_figure_now_is_a_regression(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    write_baseline(baseline, cells(0.02, 0.001), {})
    broken = cells(0.02, 0.001)
    broken[0].fail("invalid", "a lead run ended error")
    (regression,) = check_baseline(baseline, broken, ["S1"], tolerance=1.5)
    assert regression.now is None
    assert "no valid figure" in regression.describe(1.5)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "is not JSON"),
        ('{"version": 99, "scenarios": {}}', "is not a version-1 baseline"),
        ('{"version": 1}', "has no `scenarios` object"),
    ],
)
def test_a_bad_baseline_is_one_clear_error(tmp_path: Path, content: str, message: str) -> None:
    baseline = tmp_path / "baseline.json"
    baseline.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        check_baseline(baseline, cells(0.02, 0.001), ["S1"], tolerance=1.5)


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--scenarios", "S1", "--runs", "1", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_guard_passes_a_generous_baseline_and_fails_a_doctored_one(tmp_path: Path) -> None:
    saved = tmp_path / "saved.json"
    done = bench("--save-baseline", str(saved))
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert data["scenarios"]["S1"]["basis"] == "x floor"
    # No real run is a million times slower than the one it was saved from...
    data["scenarios"]["S1"]["figure"] *= 1_000_000
    generous = tmp_path / "generous.json"
    generous.write_text(json.dumps(data), encoding="utf-8")
    done = bench("--baseline", str(generous))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no regression against" in done.stderr
    # ...nor a million times faster.
    data["scenarios"]["S1"]["figure"] /= 1_000_000_000_000
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps(data), encoding="utf-8")
    done = bench("--baseline", str(strict))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "REGRESSION S1: x floor" in done.stderr


def test_the_guard_refuses_a_missing_baseline_or_a_tolerance_below_one(tmp_path: Path) -> None:
    done = bench("--baseline", str(tmp_path / "absent.json"))
    assert done.returncode == 2
    assert "no such file" in done.stderr
    done = bench("--tolerance", "0.5")
    assert done.returncode == 2
    assert "--tolerance must be at least 1" in done.stderr
