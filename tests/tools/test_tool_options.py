"""The `@tool` options beyond name, description and parallel safety, and what they change.

`validate`, `checkpoint` and `aborted_text` reach the `ToolSpec` from both decorator forms and
take effect in the pipeline and the agent loop; `Annotated[..., msgspec.Meta(...)]` parameters
keep their constraints, and a `msgspec.UNSET` default makes a parameter optional without
advertising a default.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Annotated

import pytest
from msgspec import UNSET, Meta, UnsetType

from subagents.core import Agent, AgentRuntime
from subagents.errors import ErrorCode
from subagents.ids import SessionId
from subagents.messages import JsonObject, JsonValue, ToolCallBlock
from subagents.sessions import (
    EventRecord,
    Session,
    ToolCallEvent,
    ToolResultEvent,
    WriteDone,
)
from subagents.testing import FakeClock, InMemoryEventStore, ScriptedModel, ToolCallContext
from subagents.tools import ToolOutcome, ToolRegistry, ToolSpec, execute_tool, tool


async def call(spec: ToolSpec, arguments: JsonObject) -> ToolOutcome:
    ctx = ToolCallContext(spec.name)
    block = ToolCallBlock(id="call-1", name=spec.name, arguments=json.dumps(arguments))
    scope = ToolRegistry([spec]).scope()
    return await execute_tool(scope, block, ctx, concluded=ctx.concluded)


def results(agent: Agent) -> list[ToolResultEvent]:
    return [r.event for r in agent.session.records if isinstance(r.event, ToolResultEvent)]


# -- the options reach the spec --------------------------------------------------------------


def test_keyword_options_reach_the_spec() -> None:
    @tool(
        name="careful",
        parallel_safe=True,
        validate=False,
        checkpoint=False,
        aborted_text="Error: the careful work was cancelled",
    )
    async def handler(x: int = 0) -> int:
        """Do careful work."""
        return x

    assert (handler.name, handler.description) == ("careful", "Do careful work.")
    assert handler.parallel_safe is True
    assert handler.validate is False
    assert handler.checkpoint is False
    assert handler.aborted_text == "Error: the careful work was cancelled"


def test_the_bare_form_keeps_the_spec_defaults() -> None:
    @tool
    async def plain(x: int) -> int:
        """Plain work."""
        return x

    assert plain.parallel_safe is False
    assert plain.validate is True
    assert plain.checkpoint is True
    assert plain.aborted_text is None


# -- validate --------------------------------------------------------------------------------


async def test_a_validating_tool_refuses_arguments_that_break_its_schema() -> None:
    seen: list[JsonObject] = []

    @tool
    async def strict(count: int, **raw: JsonValue) -> str:
        """Count."""
        seen.append({"count": count, **raw})
        return "ran"

    outcome = await call(strict, {"count": "many"})
    assert outcome.code == ErrorCode.INVALID_ARGS
    assert "count: 'many' is not of type 'integer'" in outcome.content
    assert seen == []


async def test_a_tool_without_validation_sees_the_invalid_arguments() -> None:
    seen: list[JsonObject] = []

    @tool(validate=False)
    async def lenient(count: int = 0, **raw: JsonValue) -> str:
        """Count, checking the arguments itself."""
        seen.append({"count": count, **raw})
        return f"got {count!r}"

    assert lenient.parameters == {
        "type": "object",
        "properties": {"count": {"type": "integer", "default": 0}},
    }
    outcome = await call(lenient, {"count": "many", "undeclared": [1]})
    assert outcome == ToolOutcome("got 'many'")
    assert seen == [{"count": "many", "undeclared": [1]}]


# -- checkpoint ------------------------------------------------------------------------------


class HeldStore(InMemoryEventStore):
    """Holds every write from the first tool call on until `release()`: only then is it durable.

    `durable()` says whether every write held so far was released; `call_submitted` is set when
    the first tool call is written.
    """

    def __init__(self) -> None:
        super().__init__()
        self.held: list[tuple[asyncio.Future[None], WriteDone | None]] = []
        self.holding = False
        self.call_submitted = asyncio.Event()

    def append(
        self,
        session_id: SessionId,
        records: Sequence[EventRecord],
        *,
        done: WriteDone | None = None,
    ) -> asyncio.Future[None]:
        if any(isinstance(record.event, ToolCallEvent) for record in records):
            self.holding = True
            self.call_submitted.set()
        if not self.holding:
            return super().append(session_id, records, done=done)
        super().append(session_id, records)  # stored, but not acknowledged until released
        held: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.held.append((held, done))
        return held

    def flush(self) -> asyncio.Future[None]:
        if not self.holding:
            return super().flush()
        barrier: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.held.append((barrier, None))
        return barrier

    def durable(self) -> bool:
        return all(held.done() for held, _ in self.held)

    def release(self) -> None:
        self.holding = False
        for held, done in self.held:
            if not held.done():
                if done is not None:
                    done(None)
                held.set_result(None)


CALL_SCRIPT = """
lead:
  - calls:
      - {tool: effect, args: {}}
  - text: done
