"""Crash safety: SIGKILL a real process mid-turn, reopen its SQLite file, resume to completion.

`crash_child.py` runs one lead turn (a response with a parallel-safe and an exclusive tool call,
then an answer) and prints every event the runtime acknowledged as durable. It dies by a real
SIGKILL at an exact point of the turn, sent by itself right after printing that event, or by this
test while it waits inside a tool. Then, in this process, every acknowledged event must be in the
file with its seq and kind, `resume_agent` must close the open turn with exactly the spec's
closers (core.md 2.8), and the session must run to a completed turn. No sleeps: the test reads
the child's stdout to EOF and waits for its exit.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from crash_child import PROMPT, SCRIPT, make_tools

from subagents.core import AgentRuntime, run_result
from subagents.errors import ErrorCode
from subagents.ids import SessionId
from subagents.messages import AssistantMessage, Message, ToolResultMessage
from subagents.sessions import (
    AssistantMessageEvent,
    EventRecord,
    RequestHeader,
    SqliteEventStore,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from subagents.sessions._projections import TranscriptProjection, fold
from subagents.sessions._repair import (
    CRASH_RETRY_SOURCE,
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN_TEXT,
)
from subagents.testing import ScriptedModel

CHILD = Path(__file__).with_name("crash_child.py")
WATCHDOG_SECONDS = 30.0
"""Only for a child that hangs instead of dying (a bug): kill it so the test fails, not hangs."""

INTERRUPTED = "turn/end interrupted"
LOOKUP_NOT_STARTED = "tool/result lookup TOOL_NOT_STARTED"
LOOKUP_UNKNOWN = "tool/result lookup TOOL_OUTCOME_UNKNOWN"
RECORD_NOT_STARTED = "tool/result record TOOL_NOT_STARTED"
RECORD_UNKNOWN = "tool/result record TOOL_OUTCOME_UNKNOWN"

REPAIR_TEXTS = {
    str(ErrorCode.TOOL_NOT_STARTED): TOOL_NOT_STARTED_TEXT,
    str(ErrorCode.TOOL_OUTCOME_UNKNOWN): TOOL_OUTCOME_UNKNOWN_TEXT,
}


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    point: tuple[str, ...]
    """The child's arguments that choose where it dies."""
    last: str
    """The kind of the last acknowledged event: proof that it died where intended."""
    closers: tuple[str, ...]
    """What the repair must append, in order (see `describe`)."""
    pending: bool = False
    """The prompt was accepted but not claimed: it is still in the inbox after the resume."""


def on_kind(kind: str) -> tuple[str, ...]:
    return ("--kill-on-kind", kind)


# The child's turn: spliced, turn/start, step/start, user/message, request/header,
# assistant/message (lookup + record), tool/call lookup, tool/result lookup, tool/call record,
# tool/result record, step/end, step/start, assistant/message (answer), step/end, turn/end.
CASES = [
    Case("inbox-splice", ("--kill-after-seq", "0"), "agent/inbox/spliced", (), pending=True),
    Case("turn-start", on_kind("turn/start"), "turn/start", (INTERRUPTED,), pending=True),
    Case(
        "step-start", on_kind("step/start"), "step/start", ("step/end", INTERRUPTED), pending=True
    ),
    Case("user-message", on_kind("user/message"), "user/message", ("step/end", INTERRUPTED)),
    Case("request-header", on_kind("request/header"), "request/header", ("step/end", INTERRUPTED)),
    Case(
        "tool-calls-answered",
        on_kind("assistant/message"),
        "assistant/message",
        (LOOKUP_NOT_STARTED, RECORD_NOT_STARTED, "step/end", INTERRUPTED),
    ),
    Case(
        "first-tool-call",
        on_kind("tool/call"),
        "tool/call",
        (LOOKUP_UNKNOWN, RECORD_NOT_STARTED, "step/end", INTERRUPTED),
    ),
    Case(
        "first-tool-result",
        on_kind("tool/result"),
        "tool/result",
        (RECORD_NOT_STARTED, "step/end", INTERRUPTED),
    ),
    Case(
        "second-tool-call",
        on_kind("tool/call:2"),
        "tool/call",
        (RECORD_UNKNOWN, "step/end", INTERRUPTED),
    ),
    Case("second-tool-result", on_kind("tool/result:2"), "tool/result", ("step/end", INTERRUPTED)),
    Case("first-step-end", on_kind("step/end"), "step/end", (INTERRUPTED,)),
    Case("second-step-start", on_kind("step/start:2"), "step/start", ("step/end", INTERRUPTED)),
    Case(
        "final-answer",
        on_kind("assistant/message:2"),
        "assistant/message",
        ("step/end", INTERRUPTED),
    ),
    Case("before-turn-end", on_kind("step/end:2"), "step/end", (INTERRUPTED,)),
    Case(
        "killed-from-outside-in-tool",
        ("--block-in-tool",),
        "tool/call",
        (RECORD_UNKNOWN, "step/end", INTERRUPTED),
    ),
]


