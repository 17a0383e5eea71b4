"""`WorkflowEngine.start`: synchronous validation before any run exists (docs/design.md
§9)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from workflow_support import (
    COMPLETED,
    META,
    ControlledRuntime,
    Recorder,
    open_engine,
    request,
    run_to_end,
)

from subagents.errors import ClosedError, ConfigError, ErrorCode, WorkflowError
from subagents.messages import JsonValue
from subagents.workflows import (
    RunOutcome,
    RunSpec,
    WorkflowEngine,
    WorkflowOptions,
    WorkflowRequest,
    WorkflowStarted,
)


class TypeScriptRuntime(ControlledRuntime):
    language = "typescript"


async def test_the_engine_refuses_a_runtime_of_another_language() -> None:
    async with open_engine() as (runtime, _, _, _):
        with pytest.raises(ConfigError) as caught:
            WorkflowEngine(runtime.subagents, runtime=TypeScriptRuntime())
    assert "requires the Python script runtime" in caught.value.message


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (None, "invalid meta: meta must be an object"),
        ([], "invalid meta: meta must be an object"),
        (
            {**META, "foo": 1},
            "invalid meta: meta.foo is not a recognized field (name/description/whenToUse/phases)",
        ),
        (
            {},
            "invalid meta: meta.name must be a non-empty string; "
            "meta.description must be a non-empty string",
        ),
        (
            {**META, "whenToUse": 3, "phases": {}},
            "invalid meta: meta.whenToUse must be a string; meta.phases must be an array",
        ),
        (
            {**META, "phases": [{"title": "", "extra": 1}, "x", {"title": "t", "model": 5}]},
            "invalid meta: meta.phases[0].extra is not a recognized field "
            "(title/detail/provider/model); meta.phases[0].title must be a non-empty string; "
            "meta.phases[1] must be an object; meta.phases[2].model must be a string",
        ),
    ],
)
async def test_meta_violations_are_all_listed_and_nothing_starts(meta: Any, message: str) -> None:
    runtime = ControlledRuntime()
    async with open_engine(runtime=runtime) as (_, lead, engine, _):
        recorder = Recorder(engine)
        with pytest.raises(WorkflowError) as caught:
            engine.start(request(lead, meta=meta))
        assert caught.value.message == message
        assert caught.value.code == ErrorCode.META_INVALID
        assert recorder.events == []
    assert runtime.specs == []


async def test_the_run_keeps_a_normalized_copy_of_meta() -> None:
    meta: dict[str, Any] = {
        "name": "audit",
        "description": "one line",
        "phases": [{"title": "scan", "detail": "look"}],
    }
    async with open_engine(runtime=ControlledRuntime()) as (_, lead, engine, _):
        run = engine.start(request(lead, meta=meta))
        meta["name"] = "changed"
        meta["phases"][0]["title"] = "changed"
        assert run.meta.name == "audit"
        assert run.meta.to_json() == {
            "name": "audit",
            "description": "one line",
            "phases": [{"title": "scan", "detail": "look"}],
        }
        await run_to_end(run)


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            "  export const meta = {name: 'x'}\nreturn null",
            "workflow meta rides the `meta` request field, not the script: remove the "
            "`export const meta = {...}` statement from the body",
        ),
        ("x = = 1", "workflow script does not parse: invalid syntax (line 1, column 5)"),
        ("if True:\nreturn 1", "workflow script does not parse: expected an indented block"),
        (
            "yield 1",
            "workflow script does not parse: 'yield' is not allowed at the top level of a "
            "workflow script; return a value (line 1, column 1)",
        ),
        ("def f():\n    await g()", "workflow script does not parse: 'await' outside async"),
    ],
)
async def test_a_script_that_does_not_parse_is_refused(script: str, message: str) -> None:
    async with open_engine(runtime=ControlledRuntime()) as (_, lead, engine, _):
        with pytest.raises(WorkflowError) as caught:
            engine.start(request(lead, script))
    assert caught.value.message.startswith(message)
    assert caught.value.code == ErrorCode.SCRIPT_PARSE


async def test_top_level_await_return_and_nested_generators_parse() -> None:
    script = (
        "x = await agent('a')\n"
        "def gen():\n    yield 1\n"
        "if x:\n    return [i for i in gen()]\n"
        "return None\n"
    )
    async with open_engine(runtime=ControlledRuntime()) as (_, lead, engine, _):
        await run_to_end(engine.start(request(lead, script)))


@pytest.mark.parametrize(
    ("field", "value", "message", "code"),
    [
        (
            "subagent_provider",
            " spawn",
            "workflow subagentProvider must be a non-empty normalized string",
            ErrorCode.INVALID_ARGUMENT,
        ),
        (
            "subagent_provider",
            "",
            "workflow subagentProvider must be a non-empty normalized string",
            ErrorCode.INVALID_ARGUMENT,
        ),
        (
            "subagent_provider",
            "remote",
            'no subagent provider registered for "remote"',
            ErrorCode.AGENT_START,
        ),
        (
            "max_total_agents",
            0,
            "workflow maxTotalAgents must be a positive safe integer",
            ErrorCode.INVALID_ARGUMENT,
        ),
        (
            "max_total_agents",
            1.5,
            "workflow maxTotalAgents must be a positive safe integer",
            ErrorCode.INVALID_ARGUMENT,
        ),
        (
            "max_total_agents",
            True,
            "workflow maxTotalAgents must be a positive safe integer",
            ErrorCode.INVALID_ARGUMENT,
        ),
        (
            "max_total_agents",
            201,
            "workflow maxTotalAgents 201 exceeds the engine ceiling 200",
            ErrorCode.INVALID_ARGUMENT,
        ),
        (
            "args",
            {"s": {1, 2}},
            "workflow args must be plain JSON data — args.s: a set is not plain JSON data "
            "(use a list)",
            ErrorCode.INVALID_ARGUMENT,
        ),
    ],
)
async def test_request_fields_are_checked(
    field: str, value: Any, message: str, code: ErrorCode
) -> None:
    runtime = ControlledRuntime()
    async with open_engine(runtime=runtime) as (_, lead, engine, _):
        recorder = Recorder(engine)
        fields: dict[str, Any] = {field: value}
        with pytest.raises(WorkflowError) as caught:
            engine.start(WorkflowRequest(script="return None", meta=META, parent=lead, **fields))
        assert (caught.value.message, caught.value.code) == (message, code)
        assert recorder.events == []
    assert runtime.specs == []


async def test_start_emits_workflow_start_once_before_any_other_event() -> None:
    async with open_engine(runtime=ControlledRuntime()) as (_, lead, engine, _):
        recorder = Recorder(engine)
        run = engine.start(request(lead))
        assert recorder.names() == ["workflow/start"]
        [started] = recorder.of(WorkflowStarted)
        assert started.info.id == run.id
        assert started.info.meta == run.meta
        assert await run_to_end(run) is not None
        assert recorder.names() == ["workflow/start", "workflow/end"]


async def test_limits_reach_the_guest_through_begin() -> None:
    seen: list[JsonValue] = []

    async def execute(spec: RunSpec) -> RunOutcome:
        seen.append(await spec.bindings["begin"]({}))
        return COMPLETED

    options = WorkflowOptions(max_concurrent_agents=0, max_items_per_call=7, sync_timeout_ms=9)
    async with open_engine(options=options, runtime=ControlledRuntime(execute)) as (
        _,
        lead,
        engine,
        _,
    ):
        run = engine.start(
            WorkflowRequest(script="return 1", meta=META, parent=lead, max_total_agents=5)
        )
        await run_to_end(run)
    assert seen == [
        {
            "meta": META,
            "body": "return 1",
            "limits": {
                "maxConcurrentAgents": min(16, max(1, (os.cpu_count() or 1) - 2)),
                "maxTotalAgents": 5,
                "maxItemsPerCall": 7,
                "syncTimeoutMs": 9,
            },
        }
    ]


async def test_an_overlong_script_is_refused() -> None:
    options = WorkflowOptions(max_script_chars=10)
    async with open_engine(options=options, runtime=ControlledRuntime()) as (_, lead, engine, _):
        with pytest.raises(WorkflowError) as caught:
            engine.start(request(lead, "return 12345"))
    assert caught.value.message == (
        "workflow script is 12 characters, over the limit of 10; keep the script to "
        "coordination and pass data through args"
    )


async def test_a_closed_engine_starts_nothing() -> None:
    async with open_engine(runtime=ControlledRuntime()) as (_, lead, engine, _):
        await engine.aclose()
        with pytest.raises(ClosedError):
            engine.start(request(lead))
