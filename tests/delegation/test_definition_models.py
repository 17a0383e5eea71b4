"""A definition's `model`: its agents run that model (opened once), kept across a resume."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from delegation_support import ToolReply, events, make_runtime, replies

from subagents import DelegationOptions
from subagents.definitions import AgentDefinition
from subagents.delegation import DelegationRuntime
from subagents.sessions import RequestHeader, SubagentDescriptor
from subagents.testing import FakeClock, ScriptedModel


def agent_def(name: str, **fields: object) -> AgentDefinition:
    base = AgentDefinition(name=name, description=f"The {name}.", body=f"You are the {name}.")
    return dataclasses.replace(base, **fields)


def own_script(tmp_path: Path, text: str) -> str:
    path = tmp_path / "own.yaml"
    path.write_text(text, encoding="utf-8")
    return f"scripted:{path}"


async def test_a_child_runs_its_definitions_model_and_its_children_inherit_it(
    tmp_path: Path,
) -> None:
    spec = own_script(
        tmp_path,
        "pinned:\n  - calls: [{tool: subagent, args: {description: d, prompt: p}}]\n"
        "  - text: pinned answer\n"
        "pinned/agent-1:\n  - text: grandchild answer\n",
    )
    options = DelegationOptions(definitions={"pinned": agent_def("pinned", model=spec)})
    rt, model = make_runtime(
        "lead:\n  - calls: [{tool: subagent, args: {description: d, prompt: p, agent: pinned}}]\n"
        "  - text: ok\n",
        delegation=options,
    )
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [ToolReply("subagent", "pinned answer", False, None)]
        headers = await rt.store.list_headers(tenant="default", roots_only=False)
        models = {}
        for header in headers:
            records = await rt.read_log(header.id)
            models[header.depth] = [h.model for h in events(records, RequestHeader)]
    # The lead's model saw only the lead; the child and grandchild ran the definition's.
    assert [r.agent_name for r in model.requests] == ["lead", "lead"]
    own = spec.removeprefix("scripted:")
    assert models == {0: [model.name], 1: [own], 2: [own]}


async def test_a_resumed_continuable_child_keeps_its_definitions_model(tmp_path: Path) -> None:
    spec = own_script(tmp_path, "pinned:\n  - text: first\n  - text: second\n")
    lead_script = tmp_path / "lead.yaml"
    lead_script.write_text(
        "lead:\n  - calls: [{tool: subagent, args: {description: d, prompt: p, agent: pinned, "
        "run_in_background: true}}]\n  - text: started\n  - text: noted\n"
        "  - calls: [{tool: send_message, args: {agent: pinned, message: again}}]\n"
        "  - text: sent\n  - text: noted again\n",
        encoding="utf-8",
    )
    store = tmp_path / "state.db"
    clock = FakeClock()
    options = DelegationOptions(definitions={"pinned": agent_def("pinned", model=spec)})
    model = ScriptedModel.from_file(lead_script, clock=clock)
    async with DelegationRuntime(model=model, store=store, clock=clock, delegation=options) as rt:
        first = await rt.run("go")
    # A new process with no definitions loaded: the child's log says which model it runs.
    async with DelegationRuntime(
        model=model, store=store, clock=clock, delegation=DelegationOptions(definitions={})
    ) as rt:
        lead = await rt.resume_agent(first.session_id)
        await rt.run("ask it again", agent=lead)
        headers = await rt.store.list_headers(tenant="default", roots_only=False)
        child = next(h for h in headers if h.depth == 1)
        records = await rt.read_log(child.id)
    [descriptor] = events(records, SubagentDescriptor)
    assert descriptor.agent_model == spec
    assert [h.model for h in events(records, RequestHeader)][-1] == spec.removeprefix("scripted:")
    texts = [r.event.message.text for r in records if r.kind == "assistant/message"]  # type: ignore[union-attr]
    assert texts == ["first", "second"]
