"""Run outcomes, settlement and events with a scripted runtime (docs/design.md §9:
outcomes, the settlement order and host callback validation).

The runtime here is note N0's `ControlledRuntime`: it plays the guest against the real host
bindings, so each case can send exactly the hostile or odd input it is about. Children start
through the real subagent service, with a provider the test controls.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from workflow_support import (
    COMPLETED,
    ControlledRuntime,
    Recorder,
    StubProvider,
    StubRun,
    open_engine,
    request,
    run_to_end,
)

from subagents._task_owner import TaskOwner
from subagents.delegation import SubagentResult
from subagents.errors import WorkflowError
from subagents.ids import SessionId
from subagents.messages import JsonValue
from subagents.policy import resolve_policy
from subagents.sessions import SubagentCatalog
from subagents.workflows import (
    AbortSignal,
    RunFailure,
    RunOutcome,
    RunSpec,
    WorkflowAgentEnded,
    WorkflowEnded,
    WorkflowEvent,
    WorkflowOptions,
    WorkflowRequest,
    WorkflowResult,
)

STUB = WorkflowOptions(provider="stub")
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"answer": {"type": "number"}}}


async def expect_rejection(call: Any, message: str) -> None:
    with pytest.raises(WorkflowError) as caught:
        await call
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("startChild", None, "requires an object"),
        ("startChild", [], "requires an object"),
        ("startChild", {"prompt": 7}, "prompt must be a string"),
        ("startChild", {"prompt": "p", "provider": 7}, "provider must be a string"),
        ("startChild", {"prompt": "p", "model": False}, "model must be a string"),
        ("progress", {}, "requires an array of events"),
        ("progress", [{"type": "phase", "title": None}], "phase must be a string"),
        ("progress", [{"type": "agent-start", "info": {"seq": 0}}], "sequence must be a positive"),
        ("progress", [{"type": "agent-end", "info": {"outcome": "x"}}], "invalid workflow agent"),
        ("progress", [{"type": "unknown"}], "invalid workflow progress event"),
        ("childResult", {"callId": "1"}, "call id must be an integer"),
        ("disposeChild", {"callId": 99}, "child call is not active"),
    ],
)
async def test_a_caught_malformed_callback_leaves_the_run_completed(
    name: str, value: JsonValue, message: str
) -> None:
    async def execute(spec: RunSpec) -> RunOutcome:
        await expect_rejection(spec.bindings[name](value), message)
        return COMPLETED

    async with open_engine(options=STUB, runtime=ControlledRuntime(execute)) as (rt, lead, eng, _):
        rt.subagents.register_provider(StubProvider())
        result = await run_to_end(eng.start(request(lead)))
    assert result == WorkflowResult(value=None, stop_reason="completed", agents_started=0)


async def test_duplicate_agent_ends_are_not_forwarded() -> None:
    info = {"seq": 1, "label": "child", "childId": "host-child"}

    async def execute(spec: RunSpec) -> RunOutcome:
        progress = spec.bindings["progress"]
        await progress([{"type": "agent-start", "info": info}])
        await progress([{"type": "agent-end", "info": {**info, "outcome": "failed"}}])
        await progress([{"type": "agent-end", "info": {**info, "outcome": "cancelled"}}])
        return COMPLETED

    async with open_engine(runtime=ControlledRuntime(execute)) as (_, lead, engine, _):
        recorder = Recorder(engine)
        result = await run_to_end(engine.start(request(lead)))
    assert result.stop_reason == "completed"
    [ended] = recorder.of(WorkflowAgentEnded)
    assert ended.outcome == "failed"


@pytest.mark.parametrize("confined", [True, False])
async def test_the_run_carries_the_session_cwd_and_policy(confined: bool) -> None:
    seen: list[JsonValue] = []

    async def execute(spec: RunSpec) -> RunOutcome:
        seen.append(await spec.bindings["begin"]({}))
        return COMPLETED

    runtime = ControlledRuntime(execute, confined=confined)
    async with open_engine(options=STUB, runtime=runtime, sandbox="read-only") as (
        rt,
        lead,
        engine,
        _,
    ):
        rt.subagents.register_provider(StubProvider())
        result = await run_to_end(engine.start(request(lead)))
        expected = await asyncio.to_thread(
            lambda: resolve_policy(
                cwd=lead.session.header.cwd, default="read-only", session_id=lead.id
            )
        )
    if confined:
        assert result.stop_reason == "completed", result.error
        [spec] = runtime.specs
        assert spec.cwd == lead.session.header.cwd
        assert spec.policy == expected
        assert seen[0]["body"] == "return None"
        assert seen[0]["meta"]["name"] == "host-test"
    else:
        assert result.stop_reason == "error"
        assert result.error is not None
        assert result.error.startswith("cannot enforce the read-only file policy")
        assert runtime.specs == []


async def test_children_are_collected_and_cleanup_finishes_before_the_result(
    tmp_path: Path,
) -> None:
    model_file = tmp_path / "selected.yaml"
    model_file.write_text('"*": [{text: selected}]\n')
    selected = f"scripted:{model_file}"
    stub = StubProvider()
    released = asyncio.Event()

    def make(index: int) -> StubRun:
        result: asyncio.Future[SubagentResult] = asyncio.get_running_loop().create_future()
        result.set_result(
            SubagentResult(output="", stop_reason="completed", structured={"answer": 42})
        )
        return StubRun(SessionId("ready-child"), result, dispose_gate=released)

    stub.make = make

    async def execute(spec: RunSpec) -> RunOutcome:
        b = spec.bindings
        child = await b["startChild"]({"prompt": "answer", "schema": SCHEMA, "model": selected})
        assert child == {"callId": 1, "childId": "ready-child"}
        assert await b["childResult"](child) == {
            "output": [],
            "structured": {"answer": 42},
            "stopReason": "completed",
        }
        await b["disposeChild"](child)
        return COMPLETED

    async with open_engine(options=STUB, runtime=ControlledRuntime(execute)) as (
        rt,
        lead,
        engine,
        _,
    ):
        rt.subagents.register_provider(stub)
        run = engine.start(request(lead))
        await stub.published.wait()
        child_run = stub.runs[0]
        await child_run.disposing.wait()
        assert not run.result.done()
        [start] = stub.requests
        assert (
            start.descriptor.label,
            [m.text for m in child_run.sent],
            start.cwd,
            start.descriptor.output_schema,
        ) == (
            "host-test child 1",
            ["answer"],
            lead.session.header.cwd,
            SCHEMA,
        )
        assert start.parent is lead
        assert rt.subagents.model_specs[SessionId("ready-child")] == selected
        [entry] = [r.event for r in lead.session.records if isinstance(r.event, SubagentCatalog)]
        assert (entry.label, entry.name, entry.mode) == ("host-test child 1", "agent-1", "one-shot")
        released.set()
        result = await run_to_end(run)
    assert result == WorkflowResult(value=None, stop_reason="completed", agents_started=1)
    assert child_run.disposals == 1


async def test_without_overrides_a_child_runs_the_parents_model() -> None:
    stub = StubProvider()

    async def execute(spec: RunSpec) -> RunOutcome:
        await spec.bindings["startChild"]({"prompt": "plain"})
        return COMPLETED

    async with open_engine(options=STUB, runtime=ControlledRuntime(execute)) as (rt, lead, eng, _):
        rt.subagents.register_provider(stub)
        await run_to_end(eng.start(request(lead)))
        assert rt.subagents.model_specs == {}
        assert stub.requests[0].descriptor.output_schema is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "workflow binding requires an object"),
        (
            {"value": None, "stopReason": "unknown", "agentsStarted": 0},
            "invalid workflow stop reason",
        ),
        (
            {"value": None, "stopReason": "cancelled", "agentsStarted": -1},
            "invalid workflow agent count",
        ),
        ({"stopReason": "completed", "agentsStarted": 0}, "workflow result is missing its value"),
        (
            {"value": None, "stopReason": "error", "agentsStarted": 0, "error": 5},
            "workflow error must be a string",
        ),
        (
            {"value": 1, "stopReason": "completed", "agentsStarted": 0, "error": "x"},
            "workflow result error must be absent exactly for completed runs",
        ),
        (
            {"value": None, "stopReason": "error", "agentsStarted": 0},
            "workflow result error must be absent exactly for completed runs",
        ),
        (
            {"value": {"t": (1, 2)}, "stopReason": "completed", "agentsStarted": 0},
            "workflow result value is not plain JSON data — workflow result.t: a tuple",
        ),
        (
            {"value": None, "stopReason": "error", "agentsStarted": 0, "error": "e" * 9000},
            "e" * 8000 + "… [truncated: 1000 more characters]",
        ),
        (
            {"value": "x" * 2000, "stopReason": "completed", "agentsStarted": 0},
            "workflow result value is 2002 bytes, over the limit of 1000 bytes",
        ),
    ],
)
async def test_an_invalid_terminal_result_is_a_workflow_error(value: Any, message: str) -> None:
    async def execute(spec: RunSpec) -> RunOutcome:
        return RunOutcome(value=value)

    options = WorkflowOptions(max_result_bytes=1000)
    async with open_engine(options=options, runtime=ControlledRuntime(execute)) as (_, lead, e, _):
        result = await run_to_end(e.start(request(lead)))
    assert result.stop_reason == "error"
    assert result.value is None
    assert result.error is not None
    assert message in result.error


async def test_a_guest_result_is_copied_with_the_larger_agent_count() -> None:
    async def execute(spec: RunSpec) -> RunOutcome:
        await spec.bindings["startChild"]({"prompt": "p"})
        value = {"value": None, "stopReason": "error", "agentsStarted": 0, "error": "boom", "x": 1}
        return RunOutcome(value=value)

    async with open_engine(options=STUB, runtime=ControlledRuntime(execute)) as (rt, lead, e, _):
        rt.subagents.register_provider(StubProvider())
        result = await run_to_end(e.start(request(lead)))
    assert result == WorkflowResult(value=None, stop_reason="error", agents_started=1, error="boom")


async def test_a_runtime_failure_is_reported_with_its_kind() -> None:
    async def execute(spec: RunSpec) -> RunOutcome:
        return RunOutcome(failure=RunFailure("exception", "m"))

    async with open_engine(runtime=ControlledRuntime(execute)) as (_, lead, engine, _):
        result = await run_to_end(engine.start(request(lead)))
    assert (result.stop_reason, result.error) == (
        "error",
        "workflow execution failed (exception): m",
    )


async def test_a_runtime_that_raises_still_settles_the_run() -> None:
    async def execute(spec: RunSpec) -> RunOutcome:
        raise RuntimeError("the runtime broke")

    async with open_engine(runtime=ControlledRuntime(execute)) as (_, lead, engine, _):
        result = await run_to_end(engine.start(request(lead)))
    assert result.stop_reason == "error"
    assert result.error == "workflow execution failed (exception): RuntimeError: the runtime broke"


async def test_cancellation_is_kept_when_the_runtime_fails_while_stopping() -> None:
    entered = asyncio.Event()

    async def execute(spec: RunSpec) -> RunOutcome:
        entered.set()
        await spec.abort.future()
        raise RuntimeError("execution provider failed while stopping")

    async with open_engine(runtime=ControlledRuntime(execute)) as (_, lead, engine, _):
        run = engine.start(request(lead))
        await entered.wait()
        run.cancel("stop requested")
        result = await run_to_end(run)
    assert result.stop_reason == "cancelled"
    assert result.error == "workflow run cancelled: stop requested"


async def test_the_first_cancel_reason_wins() -> None:
    entered = asyncio.Event()
    reasons: list[str] = []

    async def execute(spec: RunSpec) -> RunOutcome:
        entered.set()
        reasons.append(await spec.abort.future())
        return RunOutcome(failure=RunFailure("abort", reasons[0]))

    async with open_engine(runtime=ControlledRuntime(execute)) as (_, lead, engine, _):
        run = engine.start(request(lead))
        await entered.wait()
        run.cancel("a")
        run.cancel("b")
        result = await run_to_end(run)
    assert reasons == ["a"]
    assert (result.stop_reason, result.error) == ("cancelled", "workflow run cancelled: a")


async def test_dispose_twice_shares_one_completion_and_cancels_once() -> None:
    entered = asyncio.Event()
    reasons: list[str] = []

    async def execute(spec: RunSpec) -> RunOutcome:
        entered.set()
        reasons.append(await spec.abort.future())
        return RunOutcome(failure=RunFailure("abort", reasons[0]))

    async with open_engine(runtime=ControlledRuntime(execute)) as (_, lead, engine, _):
        recorder = Recorder(engine)
        run = engine.start(request(lead))
        await entered.wait()
        first, second = run.dispose(), run.dispose()
        assert await first is None
        assert await second is None
        result = await run.result
        assert len(recorder.of(WorkflowEnded)) == 1
    assert reasons == ["workflow disposed"]
    assert result.error == "workflow run cancelled: workflow disposed"


async def test_a_cancel_during_child_cleanup_keeps_the_outcome() -> None:
    stub = StubProvider()
    gate = asyncio.Event()

    def make(index: int) -> StubRun:
        result: asyncio.Future[SubagentResult] = asyncio.get_running_loop().create_future()
        return StubRun(SessionId(f"c{index}"), result, dispose_gate=gate)

    stub.make = make

    async def execute(spec: RunSpec) -> RunOutcome:
        await spec.bindings["startChild"]({"prompt": "p"})
        return RunOutcome(value={"value": 7, "stopReason": "completed", "agentsStarted": 1})

    async with open_engine(options=STUB, runtime=ControlledRuntime(execute)) as (rt, lead, e, _):
        rt.subagents.register_provider(stub)
        run = e.start(request(lead))
        await stub.published.wait()
        await stub.runs[0].disposing.wait()
        run.cancel("too late")
        gate.set()
        result = await run_to_end(run)
    assert result == WorkflowResult(value=7, stop_reason="completed", agents_started=1)


async def test_an_aborted_start_signal_cancels_before_anything_runs() -> None:
    signal = AbortSignal()
    signal.abort("caller gone")
    runtime = ControlledRuntime()
    stub = StubProvider()
    async with open_engine(options=STUB, runtime=runtime) as (rt, lead, engine, _):
        rt.subagents.register_provider(stub)
        run = engine.start(
            WorkflowRequest(
                script="return None",
                meta={"name": "n", "description": "d"},
                parent=lead,
                signal=signal,
            )
        )
        result = await run_to_end(run)
    assert (result.stop_reason, result.error) == (
        "cancelled",
        "workflow run cancelled: workflow signal aborted",
    )
    assert runtime.specs == []
    assert stub.requests == []


async def test_a_signal_aborted_mid_run_cancels_and_is_released() -> None:
    signal = AbortSignal()
    entered = asyncio.Event()

    async def execute(spec: RunSpec) -> RunOutcome:
        entered.set()
        return RunOutcome(failure=RunFailure("abort", await spec.abort.future()))

    async with open_engine(runtime=ControlledRuntime(execute)) as (_, lead, engine, _):
        run = engine.start(
            WorkflowRequest(
                script="return None",
                meta={"name": "n", "description": "d"},
                parent=lead,
                signal=signal,
            )
        )
        await entered.wait()
        signal.abort("the caller stopped")
        result = await run_to_end(run)
    assert result.error == "workflow run cancelled: workflow signal aborted"
    assert signal._listeners == []


async def test_a_live_agent_gets_a_cancelled_end_before_workflow_end() -> None:
    async def execute(spec: RunSpec) -> RunOutcome:
        info = {"seq": 1, "label": "child", "childId": "c", "phase": "p"}
        await spec.bindings["progress"]([{"type": "agent-start", "info": info}])
        return COMPLETED

    async with open_engine(runtime=ControlledRuntime(execute)) as (_, lead, engine, _):
        recorder = Recorder(engine)
        await run_to_end(engine.start(request(lead)))
    assert recorder.names() == [
        "workflow/start",
        "workflow/agent-start",
        "workflow/agent-end",
        "workflow/end",
    ]
    [ended] = recorder.of(WorkflowAgentEnded)
    assert (ended.agent.seq, ended.agent.phase, ended.outcome) == (1, "p", "cancelled")
    [end] = recorder.of(WorkflowEnded)
    assert (end.stop_reason, end.error, end.agents_started) == ("completed", None, 0)
    assert not hasattr(end, "value")


async def test_failing_listeners_are_contained(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    def raising(event: WorkflowEvent) -> None:
        raise ValueError("listener bug")

    async def rejecting(event: WorkflowEvent) -> None:
        raise ValueError("async listener bug")

    async with open_engine(runtime=ControlledRuntime()) as (_, lead, engine, _):
        engine.subscribe(raising)
        engine.subscribe(rejecting)
        engine.subscribe(lambda event: seen.append(event.event))
        with caplog.at_level(logging.WARNING, "subagents.workflows"):
            result = await run_to_end(engine.start(request(lead)))
            await engine.aclose()  # lets the rejected listener's task finish
    assert result.stop_reason == "completed"
    assert seen == ["workflow/start", "workflow/end"]
    assert "workflow: workflow/start listener threw: ValueError: listener bug" in caplog.text
    assert "workflow: workflow/end listener rejected: ValueError: async listener bug" in caplog.text


async def test_progress_after_cancellation_fails_with_the_reason() -> None:
    entered = asyncio.Event()
    failures: list[str] = []

    async def execute(spec: RunSpec) -> RunOutcome:
        entered.set()
        await spec.abort.future()
        try:
            await spec.bindings["progress"]([{"type": "phase", "title": "late"}])
        except WorkflowError as exc:
            failures.append(exc.message)
        return COMPLETED

    async with open_engine(runtime=ControlledRuntime(execute)) as (_, lead, engine, _):
        recorder = Recorder(engine)
        run = engine.start(request(lead))
        await entered.wait()
        run.cancel("halt")
        await run_to_end(run)
    assert failures == ["halt"]
    assert "workflow/phase" not in recorder.names()


async def test_a_child_published_after_cancellation_is_disposed() -> None:
    stub = StubProvider()
    stub.publication = asyncio.get_running_loop().create_future()

    async def execute(spec: RunSpec) -> RunOutcome:
        await expect_rejection(
            spec.bindings["startChild"]({"prompt": "child"}),
            "workflow child started after cancellation",
        )
        return COMPLETED

    async with open_engine(options=STUB, runtime=ControlledRuntime(execute)) as (rt, lead, e, _):
        rt.subagents.register_provider(stub)
        run = e.start(request(lead))
        await stub.entered.wait()
        run.cancel("stop during child startup")
        stub.publication.set_result(None)
        result = await run_to_end(run)
    assert result.stop_reason == "cancelled"
    assert [r.disposals for r in stub.runs] == [1]


async def test_a_pending_result_wait_is_released_when_the_script_returns() -> None:
    stub = StubProvider()
    owner = TaskOwner("test")
    waits: list[asyncio.Task[Any]] = []

    def make(index: int) -> StubRun:
        never: asyncio.Future[SubagentResult] = asyncio.get_running_loop().create_future()
        return StubRun(SessionId("output-pending"), never)

    stub.make = make

    async def execute(spec: RunSpec) -> RunOutcome:
        child = await spec.bindings["startChild"]({"prompt": "child"})

        async def wait() -> JsonValue:
            return await spec.bindings["childResult"](child)

        waits.append(owner.spawn(wait()))
        await stub.runs[0].waiting.wait()
        return COMPLETED

    async with open_engine(options=STUB, runtime=ControlledRuntime(execute)) as (rt, lead, e, _):
        rt.subagents.register_provider(stub)
        result = await run_to_end(e.start(request(lead)))
    assert result.stop_reason == "completed"
    assert [r.disposals for r in stub.runs] == [1]
    with pytest.raises(WorkflowError) as caught:
        await waits[0]
    assert caught.value.message == "workflow settled"
    await owner.aclose()