@dataclass(frozen=True, slots=True)
class Killed:
    """What a child printed before it died."""

    session: SessionId
    acked: list[tuple[int, str]]


@dataclass(frozen=True, slots=True)
class Files:
    store: Path
    script: Path


@pytest.fixture
def files(tmp_path: Path) -> Files:
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT, encoding="utf-8")
    return Files(store=tmp_path / "state.db", script=script)


def run_child(files: Files, point: Sequence[str]) -> Killed:
    """Run the child until it dies (reading its stdout to EOF) and check it died by SIGKILL."""
    command = [
        sys.executable,
        str(CHILD),
        "--store",
        str(files.store),
        "--script",
        str(files.script),
        *point,
    ]
    stderr = files.store.with_name("child.stderr")
    lines: list[dict[str, Any]] = []
    with (
        stderr.open("wb") as errors,
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=errors, text=True, start_new_session=True
        ) as child,
    ):
        hung = threading.Event()
        watchdog = threading.Timer(WATCHDOG_SECONDS, lambda: (hung.set(), child.kill()))
        watchdog.start()
        try:
            assert child.stdout is not None
            for raw in child.stdout:
                line: dict[str, Any] = json.loads(raw)
                lines.append(line)
                if line.get("blocked"):
                    child.send_signal(signal.SIGKILL)
            code = child.wait()
        finally:
            watchdog.cancel()
    detail = f"child printed {lines}; stderr: {stderr.read_text(encoding='utf-8')}"
    assert not hung.is_set(), f"the child hung; {detail}"
    assert code == -signal.SIGKILL, detail
    assert lines, detail
    assert set(lines[0]) == {"session"}, detail
    acked = [(int(line["seq"]), str(line["kind"])) for line in lines if "seq" in line]
    assert not [line for line in lines[1:] if "seq" not in line and "blocked" not in line], detail
    assert [seq for seq, _ in acked] == list(range(len(acked))), detail
    return Killed(SessionId(lines[0]["session"]), acked)


async def read_log(path: Path, session: SessionId) -> list[EventRecord]:
    async with SqliteEventStore(path) as store:
        return await store.read(session, tenant="default")


def runtime(files: Files) -> AgentRuntime:
    """A runtime like the child's: the same script under the same name (it is in the request
    header) and the same tools, built inside the loop as a resuming program would."""
    model = ScriptedModel.from_yaml(SCRIPT, source=str(files.script))
    return AgentRuntime(model=model, store=files.store, tools=make_tools())


def expected_closers(records: Sequence[EventRecord]) -> tuple[str, ...]:
    """The spec's repair rule (core.md 2.8) restated independently, for the stored log.

    Writes are acknowledged in order but batched, so a child killed at an acknowledgement may
    have committed a few events submitted after it; the closers then follow what is stored.
    """
    open_turn = False
    step_open = False
    for record in records:
        match record.event:
            case TurnStart():
                open_turn, step_open = True, False
            case TurnEnd():
                open_turn = False
            case StepStart():
                step_open = True
            case StepEnd():
                step_open = False
            case _:
                pass
    if not open_turn:
        return ()
    if not step_open:
        return (INTERRUPTED,)
    return (*_unanswered(records), "step/end", INTERRUPTED)


def _unanswered(records: Sequence[EventRecord]) -> list[str]:
    """The open step's tool calls without a result, as repair results."""
    start = max(i for i, r in enumerate(records) if isinstance(r.event, StepStart))
    calls: list[tuple[str, str]] = []
    started: set[str] = set()
    answered: set[str] = set()
    for record in records[start:]:
        match record.event:
            case AssistantMessageEvent(message=message):
                calls = [(c.id, c.name) for c in message.tool_calls]
            case ToolCallEvent(call_id=call_id):
                started.add(call_id)
            case ToolResultEvent(message=message):
                answered.add(message.call_id)
            case _:
                pass
    unknown, not_started = ErrorCode.TOOL_OUTCOME_UNKNOWN, ErrorCode.TOOL_NOT_STARTED
    return [
        f"tool/result {name} {unknown if call_id in started else not_started}"
        for call_id, name in calls
        if call_id not in answered
    ]


