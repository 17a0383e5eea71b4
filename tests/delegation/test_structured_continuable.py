"""Structured output of continuable (background, resumable) children (docs/design.md
§7.8, applied to each activation; settlement notices, §7.4).

Every activation of a child started from a definition with an `output_schema` must end with
its own valid `structured_output` call; its settlement notice then carries the value as
compact JSON. The schema is kept in the child's descriptor, so a resume re-installs it without
reading definitions. Waits are on settlements, log records, gates and quiescence.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from continuable_support import Settlements, entered, own_records, wait_turn
from delegation_support import (
    Gates,
    Lifecycle,
    ToolReply,
    context_of,
    events,
    make_runtime,
    wait_for_record,
)

from subagents import DelegationOptions
from subagents.core import Agent, SessionEventPosted, replay_inbox
from subagents.definitions import AgentDefinition
from subagents.delegation._structured import MAX_INVALID_ATTEMPTS, StructuredCapture
from subagents.delegation._wording import MISSING_DIAGNOSTIC, WAIT_TEXT, structured_instruction
from subagents.errors import ErrorCode
from subagents.ids import SessionId
from subagents.messages import JsonObject, MessageSource
from subagents.sessions import (
    EventRecord,
    InboxSpliced,
    SqliteEventStore,
    SubagentDescriptor,
    SubagentSettled,
    ToolResultEvent,
    TurnEnd,
    UserMessageEvent,
)

SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "score": {"type": "integer", "minimum": 0}},
    "required": ["title", "score"],
    "additionalProperties": False,
}

START = (
    "{tool: subagent, args: {description: Extract, prompt: Extract it, agent: extractor, "
    "run_in_background: true}}"
)
RECORDED = ToolReply("structured_output", "Structured output recorded.", False, None)
FINISHED = (
    "Background subagent extractor finished and will do no further work unless you send it more."
)
FAILED = "Background subagent extractor failed before it finished."


def options(
    schema: JsonObject | None = SCHEMA, body: str = "You extract things."
) -> DelegationOptions:
    definition = AgentDefinition(
        name="extractor",
        description="Extracts a title and a score.",
        body=body,
        output_schema=schema,
    )
    return DelegationOptions(definitions={"extractor": definition})


def valued(json_text: str) -> str:
    return f"{FINISHED}\nIts structured result:\n{json_text}"


def failed(diagnostic: str, closing: str) -> str:
    return f"{FAILED}\nDiagnostic: {diagnostic}\nIts closing message:\n{closing}"


def notices(agent: Agent) -> list[str]:
    return [text for _, kind, text in entered(agent) if kind == "subagent-settled"]


def tool_replies(records: Sequence[EventRecord]) -> list[ToolReply]:
    return [
        ToolReply(e.message.name, e.message.content, e.message.is_error, e.code)
        for e in events(records, ToolResultEvent)
    ]


def parent_source(parent: Agent) -> MessageSource:
    return MessageSource(kind="parent", name=parent.name)


async def test_a_background_start_settles_with_the_value_as_json() -> None:
    # Item 24 for a continuable child: the notice carries the value, the stop is completed.
    rt, model = make_runtime(
        f"""
lead:
  - calls: [{START}]
  - text: Started.
  - text: Noted.
extractor:
  - calls: [{{tool: structured_output, args: {{title: Report, score: 7}}}}]
""",
        delegation=options(),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await rt.wait_quiescent()
        [started] = lifecycle.started
        records = await rt.store.read(SessionId(started.child_id), tenant=rt.tenant)
        assert notices(lead) == [valued('{"title":"Report","score":7}')]
    assert [(e.name, e.stop_reason) for e in lifecycle.ended] == [("extractor", "completed")]
    [descriptor] = events(records, SubagentDescriptor)
    assert (descriptor.mode, descriptor.output_schema) == ("continuable", SCHEMA)
    assert tool_replies(records) == [RECORDED]
    assert [e.stop_reason for e in events(records, SubagentSettled)] == ["completed"]
    [request] = model.requests_of("extractor")
    assert context_of(request).endswith(structured_instruction())
    [spec] = [t for t in request.tools if t.name == "structured_output"]
    assert spec.parameters == SCHEMA
    model.assert_complete()


async def test_invalid_arguments_are_refused_and_the_child_retries_in_the_same_turn() -> None:
    # Item 23 for a continuable child.
    rt, model = make_runtime(
        f"""
