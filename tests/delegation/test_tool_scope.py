"""Tool scope of agent definitions (docs/design.md §8): the
resolution rule as properties, then what a child started from a definition actually sees.

A child's model requests are the ground truth: `RecordingModel` keeps each request's system
text and tool list.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from delegation_support import (
    Lifecycle,
    ToolReply,
    context_of,
    conversation,
    events,
    make_runtime,
    replies,
    system_with,
)
from hypothesis import given, strategies as st

from subagents import DelegationOptions
from subagents.definitions import AgentDefinition
from subagents.delegation import catalog_entries, resolve_tools
from subagents.errors import ConfigError, ErrorCode
from subagents.ids import SessionId
from subagents.messages import MessageSource, UserMessage
from subagents.models import ModelRequest
from subagents.sessions import SqliteEventStore, ToolResultEvent

NAMES = st.sampled_from(["read", "write", "exec", "search", "fetch", "plan"])
TOOL_SETS = st.frozensets(NAMES)
TOOL_LISTS = st.lists(NAMES, unique=True)


def scoped(
    allow: list[str] | tuple[str, ...] | None, deny: list[str] | tuple[str, ...]
) -> AgentDefinition:
    """`allow=None` is a definition without `tools` (every tool); `[]` one with `tools: []`."""
    return AgentDefinition(
        name="scoped",
        description="A scoped agent.",
        body="You are scoped.",
        tools=None if allow is None else tuple(allow),
        disallowed_tools=tuple(deny),
    )


# -- the rule ---------------------------------------------------------------------------------


def test_the_spec_examples() -> None:
    universe = {"read", "write", "exec", "search"}
    assert resolve_tools(scoped(["read", "write", "exec"], ["exec"]), universe) == {
        "read",
        "write",
    }
    # No allow list is the universe minus the deny list (spec behaviour); an explicit empty
    # one gives nothing (issue 11: `tools: []` in a definition file means no tools).
    assert resolve_tools(scoped(None, ["exec"]), universe) == {"read", "write", "search"}
    assert resolve_tools(scoped([], ["exec"]), universe) == set()
    assert resolve_tools(scoped(["read", "ghost"], []), {"read", "write"}) == {"read"}


@given(allow=TOOL_LISTS, deny=TOOL_LISTS, host=TOOL_SETS)
def test_the_scope_stays_inside_the_host(
    allow: list[str], deny: list[str], host: frozenset[str]
) -> None:
    assert resolve_tools(scoped(allow, deny), host) <= host


@given(allow=TOOL_LISTS, deny=TOOL_LISTS, host=TOOL_SETS)
def test_a_denied_tool_is_never_in_scope(
    allow: list[str], deny: list[str], host: frozenset[str]
) -> None:
    assert not resolve_tools(scoped(allow, deny), host) & set(deny)


@given(deny=TOOL_LISTS, host=TOOL_SETS)
def test_no_allow_list_is_the_host_minus_the_deny_list(
    deny: list[str], host: frozenset[str]
) -> None:
    assert resolve_tools(scoped(None, deny), host) == host - set(deny)
    assert resolve_tools(scoped([], deny), host) == frozenset()


@given(allow=st.lists(NAMES, unique=True, min_size=1), deny=TOOL_LISTS, host=TOOL_SETS)
def test_the_scope_is_never_wider_than_the_allow_list(
    allow: list[str], deny: list[str], host: frozenset[str]
) -> None:
    assert resolve_tools(scoped(allow, deny), host) <= set(allow)


@given(allow=TOOL_LISTS, deny=TOOL_LISTS, host=TOOL_SETS, narrower=TOOL_SETS)
def test_a_narrower_host_never_gives_more(
    allow: list[str], deny: list[str], host: frozenset[str], narrower: frozenset[str]
) -> None:
    definition = scoped(allow, deny)
    assert resolve_tools(definition, host & narrower) <= resolve_tools(definition, host)


# -- what a child sees ------------------------------------------------------------------------

REVIEWER = AgentDefinition(
    name="reviewer",
    description="Reviews code.",
    body="You are a meticulous reviewer.",
    tools=("team_task_list", "list_agents", "send_message"),
    disallowed_tools=("send_message",),
)


def with_definitions(*items: AgentDefinition) -> DelegationOptions:
    return DelegationOptions(definitions={d.name: d for d in items})


def tool_names(request: ModelRequest) -> list[str]:
    return [t.name for t in request.tools]


async def test_a_child_started_from_a_definition_gets_its_body_and_scope() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls: [{tool: subagent, args: {description: Review, prompt: Review app.py, agent: reviewer}}]
  - text: Reviewed.
reviewer:
  - text: Looks fine.
""",
        delegation=with_definitions(REVIEWER),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [ToolReply("subagent", "Looks fine.", False, None)]
        assert [e.name for e in lifecycle.started] == ["reviewer"]  # named after the definition
    [request] = model.requests_of("reviewer")
    # Untagged tools first, the delegation tools after: the order keeps a shared prefix.
    assert tool_names(request) == ["team_task_list", "list_agents"]
    assert request.system == system_with("You are a meticulous reviewer.")
    assert context_of(request).count('You are the delegated subagent "reviewer"') == 1
    assert "Delegation depth: current 1, maximum 3, 2 level(s) left." in context_of(request)
    assert "subagent" in tool_names(model.requests_of("lead")[0])
    model.assert_complete()


