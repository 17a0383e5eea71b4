"""The script's world, run in a real guest process (docs/design.md §9): the
hooks, their misuse texts, caps, the value boundary and the sync-slice limit.

Children are real one-shot subagents of the lead, answering from the scripted model.
"""

from __future__ import annotations

import pytest
from workflow_support import (
    FAST,
    Recorder,
    guest_processes,
    open_engine,
    pid_alive,
    run_to_end,
)

from subagents.messages import JsonValue
from subagents.workflows import (
    WorkflowAgentEnded,
    WorkflowAgentStarted,
    WorkflowLogged,
    WorkflowOptions,
    WorkflowPhaseStarted,
    WorkflowRequest,
    WorkflowResult,
)

CHILDREN = """
"*":
  - text: child answer
"""


async def run_script(
    script: str,
    *,
    args: JsonValue = None,
    options: WorkflowOptions = FAST,
    children: str = CHILDREN,
    max_total_agents: int | None = None,
) -> tuple[WorkflowResult, Recorder]:
    async with open_engine(children, options=options) as (_, lead, engine, _):
        recorder = Recorder(engine)
        run = engine.start(
            WorkflowRequest(
                script=script,
                meta={"name": "script-test", "description": "hooks"},
                parent=lead,
                args=args,
                max_total_agents=max_total_agents,
            )
        )
        result = await run_to_end(run)
        assert run.process_id is not None
        assert not pid_alive(run.process_id)
    assert guest_processes() == []
    return result, recorder


def completed(value: JsonValue, agents: int = 0) -> WorkflowResult:
    return WorkflowResult(value=value, stop_reason="completed", agents_started=agents)


def failed(error: str, agents: int = 0) -> WorkflowResult:
    return WorkflowResult(value=None, stop_reason="error", agents_started=agents, error=error)


async def test_the_script_returns_json_built_from_its_args() -> None:
    result, _ = await run_script(
        "total = sum(args['n'])\nreturn {'total': total, 'half': total / 2, 'ok': True}",
        args={"n": [1, 2, 3]},
    )
    assert result == completed({"total": 6, "half": 3.0, "ok": True})


async def test_no_return_is_none_and_args_default_to_an_empty_dict() -> None:
    result, _ = await run_script("x = args")
    assert result == completed(None)
    result, _ = await run_script("return args")
    assert result == completed({})


async def test_agent_returns_the_childs_text_and_parallel_keeps_order() -> None:
    result, recorder = await run_script(
        "one = await agent('first')\n"
        "many = await parallel([lambda: agent('a'), agent('b'), lambda: 7])\n"
        "return [one, many]"
    )
    assert result == completed(["child answer", ["child answer", "child answer", 7]], agents=3)
    assert len(recorder.of(WorkflowAgentStarted)) == 3
    assert [e.outcome for e in recorder.of(WorkflowAgentEnded)] == ["completed"] * 3


