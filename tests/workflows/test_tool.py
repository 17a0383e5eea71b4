"""The `workflow` tool as a model uses it (docs/design.md §9; issue 6 "bad
input"): success text and truncation, the spec's error texts, and no process left behind.

A scripted lead calls the tool; its children answer from the scripted model.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import pytest
from workflow_support import Gates, Recorder, guest_processes, pid_alive, tool_replies

from subagents import DelegationOptions
from subagents._task_owner import TaskOwner
from subagents.core import Agent
from subagents.delegation import DelegationRuntime
from subagents.errors import ErrorCode, WorkflowError
from subagents.testing import (
    FakeClock,
    GatedClock,
    InMemoryEventStore,
    RecordingModel,
    ToolCallContext,
)
from subagents.tools import ToolSpec
from subagents.workflows import (
    WorkflowAgentEnded,
    WorkflowEnded,
    WorkflowEngine,
    WorkflowOptions,
    WorkflowResult,
    WorkflowToolConfig,
    mount_workflow_tool,
)
from subagents.workflows._tool import render_success, result_text

META = {"name": "audit", "description": "Audit the files"}


def lead_script(arguments: dict[str, Any], *, children: Any = None) -> str:
    """A model script (JSON is YAML) where the lead calls `workflow` once, then finishes."""
    script: dict[str, Any] = {
        "lead": [{"calls": [{"tool": "workflow", "args": arguments}]}, {"text": "finished"}],
        "*": children if children is not None else [{"text": "child answer"}],
    }
    return json.dumps(script)


@asynccontextmanager
async def open_tool(
    script: str,
    *,
    options: WorkflowOptions | None = None,
    config: WorkflowToolConfig | None = None,
    tools: list[ToolSpec] | None = None,
    clock: GatedClock | None = None,
) -> AsyncGenerator[tuple[DelegationRuntime, Agent, WorkflowEngine], None]:
    """A runtime whose agents have the `workflow` tool; `clock` is the engine's (wall limit)."""
    runtime_clock = FakeClock()
    model = RecordingModel.from_yaml(script, clock=runtime_clock)
    runtime = DelegationRuntime(
        model=model,
        store=InMemoryEventStore(),
        clock=runtime_clock,
        tools=tools or [],
        delegation=DelegationOptions(definitions={}),
        sandbox="danger-full-access",
    )
    async with runtime:
        engine = mount_workflow_tool(runtime, options, config=config, clock=clock)
        try:
            lead = await runtime.create_agent()
            yield runtime, lead, engine
        finally:
            await engine.aclose()


async def call_workflow(
    arguments: dict[str, Any],
    *,
    options: WorkflowOptions | None = None,
    config: WorkflowToolConfig | None = None,
    children: Any = None,
) -> tuple[str, bool]:
    async with open_tool(
        lead_script(arguments, children=children), options=options, config=config
    ) as (
        runtime,
        lead,
        _,
    ):
        await runtime.run("go", agent=lead)
        [reply] = tool_replies(lead)
    assert guest_processes() == []
    return reply


async def test_a_completed_run_returns_its_value_as_pretty_json() -> None:
    script = "a = await agent('one')\nb = await agent('two')\nreturn {'answers': [a, b], 'n': 2}"
    reply = await call_workflow({"meta": META, "script": script})
    assert reply == (
        'workflow "audit" completed (2 agents).\nReturn value:\n'
        '{\n  "answers": [\n    "child answer",\n    "child answer"\n  ],\n  "n": 2\n}',
        False,
    )


@pytest.mark.parametrize(("agents", "noun"), [(0, "0 agents"), (1, "1 agent"), (2, "2 agents")])
def test_agent_is_singular_only_for_one(agents: int, noun: str) -> None:
    assert render_success("x", agents=agents, value="é", max_chars=100) == (
        f'workflow "x" completed ({noun}).\nReturn value:\n"é"'
    )


async def test_a_long_value_is_truncated_for_the_model() -> None:
    reply = await call_workflow(
        {"meta": META, "script": "return 'abcdefghijklmnopqrstuvwxyz'"},
        config=WorkflowToolConfig(max_result_chars=10),
    )
    assert reply == (
        'workflow "audit" completed (0 agents).\nReturn value:\n"abcdefghi\n'
        "… [truncated: 18 more characters]",
        False,
    )


