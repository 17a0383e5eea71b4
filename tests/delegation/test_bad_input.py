"""Bad input to `subagent`, `subagent_fork` and the task tools (docs/design.md
§7.2 and §7.5; bad input changes nothing, §1).

Every mistake comes back to the model as an `Error: ...` tool result with a stable code, the
turn goes on, and nothing is started: no session, no catalog entry, no task, no lifecycle event.
"""

from __future__ import annotations

import json

import pytest
from delegation_support import (
    Gates,
    Lifecycle,
    ToolReply,
    catalog,
    events,
    make_runtime,
    one_shot_runtime,
    replies,
    session_count,
    wait_for_record,
)

from subagents import AgentConfig
from subagents.errors import ErrorCode
from subagents.messages import JsonObject
from subagents.sessions import TurnEnd
from subagents.testing import FakeClock

INVALID = "Error: invalid arguments: "
SESSION_ID = "0b6f3c1e-5a8d-4c9e-9f41-2d7a6b3e8c10"


def bad_name(name: str) -> str:
    return (
        f"Error: invalid subagent name {name!r}: use 1-32 lower-case letters, digits or '-', "
        "starting with a letter (for example `reviewer` or `test-runner`)"
    )


def case(
    tool: str, args: JsonObject, expected: str, code: ErrorCode, *, id: str
) -> pytest.ParameterSet:
    return pytest.param(tool, args, expected, code, id=id)


OK: JsonObject = {"description": "Review", "prompt": "Review app.py"}

SUBAGENT_CASES = [
    case(
        "subagent",
        {"prompt": "p"},
        INVALID + "'description' is a required property",
        ErrorCode.INVALID_ARGS,
        id="description-missing",
    ),
    case(
        "subagent",
        {},
        INVALID + "'description' is a required property; 'prompt' is a required property",
        ErrorCode.INVALID_ARGS,
        id="everything-missing",
    ),
    case(
        "subagent",
        {**OK, "description": 123},
        INVALID + "description: 123 is not of type 'string'",
        ErrorCode.INVALID_ARGS,
        id="description-int",
    ),
    case(
        "subagent",
        {**OK, "description": ""},
        INVALID + "description: '' should be non-empty",
        ErrorCode.INVALID_ARGS,
        id="description-empty",
    ),
    case(
        "subagent",
        {**OK, "description": "   "},
        "Error: invalid description: expected text that is not blank",
        ErrorCode.USAGE,
        id="description-blank",
    ),
    case(
        "subagent",
        {**OK, "description": "   ", "run_in_background": True},
        "Error: invalid description: expected text that is not blank",
        ErrorCode.USAGE,
        id="description-blank-background",
    ),
    case(
        "subagent",
        {"description": "Review"},
        INVALID + "'prompt' is a required property",
        ErrorCode.INVALID_ARGS,
        id="prompt-missing",
    ),
    case(
        "subagent",
        {**OK, "prompt": ["Review", "app.py"]},
        INVALID + "prompt: ['Review', 'app.py'] is not of type 'string'",
        ErrorCode.INVALID_ARGS,
        id="prompt-list",
    ),
    case(
        "subagent",
        {**OK, "prompt": ""},
        INVALID + "prompt: '' should be non-empty",
        ErrorCode.INVALID_ARGS,
        id="prompt-empty",
    ),
    case(
        "subagent",
        {**OK, "prompt": " \n\t"},
        "Error: invalid prompt: expected text that is not blank",
        ErrorCode.USAGE,
        id="prompt-blank",
    ),
    case(
        "subagent",
        {**OK, "name": 7},
        INVALID + "name: 7 is not of type 'string'",
        ErrorCode.INVALID_ARGS,
        id="name-int",
    ),
    case("subagent", {**OK, "name": ""}, bad_name(""), ErrorCode.INVALID_NAME, id="name-empty"),
    case(
        "subagent",
        {**OK, "name": "Reviewer"},
        bad_name("Reviewer"),
        ErrorCode.INVALID_NAME,
        id="name-upper",
    ),
    case("subagent", {**OK, "name": "1st"}, bad_name("1st"), ErrorCode.INVALID_NAME, id="digit"),
    case(
        "subagent",
        {**OK, "name": "a" * 33},
        bad_name("a" * 33),
        ErrorCode.INVALID_NAME,
        id="name-too-long",
    ),
    case(
        "subagent",
        {**OK, "name": "reviewer/checker"},
        bad_name("reviewer/checker"),
        ErrorCode.INVALID_NAME,
        id="name-path",
    ),
    case(
        "subagent",
        {**OK, "name": SESSION_ID},
        bad_name(SESSION_ID),
        ErrorCode.INVALID_NAME,
        id="name-session-id",
    ),
    case(
        "subagent",
        {**OK, "name": "lead"},
        "Error: `lead` is reserved for the root agent; choose another name",
        ErrorCode.INVALID_NAME,
        id="name-lead",
    ),
    case(
        "subagent",
        {**OK, "name": "Bad Name", "run_in_background": True},
        bad_name("Bad Name"),
        ErrorCode.INVALID_NAME,
        id="name-invalid-background",
    ),
    case(
        "subagent",
        {**OK, "run_in_background": "true"},
        INVALID + "run_in_background: 'true' is not of type 'boolean'",
        ErrorCode.INVALID_ARGS,
        id="background-string",
    ),
    case(
        "subagent",
        {**OK, "run_in_background": 1},
        INVALID + "run_in_background: 1 is not of type 'boolean'",
        ErrorCode.INVALID_ARGS,
        id="background-int",
    ),
    case(
        "subagent",
        {**OK, "cwd": 5},
        INVALID + "cwd: 5 is not of type 'string'",
        ErrorCode.INVALID_ARGS,
        id="cwd-int",
    ),
    case(
        "subagent_fork",
        {"description": "Fork", "name": "Fork"},
        INVALID + "'prompt' is a required property",
        ErrorCode.INVALID_ARGS,
        id="fork-prompt-missing",
    ),
    case(
        "subagent_fork",
        {"description": "Fork", "prompt": "Think", "name": "Fork"},
        bad_name("Fork"),
        ErrorCode.INVALID_NAME,
        id="fork-name-upper",
    ),
]

