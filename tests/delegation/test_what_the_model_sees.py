"""What the model is sent: only usable tools, rules in the schemas, one prefix per tree.

A tree's agents share the system prompt and the order of their tools, so a server's prefix
cache serves a child's first call; what differs per agent is a runtime-context message after
that prefix, entered again only when it changes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

from delegation_support import (
    context_of,
    contexts,
    conversation,
    make_runtime,
    one_shot_runtime,
    system_with,
)
from hypothesis import given, strategies as st

from subagents import DelegationOptions, Runtime
from subagents.core import AgentConfig
from subagents.definitions import AgentDefinition
from subagents.delegation import DELEGATION_TAG
from subagents.messages import UserMessage
from subagents.models import ModelRequest
from subagents.names import NAME_PATTERN, is_name
from subagents.sessions import SqliteEventStore
from subagents.testing import InMemoryEventStore, RecordingModel
from subagents.tools import ToolSpec

REPO = Path(__file__).resolve().parents[2]

TREE = """
lead:
  - calls:
      - {tool: subagent, args: {name: mid, description: Mid, prompt: Go on}}
  - text: Lead done.
mid:
  - calls:
      - {tool: subagent, args: {name: leaf, description: Leaf, prompt: Finish it}}
  - text: Mid done.
mid/leaf:
  - text: Leaf done.
