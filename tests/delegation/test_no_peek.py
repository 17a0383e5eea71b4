"""Conformance tests for `read_transcript` and its no-peek guard (docs/design.md
§7.7).

A parent reads a descendant's transcript only after the descendant settled: while a continuable
child runs or waits, while a one-shot background task is not terminal, or while a foreground
child runs, the read fails with `cannot peek at in-flight task <id> (status=<status>); await
settlement` (`IN_FLIGHT`) and nothing of the child's log reaches the parent. After completion,
failure or kill it reads fine. Anything but the caller's own descendants reads as unknown, and a
refused read writes nothing anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from continuable_support import Settlements, background, sequential_session_ids, sid, wait_turn
from delegation_support import (
    Gates,
    Lifecycle,
    ToolReply,
    events,
    inputs,
    make_runtime,
    one_shot_runtime,
    replies,
)

from subagents import AgentConfig
from subagents.core import Agent
from subagents.delegation import DelegationRuntime
from subagents.delegation._wording import MAX_ENTRY_CHARS, transcript_entries
from subagents.errors import ErrorCode
from subagents.ids import MessageId
from subagents.messages import (
    AssistantMessage,
    JsonObject,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    user_message,
)
from subagents.sessions import (
    AssistantMessageEvent,
    EventRecord,
    InboxSpliced,
    SessionEvent,
    SqliteEventStore,
    ToolResultEvent,
    TurnEnd,
    UserMessageEvent,
)
from subagents.testing import FakeClock, RecordingModel

INVALID = "Error: invalid arguments: "
NOTHING_READ = " (no transcript was read)"
GHOST = "0b6f3c1e-5a8d-4c9e-9f41-2d7a6b3e8c10"


def in_flight(child_id: str, status: str) -> ToolReply:
    return ToolReply(
        "read_transcript",
        f"Error: cannot peek at in-flight task {child_id} (status={status}); await settlement",
        True,
        ErrorCode.IN_FLIGHT,
    )


def read(agent: str, limit: int | None = None) -> str:
    """One YAML flow mapping: a `read_transcript` call."""
    args: JsonObject = {"agent": agent} if limit is None else {"agent": agent, "limit": limit}
    return json.dumps({"tool": "read_transcript", "args": args})


def transcripts(lead_replies: list[ToolReply]) -> list[ToolReply]:
    return [r for r in lead_replies if r.name == "read_transcript"]


def seen_by(agent: Agent, secret: str) -> bool:
    """Whether `secret` is in any text of the agent's log: messages in, answers, results."""
    found: list[str] = []
    for record in agent.session.records:
        event = record.event
        if isinstance(event, UserMessageEvent | AssistantMessageEvent):
            found.append(event.message.text)
        elif isinstance(event, ToolResultEvent):
            found.append(event.message.content)
        elif isinstance(event, InboxSpliced):
            found.extend(m.text for m in event.inserted)
    return any(secret in text for text in found)


async def test_a_running_continuable_child_cannot_be_read_until_it_settles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sequential_session_ids(monkeypatch)
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - calls:
      - {read("reviewer")}
      - {read(sid(2))}
      - {read("/reviewer")}
  - text: The reviewer is still working.
  - calls: [{read("reviewer")}]
  - text: Read its transcript.
reviewer:
  - text: "Draft finding PEEK-1: app.py leaks a file handle."
    calls: [{{tool: hold, args: {{label: reviewer}}}}]
  - text: app.py is fine after all.
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("Review app.py")
        await gates.started("reviewer").wait()
        await gates.started("lead").wait()
        gates.release("lead")
        await wait_turn(rt, lead, 1)
        # Three spellings of the same working child, three refusals, and nothing of its log.
        assert transcripts(replies(lead)) == [in_flight(sid(2), "running")] * 3
        assert not seen_by(lead, "PEEK-1")

        gates.release("reviewer")
        await rt.wait_quiescent()
        assert transcripts(replies(lead))[3:] == [
            ToolReply(
                "read_transcript",
                f"transcript of subagent reviewer ({sid(2)}), last turn completed: 5 of 5 "
                "entries, most recent last\n"
                "[1] user (parent lead): Review app.py\n"
                "[2] assistant: Draft finding PEEK-1: app.py leaks a file handle.\n"
                '[3] tool call hold: {"label":"reviewer"}\n'
                "[4] tool result hold: released reviewer\n"
                "[5] assistant: app.py is fine after all.",
                False,
                None,
            )
        ]
    model.assert_complete()


