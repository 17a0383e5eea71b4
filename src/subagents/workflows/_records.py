"""The `workflow` tool's durable session records (spec 1.6) and their invariant.

A run leaves four log-only kinds in the calling agent's log: `tool-workflow/run-start` once
`start()` returned, a `tool-workflow/agent-start` / `agent-end` pair per member (from the
engine's `workflow/agent-*` events, synthesized cancelled ends included), and
`tool-workflow/run-end` once the result is known and `dispose()` reached quiescence. The first
append that fails stops the run's recording with one warning and changes nothing else, so the
log holds nothing or a legal continuous prefix. `validate_workflow_records` is the invariant
such a log keeps; a run without its terminal records is legal.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias, cast

from ..sessions import (
    EventRecord,
    SessionEvent,
    ToolWorkflowAgentEnd,
    ToolWorkflowAgentStart,
    ToolWorkflowRunEnd,
    ToolWorkflowRunStart,
)
from ._host import render_exception
from ._protocol import SAFE_INTEGER
from ._reports import StopReason, WorkflowAgentEnded, WorkflowAgentStarted, WorkflowEnded

if TYPE_CHECKING:
    from ..core import Agent
    from ._reports import WorkflowEvent

__all__ = ["RunRecorder", "WorkflowRecord", "validate_workflow_records"]

log = logging.getLogger("subagents.workflows")

WorkflowRecord: TypeAlias = (
    ToolWorkflowRunStart | ToolWorkflowAgentStart | ToolWorkflowAgentEnd | ToolWorkflowRunEnd
)

_OUTCOMES = ("completed", "failed", "cancelled")
_STOP_REASONS = ("completed", "cancelled", "error")


def _kind(event: WorkflowRecord) -> str:
    return str(type(event).__struct_config__.tag)


class RunRecorder:
    """Writes one run's records to the calling agent's log (non-waiting appends, in order).

    `start()` writes run-start; `on_event` (an engine listener) writes the run's member
    records and notes its stop reason; `finish()`, once disposal finished, writes run-end.
    """

    def __init__(self, agent: Agent, *, run_id: str, name: str) -> None:
        self._agent = agent
        self._run_id = run_id
        self._name = name
        self._enabled = True
        self._stop_reason: StopReason | None = None
        self._finished = False

    def start(self) -> None:
        self._write(ToolWorkflowRunStart(run_id=self._run_id, name=self._name))

    def on_event(self, event: WorkflowEvent) -> None:
        if event.info.id != self._run_id:
            return
        match event:
            case WorkflowAgentStarted(agent=agent):
                self._write(
                    ToolWorkflowAgentStart(
                        run_id=self._run_id,
                        seq=agent.seq,
                        label=agent.label,
                        child_id=agent.child_id,
                        phase=agent.phase,
                    )
                )
            case WorkflowAgentEnded(agent=agent, outcome=outcome):
                self._write(
                    ToolWorkflowAgentEnd(run_id=self._run_id, seq=agent.seq, outcome=outcome)
                )
            case WorkflowEnded(stop_reason=stop_reason):
                self._stop_reason = stop_reason
            case _:
                pass

    def finish(self) -> None:
        """Write run-end (once), if the run's result is known; call it after disposal."""
        if self._finished or self._stop_reason is None:
            return
        self._finished = True
        self._write(ToolWorkflowRunEnd(run_id=self._run_id, stop_reason=self._stop_reason))

    def _write(self, event: WorkflowRecord) -> None:
        if not self._enabled:
            return
        try:
            self._agent.record(event)
        except Exception as exc:  # a record never changes the tool's result or its cleanup
            self._enabled = False
            log.warning(
                "tool-workflow: disabled durable record after %s append failed: %s",
                _kind(event),
                render_exception(exc),
            )


# -- the invariant ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Run:
    ended: bool = False
    started: set[int] = field(default_factory=set[int])
    finished: set[int] = field(default_factory=set[int])


def _seq_problem(kind: str, seq: int, run_id: str) -> str | None:
    if type(seq) is not int or not 1 <= seq <= SAFE_INTEGER:
        return f"{kind} seq must be a positive safe integer (got {seq!r}) in run {run_id}"
    return None