async def test_a_script_exception_is_the_runs_error() -> None:
    result, _ = await run_script("x = 1\nraise ValueError('boom')")
    assert result == failed("ValueError: boom (line 2 of the script)")


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("{1, 2}", "workflow result: a set is not plain JSON data (use a list)"),
        ("{'a': (1, 2)}", "workflow result.a: a tuple is not plain JSON data (use a list)"),
        ("[float('nan')]", "workflow result[0]: nan is not a finite number"),
        ("{1: 'x'}", "workflow result: key 1 is not a string (object keys must be str)"),
        (
            "{'odd key': b'x'}",
            'workflow result["odd key"]: bytes are not plain JSON data (decode them to a str)',
        ),
        (
            "agent('late')",
            "workflow result: a Task is not plain JSON data (did you forget `await`?)",
        ),
        ("cyclic", "workflow result[0]: the value contains a cycle (it contains itself)"),
    ],
)
async def test_a_return_value_that_is_not_json_is_refused(expression: str, reason: str) -> None:
    result, _ = await run_script(f"cyclic = []\ncyclic.append(cyclic)\nreturn {expression}")
    assert result.stop_reason == "error"
    assert result.error == (
        f"the workflow's return value is not plain JSON data — {reason}. Return only "
        "JSON-serializable objects/arrays/scalars."
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("agent('')", "agent() requires a non-empty prompt string"),
        ("agent(7)", "agent() requires a non-empty prompt string"),
        (
            "agent('p', effort='high')",
            'agent() option "effort" is deferred and not supported by this engine '
            "(supported: label, phase, schema, provider, model, name)",
        ),
        (
            "agent('p', agent_type='x')",
            'agent() option "agent_type" is deferred and not supported by this engine '
            "(supported: label, phase, schema, provider, model, name)",
        ),
        (
            "agent('p', {'color': 'red'})",
            'agent() option "color" is not recognized '
            "(supported: label, phase, schema, provider, model, name)",
        ),
        ("agent('p', label=3)", 'agent() option "label" must be a string'),
        ("agent('p', [1])", "agent() options must be an object"),
        (
            "agent('p', label=('a',))",
            "agent() options must be plain JSON data — options.label: a tuple is not plain "
            "JSON data (use a list)",
        ),
        (
            "agent('p', schema={'type': 'object', 'properties': {'a': {'type': 'string', "
            "'pattern': 'x'}}})",
            "agent() schema is outside the supported subset — schema.properties.a: keyword "
            '"pattern" is not supported (supported: type, properties, required, '
            "additionalProperties, items, enum, const, oneOf)",
        ),
        (
            "agent('p', schema={'type': 'array'})",
            "agent() schema is outside the supported subset — schema: the root must be an "
            "object schema ({'type': 'object', ...})",
        ),
        ("phase('')", "phase() requires a non-empty title string"),
        ("log(3)", "log() requires a message string"),
        ("parallel('x')", "parallel() requires a list of zero-argument functions or awaitables"),
        ("parallel([1])", "parallel() item 0 is not a function or an awaitable"),
        ("pipeline(None, str)", "pipeline() requires an items list"),
        ("pipeline([1])", "pipeline() requires at least one stage function"),
        ("pipeline([1], str, 5)", "pipeline() stage 1 is not a function"),
    ],
)
async def test_misused_hooks_end_the_whole_script(call: str, message: str) -> None:
    result, recorder = await run_script(f"await parallel([lambda: {call}])\nreturn 'survived'")
    assert result.stop_reason == "error"
    assert result.error == f"WorkflowError: {message} (line 1 of the script)"
    assert recorder.of(WorkflowAgentStarted) == []


async def test_misuse_is_a_catchable_workflow_error_with_a_code() -> None:
    result, _ = await run_script(
        "try:\n    await agent('p', effort='x')\n"
        "except WorkflowError as e:\n    return [e.code, type(e).__name__]"
    )
    assert result == completed(["UNSUPPORTED_OPTION", "WorkflowError"])


async def test_the_total_agent_cap_stops_a_runaway_loop() -> None:
    result, _ = await run_script(
        "for i in range(5):\n    await agent(f'task {i}')\nreturn 'done'", max_total_agents=2
    )
    assert result == failed(
        "WorkflowError: this run reached its total agent cap (2) — a runaway-loop backstop; "
        "raise the applicable maxTotalAgents limit if the scale is intentional "
        "(line 2 of the script)",
        agents=2,
    )


async def test_the_item_cap_applies_to_parallel_and_pipeline() -> None:
    options = WorkflowOptions(max_items_per_call=2)
    result, _ = await run_script(
        "await parallel([agent('a'), agent('b'), agent('c')])", options=options
    )
    assert result.error is not None
    assert result.error.startswith(
        "WorkflowError: parallel() received 3 items — over the per-call cap (2); split the work "
        "or raise maxItemsPerCall in the engine config"
    )
    result, _ = await run_script("await pipeline([1, 2, 3], str)", options=options)
    assert result.error is not None
    assert result.error.startswith("WorkflowError: pipeline() received 3 items")


async def test_a_failing_thunk_becomes_none() -> None:
    result, _ = await run_script(
        "def bad():\n    raise KeyError('x')\n"
        "async def worse():\n    return 1 / 0\n"
        "return await parallel([bad, worse, lambda: 'ok', worse()])"
    )
    assert result == completed([None, None, "ok", None])


