"""Structured output (docs/design.md §7.8).

A child started from a definition with an `output_schema` answers through its private
`structured_output` tool; the parent receives the value as `structured`, rendered as JSON.
"""

from __future__ import annotations

from collections.abc import Sequence

from delegation_support import (
    Gates,
    Lifecycle,
    ToolReply,
    context_of,
    events,
    make_runtime,
    replies,
    session_count,
    wait_for_record,
)

from subagents import DelegationOptions
from subagents.definitions import AgentDefinition
from subagents.delegation import DelegationRuntime
from subagents.delegation._structured import MAX_INVALID_ATTEMPTS
from subagents.delegation._wording import MISSING_DIAGNOSTIC, WAIT_TEXT, structured_instruction
from subagents.errors import ErrorCode
from subagents.ids import SessionId
from subagents.messages import JsonObject
from subagents.sessions import EventRecord, InboxSpliced, ToolResultEvent, TurnEnd
from subagents.tools import tool

SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "score": {"type": "integer", "minimum": 0}},
    "required": ["title", "score"],
    "additionalProperties": False,
}

LEAD = """
lead:
  - calls: [{tool: subagent, args: {description: Extract, prompt: Extract it, agent: extractor}}]
  - text: Done.
"""

RECORDED = ToolReply("structured_output", "Structured output recorded.", False, None)


def options(schema: JsonObject = SCHEMA) -> DelegationOptions:
    definition = AgentDefinition(
        name="extractor",
        description="Extracts a title and a score.",
        body="You extract things.",
        output_schema=schema,
    )
    return DelegationOptions(definitions={"extractor": definition})


def child_replies(records: Sequence[EventRecord]) -> list[ToolReply]:
    return [
        ToolReply(e.message.name, e.message.content, e.message.is_error, e.code)
        for e in events(records, ToolResultEvent)
    ]


async def run_lead(rt: DelegationRuntime) -> tuple[list[ToolReply], list[EventRecord], Lifecycle]:
    """Run the lead; its replies, the extractor's log and the lifecycle events."""
    lifecycle = Lifecycle(rt)
    result = await rt.run("go")
    lead = rt.get_agent(result.session_id)
    assert lead is not None
    [started] = [e for e in lifecycle.started if e.name == "extractor"]
    records = await rt.store.read(SessionId(started.child_id), tenant=rt.tenant)
    return replies(lead), list(records), lifecycle


async def test_invalid_arguments_are_refused_and_the_child_retries_in_the_same_turn() -> None:
    # Items 23 and 24: INVALID_ARGS, a retry in the same turn, then the value as JSON.
    rt, model = make_runtime(
        LEAD
        + """
extractor:
  - calls: [{tool: structured_output, args: {title: T, score: -1}}]
  - calls: [{tool: structured_output, args: {title: T, score: 3}}]
""",
        delegation=options(),
    )
    async with rt:
        lead_replies, records, lifecycle = await run_lead(rt)
    assert lead_replies == [ToolReply("subagent", '{"title":"T","score":3}', False, None)]
    assert [e.stop_reason for e in lifecycle.ended] == ["completed"]
    invalid, accepted = child_replies(records)
    assert invalid.code == ErrorCode.INVALID_ARGS
    assert invalid.content.startswith("Error: invalid arguments: score: -1 is less than")
    assert accepted == RECORDED
    assert len(events(records, TurnEnd)) == 1  # the retry came in the same turn
    request = model.requests_of("extractor")[0]
    assert context_of(request).endswith(structured_instruction())
    [spec] = [t for t in request.tools if t.name == "structured_output"]
    assert spec.parameters == SCHEMA
    model.assert_complete()


async def test_the_run_result_carries_the_structured_value() -> None:
    # Item 24 at the service: `structured` equals the arguments, `completed`.
    rt, _ = make_runtime(
        """
extractor:
  - calls: [{tool: structured_output, args: {title: Report, score: 7}}]
""",
        delegation=options(),
    )
    async with rt:
        parent = await rt.create_agent()
        admission = rt.subagents.admit(
            "spawn",
            parent=parent,
            prompt="Extract it",
            label="Extract",
            definition=rt.definitions["extractor"],
        )
        run = await rt.subagents.launch(admission)
        try:
            result = await run.wait()
        finally:
            await run.dispose()
    assert result.structured == {"title": "Report", "score": 7}
    assert result.stop_reason == "completed"
    assert result.diagnostic is None


