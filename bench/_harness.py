"""The worker side of every benchmark process: scenarios, validation, timing, peak RSS.

Standard library only: the peer drivers under `bench/peers/` import this module from their
own virtual environments, where neither `subagents` nor the main venv's packages exist.

A worker process runs one (system, scenario) pair: one small warm-up, then one measured run,
then prints one JSON line (`WorkerReport`) on stdout. The parent (`bench/_cli.py`) starts a
fresh process for every measured run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import sys
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any, Literal, Self

__all__ = [
    "CHILD_ANSWER",
    "CHILD_PROMPT",
    "LEAD_ANSWER",
    "LEAD_PROMPT",
    "SCENARIOS",
    "Driver",
    "Expected",
    "Observed",
    "RunSpec",
    "Scenario",
    "Stopwatch",
    "TOOL_DESCRIPTION",
    "WorkerReport",
    "expected_for",
    "lead_turns",
    "validate",
    "worker_main",
]

CHILD_ANSWER = "child-answer"
"""What every child answers."""
LEAD_ANSWER = "lead-done"
"""The lead's fixed final text."""
LEAD_PROMPT = "Delegate the work."
CHILD_PROMPT = "Do the work."
TOOL_DESCRIPTION = "do the work"

Shape = Literal["sequential", "runs", "fanout"]


