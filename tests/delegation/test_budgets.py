"""Usage budgets (issue 5.4): tokens, model calls and children, narrowing down the tree.

A budget covers an agent's whole subtree; a child's limits are cut to what its parent has left;
a spent budget ends the turn `budget` before the next model call, with a reason naming whose
budget and how much was used; a spent children budget refuses the start, creating nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from delegation_support import (
    GatedClock,
    Lifecycle,
    ToolReply,
    events,
    make_runtime,
    replies,
    session_count,
)
from hypothesis import given, strategies as st

from subagents import Budget, DelegationOptions
from subagents.core import Ledger
from subagents.definitions import AgentDefinition
from subagents.delegation import DelegationRuntime
from subagents.messages import Usage
from subagents.sessions import (
    AssistantMessageEvent,
    EventRecord,
    ModelErrorEvent,
    SqliteEventStore,
    SubagentDescriptor,
    TurnEnd,
    UserMessageEvent,
)
from subagents.testing import FakeClock, RecordingModel, ScriptedModel

SUBAGENT = "{tool: subagent, args: {description: d, prompt: p%s}}"


def call(extra: str = "") -> str:
    return "  - calls: [" + (SUBAGENT % extra) + "]\n"


def agent_def(name: str, **fields: object) -> AgentDefinition:
    base = AgentDefinition(name=name, description=f"The {name}.", body=f"You are the {name}.")
    return dataclasses.replace(base, **fields)


def options(budget: Budget | None = None, *defs: AgentDefinition) -> DelegationOptions:
    return DelegationOptions(budget=budget, definitions={d.name: d for d in defs})


# -- the ledger --------------------------------------------------------------------------------


def test_a_charge_reaches_every_ancestor_and_remaining_is_the_tightest() -> None:
    root = Ledger(Budget(tokens=1000, model_calls=5), owner="lead")
    child = Ledger(Budget(tokens=600), owner="a", parent=root)
    child.charge_call(Usage(input_tokens=300, output_tokens=100))
    assert (root.tokens, root.model_calls, child.tokens) == (400, 1, 400)
    assert child.remaining() == Budget(tokens=200, model_calls=4)
    assert root.remaining() == Budget(tokens=600, model_calls=4)
    assert child.spent() is None
    child.charge_call(Usage(output_tokens=200))
    assert child.spent() == "the token budget of a is spent (600 of 600 tokens used)"
    assert root.spent() is None


def test_children_reservations_are_all_or_nothing() -> None:
    root = Ledger(Budget(children=1), owner="lead")
    child = Ledger(Budget(children=5), owner="a", parent=root)
    assert child.reserve_child() is None
    assert (root.children, child.children) == (1, 1)
    assert child.reserve_child() == "the children budget of lead is spent (1 of 1 started)"
    assert (root.children, child.children) == (1, 1)  # the refused one counted nowhere
    child.release_child()
    assert (root.children, child.children) == (0, 0)


def test_a_reserved_call_holds_the_last_call_until_it_settles_or_is_released() -> None:
    root = Ledger(Budget(model_calls=2), owner="lead")
    root.charge_call(None)
    first, second = (
        Ledger(Budget(), owner="a", parent=root),
        Ledger(Budget(), owner="b", parent=root),
    )
    held = first.reserve_call()
    assert not isinstance(held, str)
    # The sibling may not take the call already held, nor may a new child be started.
    assert second.reserve_call() == (
        "the model-call budget of lead is spent (1 of 2 calls used, 1 more in progress)"
    )
    assert second.remaining() == Budget(model_calls=0)
    assert second.reserve_child() is not None
    held.release()  # that call never reached the model: the sibling may have it
    again = second.reserve_call()
    assert not isinstance(again, str)
    again.settle(Usage(output_tokens=7))
    again.release()  # a no-op once settled
    assert (root.model_calls, root.tokens, root.calls_in_flight) == (2, 7, 0)
    assert (second.model_calls, first.model_calls) == (1, 0)
    assert root.spent() == "the model-call budget of lead is spent (2 of 2 calls used)"


def test_no_call_starts_once_the_settled_tokens_reach_the_limit() -> None:
    root = Ledger(Budget(tokens=100), owner="lead")
    # Token counts are only known when a call ends: two calls may be in flight at once...
    one, two = root.reserve_call(), root.reserve_call()
    assert not isinstance(one, str)
    assert not isinstance(two, str)
    one.settle(Usage(output_tokens=80))
    two.settle(Usage(output_tokens=80))
    # ...but once their tokens are counted, none starts.
    assert root.reserve_call() == "the token budget of lead is spent (160 of 100 tokens used)"


limits = st.one_of(st.none(), st.integers(min_value=0, max_value=50))


@given(
    parent=st.builds(Budget, tokens=limits, model_calls=limits, children=limits),
    own=st.builds(Budget, tokens=limits, model_calls=limits, children=limits),
    used=st.lists(st.integers(min_value=0, max_value=20), max_size=6),
)
def test_a_child_never_has_more_left_than_its_parent(
    parent: Budget, own: Budget, used: list[int]
) -> None:
    root = Ledger(parent, owner="lead")
    for tokens in used:
        root.charge_call(Usage(output_tokens=tokens))
    child = Ledger(root.remaining().narrowed(own), owner="a", parent=root)
    left, child_left = root.remaining(), child.remaining()
    for field in ("tokens", "model_calls", "children"):
        mine: int | None = getattr(child_left, field)
        for bound in (getattr(left, field), getattr(own, field)):
            if bound is not None:
                assert mine is not None
                assert mine <= bound


# -- model calls and tokens ----------------------------------------------------------------------


async def test_a_spent_run_budget_ends_the_turn_before_the_next_call() -> None:
    hold = "  - calls: [{tool: subagent, args: {description: d, prompt: p}}]\n"
    rt, model = make_runtime(
        "lead:\n" + hold * 3 + '  - text: never\n"*":\n  - text: child done\n',
        delegation=options(Budget(model_calls=2)),
    )
    async with rt:
        result = await rt.run("go")
    assert result.stop_reason == "budget"
    assert result.error_code == "BUDGET_EXHAUSTED"
    assert result.error_message == (
        "the model-call budget of lead is spent (2 of 2 calls used); no further model call was made"
    )
    # lead made 1 call, its child 1: the subtree's 2 calls spent the lead's budget.
    assert [r.agent_name for r in model.requests] == ["lead", "agent-1"]


async def test_a_childs_definition_budget_stops_it_and_the_parent_can_act() -> None:
    script = (
        "lead:\n" + call(", agent: worker") + "  - text: I did it myself\n"
        "worker:\n"
        "  - calls: [{tool: subagent, args: {description: d, prompt: p}}]\n"
        "  - text: never reached\n"
        "worker/agent-1:\n  - text: grandchild done\n"
    )
    worker = agent_def("worker", budget=Budget(model_calls=2))
    rt, _ = make_runtime(script, delegation=options(None, worker))
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        [reply] = replies(lead)
    assert result.stop_reason == "completed"
    assert result.output == "I did it myself"
    assert reply == ToolReply(
        "subagent",
        "Error: subagent stopped: its usage budget ran out\nDiagnostic: the model-call budget of "
        "worker is spent (2 of 2 calls used); no further model call was made",
        True,
        "BUDGET_EXHAUSTED",
    )


async def test_a_child_gets_at_most_what_its_parent_has_left() -> None:
    # The lead's first call costs 900 of its 1000 tokens; the child's definition asks for
    # 5000 but gets the 100 left, so after one 200-token call it is stopped, and so is lead.
    script = (
        "lead:\n"
        "  - calls: [{tool: subagent, args: {description: d, prompt: p, agent: big}}]\n"
        "    usage: {input_tokens: 800, output_tokens: 100}\n"
        "  - text: never\n"
        "big:\n"
        "  - calls: [{tool: subagent, args: {description: d, prompt: p}}]\n"
        "    usage: {input_tokens: 150, output_tokens: 50}\n"
        "  - text: never\n"
    )
    big = agent_def("big", budget=Budget(tokens=5000))
    rt, model = make_runtime(script, delegation=options(Budget(tokens=1000), big))
    started: list[Budget | None] = []

    def on_event(event: object) -> None:
        from subagents.delegation import SubagentStarted

        if isinstance(event, SubagentStarted):
            child = rt.get_agent(event.child_id)
            started.append(child.ledger.limits if child and child.ledger else None)

    async with rt:
        rt.subscribe(on_event)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        reply = replies(lead)[0]
    assert started == [Budget(tokens=100)]  # its own grandchild was refused: nothing left
    assert "the token budget of big is spent (200 of 100 tokens used)" in reply.content
    assert reply.code == "BUDGET_EXHAUSTED"
    assert result.stop_reason == "budget"
    assert result.error_message is not None
    assert result.error_message.startswith("the token budget of lead is spent (1100 of 1000")
    assert [r.agent_name for r in model.requests] == ["lead", "big"]


async def test_parallel_children_never_overspend_a_model_call_budget(tmp_path: Path) -> None:
    # The lead's own call leaves one of its 2 calls; three children start at once, and each
    # child's call is held open (a gated `sleep:`) so the others try while it is in flight.
    three = ", ".join([SUBAGENT % ""] * 3)
    script = (
        "lead:\n  - calls: [" + three + ']\n  - text: never\n"*":\n  - text: done\n    sleep: 1\n'
    )
    clock = GatedClock()
    store = tmp_path / "state.db"
    model = RecordingModel.from_yaml(script, clock=clock)
    assert isinstance(model, RecordingModel)
    rt = DelegationRuntime(
        model=model, store=store, clock=clock, delegation=options(Budget(model_calls=2))
    )

    async def open_every_call() -> None:
        while True:
            (await clock.next_sleeper()).set()

    async with rt, asyncio.TaskGroup() as tasks:
        lifecycle = Lifecycle(rt)
        opener = tasks.create_task(open_every_call())
        try:
            result = await rt.run("go")
        finally:
            opener.cancel()
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        answers = replies(lead)
    assert result.stop_reason == "budget"
    assert len(model.requests) == 2
    calls_in_logs = 0
    async with SqliteEventStore(store) as opened:
        headers = await opened.list_headers(tenant="default", roots_only=False)
        for header in headers:
            own = (await opened.read(header.id, tenant="default"))[header.seed_length :]
            calls = len(events(own, AssistantMessageEvent)) + len(events(own, ModelErrorEvent))
            calls_in_logs += calls
            if header.parent is not None and calls == 0:
                # A child refused its call ended its turn `budget`, saying whose budget.
                [end] = events(own, TurnEnd)
                assert end.reason == "budget"
                assert end.error_message is not None
                assert "the model-call budget of lead is spent" in end.error_message
    assert calls_in_logs == 2
    # One child made the call left; each other one ended `budget` or was refused its start.
    assert [e.stop_reason for e in lifecycle.ended].count("completed") == 1
    assert sorted(r.code or "" for r in answers) == ["", "BUDGET_EXHAUSTED", "BUDGET_EXHAUSTED"]
    assert [r.content for r in answers].count("done") == 1


# -- children ------------------------------------------------------------------------------------


async def test_a_spent_children_budget_refuses_the_start_and_creates_nothing() -> None:
    script = "lead:\n" + call() + call() + '  - text: done\n"*":\n  - text: child done\n'
    rt, _ = make_runtime(script, delegation=options(Budget(children=1)))
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert [r.content for r in replies(lead)] == [
            "child done",
            "Error: the children budget of lead is spent (1 of 1 started); carry out the "
            "work directly instead of delegating",
        ]
        assert replies(lead)[1].code == "BUDGET_EXHAUSTED"
        assert await session_count(rt) == 2  # the lead and one child
    assert result.stop_reason == "completed"


async def test_a_grandchild_counts_against_the_roots_children_budget() -> None:
    script = "lead:\n" + call() + "  - text: done\nagent-1:\n" + call() + "  - text: child done\n"
    rt, _ = make_runtime(script, delegation=options(Budget(children=1)))
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert await session_count(rt) == 2
    assert result.output == "done"


# -- across a restart ----------------------------------------------------------------------------


async def test_a_resumed_tree_keeps_its_budget_and_its_usage(tmp_path: Path) -> None:
    store = tmp_path / "state.db"
    script = tmp_path / "s.yaml"
    script.write_text(
        "lead:\n" + call() + "  - text: first answer\n  - text: second answer\n"
        '  - text: never\n"*":\n  - text: child done\n',
        encoding="utf-8",
    )
    clock = FakeClock()
    model = ScriptedModel.from_file(script, clock=clock)
    async with DelegationRuntime(
        model=model, store=store, clock=clock, delegation=options(Budget(model_calls=4))
    ) as rt:
        first = await rt.run("go")
    assert first.output == "first answer"
    descriptors = events(await _read(store, first.session_id), SubagentDescriptor)
    assert [(d.provider, d.budget_model_calls) for d in descriptors] == [("root", 4)]
    # A new process, without the budget option: the recorded budget and the 3 calls used so
    # far (2 by lead, 1 by its child) leave exactly one call.
    async with DelegationRuntime(model=model, store=store, clock=clock) as rt:
        lead = await rt.resume_agent(first.session_id)
        second = await rt.run("again", agent=lead)
        assert second.output == "second answer"
        third = await rt.run("and again", agent=lead)
    assert third.stop_reason == "budget"
    assert third.error_message is not None
    assert "(4 of 4 calls used)" in third.error_message


async def _read(store: Path, session_id: str) -> list[EventRecord]:
    from subagents.sessions import SqliteEventStore

    async with SqliteEventStore(store) as opened:
        header = await opened.get_header(session_id, tenant="default")  # type: ignore[arg-type]
        return await opened.read(header.id, tenant="default")


# -- continuable children ------------------------------------------------------------------------

BACKGROUND = (
    "  - calls: [{tool: subagent, args: {description: d, prompt: p, agent: worker, "
    "run_in_background: true}}]\n"
)


async def test_a_background_childs_budget_stop_reaches_its_parent_in_the_notice(
    tmp_path: Path,
) -> None:
    script = (
        "lead:\n" + BACKGROUND + "  - text: started\n  - text: noted\n"
        "worker:\n"
        "  - calls: [{tool: list_agents, args: {}}]\n"
        "  - text: never reached\n"
    )
    worker = agent_def("worker", budget=Budget(model_calls=1))
    rt, _ = make_runtime(script, delegation=options(None, worker))
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        notices = [
            r.event.message.text
            for r in lead.session.records
            if isinstance(r.event, UserMessageEvent)
            and r.event.message.source.kind == "subagent-settled"
        ]
    assert notices == [
        "Background subagent worker stopped before it finished: its usage budget ran out.\n"
        "Diagnostic: the model-call budget of worker is spent (1 of 1 calls used); no further "
        "model call was made\nIt left no closing message."
    ]


async def test_a_resumed_background_child_keeps_its_recorded_budget(tmp_path: Path) -> None:
    store = tmp_path / "state.db"
    script = tmp_path / "s.yaml"
    send = "  - calls: [{tool: send_message, args: {agent: worker, message: more}}]\n"
    script.write_text(
        "lead:\n"
        + BACKGROUND
        + "  - text: started\n  - text: noted\n"
        + send
        + "  - text: sent\n  - text: noted again\n"
        + send
        + "  - text: sent again\n  - text: noted the stop\n"
        "worker:\n  - text: one\n  - text: two\n  - text: never\n",
        encoding="utf-8",
    )
    clock = FakeClock()
    model = ScriptedModel.from_file(script, clock=clock)
    worker = agent_def("worker", budget=Budget(model_calls=2))
    async with DelegationRuntime(
        model=model, store=store, clock=clock, delegation=options(None, worker)
    ) as rt:
        first = await rt.run("go")
    # A new process that knows no definitions: the child's log carries its budget (2 calls),
    # and its first activation used one of them.
    async with DelegationRuntime(model=model, store=store, clock=clock, delegation=options()) as rt:
        lead = await rt.resume_agent(first.session_id)
        await rt.run("send it more", agent=lead)
        await rt.run("and more", agent=lead)
        texts = [
            r.event.message.text
            for r in lead.session.records
            if isinstance(r.event, UserMessageEvent)
            and r.event.message.source.kind == "subagent-settled"
        ]
    assert len(texts) == 3
    assert texts[1].endswith("Its closing message:\ntwo")
    assert texts[2].startswith(
        "Background subagent worker stopped before it finished: its usage budget ran out.\n"
        "Diagnostic: the model-call budget of worker is spent (2 of 2 calls used)"
    )
