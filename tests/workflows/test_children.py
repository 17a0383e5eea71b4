"""Children of a workflow, started through the real subagent service (docs/design.md
§9, end to end): labels, names, structured output, model overrides,
caller delivery, cancellation.
"""

from __future__ import annotations

from pathlib import Path

from workflow_support import (
    Gates,
    Recorder,
    guest_processes,
    open_engine,
    pid_alive,
    request,
    run_to_end,
)

from subagents.core import Agent
from subagents.ids import SessionId
from subagents.sessions import SubagentCatalog
from subagents.workflows import (
    WorkflowAgentEnded,
    WorkflowAgentStarted,
    WorkflowResult,
)

STRUCTURED = """
"*":
  - calls: [{tool: structured_output, args: {answer: 42}}]
  - text: unused
"""


def catalog(agent: Agent) -> list[SubagentCatalog]:
    return [r.event for r in agent.session.records if isinstance(r.event, SubagentCatalog)]


async def test_children_are_labelled_by_run_and_call_and_named_by_the_parent() -> None:
    async with open_engine() as (runtime, lead, engine, _):
        recorder = Recorder(engine)
        result = await run_to_end(
            engine.start(request(lead, "await agent('a')\nawait agent('b', name='reviewer')"))
        )
        assert result == WorkflowResult(value=None, stop_reason="completed", agents_started=2)
        entries = catalog(lead)
        assert [(e.label, e.name, e.mode) for e in entries] == [
            ("host-test child 1", "agent-1", "one-shot"),
            ("host-test child 2", "reviewer", "one-shot"),
        ]
        starts = recorder.of(WorkflowAgentStarted)
        assert [s.agent.child_id for s in starts] == [e.child_id for e in entries]
        header = await runtime.read_header(SessionId(entries[0].child_id))
        assert (header.parent, header.depth) == (lead.id, 1)


async def test_the_parent_gets_no_settlement_notice() -> None:
    async with open_engine() as (_, lead, engine, _):
        await run_to_end(engine.start(request(lead, "return await agent('a')")))
        assert not lead.inbox
        kinds = {r.kind for r in lead.session.records}
        assert kinds <= {"sandbox/mode", "subagent/catalog"}


async def test_a_schema_child_answers_with_its_structured_value() -> None:
    script = (
        "schema = {'type': 'object', 'properties': {'answer': {'type': 'integer'}}, "
        "'required': ['answer']}\n"
        "return await agent('answer', schema=schema)"
    )
    async with open_engine(STRUCTURED) as (_, lead, engine, _):
        recorder = Recorder(engine)
        result = await run_to_end(engine.start(request(lead, script)))
    assert result.value == {"answer": 42}
    assert [e.outcome for e in recorder.of(WorkflowAgentEnded)] == ["completed"]


async def test_a_schema_child_that_answers_in_text_gives_none() -> None:
    script = "return await agent('answer', {'schema': {'type': 'object'}})"
    async with open_engine('"*": [{text: just text}]') as (_, lead, engine, _):
        recorder = Recorder(engine)
        result = await run_to_end(engine.start(request(lead, script)))
    assert result == WorkflowResult(value=None, stop_reason="completed", agents_started=1)
    assert [e.outcome for e in recorder.of(WorkflowAgentEnded)] == ["failed"]


