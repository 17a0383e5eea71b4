"""Bad input to the control tools: `send_message`, `interrupt_agent`, `list_agents` and `report`
(docs/design.md §7.7; agent references, §7.6; bad input changes nothing, §1).

Every mistake comes back to the model as an `Error: ...` result it can act on, with a stable
code; nothing is delivered and nothing is written: the caller's log gains only its own turn
(the call and its result), every other log of the store is unchanged, and no child starts.

Two trees share one store: `lead` (sid 1) with its settled continuable child `reviewer` (sid 2),
and another root (sid 3, named `other`) with its own child `helper` (sid 4).
"""

from __future__ import annotations

import json

import pytest
from continuable_support import Settlements, background, sequential_session_ids, sid, wait_turn
from delegation_support import Gates, Lifecycle, ToolReply, events, inputs, make_runtime, replies

from subagents import AgentConfig
from subagents.delegation import DelegationRuntime
from subagents.errors import ErrorCode
from subagents.ids import SessionId
from subagents.messages import JsonObject
from subagents.sessions import InboxSpliced, ToolResultEvent, TurnEnd

INVALID = "Error: invalid arguments: "
NOT_DELIVERED = " (the message was not delivered)"
NOT_REQUESTED = " (no interrupt was requested)"
GHOST = "0b6f3c1e-5a8d-4c9e-9f41-2d7a6b3e8c10"


def malformed(reference: str) -> str:
    return (
        f"Error: invalid agent reference {reference!r}: give a child's name (`reviewer`), a path "
        "below you (`reviewer/checker`), a path from the root (`/reviewer/checker`) or a "
        "session id"
    )


def case(
    tool: str, args: JsonObject, expected: str, code: ErrorCode, *, id: str
) -> pytest.ParameterSet:
    return pytest.param(tool, args, expected, code, id=id)


def reference_cases(tool: str, extra: JsonObject, tail: str) -> list[pytest.ParameterSet]:
    """Bad `agent` values, shared by `send_message` and `interrupt_agent`."""
    cases = [
        case(
            tool,
            {**extra},
            INVALID + "'agent' is a required property",
            ErrorCode.INVALID_ARGS,
            id=f"{tool}-agent-missing",
        ),
        case(
            tool,
            {**extra, "agent": ""},
            INVALID + "agent: '' should be non-empty",
            ErrorCode.INVALID_ARGS,
            id=f"{tool}-agent-empty",
        ),
        case(
            tool,
            {**extra, "agent": 7},
            INVALID + "agent: 7 is not of type 'string'",
            ErrorCode.INVALID_ARGS,
            id=f"{tool}-agent-int",
        ),
        case(
            tool,
            {**extra, "agent": ["reviewer"]},
            INVALID + "agent: ['reviewer'] is not of type 'string'",
            ErrorCode.INVALID_ARGS,
            id=f"{tool}-agent-list",
        ),
    ]
    for reference, label in [
        ("Reviewer", "upper-case"),
        ("a//b", "empty-segment"),
        ("/", "bare-slash"),
        ("reviewer/", "trailing-slash"),
        ("lead/x", "lead-inside-a-path"),
        ("/lead/reviewer", "lead-inside-an-absolute-path"),
        ("review er", "space"),
        ("   ", "blank"),
        (GHOST.upper(), "upper-case-session-id"),
    ]:
        cases.append(
            case(
                tool,
                {**extra, "agent": reference},
                malformed(reference.strip()),
                ErrorCode.INVALID_NAME,
                id=f"{tool}-{label}",
            )
        )
    for reference, where in [
        ("ghost", "among the agents you started"),
        ("reviewer/ghost", "among the agents you started"),
        ("/ghost", "in this tree"),
    ]:
        cases.append(
            case(
                tool,
                {**extra, "agent": reference},
                f"Error: no agent named {reference!r} {where}; list_agents shows the names{tail}",
                ErrorCode.NOT_FOUND,
                id=f"{tool}-unknown-{reference.replace('/', '_')}",
            )
        )
    return cases