async def test_a_definition_never_widens_its_starters_scope() -> None:
    narrow = AgentDefinition(
        name="narrow",
        description="Few tools.",
        body="You have few tools.",
        tools=("subagent", "team_task_list"),
    )
    everything = AgentDefinition(name="everything", description="All.", body="You want all.")
    greedy = AgentDefinition(
        name="greedy",
        description="Asks for more.",
        body="You ask for more.",
        tools=("team_task_list", "send_message", "team_task_claim"),
    )
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {description: a, prompt: a, agent: everything}}
      - {tool: subagent, args: {description: b, prompt: b, agent: greedy}}
      - {tool: subagent, args: {description: c, prompt: c, name: plain}}
  - text: done
"*":
  - text: ok
""",
        delegation=with_definitions(narrow, everything, greedy),
    )
    async with rt:
        lead = await rt.create_agent_from("narrow")
        result = await rt.run("go", agent=lead)
        assert result.output == "done"
    [lead_request, _] = model.requests_of("lead")
    # The body is the instructions; the file policy is in the runtime context.
    assert lead_request.system == system_with("You have few tools.")
    assert "Current file policy: " in context_of(lead_request)
    assert tool_names(lead_request) == ["team_task_list", "subagent"]
    # An empty allow list means everything the starter has, not everything the runtime has.
    assert tool_names(model.requests_of("everything")[0]) == ["team_task_list", "subagent"]
    # Tools the starter lacks are dropped, never granted.
    assert tool_names(model.requests_of("greedy")[0]) == ["team_task_list"]
    # A child without a definition keeps its parent's scope (and instructions).
    [plain] = model.requests_of("plain")
    assert tool_names(plain) == ["team_task_list", "subagent"]
    assert plain.system == lead_request.system  # one prefix for the tree
    assert 'You are the delegated subagent "plain"' in context_of(plain)
    model.assert_complete()


async def test_max_depth_narrows_the_subtree() -> None:
    solo = dataclasses.replace(REVIEWER, name="solo", tools=("subagent",), max_depth=0)
    rt, model = make_runtime(
        """
lead:
  - calls: [{tool: subagent, args: {description: Solo, prompt: Work alone, agent: solo}}]
  - text: done
solo:
  - calls: [{tool: subagent, args: {description: Help, prompt: Help me}}]
  - text: alone
""",
        delegation=with_definitions(solo),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        await rt.run("go")
        [started] = lifecycle.started
        records = await rt.read_log(SessionId(started.child_id))
        assert [(e.message.content, e.code) for e in events(records, ToolResultEvent)] == [
            (
                "Error: subagent depth 2 exceeds maxDepth 1; carry out the work directly instead "
                "of delegating",
                ErrorCode.DEPTH_EXCEEDED,
            )
        ]
        assert [e.name for e in lifecycle.started] == ["solo"]
    [first, _] = model.requests_of("solo")
    assert "Delegation depth: current 1, maximum 1; do not delegate further" in context_of(first)
    # Its depth is spent: it is not offered `subagent`, and a call anyway says why.
    assert "subagent" not in tool_names(first)
    model.assert_complete()


async def test_a_deeper_max_depth_never_widens_the_instance() -> None:
    deep = dataclasses.replace(REVIEWER, name="deep", tools=(), max_depth=10)
    rt, model = make_runtime(
        """
lead:
  - calls: [{tool: subagent, args: {description: Deep, prompt: Go deep, agent: deep}}]
  - text: done
deep:
  - text: ok
""",
        delegation=dataclasses.replace(with_definitions(deep), max_depth=2),
    )
    async with rt:
        await rt.run("go")
    [request] = model.requests_of("deep")
    assert "Delegation depth: current 1, maximum 2, 1 level(s) left." in context_of(request)
    model.assert_complete()


async def test_context_fork_routes_to_the_fork_provider() -> None:
    planner = dataclasses.replace(REVIEWER, name="planner", tools=(), context="fork")
    rt, model = make_runtime(
        """