async def test_a_child_waiting_on_its_own_child_and_a_running_grandchild_are_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sequential_session_ids(monkeypatch)
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - calls:
      - {read("reviewer")}
      - {read("reviewer/checker")}
  - text: Both are busy.
  - calls:
      - {read("reviewer")}
      - {read("reviewer/checker", limit=1)}
  - text: Both are done.
reviewer:
  - calls:
      - {background("checker", "Check style", "Check the style")}
  - text: Waiting for the checker.
  - text: The checker is done.
reviewer/checker:
  - calls: [{{tool: hold, args: {{label: checker}}}}]
  - text: style ok
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("checker").wait()
        await gates.started("lead").wait()
        reviewer = await lifecycle.child("reviewer", rt)
        await wait_turn(rt, reviewer, 1)  # idle, but it owns a working child
        gates.release("lead")
        await wait_turn(rt, lead, 1)
        assert transcripts(replies(lead)) == [
            in_flight(sid(2), "waiting"),
            in_flight(sid(3), "running"),
        ]
        gates.release("checker")
        await rt.wait_quiescent()
        (reviewer_log, checker_log) = transcripts(replies(lead))[2:]
        assert reviewer_log.content.endswith(
            "[4] assistant: Waiting for the checker.\n"
            "[5] user (subagent-settled reviewer/checker): Background subagent reviewer/checker "
            "finished and will do no further work unless you send it more.\n"
            "    Its closing message:\n"
            "    style ok\n"
            "[6] assistant: The checker is done."
        )
        assert reviewer_log.content.startswith(
            f"transcript of subagent reviewer ({sid(2)}), last turn completed: 6 of 6 entries"
        )
        assert checker_log == ToolReply(
            "read_transcript",
            f"transcript of subagent reviewer/checker ({sid(3)}), last turn completed: 1 of 4 "
            "entries, most recent last\n"
            "… 3 earlier entries left out; raise limit (at most 200) to see them\n"
            "[4] assistant: style ok",
            False,
            None,
        )
    model.assert_complete()


async def test_a_foreground_grandchild_is_in_flight_until_its_run_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sequential_session_ids(monkeypatch)
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - calls: [{read("reviewer/helper")}]
  - text: The helper is busy.
  - calls: [{read("reviewer/helper")}]
  - text: Read the helper.
reviewer:
  - calls: [{{tool: subagent, args: {{name: helper, description: Help, prompt: Help out}}}}]
  - text: The helper helped.
reviewer/helper:
  - text: "Working on it: PEEK-3"
    calls: [{{tool: hold, args: {{label: helper}}}}]
  - text: helped
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("helper").wait()
        await gates.started("lead").wait()
        gates.release("lead")
        await wait_turn(rt, lead, 1)
        assert transcripts(replies(lead)) == [in_flight(sid(3), "running")]
        assert not seen_by(lead, "PEEK-3")
        gates.release("helper")
        await rt.wait_quiescent()
        done = transcripts(replies(lead))[1]
        assert not done.is_error
        assert done.content.startswith(
            f"transcript of subagent reviewer/helper ({sid(3)}), last turn completed: 5 of 5"
        )
        assert "[2] assistant: Working on it: PEEK-3" in done.content
    model.assert_complete()