@dataclass(frozen=True, slots=True)
class Scenario:
    """One scenario of docs/benchmarks.md and the sizes it runs at."""

    name: str
    shape: Shape
    """`sequential`: one lead run, one delegation per lead turn; `runs`: separate lead runs
    delegating once each; `fanout`: one lead response with `size` parallel delegations."""
    size: int
    quick_size: int
    warm_size: int
    child_sleep: float = 0.0
    """Seconds every child model call waits before answering."""
    title: str = ""


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("S1", "sequential", 200, 20, 5, title="sequential delegation"),
        Scenario("S1b", "runs", 200, 20, 5, title="many short runs"),
        Scenario("S2", "fanout", 100, 10, 5, title="fan-out"),
        Scenario("S3", "fanout", 2000, 100, 20, child_sleep=0.05, title="scale, 50 ms children"),
    )
}


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What a driver runs once: a scenario shape at a size."""

    scenario: str
    shape: Shape
    size: int
    child_sleep: float


def lead_turns(spec: RunSpec) -> list[int]:
    """The lead model's responses across all lead runs of a run, in order.

    Each entry is how many parallel delegation calls that response holds; 0 is the final
    text. A fake lead model can answer its i-th call from entry i.
    """
    match spec.shape:
        case "sequential":
            return [1] * spec.size + [0]
        case "runs":
            return [1, 0] * spec.size
        case "fanout":
            return [spec.size, 0]


@dataclass(frozen=True, slots=True)
class Expected:
    lead_calls: int
    child_calls: int
    child_results: int


def expected_for(spec: RunSpec) -> Expected:
    """The exact counts docs/benchmarks.md states for a scenario at `spec.size`."""
    n = spec.size
    match spec.shape:
        case "sequential":
            return Expected(lead_calls=n + 1, child_calls=n, child_results=n)
        case "runs":
            return Expected(lead_calls=2 * n, child_calls=n, child_results=n)
        case "fanout":
            return Expected(lead_calls=2, child_calls=n, child_results=n)


def _maxrss_kib() -> int:
    """The process's peak resident set so far (`ru_maxrss`, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _status_kib(field: str) -> int | None:
    """A `/proc/self/status` memory field (`VmRSS`, `VmHWM`) in KiB, or None off Linux."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _reset_peak() -> bool:
    """Reset the kernel's high-water mark of this process's RSS to its current RSS.

    Linux >= 4.0 (`echo 5 > /proc/self/clear_refs`); False where that is not possible.
    """
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return True


class Stopwatch:
    """Times the measured part of a run and reads memory the moment it ends.

    Memory is read before the driver counts anything, so reading a store back for validation
    never shows up in the reported numbers. Two peaks are kept:

    - `peak_rss_kib`: the process's peak resident set (`resource.getrusage`'s `ru_maxrss`),
      imports and warm-up included: what the process needed.
    - `run_peak_rss_kib`: the peak during the measured part alone (the high-water mark is
      reset when it starts), so that `run_peak_rss_kib - start_rss_kib` is what the run
      added, not an earlier peak of the imports. Without `/proc` it falls back to
      `ru_maxrss`.

    It also counts the garbage collector's full (generation-2) collections during the
    measured part: at scale they are a large share of the time, and a few objects more per
    child can add one (docs/benchmarks.md §5), which the count shows without timing noise.
    """

    def __init__(self) -> None:
        self.wall_s = 0.0
        self.start_rss_kib = 0
        """Resident memory when the measured part began (after setup and a collection)."""
        self.peak_rss_kib = 0
        self.run_peak_rss_kib = 0
        self._peak_before = 0
        self._reset = False
        self._start = 0.0
        self.full_collections = 0

    def __enter__(self) -> Self:
        gc.collect()
        self._peak_before = _maxrss_kib()
        self._reset = _reset_peak()
        current = _status_kib("VmRSS")
        self.start_rss_kib = current if current is not None else self._peak_before
        gc.callbacks.append(self._collected)
        self._start = time.perf_counter()
        return self

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            self.full_collections += 1

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.wall_s = time.perf_counter() - self._start
        gc.callbacks.remove(self._collected)
        peak = _maxrss_kib()
        run_peak = _status_kib("VmHWM") if self._reset else None
        self.peak_rss_kib = max(self._peak_before, peak)
        self.run_peak_rss_kib = run_peak if run_peak is not None else peak


@dataclass(slots=True)
class Observed:
    """What a driver saw in one run, counted from the system itself after the timed part."""

    watch: Stopwatch
    """The timed part (the lead run or runs, nothing before or after)."""
    lead_calls: int
    child_calls: int
    child_results: list[str]
    """Every child result the lead (or leads) received, as text."""
    lead_outputs: list[str]
    """The final text of every lead run."""
    problems: list[str] = field(default_factory=list[str])
    """Anything else the driver found wrong (a failed turn, an unconsumed script...)."""


def validate(spec: RunSpec, observed: Observed) -> list[str]:
    """Every way `observed` differs from what the scenario requires; empty when valid."""
    want = expected_for(spec)
    problems = list(observed.problems)
    if observed.lead_calls != want.lead_calls:
        problems.append(f"lead model calls {observed.lead_calls}, expected {want.lead_calls}")
    if observed.child_calls != want.child_calls:
        problems.append(f"child model calls {observed.child_calls}, expected {want.child_calls}")
    results = observed.child_results
    if len(results) != want.child_results:
        problems.append(
            f"lead received {len(results)} child results, expected {want.child_results}"
        )
    wrong = [r for r in results if r != CHILD_ANSWER]
    if wrong:
        problems.append(f"{len(wrong)} child results are not {CHILD_ANSWER!r}, e.g. {wrong[0]!r}")
    leads = 1 if spec.shape != "runs" else spec.size
    if len(observed.lead_outputs) != leads:
        problems.append(f"{len(observed.lead_outputs)} lead runs finished, expected {leads}")
    bad = [o for o in observed.lead_outputs if o != LEAD_ANSWER]
    if bad:
        problems.append(f"{len(bad)} lead runs did not end with {LEAD_ANSWER!r}, e.g. {bad[0]!r}")
    if observed.watch.wall_s <= 0:
        problems.append("the driver reported no wall time")
    return problems


@dataclass(slots=True)
class WorkerReport:
    """The one JSON line a worker prints."""

    system: str
    scenario: str
    size: int
    ok: bool
    problems: list[str]
    wall_s: float = 0.0
    peak_rss_kib: int = 0
    """`ru_maxrss` (KiB on Linux) the moment the measured part ended."""
    start_rss_kib: int = 0
    """Resident memory (KiB) when the measured part began."""
    run_peak_rss_kib: int = 0
    """Peak resident memory (KiB) during the measured part; growth = this - start."""
    full_collections: int = 0
    """Full (generation-2) garbage collections during the measured part."""
    version: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


Driver = Callable[[RunSpec], Coroutine[Any, Any, Observed]]
"""One run of a scenario: builds everything untimed, times only the lead run(s), counts after."""


def worker_main(
    system: str, driver: Driver, *, version: str = "", argv: Sequence[str] | None = None
) -> int:
    """Parse the worker arguments, warm up, measure once, print a `WorkerReport` line."""
    parser = argparse.ArgumentParser(description=f"one benchmark run of {system}")
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--warm-size", type=int, required=True)
    args = parser.parse_args(argv)
    scenario = SCENARIOS[args.scenario]

    def spec(size: int) -> RunSpec:
        return RunSpec(scenario.name, scenario.shape, size, scenario.child_sleep)

    report = WorkerReport(system, scenario.name, args.size, ok=False, problems=[], version=version)
    try:
        if args.warm_size > 0:
            warm_spec = spec(args.warm_size)
            warm = asyncio.run(driver(warm_spec))
            problems = validate(warm_spec, warm)
            if problems:
                report.problems = [f"warm-up: {p}" for p in problems]
                print(report.to_json())
                return 0
        measured_spec = spec(args.size)
        observed = asyncio.run(driver(measured_spec))
        report.peak_rss_kib = observed.watch.peak_rss_kib
        report.start_rss_kib = observed.watch.start_rss_kib
        report.run_peak_rss_kib = observed.watch.run_peak_rss_kib
        report.wall_s = observed.watch.wall_s
        report.full_collections = observed.watch.full_collections
        report.problems = validate(measured_spec, observed)
        report.ok = not report.problems
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        report.problems = [f"{type(exc).__name__}: {exc}"]
    print(report.to_json())
    return 0