lead:
  - calls: [{START}]
  - text: Started.
  - text: Noted.
extractor:
  - calls: [{{tool: structured_output, args: {{title: T, score: -1}}}}]
  - calls: [{{tool: structured_output, args: {{title: T, score: 3}}}}]
""",
        delegation=options(),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await rt.wait_quiescent()
        [started] = lifecycle.started
        records = await rt.store.read(SessionId(started.child_id), tenant=rt.tenant)
        assert notices(lead) == [valued('{"title":"T","score":3}')]
    invalid, accepted = tool_replies(records)
    assert invalid.code == ErrorCode.INVALID_ARGS
    assert invalid.content.startswith("Error: invalid arguments: score: -1 is less than")
    assert accepted == RECORDED
    assert len(events(records, TurnEnd)) == 1  # the retry came in the same turn
    # What a resume after a crash would recover from this activation's records.
    capture = StructuredCapture(SCHEMA)
    capture.restore(records)
    assert (capture.invalid, capture.sealed) == (1, True)
    assert capture.staged is not None
    assert capture.staged[1] == {"title": "T", "score": 3}
    model.assert_complete()


async def test_an_activation_that_ends_without_the_call_settles_as_an_error() -> None:
    # Item 27: an error with the diagnostic, never a re-prompt.
    rt, model = make_runtime(
        f"""
lead:
  - calls: [{START}]
  - text: Started.
  - text: Noted.
extractor:
  - text: The title is T.
""",
        delegation=options(),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await rt.wait_quiescent()
        assert notices(lead) == [failed(MISSING_DIAGNOSTIC, "The title is T.")]
    assert [e.stop_reason for e in lifecycle.ended] == ["error"]
    assert len(model.requests_of("extractor")) == 1  # not re-prompted
    model.assert_complete()


async def test_too_many_invalid_attempts_settle_as_an_error() -> None:
    bad = "{tool: structured_output, args: {title: T}}"
    rt, model = make_runtime(
        f"""
lead:
  - calls: [{START}]
  - text: Started.
  - text: Noted.
extractor:
"""
        + "".join(f"  - calls: [{bad}]\n" for _ in range(MAX_INVALID_ATTEMPTS))
        + """  - calls: [{tool: structured_output, args: {title: T, score: 1}}]
  - text: I could not do it.