@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        (
            {"meta": META, "script": "x = = 1"},
            "Error: workflow script does not parse: invalid syntax (line 1, column 5)",
        ),
        ({"script": "return 1"}, "Error: invalid meta: meta must be an object"),
        (
            {"meta": {"name": "audit"}, "script": "return 1"},
            "Error: invalid meta: meta.description must be a non-empty string",
        ),
        (
            {"meta": META, "script": "return 1", "args": [1, 2]},
            "Error: invalid arguments: args must be a JSON object; wrap a list in a field, e.g. "
            '{"files": [...]}',
        ),
        (
            {"meta": META},
            "Error: invalid arguments: script must be a string (the Python script body)",
        ),
        (
            {"meta": META, "script": "return {'when': {1, 2}}"},
            "Error: workflow run failed: the workflow's return value is not plain JSON data — "
            "workflow result.when: a set is not plain JSON data (use a list). Return only "
            "JSON-serializable objects/arrays/scalars.",
        ),
        (
            {
                "meta": META,
                "script": "files = args['files']\nreturn files[3]",
                "args": {"files": []},
            },
            "Error: workflow run failed: IndexError: list index out of range "
            "(line 2 of the script)",
        ),
        (
            {"meta": META, "script": "return await agent('x', effort='high')"},
            'Error: workflow run failed: WorkflowError: agent() option "effort" is deferred and '
            "not supported by this engine (supported: label, phase, schema, provider, model, "
            "name) "
            "(line 1 of the script)",
        ),
    ],
)
async def test_bad_input_gets_the_spec_texts(arguments: dict[str, Any], text: str) -> None:
    assert await call_workflow(arguments) == (text, True)


WALL_TEXT = (
    "Error: workflow run failed: workflow run exceeded its wall-clock limit of 600 s; the "
    "script was stopped and every process of the run killed. Split the work into smaller "
    "workflows or raise the engine's wall_seconds"
)


async def test_a_script_that_spins_forever_hits_the_wall_clock_limit() -> None:
    clock = GatedClock()
    script = lead_script({"meta": META, "script": "await agent('warm up')\nwhile True:\n    pass"})
    async with open_tool(script, clock=clock) as (runtime, lead, engine):
        recorder = Recorder(engine)
        owner = TaskOwner("test")
        running = owner.spawn(runtime.run("go", agent=lead))
        wall = await clock.next_sleeper()
        await recorder.wait_for(WorkflowAgentEnded)  # the script is past its first await
        pid = await recorder.pid()
        wall.set()
        await running
        await owner.aclose()
        [reply] = tool_replies(lead)
    assert reply == (WALL_TEXT, True)
    assert not pid_alive(pid)
    assert guest_processes() == []


async def test_a_script_that_waits_forever_hits_the_wall_clock_limit_and_frees_its_child() -> None:
    gates = Gates()
    clock = GatedClock()
    script = lead_script(
        {"meta": META, "script": "return await agent('wait')"},
        children=[{"calls": [{"tool": "hold", "args": {"label": "forever"}}]}],
    )
    async with open_tool(script, tools=[gates.tool()], clock=clock) as (runtime, lead, engine):
        recorder = Recorder(engine)
        owner = TaskOwner("test")
        running = owner.spawn(runtime.run("go", agent=lead))
        wall = await clock.next_sleeper()
        await gates.started("forever").wait()
        wall.set()
        await running
        await owner.aclose()
        [reply] = tool_replies(lead)
    assert reply == (WALL_TEXT, True)
    assert gates.cancelled == ["forever"]
    [end] = recorder.of(WorkflowEnded)
    assert (end.stop_reason, end.agents_started) == ("error", 1)
    assert guest_processes() == []


async def test_a_script_that_never_yields_hits_the_sync_slice_limit() -> None:
    reply = await call_workflow(
        {"meta": META, "script": "while True:\n    pass"},
        options=WorkflowOptions(sync_timeout_ms=100),
    )
    assert reply == (
        "Error: workflow run failed: the workflow script ran longer than its synchronous slice "
        "limit (syncTimeoutMs 100 ms) before its first await; await agent(), parallel() or "
        "pipeline() instead of computing in a loop",
        True,
    )


async def test_stopping_the_parent_cancels_the_run_and_its_children() -> None:
    gates = Gates()
    script = lead_script(
        {"meta": META, "script": "return await agent('wait')"},
        children=[{"calls": [{"tool": "hold", "args": {"label": "child"}}]}],
    )
    async with open_tool(script, tools=[gates.tool()]) as (_, lead, engine):
        recorder = Recorder(engine)
        await lead.followup("go")
        await gates.started("child").wait()
        await lead.cancel("user")
        await lead.when_idle()
        await recorder.wait_for(WorkflowEnded)
        [(text, is_error)] = tool_replies(lead)
    assert (text, is_error) == ("Error: tool call aborted", True)
    [end] = recorder.of(WorkflowEnded)
    assert (end.stop_reason, end.error) == (
        "cancelled",
        "workflow run cancelled: parent step aborted",
    )
    assert gates.cancelled == ["child"]
    assert guest_processes() == []


@dataclass
class Context:
    call_id: str = "call-1"
    tool_name: str = "workflow"
    agent_id: str = "00000000-0000-4000-8000-000000000000"
    agent_name: str = "ghost"
    grant: str | None = None

    def conclude_turn(self) -> None:
        pass