async def test_pipeline_runs_items_through_stages_independently() -> None:
    result, _ = await run_script(
        "def first(prev, item, index):\n    return [prev, item, index]\n"
        "async def second(prev, item, index):\n"
        "    if item == 'b':\n        raise ValueError('skip')\n"
        "    return prev + ['second']\n"
        "def third(prev, item, index):\n    return prev + ['third']\n"
        "return await pipeline(['a', 'b'], first, second, third)"
    )
    assert result == completed([["a", "a", 0, "second", "third"], None])


async def test_phases_logs_and_agent_events_are_reported() -> None:
    long_prompt = "x" * 60
    result, recorder = await run_script(
        "phase('scan')\nlog('starting')\n"
        f"await agent('{long_prompt}\\nsecond line')\n"
        "await agent('p', label='custom', phase='other')\n"
        "return None"
    )
    assert result == completed(None, agents=2)
    assert [e.title for e in recorder.of(WorkflowPhaseStarted)] == ["scan"]
    assert [e.message for e in recorder.of(WorkflowLogged)] == ["starting"]
    starts = recorder.of(WorkflowAgentStarted)
    assert [(s.agent.seq, s.agent.label, s.agent.phase) for s in starts] == [
        (1, "x" * 47 + "…", "scan"),
        (2, "custom", "other"),
    ]
    ends = recorder.of(WorkflowAgentEnded)
    assert [(e.agent.child_id, e.outcome) for e in ends] == [
        (starts[0].agent.child_id, "completed"),
        (starts[1].agent.child_id, "completed"),
    ]
    assert recorder.names()[-1] == "workflow/end"


async def test_one_slot_runs_children_one_after_another() -> None:
    result, recorder = await run_script(
        "return await parallel([lambda: agent('a'), lambda: agent('b'), lambda: agent('c')])",
        options=WorkflowOptions(max_concurrent_agents=1),
    )
    assert result.stop_reason == "completed"
    members = [
        (e.event, e.agent.seq)
        for e in recorder.events
        if isinstance(e, WorkflowAgentStarted | WorkflowAgentEnded)
    ]
    assert members == [
        ("workflow/agent-start", 1),
        ("workflow/agent-end", 1),
        ("workflow/agent-start", 2),
        ("workflow/agent-end", 2),
        ("workflow/agent-start", 3),
        ("workflow/agent-end", 3),
    ]


async def test_a_child_that_fails_gives_none() -> None:
    children = """
"*":
  - error: the model is down
"""
    result, recorder = await run_script("return await agent('p')", children=children)
    assert result == completed(None, agents=1)
    assert [e.outcome for e in recorder.of(WorkflowAgentEnded)] == ["failed"]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("import json\nreturn json.loads('[1]')", completed([1])),
        (
            "from collections import Counter\nreturn dict(Counter('aab'))",
            completed({"a": 2, "b": 1}),
        ),
        ("print('hello')\nreturn 1", completed(1)),
    ],
)
async def test_pure_modules_and_print_are_available(script: str, expected: WorkflowResult) -> None:
    result, _ = await run_script(script)
    assert result == expected


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (
            "import os",
            "ImportError: module 'os' is not available in a workflow script (available: bisect, "
            "collections, copy, dataclasses, datetime, decimal, difflib, enum, fractions, "
            "functools, heapq, itertools, json, math, operator, random, re, statistics, string, "
            "textwrap, typing); the agents do the work, the script coordinates "
            "(line 1 of the script)",
        ),
        ("open('/etc/passwd')", "NameError: name 'open' is not defined (line 1 of the script)"),
        ("eval('1')", "NameError: name 'eval' is not defined (line 1 of the script)"),
    ],
)
async def test_the_script_has_no_files_or_imports_beyond_pure_modules(
    script: str, error: str
) -> None:
    result, _ = await run_script(script)
    assert result == failed(error)


async def test_a_long_first_slice_ends_the_run_and_its_process() -> None:
    options = WorkflowOptions(sync_timeout_ms=200)
    result, _ = await run_script("phase('spin')\nwhile True:\n    pass", options=options)
    assert result == failed(
        "the workflow script ran longer than its synchronous slice limit (syncTimeoutMs 200 ms) "
        "before its first await; await agent(), parallel() or pipeline() instead of computing "
        "in a loop"
    )


async def test_exiting_the_interpreter_is_a_failed_run() -> None:
    result, _ = await run_script("raise SystemExit(3)")
    assert result == failed("SystemExit: 3 (line 1 of the script)")
