"""`subagents` on the scripted model with the durable SQLite store (a fresh file per run).

Run as `python -m bench.drive_subagents --scenario S1 --size 200 --warm-size 5` (the parent
does this in a fresh process for every measured run). The lead delegates through the
`subagent` tool in the foreground; children get the default names agent-1, agent-2... and
the script's `"*"` entry answers each of them with `child-answer`.

With `--stream` the lead run is consumed as `runtime.stream(...)` instead of `runtime.run(...)`,
and every event is serialized as a `--stream` line (`subagents.cli._stream`) and written, one
flushed write a line, to /dev/null, as the command line writes them to its stdout
(`python -m bench.stream_overhead` compares the two).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import TextIO

from subagents import (
    AgentReasoningDelta,
    AgentTextDelta,
    DelegationOptions,
    RunFinished,
    RunResult,
    Runtime,
    SessionEventPosted,
)
from subagents.models import ScriptedCall, ScriptedModel, ScriptedResponse
from subagents.sessions import (
    AssistantMessageEvent,
    ModelErrorEvent,
    SessionHeader,
    SqliteEventStore,
    ToolResultEvent,
)

from ._harness import (
    CHILD_ANSWER,
    CHILD_PROMPT,
    LEAD_ANSWER,
    LEAD_PROMPT,
    TOOL_DESCRIPTION,
    Observed,
    RunSpec,
    Stopwatch,
    worker_main,
)

TENANT = "default"
CALL = ScriptedCall("subagent", {"description": TOOL_DESCRIPTION, "prompt": CHILD_PROMPT})
# Background delegation is not used, but the benchmarks raise the per-owner cap anyway
# (docs/design.md §7.5) so that no limit of the runtime shapes the numbers.
DELEGATION = DelegationOptions(task_capacity=100_000)


def lead_script(spec: RunSpec) -> list[ScriptedResponse]:
    """The responses of one lead run."""
    final = ScriptedResponse(text=LEAD_ANSWER)
    match spec.shape:
        case "sequential":
            return [ScriptedResponse(calls=(CALL,)) for _ in range(spec.size)] + [final]
        case "runs":
            return [ScriptedResponse(calls=(CALL,)), final]
        case "fanout":
            # One response, `size` parallel calls (ids call_0_0, call_0_1, ...).
            return [ScriptedResponse(calls=(CALL,) * spec.size), final]


def model_for(spec: RunSpec) -> ScriptedModel:
    child = ScriptedResponse(text=CHILD_ANSWER, sleep=spec.child_sleep)
    # No clock argument: the scripted model sleeps on the real SystemClock.
    return ScriptedModel({"lead": lead_script(spec), "*": [child]})


class LineSink:
    """Where a streamed run's lines go: /dev/null, one flushed write per line, counted."""

    def __init__(self, out: TextIO) -> None:
        # The command line's line format, imported only for a streamed run: a plain run's
        # process then holds none of the CLI's modules, some 4,300 objects that S3's full
        # collection would walk and that a program using the runtime does not import.
        from subagents.cli import _stream

        self.lines = _stream
        self.out = out
        self.events = 0
        self.deltas = 0
        self.kinds: Counter[str] = Counter()

    def write(self, line: dict[str, object]) -> None:
        self.out.write(self.lines.line_text(line) + "\n")
        self.out.flush()


async def streamed_run(rt: Runtime, sink: LineSink) -> RunResult:
    """`rt.run(LEAD_PROMPT)` consumed as a stream, each event written as a `--stream` line."""
    finished: RunResult | None = None
    async for event in rt.stream(LEAD_PROMPT):
        match event:
            case SessionEventPosted(agent_id=session_id, name=name, record=record):
                sink.events += 1
                sink.kinds[record.kind] += 1
                sink.write(sink.lines.event_line(name, session_id, record))
            case AgentTextDelta() | AgentReasoningDelta():
                sink.deltas += 1
                kind = "text" if isinstance(event, AgentTextDelta) else "reasoning"
                sink.write(
                    sink.lines.delta_line(
                        event.name,
                        event.agent_id,
                        turn=event.turn,
                        step=event.step,
                        kind=kind,
                        text=event.text,
                    )
                )
            case RunFinished(result=result):
                finished = result
                sink.write(
                    sink.lines.result_line(
                        {
                            "session_id": result.session_id,
                            "stop_reason": result.stop_reason,
                            "output": result.output,
                        }
                    )
                )
    assert finished is not None, "the stream ended without RunFinished"
    return finished


