"""`bench/stream_overhead.py` runs and prints its rows (a smoke run: no time is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_quick_stream_overhead_run_prints_a_valid_row_per_scenario() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.stream_overhead", "--quick"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| S")]
    assert [row.split(",")[0] for row in rows] == ["| S2", "| S3"]
    for row in rows:
        assert "INVALID" not in row
        assert re.search(r"\| \d+\.\d\dx \|$", row), row