async def test_a_model_override_opens_another_model(tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text('"*": [{text: from the other model}, {text: again}]\n')
    script = (
        f"a = await agent('a', model='scripted:{other}')\n"
        f"b = await agent('b', provider='scripted', model='{other}')\n"
        "c = await agent('c')\n"
        "return [a, b, c]"
    )
    async with open_engine() as (runtime, lead, engine, _):
        result = await run_to_end(engine.start(request(lead, script)))
        ids = [e.child_id for e in catalog(lead)]
        specs = [runtime.subagents.model_specs.get(SessionId(i)) for i in ids]
    assert result.value == ["from the other model", "from the other model", "done"]
    assert specs == [f"scripted:{other}", f"scripted:{other}", None]


async def test_a_child_that_cannot_start_ends_the_script() -> None:
    script = "return await agent('a', model='scripted:/nonexistent/model.yaml')"
    async with open_engine() as (_, lead, engine, _):
        recorder = Recorder(engine)
        result = await run_to_end(engine.start(request(lead, script)))
    assert result.stop_reason == "error"
    assert result.error is not None
    assert result.error.startswith(
        "WorkflowError: agent() could not start a child: the caller asks for model "
        '"scripted:/nonexistent/model.yaml", which cannot be opened'
    )
    assert result.agents_started == 1
    assert recorder.of(WorkflowAgentStarted) == []
    assert catalog(lead) == []


async def test_an_invalid_child_name_ends_the_script() -> None:
    async with open_engine() as (_, lead, engine, _):
        result = await run_to_end(engine.start(request(lead, "await agent('a', name='Bad Name')")))
    assert result.error is not None
    assert "agent() could not start a child:" in result.error


async def test_children_work_in_the_directory_the_run_selected(tmp_path: Path) -> None:
    selected = tmp_path / "selected"
    selected.mkdir()
    asked: list[str] = []

    async def directory(parent: Agent) -> str:
        asked.append(parent.name)
        return str(selected)

    async with open_engine(directory=directory) as (runtime, lead, engine, _):
        await run_to_end(engine.start(request(lead, "await parallel([agent('a'), agent('b')])")))
        cwds = [(await runtime.read_header(SessionId(e.child_id))).cwd for e in catalog(lead)]
    assert cwds == [str(selected), str(selected)]
    assert asked == ["lead"]


async def test_cancelling_a_run_stops_its_children_and_its_process() -> None:
    gates = Gates()
    children = """
agent-1: [{calls: [{tool: hold, args: {label: one}}]}, {text: never}]
agent-2: [{calls: [{tool: hold, args: {label: two}}]}, {text: never}]
"""
    script = "return await parallel([lambda: agent('one'), lambda: agent('two')])"
    async with open_engine(children, tools=[gates.tool()]) as (_, lead, engine, _):
        recorder = Recorder(engine)
        run = engine.start(request(lead, script))
        await gates.started("one").wait()
        await gates.started("two").wait()
        await recorder.wait_for(WorkflowAgentStarted, 2)
        pid = await recorder.pid()
        run.cancel("the user stopped it")
        result = await run_to_end(run)
        assert not pid_alive(pid)
    assert result == WorkflowResult(
        value=None,
        stop_reason="cancelled",
        agents_started=2,
        error="workflow run cancelled: the user stopped it",
    )
    assert sorted(gates.cancelled) == ["one", "two"]
    assert [e.outcome for e in recorder.of(WorkflowAgentEnded)] == ["cancelled", "cancelled"]
    assert recorder.names()[-1] == "workflow/end"
    assert guest_processes() == []


async def test_a_script_that_returns_while_a_child_works_releases_the_child() -> None:
    gates = Gates()
    children = """
agent-1: [{calls: [{tool: hold, args: {label: slow}}]}, {text: never}]
agent-2: [{calls: [{tool: hold, args: {label: fast}}]}, {text: fast answer}]
"""
    script = "slow = agent('slow')\nreturn await agent('fast')"
    async with open_engine(children, tools=[gates.tool()]) as (_, lead, engine, _):
        recorder = Recorder(engine)
        run = engine.start(request(lead, script))
        await gates.started("slow").wait()
        await gates.started("fast").wait()
        gates.release("fast")
        result = await run_to_end(run)
    assert result == WorkflowResult(value="fast answer", stop_reason="completed", agents_started=2)
    assert gates.cancelled == ["slow"]
    ends = {e.agent.label: e.outcome for e in recorder.of(WorkflowAgentEnded)}
    assert ends == {"fast": "completed", "slow": "cancelled"}
    assert recorder.names()[-1] == "workflow/end"
