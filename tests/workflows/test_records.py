"""The `workflow` tool's durable session records (docs/design.md §9).

A scripted lead calls the tool (real guest processes, scripted children); its own log gets
`tool-workflow/run-start`, a start/end pair per member and `tool-workflow/run-end`, and
`validate_workflow_records` holds the record invariant.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from workflow_support import (
    COMPLETED,
    ControlledRuntime,
    Gates,
    Recorder,
    guest_processes,
    tool_replies,
)

from subagents import DelegationOptions
from subagents._task_owner import TaskOwner
from subagents.core import Agent
from subagents.delegation import DelegationRuntime
from subagents.errors import StoreError
from subagents.messages import user_message
from subagents.sessions import (
    EventRecord,
    EventStore,
    InMemoryEventStore,
    SessionEvent,
    SqliteEventStore,
    SubagentCatalog,
    ToolCallEvent,
    ToolWorkflowAgentEnd,
    ToolWorkflowAgentStart,
    ToolWorkflowRunEnd,
    ToolWorkflowRunStart,
    UserMessageEvent,
)
from subagents.testing import FakeClock, RecordingModel
from subagents.tools import ToolSpec
from subagents.workflows import (
    RunOutcome,
    RunSpec,
    WorkflowAgentEnded,
    WorkflowAgentStarted,
    WorkflowEnded,
    WorkflowEngine,
    WorkflowStarted,
    mount_workflow_tool,
    validate_workflow_records,
)

META = {"name": "audit", "description": "Audit the files"}

TWO_MEMBERS = """\
phase("review")
a = await agent("one", label="first")
b = await agent("two", label="second", phase="check")
return [a, b]
"""

WorkflowRecord = (
    ToolWorkflowRunStart | ToolWorkflowAgentStart | ToolWorkflowAgentEnd | ToolWorkflowRunEnd
)


def lead_script(arguments: dict[str, Any], *, children: Any = None) -> str:
    """A model script (JSON is YAML) where the lead calls `workflow` once, then finishes."""
    script: dict[str, Any] = {
        "lead": [{"calls": [{"tool": "workflow", "args": arguments}]}, {"text": "finished"}],
        "*": children if children is not None else [{"text": "child answer"}],
    }
    return json.dumps(script)


@asynccontextmanager
async def open_tool(
    script: str, *, store: EventStore | None = None, tools: Sequence[ToolSpec] = ()
) -> AsyncGenerator[tuple[DelegationRuntime, Agent, WorkflowEngine], None]:
    clock = FakeClock()
    runtime = DelegationRuntime(
        model=RecordingModel.from_yaml(script, clock=clock),
        store=store or InMemoryEventStore(),
        clock=clock,
        tools=tools,
        delegation=DelegationOptions(definitions={}),
        sandbox="danger-full-access",
    )
    async with runtime:
        engine = mount_workflow_tool(runtime)
        try:
            yield runtime, await runtime.create_agent(), engine
        finally:
            await engine.aclose()


def records_of(records: Sequence[EventRecord]) -> list[WorkflowRecord]:
    return [
        r.event
        for r in records
        if isinstance(
            r.event,
            ToolWorkflowRunStart
            | ToolWorkflowAgentStart
            | ToolWorkflowAgentEnd
            | ToolWorkflowRunEnd,
        )
    ]


def kinds(records: Sequence[EventRecord]) -> list[str]:
    return [r.kind for r in records]


def children_of(lead: Agent) -> list[str]:
    return [r.event.child_id for r in lead.session.records if isinstance(r.event, SubagentCatalog)]


async def test_a_run_leaves_paired_member_records_between_its_start_and_end() -> None:
    script = lead_script({"meta": META, "script": TWO_MEMBERS})
    async with open_tool(script) as (runtime, lead, engine):
        recorder = Recorder(engine)
        await runtime.run("go", agent=lead)
        [reply] = tool_replies(lead)
        log = list(lead.session.records)
    assert reply[1] is False
    [started] = recorder.of(WorkflowStarted)
    run = started.info.id
    first, second = children_of(lead)
    assert records_of(log) == [
        ToolWorkflowRunStart(run_id=run, name="audit"),
        ToolWorkflowAgentStart(run_id=run, seq=1, label="first", child_id=first, phase="review"),
        ToolWorkflowAgentEnd(run_id=run, seq=1, outcome="completed"),
        ToolWorkflowAgentStart(run_id=run, seq=2, label="second", child_id=second, phase="check"),
        ToolWorkflowAgentEnd(run_id=run, seq=2, outcome="completed"),
        ToolWorkflowRunEnd(run_id=run, stop_reason="completed"),
    ]
    order = kinds(log)
    assert order.index("tool/call") < order.index("tool-workflow/run-start")
    assert order.index("tool-workflow/run-end") < order.index("tool/result")
    assert validate_workflow_records(log) == []
    assert guest_processes() == []


async def test_two_runs_of_one_response_keep_their_own_records() -> None:
    call = {"tool": "workflow", "args": {"meta": META, "script": TWO_MEMBERS}}
    script = json.dumps(
        {"lead": [{"calls": [call, call]}, {"text": "finished"}], "*": [{"text": "answer"}]}
    )
    async with open_tool(script) as (runtime, lead, _):
        await runtime.run("go", agent=lead)
        assert [error for _, error in tool_replies(lead)] == [False, False]
        records = records_of(lead.session.records)
    runs = {r.run_id for r in records}
    assert len(runs) == 2
    for run in runs:
        own = [type(r) for r in records if r.run_id == run]
        assert own == [
            ToolWorkflowRunStart,
            ToolWorkflowAgentStart,
            ToolWorkflowAgentEnd,
            ToolWorkflowAgentStart,
            ToolWorkflowAgentEnd,
            ToolWorkflowRunEnd,
        ]
    assert validate_workflow_records(records) == []


async def test_a_failed_member_and_a_failed_run_are_recorded_as_such() -> None:
    body = "await agent('one', label='x', schema={'type': 'object'})\nraise ValueError('no')"
    script = lead_script({"meta": META, "script": body})
    async with open_tool(script) as (runtime, lead, _):
        await runtime.run("go", agent=lead)
        [(text, is_error)] = tool_replies(lead)
        log = list(lead.session.records)
    assert is_error
    assert text.startswith("Error: workflow run failed: ValueError: no")
    [start, member, end, run_end] = records_of(log)
    assert isinstance(start, ToolWorkflowRunStart)
    assert (member, end) == (
        ToolWorkflowAgentStart(
            run_id=start.run_id, seq=1, label="x", child_id=children_of(lead)[0]
        ),
        ToolWorkflowAgentEnd(run_id=start.run_id, seq=1, outcome="failed"),
    )
    assert run_end == ToolWorkflowRunEnd(run_id=start.run_id, stop_reason="error")
    assert validate_workflow_records(log) == []


async def test_a_call_the_engine_refuses_records_nothing() -> None:
    script = lead_script({"meta": META, "script": "x = = 1"})
    async with open_tool(script) as (runtime, lead, _):
        await runtime.run("go", agent=lead)
        [(_, is_error)] = tool_replies(lead)
        assert is_error
        assert records_of(lead.session.records) == []


async def test_a_cancelled_run_ends_its_open_members_before_its_run_end() -> None:
    gates = Gates()
    body = "return await parallel([lambda: agent('a', label='a'), lambda: agent('b', label='b')])"
    script = lead_script(
        {"meta": META, "script": body},
        children=[{"calls": [{"tool": "hold", "args": {"label": "child"}}]}],
    )
    async with open_tool(script, tools=[gates.tool()]) as (_, lead, engine):
        recorder = Recorder(engine)
        await lead.followup("go")
        await recorder.wait_for(WorkflowAgentStarted, 2)
        await gates.started("child").wait()
        await lead.cancel("user")
        await lead.when_idle()
        await recorder.wait_for(WorkflowEnded)
        log = list(lead.session.records)
    records = records_of(log)
    run = records[0].run_id
    assert records[0] == ToolWorkflowRunStart(run_id=run, name="audit")
    starts = [r for r in records if isinstance(r, ToolWorkflowAgentStart)]
    assert sorted(s.seq for s in starts) == [1, 2]
    assert records[-1] == ToolWorkflowRunEnd(run_id=run, stop_reason="cancelled")
    ends = records[len(starts) + 1 : -1]
    assert sorted(ends, key=lambda e: getattr(e, "seq", 0)) == [
        ToolWorkflowAgentEnd(run_id=run, seq=1, outcome="cancelled"),
        ToolWorkflowAgentEnd(run_id=run, seq=2, outcome="cancelled"),
    ]
    engine_ends = recorder.of(WorkflowAgentEnded)
    assert {e.outcome for e in engine_ends} == {"cancelled"}
    order = kinds(log)
    assert order.index("tool-workflow/run-end") < order.index("tool/result")
    assert validate_workflow_records(log) == []
    assert guest_processes() == []


async def test_a_failed_append_stops_the_record_and_changes_nothing_else(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    script = lead_script({"meta": META, "script": TWO_MEMBERS})
    async with open_tool(script) as (runtime, lead, _):
        record = lead.record

        def failing(event: SessionEvent) -> EventRecord:
            if isinstance(event, ToolWorkflowAgentStart):
                raise StoreError("disk full")
            return record(event)

        monkeypatch.setattr(lead, "record", failing)
        with caplog.at_level(logging.WARNING, logger="subagents.workflows"):
            await runtime.run("go", agent=lead)
        [reply] = tool_replies(lead)
        log = list(lead.session.records)
    assert reply == (
        'workflow "audit" completed (2 agents).\nReturn value:\n'
        '[\n  "child answer",\n  "child answer"\n]',
        False,
    )
    [start] = records_of(log)
    assert isinstance(start, ToolWorkflowRunStart)
    assert [r.getMessage() for r in caplog.records if r.name == "subagents.workflows"] == [
        "tool-workflow: disabled durable record after tool-workflow/agent-start append failed: "
        "disk full"
    ]
    assert validate_workflow_records(log) == []


@dataclass
class Context:
    agent_id: str
    call_id: str = "call-1"
    tool_name: str = "workflow"
    agent_name: str = "lead"
    grant: str | None = None

    def conclude_turn(self) -> None:
        pass


async def test_run_end_waits_for_quiescence_even_when_the_call_is_cancelled_twice() -> None:
    """A second cancel while the run is disposed ends the call; run-end still follows disposal."""
    entered, stopping, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def stubborn(spec: RunSpec) -> RunOutcome:
        """A runtime that, once aborted, stops only when the test lets it."""
        entered.set()
        await spec.abort.future()
        stopping.set()
        await release.wait()
        return COMPLETED

    clock = FakeClock()
    runtime = DelegationRuntime(
        model=RecordingModel.from_yaml("{}", clock=clock),
        store=InMemoryEventStore(),
        clock=clock,
        delegation=DelegationOptions(definitions={}),
        sandbox="danger-full-access",
    )
    async with runtime:
        engine = mount_workflow_tool(runtime, script_runtime=ControlledRuntime(stubborn))
        lead = await runtime.create_agent()
        ended = asyncio.Event()
        lead.session.observe(
            lambda _, record: ended.set() if isinstance(record.event, ToolWorkflowRunEnd) else None
        )
        spec = runtime.tools.get("workflow")
        assert spec is not None
        handler = spec.handler

        async def invoke() -> object:
            return await handler({"meta": META, "script": "return 1"}, Context(lead.id))

        owner = TaskOwner("test")
        call = owner.spawn(invoke())
        await entered.wait()
        call.cancel()  # the call disposes the run, which waits for the stubborn runtime
        await stopping.wait()
        call.cancel()
        await asyncio.wait({call})
        assert call.cancelled()
        assert [type(r) for r in records_of(lead.session.records)] == [ToolWorkflowRunStart]
        release.set()
        await ended.wait()
        records = records_of(lead.session.records)
        await owner.aclose()
        await engine.aclose()
    assert records[1:] == [ToolWorkflowRunEnd(run_id=records[0].run_id, stop_reason="cancelled")]


async def test_the_records_survive_in_sqlite_and_the_cli_shows_them(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    script = lead_script({"meta": META, "script": TWO_MEMBERS})
    async with open_tool(script, store=SqliteEventStore(path)) as (runtime, lead, _):
        await runtime.run("go", agent=lead)
        live = records_of(lead.session.records)
        lead_id = lead.id
    async with SqliteEventStore(path) as fresh:
        stored = await fresh.read(lead_id, tenant="default")
    assert records_of(stored) == live
    assert [type(r) for r in live] == [
        ToolWorkflowRunStart,
        ToolWorkflowAgentStart,
        ToolWorkflowAgentEnd,
        ToolWorkflowAgentStart,
        ToolWorkflowAgentEnd,
        ToolWorkflowRunEnd,
    ]
    assert validate_workflow_records(stored) == []

    as_json, code = await cli("log", lead_id, "--store", str(path), "--json")
    assert code == 0
    shown = [e for e in json.loads(as_json) if e["kind"].startswith("tool-workflow/")]
    assert [e["kind"] for e in shown] == [
        "tool-workflow/run-start",
        "tool-workflow/agent-start",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/agent-end",
        "tool-workflow/run-end",
    ]
    assert shown[0]["payload"] == {"run_id": live[0].run_id, "name": "audit"}
    assert shown[-1]["payload"] == {"run_id": live[0].run_id, "stop_reason": "completed"}
    text, code = await cli("log", lead_id, "--store", str(path))
    assert code == 0
    assert "tool call  workflow" in text
    assert 'result     workflow: workflow "audit" completed (2 agents).' in text


async def cli(*args: str) -> tuple[str, int]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "subagents",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert not err, err.decode()
    return out.decode(), process.returncode or 0


# -- the invariant ---------------------------------------------------------------------------

RUN = "run-1"


def start(run: str = RUN, name: str = "audit") -> ToolWorkflowRunStart:
    return ToolWorkflowRunStart(run_id=run, name=name)


def member(seq: int, run: str = RUN, **fields: Any) -> ToolWorkflowAgentStart:
    values: dict[str, Any] = {"label": f"m{seq}", "child_id": f"child-{seq}", **fields}
    return ToolWorkflowAgentStart(run_id=run, seq=seq, **values)


def member_end(seq: int, run: str = RUN, outcome: Any = "completed") -> ToolWorkflowAgentEnd:
    return ToolWorkflowAgentEnd(run_id=run, seq=seq, outcome=outcome)


def end(run: str = RUN, stop_reason: Any = "completed") -> ToolWorkflowRunEnd:
    return ToolWorkflowRunEnd(run_id=run, stop_reason=stop_reason)


@pytest.mark.parametrize(
    "events",
    [
        [],
        [start()],
        [start(), member(1)],  # the log stopped before the member and the run ended
        [start(), member(1), member_end(1)],
        [start(), member(1, phase="p"), member(2), member_end(2), member_end(1), end()],
        [start(), member(1), member_end(1, outcome="cancelled"), end(stop_reason="cancelled")],
        [start("a"), start("b"), member(1, "b"), end("a"), member_end(1, "b"), end("b")],
        [
            UserMessageEvent(message=user_message("hi")),
            start(),
            ToolCallEvent(turn=1, step=1, call_id="c", name="workflow", arguments="{}"),
            end(),
        ],
    ],
)
def test_legal_logs_have_no_problem(events: list[SessionEvent]) -> None:
    assert validate_workflow_records(events) == []


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        (
            [member(1)],
            "tool-workflow/agent-start has no matching tool-workflow/run-start for run run-1",
        ),
        (
            [start(), end(), member_end(1)],
            "tool-workflow/agent-end appears after tool-workflow/run-end for run run-1",
        ),
        (
            [end()],
            "tool-workflow/run-end has no matching tool-workflow/run-start for run run-1",
        ),
        (
            [start(), end(), end()],
            "tool-workflow/run-end appears after tool-workflow/run-end for run run-1",
        ),
        ([start(), start()], "tool-workflow/run-start repeated for run run-1"),
        ([start(), end(), start()], "tool-workflow/run-start repeated for run run-1"),
        ([start(run="")], "tool-workflow/run-start run_id must be a non-empty string"),
        (
            [start(), member(1, run="")],
            "tool-workflow/agent-start run_id must be a non-empty string",
        ),
        (
            [start(name="")],
            "tool-workflow/run-start name must be a non-empty string in run run-1",
        ),
        (
            [start(), member(0)],
            "tool-workflow/agent-start seq must be a positive safe integer (got 0) in run run-1",
        ),
        (
            [start(), member(2**53)],
            "tool-workflow/agent-start seq must be a positive safe integer "
            f"(got {2**53}) in run run-1",
        ),
        (
            [start(), member(1), member_end(-1)],
            "tool-workflow/agent-end seq must be a positive safe integer (got -1) in run run-1",
        ),
        (
            [start(), member(1, label=None)],
            "tool-workflow/agent-start label must be a string in run run-1",
        ),
        (
            [start(), member(1, phase=3)],
            "tool-workflow/agent-start phase must be a string when present in run run-1",
        ),
        (
            [start(), member(1, child_id="")],
            "tool-workflow/agent-start child_id must be a non-empty string in run run-1",
        ),
        ([start(), member(1), member(1)], "tool-workflow/agent-start repeated seq 1 in run run-1"),
        (
            [start(), member(1), member_end(1), member_end(1)],
            "tool-workflow/agent-end repeated seq 1 in run run-1",
        ),
        (
            [start(), member_end(1)],
            "tool-workflow/agent-end has no matching tool-workflow/agent-start for seq 1 in run "
            "run-1",
        ),
        (
            [start(), member(1), member_end(1, outcome="aborted")],
            'tool-workflow/agent-end carries unknown outcome "aborted" in run run-1',
        ),
        (
            [start(), end(stop_reason="aborted")],
            'tool-workflow/run-end carries unknown stop_reason "aborted" in run run-1',
        ),
        (
            [start(), member(3), member(1), member(2), member_end(2), end()],
            "tool-workflow/run-end leaves member seq 1, 3 open in run run-1",
        ),
    ],
)
def test_each_breach_is_named(events: list[SessionEvent], problem: str) -> None:
    assert validate_workflow_records(events) == [problem]


def test_every_breach_is_listed_in_log_order() -> None:
    records = [
        EventRecord(i, 0.0, e)
        for i, e in enumerate([member(1), start(), start(), member(1), end(), member_end(1)])
    ]
    assert validate_workflow_records(records) == [
        "tool-workflow/agent-start has no matching tool-workflow/run-start for run run-1",
        "tool-workflow/run-start repeated for run run-1",
        "tool-workflow/run-end leaves member seq 1 open in run run-1",
        "tool-workflow/agent-end appears after tool-workflow/run-end for run run-1",
    ]