def describe(record: EventRecord) -> str:
    match record.event:
        case ToolResultEvent(message=message, code=code):
            return f"tool/result {message.name} {code}"
        case TurnEnd(reason=reason):
            return f"turn/end {reason}"
        case _:
            return record.kind


def check_closers(closers: Sequence[EventRecord], turn: int, step: int | None) -> None:
    """The repair's events belong to the open turn and step and carry the spec's exact texts."""
    for record in closers:
        match record.event:
            case ToolResultEvent(message=message, code=code) as event:
                assert (event.turn, event.step) == (turn, step)
                assert message.is_error
                assert code is not None
                assert message.content == REPAIR_TEXTS[code]
            case StepEnd() as event:
                assert (event.turn, event.step) == (turn, step)
            case TurnEnd() as event:
                assert event.turn == turn
            case _:
                pytest.fail(f"unexpected closer {record}")


def open_turn_and_step(records: Sequence[EventRecord]) -> tuple[int, int | None]:
    turn, step = 0, None
    for record in records:
        match record.event:
            case TurnStart(turn=n):
                turn = n
            case StepStart(step=n):
                step = n
            case StepEnd():
                step = None
            case _:
                pass
    return turn, step


def assert_well_formed(records: Sequence[EventRecord]) -> None:
    """Seqs run from 0; turns and steps nest and close; every tool call has one result."""
    assert [r.seq for r in records] == list(range(len(records)))
    turn: int | None = None
    step: int | None = None
    turns: list[int] = []
    calls: dict[str, str] = {}
    started: Counter[str] = Counter()
    answered: Counter[str] = Counter()
    for record in records:
        match record.event:
            case TurnStart(turn=n):
                assert turn is None, record
                turn = n
                turns.append(n)
            case TurnEnd(turn=n):
                assert (n, step) == (turn, None), record
                turn = None
            case StepStart(turn=n, step=s):
                assert (n, step) == (turn, None), record
                step = s
            case StepEnd(turn=n, step=s):
                assert (n, s) == (turn, step), record
                step = None
            case AssistantMessageEvent(message=message):
                assert step is not None, record
                for call in message.tool_calls:
                    assert call.id not in calls, record
                    calls[call.id] = call.name
            case ToolCallEvent(call_id=call_id, name=name):
                assert calls.get(call_id) == name, record
                started[call_id] += 1
            case ToolResultEvent(message=message):
                assert calls.get(message.call_id) == message.name, record
                answered[message.call_id] += 1
            case _:
                pass
    assert turn is None
    assert turns == list(range(1, len(turns) + 1))
    assert answered == Counter(calls.keys())  # every call answered exactly once
    assert max(started.values(), default=1) == 1
    assert_answered(list(fold(TranscriptProjection(), records)))


def assert_answered(transcript: Sequence[Message]) -> None:
    """In the model's transcript each tool-calling message is followed by one result per call."""
    for index, message in enumerate(transcript):
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            continue
        results: list[str] = []
        for later in transcript[index + 1 :]:
            if not isinstance(later, ToolResultMessage):
                break
            results.append(later.call_id)
        assert results == [call.id for call in message.tool_calls], transcript