async def test_a_one_shot_background_task_is_read_only_once_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sequential_session_ids(monkeypatch)
    gates = Gates()
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
      - {background("helper", "Help", "Help out")}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - calls: [{read("helper")}]
  - text: The task is running.
  - calls: [{read("helper")}]
  - text: Read the task's transcript.
helper:
  - text: "Half done: PEEK-4"
    calls: [{{tool: hold, args: {{label: helper}}}}]
  - text: helped
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("helper").wait()
        await gates.started("lead").wait()
        gates.release("lead")
        await wait_turn(rt, lead, 1)
        assert transcripts(replies(lead)) == [in_flight(sid(2), "running")]
        assert not seen_by(lead, "PEEK-4")
        gates.release("helper")
        await rt.wait_quiescent()  # the task's notice woke the lead, which read it
        (record,) = rt.tasks.list(lead.id)
        assert (record.status, record.subject) == ("completed", sid(2))
        done = transcripts(replies(lead))[1]
        assert not done.is_error
        assert "[2] assistant: Half done: PEEK-4" in done.content
        assert done.content.endswith("[5] assistant: helped")
    model.assert_complete()


async def test_a_stopping_task_is_in_flight_and_a_killed_one_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sequential_session_ids(monkeypatch)
    gates = Gates()
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
      - {background("helper", "Help", "Help out")}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - calls: [{{tool: task_kill, args: {{task_id: subagent-1}}}}]
  - calls: [{read("helper")}]
  - text: It is stopping.
  - calls: [{read("helper")}]
  - text: It was killed.
helper:
  - calls: [{{tool: hold, args: {{label: helper}}}}]
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        linger = gates.linger("helper")
        await lead.followup("go")
        await gates.started("helper").wait()
        await gates.started("lead").wait()
        gates.release("lead")
        await wait_turn(rt, lead, 1)
        assert transcripts(replies(lead)) == [in_flight(sid(2), "stopping")]
        linger.set()
        await rt.wait_quiescent()
        assert rt.tasks.get("subagent-1", lead.id).status == "killed"
        await lead.followup("Read it now")  # a killed task sends no notice
        await wait_turn(rt, lead, 2)
        killed = transcripts(replies(lead))[1]
        assert not killed.is_error
        assert killed.content.endswith("turn 1 ended: aborted")
    model.assert_complete()


def test_entries_are_clipped_and_failed_turns_shown() -> None:
    long = "x" * (MAX_ENTRY_CHARS + 25)
    answer = AssistantMessage(
        id=MessageId("a1"),
        content=(TextBlock(long), ToolCallBlock(id="c1", name="hold", arguments='{"label": "x"}')),
    )
    result = ToolResultMessage(
        id=MessageId("r1"), call_id="c1", name="hold", content="boom", is_error=True
    )
    events_in_order: list[SessionEvent] = [
        UserMessageEvent(message=user_message("hi"), turn=1),
        AssistantMessageEvent(turn=1, step=1, message=answer),
        ToolResultEvent(turn=1, step=1, message=result),
        TurnEnd(turn=1, reason="error", error_message="model failed"),
    ]
    records = [EventRecord(seq, 0.0, e) for seq, e in enumerate(events_in_order, 1)]
    assert transcript_entries(records) == [
        "user: hi",
        f"assistant: {'x' * MAX_ENTRY_CHARS}… [25 more characters]",
        'tool call hold: {"label": "x"}',
        "tool error hold: boom",
        "turn 1 ended: error (model failed)",
    ]


# -- refusals: bad input and targets outside the caller's subtree ---------------------------


def case(args: JsonObject, expected: str, code: ErrorCode, *, id: str) -> pytest.ParameterSet:
    return pytest.param(args, expected, code, id=id)


def unavailable(session_id: str) -> str:
    return (
        f'Error: subagent "{session_id}" is unavailable; list_agents shows your children'
        + NOTHING_READ
    )