"""


@pytest.mark.parametrize("checkpoint", [True, False])
async def test_checkpoint_decides_whether_the_call_is_durable_before_the_handler(
    clock: FakeClock, checkpoint: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = HeldStore()
    # Set by whichever comes first once the tool call is held: its handler, or the loop asking
    # for the log to be durable. The test never waits for something that cannot happen.
    progressed = asyncio.Event()
    durable_at_start: list[bool] = []

    @tool(checkpoint=checkpoint)
    async def effect() -> str:
        """An effect outside the log."""
        durable_at_start.append(store.durable())
        progressed.set()
        return "done"

    model = ScriptedModel.from_yaml(CALL_SCRIPT, clock=clock)
    async with AgentRuntime(model=model, store=store, tools=[effect], clock=clock) as rt:
        agent = await rt.create_agent()
        flush = Session.flush

        async def noted_flush(session: Session) -> None:
            if session is agent.session and store.holding:
                progressed.set()
            await flush(session)

        monkeypatch.setattr(Session, "flush", noted_flush)  # slotted: patched on the class
        await agent.followup("go")
        try:
            await store.call_submitted.wait()
            await progressed.wait()
            # Checkpointed, the handler waits for the held call to be durable; else it has run.
            assert durable_at_start == ([] if checkpoint else [False])
        finally:
            store.release()  # a failed check must not leave the agent's disposal waiting
        await agent.when_idle()
        assert [e.message.content for e in results(agent)] == ["done"]
    assert durable_at_start == [checkpoint]
    model.assert_complete()


# -- aborted_text ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("aborted_text", "seen"),
    [
        ("Error: the child's run was cancelled", "Error: the child's run was cancelled"),
        (None, "Error: tool call aborted"),
    ],
)
async def test_aborted_text_is_what_the_model_reads_of_a_cut_call(
    clock: FakeClock, aborted_text: str | None, seen: str
) -> None:
    started = asyncio.Event()

    @tool(aborted_text=aborted_text)
    async def effect() -> str:
        """Runs until cancelled."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    model = ScriptedModel.from_yaml(
        "lead:\n  - calls:\n      - {tool: effect, args: {}}\n", clock=clock
    )
    async with AgentRuntime(
        model=model, store=InMemoryEventStore(), tools=[effect], clock=clock
    ) as rt:
        agent = await rt.create_agent()
        await agent.followup("go")
        await started.wait()
        await agent.cancel("user")
        await agent.when_idle()
        assert [(e.message.content, e.code, e.message.is_error) for e in results(agent)] == [
            (seen, ErrorCode.ABORTED, True)
        ]
    model.assert_complete()


# -- Annotated constraints and UNSET ---------------------------------------------------------

Who = Annotated[str, Meta(min_length=1, description="Who to greet.")]
Times = Annotated[int, Meta(ge=1, le=3, description="How often.")]


@tool
async def greet(who: Who, times: Times | UnsetType = UNSET) -> str:
    """Greet someone."""
    return " ".join([f"hello {who}"] * (1 if times is UNSET else times))


def test_annotated_constraints_and_descriptions_reach_the_schema() -> None:
    assert greet.parameters == {
        "type": "object",
        "properties": {
            "who": {"type": "string", "minLength": 1, "description": "Who to greet."},
            # Optional, and no `default`: UNSET is not advertised.
            "times": {"type": "integer", "minimum": 1, "maximum": 3, "description": "How often."},
        },
        "required": ["who"],
    }


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [({"who": ""}, "who: '' should be non-empty"), ({"who": "x", "times": 4}, "times: 4 is")],
)
async def test_annotated_constraints_are_enforced(arguments: JsonObject, problem: str) -> None:
    outcome = await call(greet, arguments)
    assert outcome.code == ErrorCode.INVALID_ARGS
    assert problem in outcome.content


async def test_an_unset_parameter_reaches_the_handler_as_unset_or_as_sent() -> None:
    assert await call(greet, {"who": "ada"}) == ToolOutcome("hello ada")
    assert await call(greet, {"who": "ada", "times": 2}) == ToolOutcome("hello ada hello ada")


def test_a_docstring_description_wins_over_the_annotated_one() -> None:
    @tool
    async def wave(who: Who) -> str:
        """Wave at someone.

        Args:
            who: The one to wave at.
        """
        return who

    assert wave.parameters["properties"]["who"] == {
        "type": "string",
        "minLength": 1,
        "description": "The one to wave at.",
    }