lead:
  - text: First turn.
  - calls: [{tool: subagent, args: {description: Plan, prompt: Plan it, agent: planner}}]
  - text: Planned.
planner:
  - text: The plan.
""",
        delegation=with_definitions(planner),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await rt.run("hello", agent=lead)
        await rt.run("now plan", agent=lead)
        assert [(e.name, e.provider) for e in lifecycle.started] == [("planner", "fork")]
    [request] = model.requests_of("planner")
    # The completed first turn is inherited; the turn in progress is not.
    assert [m.text for m in conversation(request) if isinstance(m, UserMessage)] == [
        "hello",
        "Plan it",
    ]
    assert request.system == system_with("You are a meticulous reviewer.")
    model.assert_complete()


async def test_a_background_child_keeps_its_definition_across_a_resume() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {description: Review, prompt: Review, agent: reviewer,
                                run_in_background: true}}
  - text: Started.
  - calls: [{tool: send_message, args: {agent: reviewer, message: Look again}}]
  - text: Asked again.
  - text: All done.
reviewer:
  - text: first look
  - text: second look
""",
        delegation=with_definitions(REVIEWER),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        await rt.run("go")
        assert [e.name for e in lifecycle.started] == ["reviewer", "reviewer"]
    first, second = model.requests_of("reviewer")
    for request in (first, second):
        # `report` is the continuable child's own tool (last); the rest is the definition's.
        assert tool_names(request) == ["team_task_list", "list_agents", "report"]
        assert request.system == system_with("You are a meticulous reviewer.")
    model.assert_complete()


async def test_the_root_refuses_a_definition_naming_unknown_tools() -> None:
    typo = dataclasses.replace(REVIEWER, name="typo", tools=("task_lst",), source="typo.md")
    rt, _ = make_runtime("{}", delegation=with_definitions(typo))
    async with rt:
        with pytest.raises(ConfigError) as caught:
            await rt.create_agent_from("typo")
        assert caught.value.code == ErrorCode.CONFIG
        assert "names tools this runtime does not have: task_lst" in caught.value.message
        assert await rt.store.list_headers(tenant=rt.tenant, roots_only=False) == []


async def test_a_restarted_runtime_restores_a_childs_scope_from_its_log(tmp_path: Path) -> None:
    """A new process without the definition loaded resumes the child with the scope and
    instructions its descriptor recorded: a restart never widens what it may use."""
    path = tmp_path / "state.db"
    script = """
lead:
  - calls:
      - {tool: subagent, args: {description: Review, prompt: Review, agent: reviewer,
                                run_in_background: true}}
  - text: Started.
  - text: Heard back.
  - text: Heard back again.
reviewer:
  - text: first look
  - text: second look
"""
    rt, first = make_runtime(
        script, store=SqliteEventStore(path), delegation=with_definitions(REVIEWER)
    )
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        (entry,) = catalog_entries(lead.session.records)
        child = SessionId(entry.child_id)
    rt2, second = make_runtime(
        script, store=SqliteEventStore(path), delegation=DelegationOptions(definitions={})
    )
    async with rt2:
        lead = await rt2.resume_agent(result.session_id)
        await rt2.continuable.send(lead, child, "Look again", source=MessageSource(kind="parent"))
        await rt2.wait_quiescent()
    (request,) = second.requests_of("reviewer")
    assert tool_names(request) == tool_names(first.requests_of("reviewer")[0])
    assert tool_names(request) == ["team_task_list", "list_agents", "report"]
    assert request.system == system_with("You are a meticulous reviewer.")


async def test_a_resumed_root_keeps_the_definition_it_ran(tmp_path: Path) -> None:
    """`run --agent` records the definition's scope in the root's log; a resume in a runtime
    without that definition loaded still runs with it."""
    path = tmp_path / "state.db"
    script = "lead:\n  - text: first\n  - text: second\n"
    rt, first = make_runtime(
        script, store=SqliteEventStore(path), delegation=with_definitions(REVIEWER)
    )
    async with rt:
        lead = await rt.create_agent_from("reviewer")
        await rt.run("go", agent=lead)
    rt2, second = make_runtime(
        script, store=SqliteEventStore(path), delegation=DelegationOptions(definitions={})
    )
    async with rt2:
        resumed = await rt2.resume_agent(lead.id)
        await rt2.run("again", agent=resumed)
    (before,) = first.requests_of("lead")[:1]
    (after,) = second.requests_of("lead")
    assert tool_names(after) == tool_names(before)
    assert "subagent" not in tool_names(after)
    assert after.system == before.system
    assert before.system == system_with("You are a meticulous reviewer.")