def unknown_name(reference: str, where: str = "among the agents you started") -> str:
    return (
        f"Error: no agent named {reference!r} {where}; list_agents shows the names" + NOTHING_READ
    )


BAD_CASES = [
    case({}, INVALID + "'agent' is a required property", ErrorCode.INVALID_ARGS, id="missing"),
    case(
        {"agent": ""}, INVALID + "agent: '' should be non-empty", ErrorCode.INVALID_ARGS, id="empty"
    ),
    case(
        {"agent": 7}, INVALID + "agent: 7 is not of type 'string'", ErrorCode.INVALID_ARGS, id="int"
    ),
    case(
        {"agent": ["reviewer"]},
        INVALID + "agent: ['reviewer'] is not of type 'string'",
        ErrorCode.INVALID_ARGS,
        id="list",
    ),
    case(
        {"agent": "Reviewer"},
        "Error: invalid agent reference 'Reviewer': give a child's name (`reviewer`), a path "
        "below you (`reviewer/checker`), a path from the root (`/reviewer/checker`) or a "
        "session id",
        ErrorCode.INVALID_NAME,
        id="malformed",
    ),
    case({"agent": "ghost"}, unknown_name("ghost"), ErrorCode.NOT_FOUND, id="unknown-name"),
    case(
        {"agent": "/ghost"},
        unknown_name("/ghost", "in this tree"),
        ErrorCode.NOT_FOUND,
        id="unknown-absolute-name",
    ),
    case({"agent": GHOST}, unavailable(GHOST), ErrorCode.NOT_FOUND, id="unknown-session-id"),
    case({"agent": "/lead"}, unknown_name("/lead"), ErrorCode.NOT_FOUND, id="self-by-name"),
    case({"agent": sid(1)}, unavailable(sid(1)), ErrorCode.NOT_FOUND, id="self-by-id"),
    case({"agent": sid(3)}, unavailable(sid(3)), ErrorCode.NOT_FOUND, id="another-root"),
    case({"agent": sid(4)}, unavailable(sid(4)), ErrorCode.NOT_FOUND, id="another-trees-child"),
    case(
        {"agent": "reviewer", "limit": 0},
        INVALID + "limit: 0 is less than the minimum of 1",
        ErrorCode.INVALID_ARGS,
        id="limit-zero",
    ),
    case(
        {"agent": "reviewer", "limit": 201},
        INVALID + "limit: 201 is greater than the maximum of 200",
        ErrorCode.INVALID_ARGS,
        id="limit-too-big",
    ),
    case(
        {"agent": "reviewer", "limit": "10"},
        INVALID + "limit: '10' is not of type 'integer'",
        ErrorCode.INVALID_ARGS,
        id="limit-text",
    ),
    case(
        {"agent": "reviewer", "limit": 2.5},
        INVALID + "limit: 2.5 is not of type 'integer'",
        ErrorCode.INVALID_ARGS,
        id="limit-float",
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


async def store_counts(rt: DelegationRuntime) -> dict[str, int]:
    await rt.store.flush()
    headers = await rt.store.list_headers(tenant=rt.tenant, roots_only=False)
    return {h.id: len(await rt.store.read(h.id, tenant=rt.tenant)) for h in headers}


@pytest.mark.parametrize(("args", "expected", "code"), BAD_CASES)
async def test_a_bad_read_is_an_error_result_and_changes_nothing(
    args: JsonObject, expected: str, code: ErrorCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    sequential_session_ids(monkeypatch)
    gates = Gates()
    call = json.dumps({"tool": "read_transcript", "args": args})
    rt, model = make_runtime(
        f"""{SETUP}
  - calls: [{call}]
  - text: I will fix that.
{OTHER}""",
        tools=[gates.tool()],
    )
    async with rt:
        # `lead` (sid 1) with its settled child `reviewer` (sid 2); `other` (sid 3) with its
        # one-shot child `helper` (sid 4).
        settled = Settlements(rt)
        lead = await rt.create_agent()
        await lead.followup("Start a reviewer")
        await gates.started("lead").wait()
        await settled.reached(1)
        gates.release("lead")
        await rt.wait_quiescent()
        await rt.run("Get help", agent=await rt.create_agent(config=AgentConfig(name="other")))
        lifecycle = Lifecycle(rt)
        before = await store_counts(rt)
        first = lead.session.next_seq
        await lead.followup("Read a transcript")
        await rt.wait_quiescent()
        assert replies(lead)[-1] == ToolReply("read_transcript", expected, True, code)
        new = lead.session.records[first:]
        assert [e.message.text for e in inputs(new)] == ["Read a transcript"]
        assert events(new, TurnEnd)[-1].reason == "completed"
        after = await store_counts(rt)
        assert after.pop(sid(1)) == before.pop(sid(1)) + len(new)
        assert after == before  # no other log of the store changed
        assert lifecycle.events == []  # nothing was resumed or started
    model.assert_complete()


async def test_a_sibling_and_an_ancestor_read_as_unknown_even_while_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sequential_session_ids(monkeypatch)
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("busy", "Busy work", "Work until released")}
      - {background("nosy", "Look around", "Look at your sibling")}
  - text: Started both.
  - text: One settled.
  - text: Both settled.
busy:
  - text: "Secret progress PEEK-5"
    calls: [{{tool: hold, args: {{label: busy}}}}]
  - text: busy done
nosy:
  - calls: [{{tool: hold, args: {{label: nosy}}}}]
  - calls:
      - {read("/busy")}
      - {read(sid(2))}
      - {read("/lead")}
      - {read(sid(1))}
  - text: I cannot see them.
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("busy").wait()
        await gates.started("nosy").wait()
        gates.release("nosy")
        nosy = await lifecycle.child("nosy", rt)
        await wait_turn(rt, nosy, 1)
        assert transcripts(replies(nosy)) == [
            ToolReply("read_transcript", unknown_name("/busy"), True, ErrorCode.NOT_FOUND),
            ToolReply("read_transcript", unavailable(sid(2)), True, ErrorCode.NOT_FOUND),
            ToolReply("read_transcript", unknown_name("/lead"), True, ErrorCode.NOT_FOUND),
            ToolReply("read_transcript", unavailable(sid(1)), True, ErrorCode.NOT_FOUND),
        ]
        assert not seen_by(nosy, "PEEK-5")
        gates.release("busy")
        await rt.wait_quiescent()
    model.assert_complete()


async def test_another_tenants_child_reads_as_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sequential_session_ids(monkeypatch)
    path = tmp_path / "state.db"
    clock = FakeClock()

    def tenant_runtime(tenant: str) -> DelegationRuntime:
        script = f"""
lead:
  - calls: [{{tool: subagent, args: {{name: helper, description: Help, prompt: Help}}}}]
  - text: Helped.
  - calls: [{read(sid(2))}]
  - text: Not mine.
helper:
  - text: "{tenant} secret"
"""
        model = RecordingModel.from_yaml(script, clock=clock)
        return DelegationRuntime(
            model=model, store=SqliteEventStore(path), clock=clock, tenant=tenant
        )

    async with tenant_runtime("globex") as rt:
        result = await rt.run("Get help")
        assert result.session_id == sid(1)
    async with tenant_runtime("acme") as rt:
        lead = await rt.create_agent()
        # The same script: the lead's first turn starts its own helper (sid 4), the second
        # asks for globex's helper by id.
        await rt.run("Get help", agent=lead)
        await rt.run("Read globex's helper", agent=lead)
        assert transcripts(replies(lead)) == [
            ToolReply("read_transcript", unavailable(sid(2)), True, ErrorCode.NOT_FOUND)
        ]
        assert not seen_by(lead, "globex secret")
        assert seen_by(lead, "acme secret")