def _start_problems(event: ToolWorkflowAgentStart, run: _Run) -> list[str]:
    kind, run_id = _kind(event), event.run_id
    problems: list[str] = []
    if (problem := _seq_problem(kind, event.seq, run_id)) is not None:
        problems.append(problem)
    if not isinstance(cast("object", event.label), str):
        problems.append(f"{kind} label must be a string in run {run_id}")
    phase = cast("object", event.phase)
    if phase is not None and not isinstance(phase, str):
        problems.append(f"{kind} phase must be a string when present in run {run_id}")
    child_id = cast("object", event.child_id)
    if not isinstance(child_id, str) or not child_id:
        problems.append(f"{kind} child_id must be a non-empty string in run {run_id}")
    if problems:
        return problems
    if event.seq in run.started:
        return [f"{kind} repeated seq {event.seq} in run {run_id}"]
    run.started.add(event.seq)
    return []


def _end_problems(event: ToolWorkflowAgentEnd, run: _Run) -> list[str]:
    kind, run_id = _kind(event), event.run_id
    if event.outcome not in _OUTCOMES:
        return [f"{kind} carries unknown outcome {json.dumps(event.outcome)} in run {run_id}"]
    if (problem := _seq_problem(kind, event.seq, run_id)) is not None:
        return [problem]
    if event.seq in run.finished:
        return [f"{kind} repeated seq {event.seq} in run {run_id}"]
    if event.seq not in run.started:
        return [
            f"{kind} has no matching tool-workflow/agent-start for seq {event.seq} in run {run_id}"
        ]
    run.finished.add(event.seq)
    return []


def _run_end_problems(event: ToolWorkflowRunEnd, run: _Run) -> list[str]:
    kind, run_id = _kind(event), event.run_id
    if event.stop_reason not in _STOP_REASONS:
        return [
            f"{kind} carries unknown stop_reason {json.dumps(event.stop_reason)} in run {run_id}"
        ]
    run.ended = True
    open_seqs = sorted(run.started - run.finished)
    if open_seqs:
        listed = ", ".join(str(seq) for seq in open_seqs)
        return [f"{kind} leaves member seq {listed} open in run {run_id}"]
    return []


def _check(event: WorkflowRecord, runs: dict[str, _Run]) -> list[str]:
    kind = _kind(event)
    run_id = cast("object", event.run_id)
    if not isinstance(run_id, str) or not run_id:
        return [f"{kind} run_id must be a non-empty string"]
    run = runs.get(run_id)
    if isinstance(event, ToolWorkflowRunStart):
        if run is not None:
            return [f"{kind} repeated for run {run_id}"]
        name = cast("object", event.name)
        if not isinstance(name, str) or not name:
            return [f"{kind} name must be a non-empty string in run {run_id}"]
        runs[run_id] = _Run()
        return []
    if run is None:
        return [f"{kind} has no matching tool-workflow/run-start for run {run_id}"]
    if run.ended:
        return [f"{kind} appears after tool-workflow/run-end for run {run_id}"]
    match event:
        case ToolWorkflowAgentStart():
            return _start_problems(event, run)
        case ToolWorkflowAgentEnd():
            return _end_problems(event, run)
        case ToolWorkflowRunEnd():
            return _run_end_problems(event, run)


def validate_workflow_records(records: Iterable[EventRecord | SessionEvent]) -> list[str]:
    """Every breach of the `tool-workflow/*` record invariant in a log, in log order.

    Other kinds are ignored. A run's records must start with one run-start (non-empty
    `run_id` and `name`); member starts (positive safe `seq`, string `label` and `phase`,
    non-empty `child_id`) and ends (a known `outcome`) pair up once each while the run is
    open; run-end (a known `stop_reason`) closes the run and must leave no member open.
    A log that stops early (no member end or run-end yet) is legal. An empty list: no problem.
    """
    runs: dict[str, _Run] = {}
    problems: list[str] = []
    for item in records:
        event = item.event if isinstance(item, EventRecord) else item
        if isinstance(
            event,
            ToolWorkflowRunStart
            | ToolWorkflowAgentStart
            | ToolWorkflowAgentEnd
            | ToolWorkflowRunEnd,
        ):
            problems.extend(_check(event, runs))
    return problems