"""


def names(request: ModelRequest) -> list[str]:
    return [t.name for t in request.tools]


async def test_a_tree_shares_one_system_prompt_and_one_tool_order() -> None:
    rt, model = make_runtime(TREE, delegation=DelegationOptions(max_depth=2))
    async with rt:
        result = await rt.run("Start")
        assert result.output == "Lead done."
        specs = [rt.tools.get(n) for n in rt.tools.names()]
        delegating = {s.name for s in specs if s is not None and DELEGATION_TAG in s.tags}
    lead = model.requests_of("lead")[0]
    mid = model.requests_of("mid")[0]
    leaf = model.requests_of("mid/leaf")[0]
    assert lead.system == mid.system == leaf.system
    assert names(mid) == names(lead)
    # The leaf may not delegate: it lacks the delegation tools, which come last, so what it
    # has is the start of everyone else's list.
    assert delegating >= {"subagent", "subagent_fork", "send_message", "list_agents"}
    assert names(leaf) == [n for n in names(lead) if n not in delegating]
    assert names(lead)[: len(names(leaf))] == names(leaf)
    assert 'You are "lead", the root agent' in context_of(lead)
    assert "current 1, maximum 2, 1 level(s) left" in context_of(mid)
    assert 'You are the delegated subagent "mid/leaf", started by "mid".' in context_of(leaf)
    assert "do not delegate further" in context_of(leaf)


async def test_the_runtime_context_is_entered_once_and_again_when_it_changes(
    tmp_path: Path,
) -> None:
    script = "lead:\n  - text: one\n  - text: two\n  - text: three\n  - text: four\n"
    path = tmp_path / "state.db"
    rt, model = make_runtime(script, store=SqliteEventStore(path), cwd=str(tmp_path))
    async with rt:
        lead = await rt.create_agent()
        await rt.run("first", agent=lead)
        await rt.run("second", agent=lead)
        assert len(contexts(lead.session.records)) == 1  # unchanged: not entered again
        rt.set_sandbox_mode(lead, "read-only")
        await rt.run("third", agent=lead)
        told = contexts(lead.session.records)
        assert len(told) == 2
        assert "Current file policy: read-only." in told[1]
        lead_id = lead.id
    # A new process restores what was last entered: nothing new to tell, nothing entered.
    rt2, second = make_runtime(script, store=SqliteEventStore(path), cwd=str(tmp_path))
    async with rt2:
        lead = await rt2.resume_agent(lead_id)  # its recorded mode (read-only) is restored
        await rt2.run("fourth", agent=lead)
        assert len(contexts(lead.session.records)) == 2
    (request,) = second.requests_of("lead")
    last = conversation(request)[-1]
    assert isinstance(last, UserMessage)
    assert last.text == "fourth"
    assert request.system == model.requests_of("lead")[0].system


async def test_descriptions_name_only_the_tools_the_agent_has() -> None:
    solo = AgentDefinition(
        name="solo", description="Delegates only.", body="You delegate.", tools=("subagent",)
    )
    rt, model = make_runtime(
        "lead:\n  - text: ok\n", delegation=DelegationOptions(definitions={"solo": solo})
    )
    async with rt:
        lead = await rt.create_agent_from("solo")
        await rt.run("go", agent=lead)
        default = await rt.create_agent()
        full = {s.name: s.description for s in default.tools.schemas()}
    (request,) = model.requests_of("lead")
    assert names(request) == ["subagent"]
    assert request.system == system_with("You delegate.")
    (description,) = [t.description for t in request.tools]
    for absent in ("send_message", "interrupt_agent", "task_output"):
        assert absent not in description
    assert "send_message gives it another turn" in full["subagent"]
    assert "send_message continues it" in full["interrupt_agent"]


async def test_task_tools_exist_only_where_background_children_are_tasks() -> None:
    continuable, _ = make_runtime("{}")
    tasks, _ = one_shot_runtime("{}")
    async with continuable, tasks:
        assert not {"task_output", "task_list", "task_kill"} & set(continuable.tools.names())
        assert {"task_output", "task_list", "task_kill"} <= set(tasks.tools.names())
        spec = tasks.tools.get("subagent")
        assert spec is not None
        assert spec.describe is not None
        assert "read it with task_output" in spec.describe({"subagent", "task_output"})


async def test_workflow_is_offered_only_where_scripts_can_run_children() -> None:
    plain, _ = make_runtime("{}")
    model = RecordingModel({"lead": [{"text": "ok"}]})
    full = Runtime(model=model, store=InMemoryEventStore(), delegation=DelegationOptions())
    leafless = Runtime(
        model=RecordingModel({"lead": [{"text": "ok"}]}),
        store=InMemoryEventStore(),
        delegation=DelegationOptions(max_depth=0),
    )
    async with plain, full, leafless:
        assert "workflow" not in set(plain.tools.names())
        await full.run("go")
        await leafless.run("go")
        no_depth = leafless.model
        assert isinstance(no_depth, RecordingModel)
        offered = names(no_depth.requests_of("lead")[0])
    assert {"workflow", "workflow_guide"} <= set(names(model.requests_of("lead")[0]))
    assert not {"workflow", "workflow_guide", "subagent"} & set(offered)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_A. \n", max_size=40))
def test_the_name_pattern_is_the_name_grammar(text: str) -> None:
    # What a constrained decoder enforces from the schema is exactly what admission accepts
    # (`lead` is refused by admission with its own hint, and named in the description).
    assert (re.fullmatch(NAME_PATTERN, text) is not None) == (is_name(text) or text == "lead")


async def test_schemas_state_the_rules_a_decoder_can_enforce() -> None:
    reviewer = AgentDefinition(name="reviewer", description="Reviews.", body="Review.")
    rt, _ = make_runtime("{}", delegation=DelegationOptions(definitions={"reviewer": reviewer}))
    async with rt:
        spec = rt.tools.get("subagent")
        read = rt.tools.get("read_file")
        bash = rt.tools.get("bash")
    assert spec is not None
    assert read is not None
    assert bash is not None
    assert prop(spec, "name") == {
        "type": "string",
        "pattern": NAME_PATTERN,
        "maxLength": 32,
        "description": "Unique among your children, not `lead` (default agent-N).",
    }
    assert prop(spec, "agent")["enum"] == ["reviewer"]
    assert prop(read, "limit")["minimum"] == 1
    assert (prop(bash, "timeout_ms")["minimum"], prop(bash, "timeout_ms")["maximum"]) == (
        1,
        600000,
    )


def prop(spec: ToolSpec, name: str) -> dict[str, Any]:
    properties = cast("dict[str, dict[str, Any]]", spec.parameters["properties"])
    return properties[name]


def test_a_default_leads_tools_fit_the_token_budget() -> None:
    # The bench script counts the real first request with an offline tokenizer.
    done = subprocess.run(
        [sys.executable, "-m", "bench.tool_budget"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.splitlines()[-1]
    assert re.fullmatch(r"\d+ tools, \d+ tokens: within the budget of 2500", last), last


async def test_background_children_share_a_custom_leads_system_prompt(tmp_path: Path) -> None:
    script = """
lead:
  - calls:
      - {tool: subagent, args: {name: bg, description: Bg, prompt: Work, run_in_background: true}}
      - {tool: subagent, args: {name: fg, description: Fg, prompt: Work}}
  - text: started
  - text: heard back
  - text: heard again
bg:
  - text: bg done
  - text: bg again
fg:
  - text: fg done
"""
    path = tmp_path / "state.db"
    rt, model = make_runtime(script, store=SqliteEventStore(path))
    async with rt:
        lead = await rt.create_agent(config=AgentConfig(instructions="Custom lead rules."))
        await rt.run("go", agent=lead)
        await rt.wait_quiescent()
    systems = {r.agent_name: r.system for r in model.requests}
    assert systems["bg"] == systems["fg"] == systems["lead"] == system_with("Custom lead rules.")
    # A new process cold-resumes the background child with the instructions it recorded.
    rt2, second = make_runtime(script, store=SqliteEventStore(path))
    async with rt2:
        answer = await rt2.send(lead.id, "bg", "Once more")
    assert answer.output == "bg again"
    (again,) = second.requests_of("bg")
    assert again.system == system_with("Custom lead rules.")