async def test_the_tool_needs_a_calling_agent() -> None:
    async with open_tool(lead_script({})) as (runtime, _, _):
        spec = runtime.tools.get("workflow")
        assert spec is not None
        with pytest.raises(WorkflowError) as caught:
            await spec.handler({"meta": META, "script": "return 1"}, Context())
    assert caught.value.code == ErrorCode.NO_CALLER
    assert caught.value.message == (
        "workflow tool requires a calling agent (no live agent "
        "00000000-0000-4000-8000-000000000000)"
    )


async def test_the_guide_is_the_authoring_contract() -> None:
    async with open_tool(lead_script({})) as (runtime, _, _):
        spec = runtime.tools.get("workflow")
        guide = runtime.tools.get("workflow_guide")
        assert spec is not None
        assert guide is not None
        text = await guide.handler({}, ToolCallContext("workflow_guide"))
    # The description says when to use it and points at the guide, which has the rest.
    offered = {"workflow", "workflow_guide", "subagent"}
    assert spec.describe is not None
    assert "Call workflow_guide once before your first script" in spec.describe(offered)
    assert "use subagent" in spec.describe(offered)
    assert "workflow_guide" not in spec.describe({"workflow"})
    assert "subagent" not in spec.describe({"workflow"}).replace("subagents", "")
    assert isinstance(text, str)
    for phrase in (
        "await agent(prompt, *, schema=None",
        "await parallel(items)",
        "await pipeline(items, *stages)",
        "phase(title)",
        "log(message)",
        "WorkflowError",
        "At most 16 children run at once and 200 in all",
        "Example:",
        'return {"bugs": found, "summary": summary}',
    ):
        assert phrase in text, phrase
    assert spec.parameters["required"] == ["meta", "script"]


@pytest.mark.parametrize(
    ("result", "text", "code"),
    [
        (
            WorkflowResult(
                value=None,
                stop_reason="cancelled",
                agents_started=1,
                error="workflow run cancelled: workflow disposed",
            ),
            "workflow run was cancelled (workflow run cancelled: workflow disposed)",
            ErrorCode.CANCELLED,
        ),
        (
            WorkflowResult(value=None, stop_reason="cancelled", agents_started=0),
            "workflow run was cancelled",
            ErrorCode.CANCELLED,
        ),
        (
            WorkflowResult(value=None, stop_reason="error", agents_started=0, error="boom"),
            "workflow run failed: boom",
            ErrorCode.WORKFLOW_FAILED,
        ),
        (
            WorkflowResult(value=None, stop_reason="error", agents_started=0),
            "workflow run failed: unknown error",
            ErrorCode.WORKFLOW_FAILED,
        ),
        (
            WorkflowResult(value=None, stop_reason=cast("Any", "exploded"), agents_started=0),
            "workflow run ended abnormally (exploded)",
            ErrorCode.WORKFLOW_FAILED,
        ),
    ],
)
def test_a_run_that_did_not_complete_gets_the_spec_texts(
    result: WorkflowResult, text: str, code: ErrorCode
) -> None:
    # spec 1.3: the tool raises; the registry makes it an `Error: ...` result
    with pytest.raises(WorkflowError) as caught:
        result_text("audit", result, max_chars=100)
    assert (caught.value.message, caught.value.code) == (text, code)
    assert result_text(
        "audit",
        WorkflowResult(value=[1], stop_reason="completed", agents_started=1),
        max_chars=100,
    ) == ('workflow "audit" completed (1 agent).\nReturn value:\n[\n  1\n]')


async def test_the_example_in_the_guide_runs_as_written() -> None:
    """The guide's example is a working script (docs/design.md §9), not just prose."""
    async with open_tool(lead_script({})) as (runtime, _, _):
        guide = runtime.tools.get("workflow_guide")
        assert guide is not None
        text = await guide.handler({}, ToolCallContext("workflow_guide"))
    assert isinstance(text, str)
    example = textwrap.dedent(text.split("Example:\n", 1)[1])
    bugs = {"calls": [{"tool": "structured_output", "args": {"bugs": ["off by one"]}}]}
    script = json.dumps(
        {
            "lead": [
                {
                    "calls": [
                        {
                            "tool": "workflow",
                            "args": {
                                "meta": META,
                                "script": example,
                                "args": {"files": ["a.py", "b.py"]},
                            },
                        }
                    ]
                },
                {"text": "finished"},
            ],
            "agent-1": [bugs, {"text": "unused"}],
            "agent-2": [bugs, {"text": "unused"}],
            "agent-3": [{"text": "one bug per file"}],
        }
    )
    async with open_tool(script) as (runtime, lead, _):
        await runtime.run("go", agent=lead)
        [reply] = tool_replies(lead)
    assert reply == (
        'workflow "audit" completed (3 agents).\nReturn value:\n'
        + json.dumps(
            {
                "bugs": {"a.py": ["off by one"], "b.py": ["off by one"]},
                "summary": "one bug per file",
            },
            indent=2,
        ),
        False,
    )