""",
        delegation=options(),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await rt.wait_quiescent()
        [started] = lifecycle.started
        records = await rt.store.read(SessionId(started.child_id), tenant=rt.tenant)
        [notice] = notices(lead)
    assert [r.code for r in tool_replies(records)] == [
        ErrorCode.INVALID_ARGS
    ] * MAX_INVALID_ATTEMPTS + [ErrorCode.DENIED]
    assert notice.startswith(
        f"{FAILED}\nDiagnostic: structured_output was called with invalid arguments "
        f"{MAX_INVALID_ATTEMPTS} times"
    )
    assert [e.stop_reason for e in lifecycle.ended] == ["error"]
    model.assert_complete()


async def test_every_activation_needs_its_own_structured_call() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls: [{START}]
  - text: Started.
  - calls: [{{tool: send_message, args: {{agent: extractor, message: Score it again}}}}]
  - text: Asked again.
  - text: Noted the failure.
  - text: Noted the new score.
extractor:
  - calls: [{{tool: structured_output, args: {{title: T, score: 1}}}}]
  - calls: [{{tool: hold, args: {{label: second}}}}]
  - text: Same as before.
  - calls: [{{tool: structured_output, args: {{title: T, score: 3}}}}]
""",
        tools=[gates.tool()],
        delegation=options(),
    )
    async with rt:
        settlements = Settlements(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await settlements.reached(1)
        # The lead's notice turn sent a message: a second activation, held until the lead idles.
        await gates.started("second").wait()
        await wait_turn(rt, lead, 2)
        gates.release("second")
        await settlements.reached(2)
        await rt.wait_quiescent()
        extractor_id = SessionId(settlements.ended[0].child_id)
        await rt.continuable.send(lead, extractor_id, "Use the tool", source=parent_source(lead))
        await settlements.reached(3)
        await rt.wait_quiescent()
        records = await rt.store.read(extractor_id, tenant=rt.tenant)
        assert notices(lead) == [
            valued('{"title":"T","score":1}'),
            failed(MISSING_DIAGNOSTIC, "Same as before."),
            valued('{"title":"T","score":3}'),
        ]
    assert [e.stop_reason for e in settlements.ended] == ["completed", "error", "completed"]
    # The third activation's call was accepted: no guard left over from the first.
    assert tool_replies(records) == [
        RECORDED,
        ToolReply("hold", "released second", False, None),
        RECORDED,
    ]
    requests = model.requests_of("extractor")
    assert all(context_of(r).endswith(structured_instruction()) for r in requests)
    model.assert_complete()


async def test_input_for_an_activation_whose_answer_is_recorded_goes_to_the_next_one() -> None:
    # Spec 3.6: an activation with a recorded value no longer accepts input.
    rt, model = make_runtime(
        f"""
lead:
  - calls: [{START}]
  - text: Started.
  - text: Noted.
  - text: Noted again.
extractor:
  - calls: [{{tool: structured_output, args: {{title: T, score: 1}}}}]
  - calls: [{{tool: structured_output, args: {{title: T, score: 2}}}}]
""",
        delegation=options(),
    )
    async with rt:
        settlements = Settlements(rt)
        lead = await rt.create_agent()
        sealed: list[bool] = []
        async with asyncio.TaskGroup() as group:

            def on_posted(event: object) -> None:
                if not (
                    isinstance(event, SessionEventPosted)
                    and isinstance(event.record.event, ToolResultEvent)
                    and event.record.event.message.name == "structured_output"
                    and not sealed
                ):
                    return
                act = rt.continuable.get(event.agent_id)
                assert act is not None
                sealed.append(not act.closing and not act.admits_input)
                # Sent while the first activation is still resident with its answer recorded.
                group.create_task(
                    rt.continuable.send(lead, act.id, "Score it again", source=parent_source(lead))
                )

            unsubscribe = rt.subscribe(on_posted, types=(SessionEventPosted,))
            await lead.followup("go")
            await settlements.reached(2)  # keeps the group open for the send
        unsubscribe()
        await rt.wait_quiescent()
        extractor_id = SessionId(settlements.ended[0].child_id)
        records = await rt.store.read(extractor_id, tenant=rt.tenant)
        assert notices(lead) == [
            valued('{"title":"T","score":1}'),
            valued('{"title":"T","score":2}'),
        ]
    assert sealed == [True]
    kinds = [r.kind for r in records]
    [message] = [
        i
        for i, r in enumerate(records)
        if isinstance(r.event, UserMessageEvent) and r.event.message.text == "Score it again"
    ]
    assert kinds.index("subagent/settled") < message  # taken in by the second activation
    assert tool_replies(records) == [RECORDED, RECORDED]
    model.assert_complete()


def steered(record: EventRecord) -> bool:
    return isinstance(record.event, InboxSpliced) and record.event.target == "next-step"


async def test_refused_while_a_background_child_of_its_own_still_works() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls: [{START}]
  - text: Started.
  - text: Noted.
extractor:
  - calls: [{{tool: subagent, args: {{name: helper, description: Help, prompt: Help,
                                    run_in_background: true}}}}]
  - calls: [{{tool: structured_output, args: {{title: T, score: 1}}}}]
  - calls: [{{tool: hold, args: {{label: extractor}}}}]
  - calls: [{{tool: structured_output, args: {{title: T, score: 2}}}}]
extractor/helper:
  - calls: [{{tool: hold, args: {{label: helper}}}}]
  - text: Helped.
""",
        tools=[gates.tool()],
        delegation=options(),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        settlements = Settlements(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("extractor").wait()
        extractor = await lifecycle.child("extractor", rt)
        gates.release("helper")
        await wait_for_record(rt, extractor, steered)  # the helper's notice
        await settlements.reached(1)  # the helper is released
        gates.release("extractor")
        await rt.wait_quiescent()
        replies = tool_replies(own_records(extractor))
        assert notices(lead) == [valued('{"title":"T","score":2}')]
    started, refused, held, accepted = replies
    assert (started.name, started.is_error) == ("subagent", False)
    assert refused == ToolReply("structured_output", f"Error: {WAIT_TEXT}", True, "USAGE")
    assert held.content == "released extractor"
    assert accepted == RECORDED
    model.assert_complete()


FIRST_RUN = f"""
lead:
  - calls: [{START}]
  - text: Started.
extractor:
  - calls: [{{tool: hold, args: {{label: extractor}}}}]
"""
# Each agent continues at its own response index: earlier entries are placeholders.
SECOND_RUN = """
extractor:
  - text: (first run)
  - calls: [{tool: structured_output, args: {title: T, score: -1}}]
  - calls: [{tool: structured_output, args: {title: T, score: 4}}]
  - text: Nothing else.
"""


async def test_a_resume_in_a_fresh_runtime_restores_the_capture_from_the_descriptor(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    gates = Gates()
    rt, model = make_runtime(
        FIRST_RUN, store=SqliteEventStore(path), tools=[gates.tool()], delegation=options()
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("extractor").wait()
        await wait_turn(rt, lead, 1)
        extractor = await lifecycle.child("extractor", rt)
        # Accepted, never run: the runtime closes while the extractor's turn is in progress.
        await rt.continuable.send(lead, extractor.id, "Score it too", source=parent_source(lead))
        lead_id, extractor_id = lead.id, extractor.id
    model.assert_complete()

    # The definition changed since: no schema now. The child keeps the one it started with.
    rt, model = make_runtime(
        SECOND_RUN, store=SqliteEventStore(path), delegation=options(None, body="Changed.")
    )
    async with rt:
        settlements = Settlements(rt)
        resumed = await rt.continuable.resume_unsettled(await rt.read_header(lead_id))
        assert [a.id for a in resumed] == [extractor_id]
        await settlements.reached(1)
        await rt.wait_quiescent()
        # A settled child cold-resumed by a person's message needs its own call again.
        await rt.continuable.deliver_as_user(extractor_id, "Anything else?")
        await settlements.reached(2)
        await rt.wait_quiescent()
        records = await rt.store.read(extractor_id, tenant=rt.tenant)
        pending = replay_inbox(await rt.store.read(lead_id, tenant=rt.tenant))
    assert [e.stop_reason for e in settlements.ended] == ["completed", "error"]
    assert [m.text for m in pending.next_turn] == [
        valued('{"title":"T","score":4}'),
        failed(MISSING_DIAGNOSTIC, "Nothing else."),
    ]
    assert [(r.name, r.code) for r in tool_replies(records)[-2:]] == [
        ("structured_output", ErrorCode.INVALID_ARGS),
        ("structured_output", None),
    ]
    for request in model.requests_of("extractor"):
        assert request.system.endswith("\n\nYou extract things.")
        assert context_of(request).endswith(structured_instruction())
        [spec] = [t for t in request.tools if t.name == "structured_output"]
        assert spec.parameters == SCHEMA
    model.assert_complete()


CRASH_CHILD = Path(__file__).with_name("structured_crash_child.py")


async def test_an_answer_recorded_before_a_crash_is_announced_on_resume(tmp_path: Path) -> None:
    """SIGKILL once the extractor's turn that recorded its `structured_output` result is
    durable, before its settlement is. A fresh runtime resumes it sealed: it settles with that
    value."""
    path = tmp_path / "state.db"
    killed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(CRASH_CHILD), str(path)],
        capture_output=True,
        text=True,
        timeout=60,  # only for a child that hangs (a bug)
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    ids = json.loads(killed.stdout.strip().splitlines()[-1])
    lead_id, extractor_id = SessionId(ids["lead"]), SessionId(ids["child"])
    # No schema in today's definition: the capture comes back from the descriptor.
    rt, model = make_runtime(
        "extractor: []\n", store=SqliteEventStore(path), delegation=options(None)
    )
    async with rt:
        settlements = Settlements(rt)
        resumed = await rt.continuable.resume_unsettled(await rt.read_header(lead_id))
        assert [a.id for a in resumed] == [extractor_id]
        assert resumed[0].structured is not None
        assert resumed[0].structured.sealed
        await settlements.reached(1)
        await rt.wait_quiescent()
        records = await rt.store.read(extractor_id, tenant=rt.tenant)
        pending = replay_inbox(await rt.store.read(lead_id, tenant=rt.tenant))
    assert [e.stop_reason for e in settlements.ended] == ["completed"]
    assert [e.stop_reason for e in events(records, SubagentSettled)] == ["completed"]
    assert [m.text for m in pending.next_turn] == [valued('{"title":"Crash","score":5}')]
    assert model.requests_of("extractor") == []  # settled from the log, no new model call
    model.assert_complete()