async def test_a_later_call_in_the_same_response_is_refused_and_not_executed() -> None:
    # Item 25.
    executed: list[str] = []

    @tool
    async def note(text: str) -> str:
        """Note something."""
        executed.append(text)
        return "noted"

    rt, model = make_runtime(
        LEAD
        + """
extractor:
  - calls:
      - {tool: structured_output, args: {title: T, score: 1}}
      - {tool: note, args: {text: after}}
""",
        tools=[note],
        delegation=options(),
    )
    async with rt:
        lead_replies, records, _ = await run_lead(rt)
    assert lead_replies == [ToolReply("subagent", '{"title":"T","score":1}', False, None)]
    assert child_replies(records) == [
        RECORDED,
        ToolReply(
            "note",
            "Error: structured output already recorded: the run is complete, so `note` is "
            "not executed",
            True,
            ErrorCode.DENIED,
        ),
    ]
    assert executed == []
    model.assert_complete()


async def test_a_plain_text_answer_fails_without_a_re_prompt() -> None:
    # Item 27.
    rt, model = make_runtime(
        LEAD
        + """
extractor:
  - text: The title is T.
""",
        delegation=options(),
    )
    async with rt:
        lead_replies, _, lifecycle = await run_lead(rt)
    [reply] = lead_replies
    assert reply.is_error
    assert reply.content == (
        f"Error: subagent run failed\nDiagnostic: {MISSING_DIAGNOSTIC}\n"
        "Partial output before the run ended:\nThe title is T."
    )
    assert [e.stop_reason for e in lifecycle.ended] == ["error"]
    assert len(model.requests_of("extractor")) == 1  # not re-prompted
    model.assert_complete()


async def test_invalid_attempts_are_bounded() -> None:
    bad = "{tool: structured_output, args: {title: T}}"
    rt, model = make_runtime(
        LEAD
        + "extractor:\n"
        + "".join(f"  - calls: [{bad}]\n" for _ in range(MAX_INVALID_ATTEMPTS))
        + """  - calls: [{tool: structured_output, args: {title: T, score: 1}}]
  - text: I could not do it.
""",
        delegation=options(),
    )
    async with rt:
        lead_replies, records, lifecycle = await run_lead(rt)
    found = child_replies(records)
    assert [r.code for r in found] == [ErrorCode.INVALID_ARGS] * MAX_INVALID_ATTEMPTS + [
        ErrorCode.DENIED
    ]
    assert found[-2].content.endswith("so the run has failed: stop now")
    assert "the run has failed: `structured_output` is not executed" in found[-1].content
    [reply] = lead_replies
    assert reply.is_error
    assert (
        f"Diagnostic: structured_output was called with invalid arguments "
        f"{MAX_INVALID_ATTEMPTS} times" in reply.content
    )
    assert [e.stop_reason for e in lifecycle.ended] == ["error"]
    model.assert_complete()


def steered(record: EventRecord) -> bool:
    return isinstance(record.event, InboxSpliced) and record.event.target == "next-step"


async def test_refused_while_a_delegated_child_is_still_running() -> None:
    gates = Gates()
    rt, model = make_runtime(
        LEAD
        + """
extractor:
  - calls: [{tool: subagent, args: {name: helper, description: Help, prompt: Help,
                                    run_in_background: true}}]
  - calls: [{tool: structured_output, args: {title: T, score: 1}}]
  - calls: [{tool: hold, args: {label: extractor}}]
  - calls: [{tool: structured_output, args: {title: T, score: 2}}]
extractor/helper:
  - calls: [{tool: hold, args: {label: helper}}]
  - text: Helped.
""",
        tools=[gates.tool()],
        delegation=options(),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("extractor").wait()
        extractor = await lifecycle.child("extractor", rt)
        gates.release("helper")
        # The helper's settlement notice joins the extractor's next step.
        await wait_for_record(
            rt,
            extractor,
            steered,
        )
        gates.release("extractor")
        await lead.when_idle()
        lead_replies = replies(lead)
        records = list(extractor.session.records)
    started, refused, held, accepted = child_replies(records)
    assert started.name == "subagent"
    assert not started.is_error
    assert refused == ToolReply("structured_output", f"Error: {WAIT_TEXT}", True, "USAGE")
    assert held.content == "released extractor"
    assert accepted == RECORDED
    assert lead_replies == [ToolReply("subagent", '{"title":"T","score":2}', False, None)]
    model.assert_complete()


async def test_a_schema_whose_root_is_not_an_object_is_refused_before_any_child_exists() -> None:
    for schema, words in [
        ({"type": "array", "items": {"type": "string"}}, "root is not an object schema"),
        (
            {"type": "object", "properties": {"x": {"$ref": "https://example.com/x.json"}}},
            'remote reference "https://example.com/x.json"',
        ),
    ]:
        rt, model = make_runtime(LEAD, delegation=options(schema))
        async with rt:
            lifecycle = Lifecycle(rt)
            result = await rt.run("go")
            lead = rt.get_agent(result.session_id)
            assert lead is not None
            [reply] = replies(lead)
            assert reply.is_error
            assert reply.code == ErrorCode.USAGE
            assert words in reply.content
            assert lifecycle.started == []
            assert await session_count(rt) == 1
        model.assert_complete()