def last_turn_end(records: Sequence[EventRecord]) -> TurnEnd:
    ends = [r.event for r in records if isinstance(r.event, TurnEnd)]
    assert ends
    return ends[-1]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_sigkill_mid_turn_keeps_acknowledged_events_and_resumes(
    files: Files, case: Case
) -> None:
    killed = await asyncio.to_thread(run_child, files, case.point)
    assert killed.acked[-1][1] == case.last, killed.acked

    stored = await read_log(files.store, killed.session)
    assert [(r.seq, r.kind) for r in stored[: len(killed.acked)]] == killed.acked
    open_turn, open_step = open_turn_and_step(stored)

    if len(stored) == len(killed.acked):  # nothing committed past the kill point
        assert expected_closers(stored) == case.closers
    pending = not any(isinstance(r.event, UserMessageEvent) for r in stored)
    if len(stored) == len(killed.acked):
        assert pending == case.pending

    # A turn cut off after it entered the prompt is run again (its re-run queued by repair).
    retried = bool(expected_closers(stored)) and not pending
    async with runtime(files) as rt:
        agent = await rt.resume_agent(killed.session)
        closers = agent.session.records[len(stored) :]
        expected = expected_closers(stored) + (("agent/inbox/spliced",) if retried else ())
        assert tuple(describe(r) for r in closers) == expected
        check_closers(closers[: len(expected_closers(stored))], open_turn, open_step)
        repaired = agent.session.next_seq
        assert [r.kind for r in await read_log(files.store, killed.session)] == [
            r.kind for r in agent.session.records
        ]  # the repair is durable before anything runs

        if pending or retried:  # the prompt, or the re-run of its cut turn, runs now
            assert agent.wake()
            await agent.when_idle()
            woken = agent.session.records[repaired:]
            entered = [r.event.message for r in woken if isinstance(r.event, UserMessageEvent)]
            assert len(entered) == 1
            if pending:
                assert entered[0].text == PROMPT
            else:
                assert entered[0].source == CRASH_RETRY_SOURCE
                assert "cut off" in entered[0].text
            result = run_result(agent.id, woken)
            assert (result.stop_reason, result.output) == ("completed", "Both tools ran.")
        else:
            assert not agent.wake()

        result = await rt.run("Finish up.", agent=agent)
        assert result.ok, result
        assert result.output
        final = list(agent.session.records)
        assert agent.transcript == list(fold(TranscriptProjection(), final))

    resumed = final[len(stored) + len(closers) :]
    headers = [r.event for r in resumed if isinstance(r.event, RequestHeader)]
    if any(isinstance(r.event, RequestHeader) for r in stored):
        assert headers[0].reason == "resume"
    turn_starts = [r.event.turn for r in resumed if isinstance(r.event, TurnStart)]
    assert turn_starts[0] == open_turn + 1  # numbering continues after the crash

    records = await read_log(files.store, killed.session)
    assert [(r.seq, r.kind) for r in records] == [(r.seq, r.kind) for r in final]
    assert_well_formed(records)
    assert last_turn_end(records).reason == "completed"

    async with runtime(files) as rt:  # a second resume finds nothing to repair or run
        again = await rt.resume_agent(killed.session)
        assert again.session.next_seq == len(records)
        assert not again.wake()
    assert len(await read_log(files.store, killed.session)) == len(records)


async def test_cli_resume_continues_a_killed_session(files: Files) -> None:
    killed = await asyncio.to_thread(run_child, files, on_kind("tool/result"))
    stored = await read_log(files.store, killed.session)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SUBAGENTS_")},
        "SUBAGENTS_HOME": str(files.store.parent / "home"),
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "subagents", "resume", killed.session, *args]
        return subprocess.run(
            [*command, "--store", str(files.store)],
            capture_output=True,
            text=True,
            env=env,
            cwd=files.store.parent,
            check=False,
        )

    # The recorded model spec (scripted:PATH) is reused. The cut turn runs again first (its
    # answer is the next response), then the new prompt, whose answer is printed.
    done = await asyncio.to_thread(cli, "Finish up.")
    assert (done.returncode, done.stdout) == (0, "Finished.\n"), done.stderr

    records = await read_log(files.store, killed.session)
    expected = expected_closers(stored)
    closers = records[len(stored) : len(stored) + len(expected)]
    assert tuple(describe(r) for r in closers) == expected
    assert expected[-2:] == ("step/end", INTERRUPTED)
    assert_well_formed(records)
    assert last_turn_end(records).reason == "completed"
    answers = [r.event.message.text for r in records if isinstance(r.event, AssistantMessageEvent)]
    assert answers[-2:] == ["Both tools ran.", "Finished."]

    again = await asyncio.to_thread(cli)  # nothing pending: reports where the session stands
    assert (again.returncode, again.stdout) == (0, "Finished.\n"), again.stderr
    assert len(await read_log(files.store, killed.session)) == len(records)


async def test_repair_closers_reuse_the_last_real_timestamp(files: Files) -> None:
    """core.md 2.8: synthetic closers "continue the seq and reuse the last real timestamp"."""
    killed = await asyncio.to_thread(run_child, files, on_kind("tool/call"))
    stored = await read_log(files.store, killed.session)
    async with runtime(files) as rt:
        agent = await rt.resume_agent(killed.session)
        closers = agent.session.records[len(stored) :]
    assert [describe(r) for r in closers] == [
        LOOKUP_UNKNOWN,
        RECORD_NOT_STARTED,
        "step/end",
        INTERRUPTED,
        "agent/inbox/spliced",  # the cut turn's re-run, queued
    ]
    assert [r.time for r in closers] == [stored[-1].time] * len(closers)