async def run(spec: RunSpec, *, stream: bool = False) -> Observed:
    """One run: a fresh database file, an open runtime, then the timed lead run(s)."""
    model = model_for(spec)
    with (
        tempfile.TemporaryDirectory(prefix="subagents-bench-") as tmp,
        open(os.devnull, "w", encoding="utf-8") as devnull,  # noqa: ASYNC230 (as the CLI writes)
    ):
        db = Path(tmp) / "bench.db"
        outputs: list[str] = []
        problems: list[str] = []
        sink = LineSink(devnull) if stream else None
        async with Runtime(model=model, store=db, delegation=DELEGATION) as rt:
            runs = spec.size if spec.shape == "runs" else 1
            with Stopwatch() as watch:
                for _ in range(runs):
                    lead = rt.run(LEAD_PROMPT) if sink is None else streamed_run(rt, sink)
                    result = await lead
                    outputs.append(result.output)
                    if result.stop_reason != "completed":
                        problems.append(f"a lead run ended {result.stop_reason}")
                # `run` already returns with its writes committed; this barrier keeps "every
                # event durable inside the timed part" true whatever `run` does internally.
                await rt.store.flush()
        observed = await count_from_store(db, watch, outputs, problems)
        if sink is not None:
            await check_streamed(db, sink, observed)
    check_consumption(spec, model, observed)
    return observed


async def check_streamed(db: Path, sink: LineSink, observed: Observed) -> None:
    """A streamed run must have written one line per stored record and one per model answer."""
    async with SqliteEventStore(db) as store:
        headers = await store.list_headers(tenant=TENANT, roots_only=False)
        records = [r for h in headers for r in await store.read(h.id, tenant=TENANT)]
    if sink.events != len(records):
        kinds = Counter(r.kind for r in records)
        kinds.subtract(sink.kinds)
        unseen = {kind: n for kind, n in kinds.items() if n}
        observed.problems.append(
            f"streamed {sink.events} records, the store holds {len(records)} "
            f"(stored minus streamed, by kind: {unseen})"
        )
    answers = sum(
        isinstance(r.event, AssistantMessageEvent) and bool(r.event.message.text) for r in records
    )
    if sink.deltas != answers:  # the scripted model sends each answer's text in one piece
        observed.problems.append(f"streamed {sink.deltas} deltas for {answers} answers with text")


async def count_from_store(
    db: Path, watch: Stopwatch, outputs: list[str], problems: list[str]
) -> Observed:
    """Count model calls and the lead's child results from the closed database, reopened."""
    observed = Observed(
        watch=watch,
        lead_calls=0,
        child_calls=0,
        child_results=[],
        lead_outputs=outputs,
        problems=problems,
    )
    async with SqliteEventStore(db) as store:
        headers: list[SessionHeader] = await store.list_headers(tenant=TENANT, roots_only=False)
        for header in headers:
            records = await store.read(header.id, tenant=TENANT)
            calls = sum(
                isinstance(r.event, AssistantMessageEvent | ModelErrorEvent) for r in records
            )
            if header.parent is None:
                observed.lead_calls += calls
                for record in records:
                    event = record.event
                    if isinstance(event, ToolResultEvent):
                        message = event.message
                        text = f"error: {message.content}" if message.is_error else message.content
                        observed.child_results.append(text)
            else:
                observed.child_calls += calls
    return observed


def check_consumption(spec: RunSpec, model: ScriptedModel, observed: Observed) -> None:
    """Cross-check the store's counts against what the scripted model handed out.

    The scripted model records, per agent full name, how many of its responses were consumed.
    """
    consumed: dict[str, int] = dict(model._consumed)  # no public accessor; checked by name
    lead = consumed.pop("lead", 0)
    children = Counter(consumed.values())
    want_lead = 2 if spec.shape == "runs" else len(lead_script(spec))
    want_children = {1: 1} if spec.shape == "runs" else {1: spec.size}
    if lead != want_lead:
        observed.problems.append(f"the script's lead consumed {lead} responses, not {want_lead}")
    if dict(children) != want_children:
        observed.problems.append(
            f"children consumed responses {dict(children)} (count: children), "
            f"expected {want_children}"
        )


async def run_streamed(spec: RunSpec) -> Observed:
    return await run(spec, stream=True)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--stream" in args:
        args.remove("--stream")
        return worker_main(
            "subagents --stream", run_streamed, version=version("subagents"), argv=args
        )
    return worker_main("subagents", run, version=version("subagents"), argv=args)


if __name__ == "__main__":
    raise SystemExit(main())
