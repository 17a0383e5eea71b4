"""The benchmark harness counts the collector's full collections of the measured part.

Counted, not timed: `gc.collect()` is one full collection, `gc.collect(0)` is none.
"""

from __future__ import annotations

import gc

from bench._harness import Stopwatch, WorkerReport
from bench._report import Cell, render_json, render_table
from bench._systems import core_systems


def test_the_stopwatch_counts_full_collections_inside_it_only() -> None:
    gc.collect()  # before it: not counted
    with Stopwatch() as watch:  # it collects once itself, before it starts counting
        gc.collect(0)
        gc.collect(1)
        gc.collect()
        gc.collect(2)
    gc.collect()  # after it: not counted
    assert watch.full_collections == 2
    assert watch._collected not in gc.callbacks


def test_the_table_and_the_json_show_the_median_count() -> None:
    ours, floor = core_systems()
    cells: list[Cell] = []
    for system, counts in ((ours, (1, 3, 2)), (floor, (0, 0, 0))):
        cell = Cell(system, "S3", 2000)
        for count in counts:
            cell.add(
                WorkerReport(
                    system.key, "S3", 2000, ok=True, problems=[], wall_s=0.5, full_collections=count
                )
            )
        cells.append(cell)
    table = render_table(cells, cells, title="t").splitlines()
    header = next(line for line in table if line.startswith("scenario"))
    assert header.rstrip().endswith("full GCs")
    rows = [line for line in table if line.startswith("S3")]
    assert [row.split()[-1] for row in rows] == ["2", "0"]
    results = render_json(cells, cells, {})["results"]
    assert [r["full_collections"] for r in results] == [2, 0]
    assert [run["full_collections"] for run in results[0]["runs"]] == [1, 3, 2]