TASK_CASES = [
    case(
        "task_output",
        {},
        INVALID + "'task_id' is a required property",
        ErrorCode.INVALID_ARGS,
        id="output-id-missing",
    ),
    case(
        "task_output",
        {"task_id": 3},
        INVALID + "task_id: 3 is not of type 'string'",
        ErrorCode.INVALID_ARGS,
        id="output-id-int",
    ),
    case(
        "task_output",
        {"task_id": ""},
        'Error: invalid task_id: expected a non-empty string, got ""',
        ErrorCode.USAGE,
        id="output-id-empty",
    ),
    case(
        "task_output",
        {"task_id": "  "},
        'Error: invalid task_id: expected a non-empty string, got "  "',
        ErrorCode.USAGE,
        id="output-id-blank",
    ),
    case(
        "task_output",
        {"task_id": "subagent-9"},
        "Error: unknown task subagent-9; task_list shows yours",
        ErrorCode.UNKNOWN_TASK,
        id="output-id-unknown",
    ),
    case(
        "task_output",
        {"task_id": "subagent-9", "wait": True},
        "Error: unknown task subagent-9; task_list shows yours",
        ErrorCode.UNKNOWN_TASK,
        id="output-wait-unknown",
    ),
    case(
        "task_output",
        {"task_id": "subagent-1", "wait": "yes"},
        INVALID + "wait: 'yes' is not of type 'boolean'",
        ErrorCode.INVALID_ARGS,
        id="output-wait-string",
    ),
    case(
        "task_output",
        {"task_id": "subagent-1", "wait": True, "timeout_ms": 0},
        INVALID + "timeout_ms: 0 is less than or equal to the minimum of 0",
        ErrorCode.INVALID_ARGS,
        id="output-timeout-zero",
    ),
    case(
        "task_output",
        {"task_id": "subagent-1", "wait": True, "timeout_ms": -5},
        INVALID + "timeout_ms: -5 is less than or equal to the minimum of 0",
        ErrorCode.INVALID_ARGS,
        id="output-timeout-negative",
    ),
    case(
        "task_output",
        {"task_id": "subagent-1", "wait": True, "timeout_ms": "100"},
        INVALID + "timeout_ms: '100' is not of type 'number'",
        ErrorCode.INVALID_ARGS,
        id="output-timeout-string",
    ),
    case(
        "task_kill",
        {},
        INVALID + "'task_id' is a required property",
        ErrorCode.INVALID_ARGS,
        id="kill-id-missing",
    ),
    case(
        "task_kill",
        {"task_id": ""},
        'Error: invalid task_id: expected a non-empty string, got ""',
        ErrorCode.USAGE,
        id="kill-id-empty",
    ),
    case(
        "task_kill",
        {"task_id": "nope"},
        "Error: unknown task nope; task_list shows yours",
        ErrorCode.UNKNOWN_TASK,
        id="kill-id-unknown",
    ),
    case(
        "task_kill",
        {"task_id": "subagent-1", "reason": 5},
        INVALID + "reason: 5 is not of type 'string'",
        ErrorCode.INVALID_ARGS,
        id="kill-reason-int",
    ),
]