SEND_CASES = [
    *reference_cases("send_message", {"message": "Hello"}, NOT_DELIVERED),
    case(
        "send_message",
        {"agent": "reviewer"},
        INVALID + "'message' is a required property",
        ErrorCode.INVALID_ARGS,
        id="send-message-missing",
    ),
    case(
        "send_message",
        {"agent": "reviewer", "message": ""},
        INVALID + "message: '' should be non-empty",
        ErrorCode.INVALID_ARGS,
        id="send-message-empty",
    ),
    case(
        "send_message",
        {"agent": "reviewer", "message": " \n\t"},
        "Error: message must not be empty",
        ErrorCode.USAGE,
        id="send-message-blank",
    ),
    case(
        "send_message",
        {"agent": "reviewer", "message": {"text": "Hello"}},
        INVALID + "message: {'text': 'Hello'} is not of type 'string'",
        ErrorCode.INVALID_ARGS,
        id="send-message-object",
    ),
    case(
        "send_message",
        {"agent": GHOST, "message": "Hello"},
        f'Error: subagent "{GHOST}" is unavailable; list_agents shows your children'
        + NOT_DELIVERED,
        ErrorCode.NOT_RESUMABLE,
        id="send-unknown-session-id",
    ),
    case(
        "send_message",
        {"agent": "/lead", "message": "Hello"},
        f'Error: subagent "{sid(1)}" belongs to another parent session; only its direct '
        "parent can send it messages" + NOT_DELIVERED,
        ErrorCode.UNAUTHORIZED,
        id="send-to-self",
    ),
    case(
        "send_message",
        {"agent": sid(3), "message": "Hello"},
        f'Error: subagent "{sid(3)}" belongs to another parent session; only its direct '
        "parent can send it messages" + NOT_DELIVERED,
        ErrorCode.UNAUTHORIZED,
        id="send-to-another-root",
    ),
    case(
        "send_message",
        {"agent": sid(4), "message": "Hello"},
        f'Error: subagent "{sid(4)}" belongs to another parent session; only its direct '
        "parent can send it messages" + NOT_DELIVERED,
        ErrorCode.UNAUTHORIZED,
        id="send-to-another-trees-child",
    ),
]

INTERRUPT_CASES = [
    *reference_cases("interrupt_agent", {}, NOT_REQUESTED),
    case(
        "interrupt_agent",
        {"agent": "/lead"},
        'Error: agent "lead" cannot interrupt itself',
        ErrorCode.UNAUTHORIZED,
        id="interrupt-self",
    ),
    case(
        "interrupt_agent",
        {"agent": sid(3)},
        f'Error: subagent "{sid(3)}" is not a live descendant of agent "lead"',
        ErrorCode.UNAUTHORIZED,
        id="interrupt-another-root",
    ),
    case(
        "interrupt_agent",
        {"agent": sid(4)},
        f'Error: subagent "{sid(4)}" is not a live descendant of agent "lead"',
        ErrorCode.UNAUTHORIZED,
        id="interrupt-another-trees-child",
    ),
]

LIST_CASES = [
    case(
        "list_agents",
        {"scope": "everyone"},
        INVALID + "scope: 'everyone' is not one of ['children', 'descendants']",
        ErrorCode.INVALID_ARGS,
        id="list-scope-unknown",
    ),
    case(
        "list_agents",
        {"scope": 2},
        INVALID + "scope: 2 is not of type 'string'; scope: 2 is not one of ['children', "
        "'descendants']",
        ErrorCode.INVALID_ARGS,
        id="list-scope-int",
    ),
    case(
        "list_agents",
        {"cursor": "abc"},
        INVALID + "cursor: 'abc' is not of type 'integer'",
        ErrorCode.INVALID_ARGS,
        id="list-cursor-text",
    ),
    case(
        "list_agents",
        {"cursor": -1},
        INVALID + "cursor: -1 is less than the minimum of 0",
        ErrorCode.INVALID_ARGS,
        id="list-cursor-negative",
    ),
    case(
        "list_agents",
        {"cursor": 1.5},
        INVALID + "cursor: 1.5 is not of type 'integer'",
        ErrorCode.INVALID_ARGS,
        id="list-cursor-float",
    ),
    case(
        "list_agents",
        {"cursor": None},
        INVALID + "cursor: None is not of type 'integer'",
        ErrorCode.INVALID_ARGS,
        id="list-cursor-null",
    ),
    case(
        "list_agents",
        {"limit": 0},
        INVALID + "limit: 0 is less than the minimum of 1",
        ErrorCode.INVALID_ARGS,
        id="list-limit-zero",
    ),
    case(
        "list_agents",
        {"limit": 501},
        INVALID + "limit: 501 is greater than the maximum of 500",
        ErrorCode.INVALID_ARGS,
        id="list-limit-too-big",
    ),
    case(
        "list_agents",
        {"limit": "10"},
        INVALID + "limit: '10' is not of type 'integer'",
        ErrorCode.INVALID_ARGS,
        id="list-limit-text",
    ),
]

SETUP = f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - text: Started.
"""
OTHER = """
reviewer:
  - text: reviewed
other:
  - calls: [{tool: subagent, args: {name: helper, description: Help, prompt: Help}}]
  - text: Helped.
other/helper:
  - text: helped
"""


async def two_trees(rt: DelegationRuntime, gates: Gates) -> None:
    """`lead` whose reviewer settled while it was held, and the other tree beside it."""
    settled = Settlements(rt)
    lead = await rt.create_agent()
    await lead.followup("Start a reviewer")
    await gates.started("lead").wait()
    await settled.reached(1)
    gates.release("lead")
    await rt.wait_quiescent()
    await rt.run("Get help", agent=await rt.create_agent(config=AgentConfig(name="other")))


async def store_counts(rt: DelegationRuntime) -> dict[str, int]:
    await rt.store.flush()
    headers = await rt.store.list_headers(tenant=rt.tenant, roots_only=False)
    return {h.id: len(await rt.store.read(h.id, tenant=rt.tenant)) for h in headers}


TURN_KINDS = {
    "agent/inbox/spliced",
    "turn/start",
    "user/message",
    "request/header",
    "step/start",
    "assistant/message",
    "tool/call",
    "tool/result",
    "step/end",
    "turn/end",
}


@pytest.mark.parametrize(
    ("tool", "args", "expected", "code"), SEND_CASES + INTERRUPT_CASES + LIST_CASES
)
async def test_bad_control_input_is_an_error_result_and_changes_nothing(
    tool: str,
    args: JsonObject,
    expected: str,
    code: ErrorCode,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sequential_session_ids(monkeypatch)
    gates = Gates()
    call = json.dumps({"tool": tool, "args": args})
    rt, model = make_runtime(
        f"""{SETUP}
  - calls: [{call}]
  - text: I will fix that.
{OTHER}""",
        tools=[gates.tool()],
    )
    async with rt:
        await two_trees(rt, gates)
        lifecycle = Lifecycle(rt)
        lead = rt.get_agent(sid(1))
        assert lead is not None
        before = await store_counts(rt)
        first = lead.session.next_seq
        await lead.followup("Try the control tool")
        await rt.wait_quiescent()
        assert replies(lead)[-1] == ToolReply(tool, expected, True, code)
        # The lead's turn went on; it wrote only that turn.
        new = lead.session.records[first:]
        assert {r.kind for r in new} <= TURN_KINDS
        assert [r.event for r in new if isinstance(r.event, InboxSpliced)] == [
            events(new, InboxSpliced)[0]
        ]
        assert [e.message.text for e in inputs(new)] == ["Try the control tool"]
        assert events(new, TurnEnd)[-1].reason == "completed"
        after = await store_counts(rt)
        assert after.pop(sid(1)) == before.pop(sid(1)) + len(new)
        assert after == before  # no other log of the store changed
        assert lifecycle.events == []  # nothing was resumed or started
    model.assert_complete()


REPORT_CASES = [
    case(
        "report",
        {},
        INVALID + "'message' is a required property",
        ErrorCode.INVALID_ARGS,
        id="report-message-missing",
    ),
    case(
        "report",
        {"message": ""},
        INVALID + "message: '' should be non-empty",
        ErrorCode.INVALID_ARGS,
        id="report-message-empty",
    ),
    case(
        "report",
        {"message": "  "},
        "Error: message must not be empty",
        ErrorCode.USAGE,
        id="report-message-blank",
    ),
    case(
        "report",
        {"message": 5},
        INVALID + "message: 5 is not of type 'string'",
        ErrorCode.INVALID_ARGS,
        id="report-message-int",
    ),
]


@pytest.mark.parametrize(("tool", "args", "expected", "code"), REPORT_CASES)
async def test_a_bad_report_delivers_nothing_to_the_parent(
    tool: str, args: JsonObject, expected: str, code: ErrorCode
) -> None:
    call = json.dumps({"tool": tool, "args": args})
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - text: Noted.
reviewer:
  - calls: [{{tool: hold, args: {{label: reviewer}}}}]
  - calls: [{call}]
  - text: reviewed
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("reviewer").wait()
        await wait_turn(rt, lead, 1)
        gates.release("reviewer")
        await rt.wait_quiescent()
        reviewer = await rt.read_log(SessionId(lifecycle.started[0].child_id))
        results = [e.message for e in events(reviewer, ToolResultEvent)][1:]
        assert [(m.name, m.content, m.is_error) for m in results] == [(tool, expected, True)]
        assert [e.code for e in events(reviewer, ToolResultEvent)][1:] == [code]
        # The lead received its prompt and the settlement notice, no report.
        assert [e.message.source.kind for e in inputs(lead.session.records)] == [
            "user",
            "subagent-settled",
        ]
    model.assert_complete()


async def test_agents_without_the_report_tool_get_an_unknown_tool_error() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls: [{tool: subagent, args: {name: helper, description: Help, prompt: Help}}]
  - calls: [{tool: report, args: {message: from the root}}]
  - text: I have nobody to report to.
helper:
  - calls: [{tool: report, args: {message: from a one-shot child}}]
  - text: helped
"""
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        helper = await rt.read_log(SessionId(lifecycle.started[0].child_id))
        (unknown,) = [e.message.content for e in events(helper, ToolResultEvent)]
        assert replies(lead)[-1] == ToolReply("report", unknown, True, ErrorCode.UNKNOWN_TOOL)
        assert unknown.startswith('Error: unknown tool "report"')
        assert [e.message.source.kind for e in inputs(lead.session.records)] == ["user"]
    model.assert_complete()