@pytest.mark.parametrize(("tool", "args", "expected", "code"), SUBAGENT_CASES + TASK_CASES)
async def test_bad_input_is_an_error_result_and_starts_nothing(
    tool: str, args: JsonObject, expected: str, code: ErrorCode
) -> None:
    clock = FakeClock()
    # The task tools exist where background children are one-shot tasks.
    runtime_for = one_shot_runtime if tool.startswith("task_") else make_runtime
    rt, model = runtime_for(
        f"""
lead:
  - calls:
      - {{tool: {tool}, args: {json.dumps(args)}}}
  - text: I will correct the call.
""",
        clock=clock,
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        start = clock.now()
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [ToolReply(tool, expected, True, code)]
        # The model saw the error and went on: its turn completed normally.
        assert result.output == "I will correct the call."
        assert events(lead.session.records, TurnEnd) == [TurnEnd(turn=1, reason="completed")]
        assert await session_count(rt) == 1
        assert catalog(lead) == []
        assert rt.tasks.list(lead.id) == []
        assert lifecycle.events == []
        assert clock.now() == start  # nothing waited
    model.assert_complete()


async def test_undeclared_keys_are_tolerated() -> None:
    rt, model = one_shot_runtime(
        """
lead:
  - calls:
      - {tool: task_list, args: {verbose: true}}
      - {tool: subagent, args: {description: Review, prompt: Review app.py, colour: blue}}
  - text: done
agent-1:
  - text: reviewed
"""
    )
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [
            ToolReply("task_list", "(no background tasks)", False, None),
            ToolReply("subagent", "reviewed", False, None),
        ]
    model.assert_complete()


async def test_another_owners_task_id_is_refused_before_any_wait() -> None:
    gates = Gates()
    clock = FakeClock()
    rt, model = one_shot_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: tester, description: Run tests, prompt: Run them,
                                run_in_background: true}}
  - text: Started.
other:
  - calls:
      - {tool: task_output, args: {task_id: subagent-1, wait: true, timeout_ms: 5000}}
      - {tool: task_kill, args: {task_id: subagent-1, reason: mine now}}
  - text: It is not mine.
tester:
  - calls: [{tool: hold, args: {label: tester}}]
""",
        clock=clock,
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        other = await rt.create_agent(config=AgentConfig(name="other"))
        await lead.followup("go")
        await gates.started("tester").wait()
        await wait_for_record(rt, lead, lambda r: isinstance(r.event, TurnEnd))
        count = await session_count(rt)
        start = clock.now()
        await other.followup("look")
        await wait_for_record(rt, other, lambda r: isinstance(r.event, TurnEnd))
        refused = "Error: task subagent-1 belongs to another session"
        assert replies(other) == [
            ToolReply("task_output", refused, True, ErrorCode.UNAUTHORIZED),
            ToolReply("task_kill", refused, True, ErrorCode.UNAUTHORIZED),
        ]
        assert clock.now() == start
        record = rt.tasks.get("subagent-1", lead.id)
        assert (record.status, record.reported) == ("running", False)
        assert await session_count(rt) == count
        assert catalog(other) == []
        await lead.dispose()
    model.assert_complete()
