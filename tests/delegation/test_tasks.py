"""Conformance tests for background subagent tasks and the task tools (docs/design.md
§7.5).

Children are held with the `hold` tool until the test releases them; waits use the runtime
clock (a `FakeClock` jumps, a `GatedClock` never fires unless opened).
"""

from __future__ import annotations

import asyncio

from delegation_support import (
    GatedClock,
    Gates,
    Lifecycle,
    ToolReply,
    catalog,
    events,
    inputs,
    one_shot_runtime,
    replies,
    session_count,
    wait_for_record,
)

from subagents import AgentConfig, DelegationOptions
from subagents.core import Agent
from subagents.delegation import DelegationRuntime
from subagents.errors import ErrorCode
from subagents.messages import UserMessage
from subagents.sessions import InboxSpliced, TurnEnd, TurnStart
from subagents.testing import FakeClock

TESTER = """
tester:
  - calls: [{tool: hold, args: {label: tester}}]
  - text: 12 tests passed.
"""

HELD_TESTER = """
tester:
  - calls: [{tool: hold, args: {label: tester}}]
"""

START_TESTER = """
      - tool: subagent
        args: {name: tester, description: Run tests, prompt: Run the tests, run_in_background: true}
"""

STARTED = (
    "started background subagent task subagent-1 (tester); you will be notified when it finishes"
)


def notice(task_id: str, label: str, status: str) -> str:
    return (
        f"background task {task_id} (subagent: {label}) finished [status: {status}]. Read its "
        "output with task_output."
    )


async def wait_turn(rt: DelegationRuntime, agent: Agent, turn: int) -> None:
    """Wait until `agent` has finished turn `turn` and gone idle."""
    await wait_for_record(
        rt, agent, lambda r: isinstance(r.event, TurnEnd) and r.event.turn == turn
    )
    await agent.when_idle()


def entered(agent: Agent) -> list[tuple[int | None, str, str]]:
    """(turn, source kind, text) of every message that entered `agent`'s turns."""
    return [(e.turn, e.message.source.kind, e.message.text) for e in inputs(agent.session.records)]


def turns(agent: Agent) -> int:
    return len(events(agent.session.records, TurnStart))


# -- starting ----------------------------------------------------------------------------------


async def test_a_background_start_returns_at_once_and_its_notice_wakes_the_idle_owner() -> None:
    gates = Gates()
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
{START_TESTER}
  - text: Started the tester.
  - calls: [{{tool: task_output, args: {{task_id: subagent-1}}}}]
  - text: The tests passed.
{TESTER}
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("Run the tests in the background")
        await gates.started("tester").wait()
        await wait_turn(rt, lead, 1)  # the lead's turn ended while the child is held
        assert replies(lead) == [ToolReply("subagent", STARTED, False, None)]
        (record,) = rt.tasks.list(lead.id)
        assert (record.id, record.kind, record.label, record.status) == (
            "subagent-1",
            "subagent",
            "Run tests",
            "running",
        )
        assert [e.name for e in lifecycle.started] == ["tester"]

        gates.release("tester")
        await rt.wait_quiescent()
        # The settlement notice opened a new turn whose user message is the notice.
        assert entered(lead)[1:] == [
            (2, "notice", notice("subagent-1", "Run tests", "completed")),
        ]
        assert replies(lead)[1] == ToolReply(
            "task_output", "12 tests passed.\n[status: completed]", False, None
        )
        assert [(e.name, e.stop_reason) for e in lifecycle.ended] == [("tester", "completed")]
        assert list(rt.agents) == [lead.id]
    model.assert_complete()


async def test_two_background_starts_get_consecutive_ids() -> None:
    gates = Gates()
    rt, model = one_shot_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {description: One, prompt: One, run_in_background: true}}
      - {tool: subagent, args: {description: Two, prompt: Two, run_in_background: true}}
  - text: Both started.
agent-1:
  - calls: [{tool: hold, args: {label: one}}]
agent-2:
  - calls: [{tool: hold, args: {label: two}}]
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await wait_turn(rt, lead, 1)
        assert [r.content for r in replies(lead)] == [
            "started background subagent task subagent-1 (agent-1); you will be notified when "
            "it finishes",
            "started background subagent task subagent-2 (agent-2); you will be notified when "
            "it finishes",
        ]
        assert [r.id for r in rt.tasks.list(lead.id)] == ["subagent-1", "subagent-2"]
        await lead.dispose()  # kills both; nothing is left running
        assert rt.tasks.live_count() == 0
    model.assert_complete()


async def test_background_validation_errors_are_immediate_and_spawn_nothing() -> None:
    gates = Gates()
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
{START_TESTER}
  - calls:
{START_TESTER}
  - calls:
      - tool: subagent
        args: {{name: other, description: Other, prompt: Other, cwd: nowhere,
                run_in_background: true}}
  - calls:
      - {{tool: task_list}}
  - text: One task runs.
{HELD_TESTER}
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await wait_turn(rt, lead, 1)
        cwd = lead.session.header.cwd
        assert replies(lead) == [
            ToolReply("subagent", STARTED, False, None),
            ToolReply(
                "subagent",
                "Error: a child named 'tester' already exists here; choose another name or "
                "address the existing one",
                True,
                ErrorCode.DUPLICATE_NAME,
            ),
            ToolReply(
                "subagent",
                f"Error: cwd {cwd}/nowhere is not an accessible directory; give an existing "
                "directory or omit cwd to use yours",
                True,
                ErrorCode.INVALID_CWD,
            ),
            ToolReply("task_list", "subagent-1 [subagent] running — Run tests", False, None),
        ]
        assert [e.name for e in catalog(lead)] == ["tester"]
        assert await session_count(rt) == 2
        await lead.dispose()
    model.assert_complete()


async def test_a_background_start_beyond_the_depth_limit_is_refused_at_once() -> None:
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
{START_TESTER}
  - text: I will run them myself.
""",
        delegation=DelegationOptions(max_depth=0),
    )
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [
            ToolReply(
                "subagent",
                "Error: subagent depth 1 exceeds maxDepth 0; carry out the work directly "
                "instead of delegating",
                True,
                ErrorCode.DEPTH_EXCEEDED,
            )
        ]
        assert rt.tasks.list(lead.id) == []
        assert await session_count(rt) == 1
    model.assert_complete()


async def test_with_background_disabled_the_parameter_is_absent_and_refused() -> None:
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
{START_TESTER}
  - calls:
      - tool: subagent
        args: {{name: tester, description: Run tests, prompt: Run the tests,
                run_in_background: false}}
  - text: Ran them in the foreground.
tester:
  - text: 12 tests passed.
""",
        delegation=DelegationOptions(background=False),
    )
    async with rt:
        for name in ("subagent", "subagent_fork"):
            spec = rt.tools.get(name)
            assert spec is not None
            assert "run_in_background" not in spec.parameters["properties"]
            assert "run_in_background" not in spec.description
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [
            ToolReply(
                "subagent",
                "Error: run_in_background is disabled for this tool instance (subagent); call "
                "it without run_in_background to wait for the answer",
                True,
                ErrorCode.BACKGROUND_DISABLED,
            ),
            # An explicit false is tolerated and runs in the foreground.
            ToolReply("subagent", "12 tests passed.", False, None),
        ]
        assert [e.name for e in lifecycle.started] == ["tester"]
        assert rt.tasks.list(lead.id) == []
        assert [e.name for e in catalog(lead)] == ["tester"]
    model.assert_complete()


# -- reading and waiting -----------------------------------------------------------------------


async def test_task_output_and_task_list_before_and_after_settlement() -> None:
    gates = Gates()
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls: [{{tool: task_list}}]
  - calls:
{START_TESTER}
  - calls: [{{tool: task_output, args: {{task_id: subagent-1}}}}]
  - calls: [{{tool: task_list}}]
  - text: It is running.
  - calls: [{{tool: task_output, args: {{task_id: subagent-1}}}}]
  - calls: [{{tool: task_list}}]
  - calls: [{{tool: task_kill, args: {{task_id: subagent-1}}}}]
  - text: The tests passed.
{TESTER}
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await wait_turn(rt, lead, 1)
        gates.release("tester")
        await rt.wait_quiescent()
        assert [(r.name, r.content) for r in replies(lead)] == [
            ("task_list", "(no background tasks)"),
            ("subagent", STARTED),
            ("task_output", "(no new output)\n[status: running]"),
            ("task_list", "subagent-1 [subagent] running — Run tests"),
            ("task_output", "12 tests passed.\n[status: completed]"),
            ("task_list", "subagent-1 [subagent] completed — Run tests"),
            # The first outcome stands: a later kill changes nothing.
            ("task_kill", "task subagent-1 had already finished [status: completed]"),
        ]
        assert not any(r.is_error for r in replies(lead))
        assert rt.tasks.get("subagent-1", lead.id).status == "completed"
    model.assert_complete()


async def test_a_wait_returns_the_result_and_suppresses_the_notice() -> None:
    gates = Gates()
    clock = GatedClock()
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
{START_TESTER}
  - calls: [{{tool: task_output, args: {{task_id: subagent-1, wait: true}}}}]
  - text: The tests passed.
{TESTER}
""",
        clock=clock,
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("tester").wait()
        await clock.next_sleeper()  # the wait's timer: never opened, so it cannot time out
        gates.release("tester")
        await rt.wait_quiescent()
        assert replies(lead)[1] == ToolReply(
            "task_output", "12 tests passed.\n[status: completed]", False, None
        )
        record = rt.tasks.get("subagent-1", lead.id)
        assert (record.status, record.reported) == ("completed", True)
        # No notice: the lead ran one turn and received nothing else.
        assert turns(lead) == 1
        assert [source for _, source, _ in entered(lead)] == ["user"]
    model.assert_complete()


async def test_wait_timeouts_use_the_runtime_clock_and_leave_the_task_running() -> None:
    gates = Gates()
    clock = FakeClock()
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
{START_TESTER}
  - calls: [{{tool: task_output, args: {{task_id: subagent-1, wait: true, timeout_ms: 250}}}}]
  - calls: [{{tool: task_output, args: {{task_id: subagent-1, wait: true}}}}]
  - calls:
      - {{tool: task_output, args: {{task_id: subagent-1, wait: true, timeout_ms: 1000000000}}}}
  - text: Still running.
  - text: Now it finished.
{TESTER}
""",
        clock=clock,
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        start = clock.now()
        await lead.followup("go")
        await gates.started("tester").wait()
        await wait_turn(rt, lead, 1)
        running = "(no new output)\n[status: running]"
        assert [r.content for r in replies(lead)[1:]] == [running] * 3
        # 250 ms, the 30 s default, and the 600 s ceiling: in runtime-clock time only.
        assert clock.now() - start == 0.25 + 30 + 600
        record = rt.tasks.get("subagent-1", lead.id)
        assert (record.status, record.reported) == ("running", False)

        gates.release("tester")
        await rt.wait_quiescent()
        assert entered(lead)[-1] == (2, "notice", notice("subagent-1", "Run tests", "completed"))
    model.assert_complete()


# -- killing -----------------------------------------------------------------------------------


async def test_task_kill_stops_the_task_without_a_notice() -> None:
    gates = Gates()
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
{START_TESTER}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - calls: [{{tool: task_kill, args: {{task_id: subagent-1, reason: no longer needed}}}}]
  - calls: [{{tool: task_list}}]
  - text: Stopping it.
  - calls: [{{tool: task_output, args: {{task_id: subagent-1}}}}]
  - calls: [{{tool: task_kill, args: {{task_id: subagent-1}}}}]
  - text: It is stopped.
{HELD_TESTER}
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        linger = gates.linger("tester")  # a cancelled hold waits, so "stopping" is observable
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("tester").wait()
        tester = await lifecycle.child("tester", rt)
        gates.release("lead")
        await wait_turn(rt, lead, 1)
        assert [(r.name, r.content) for r in replies(lead)[2:]] == [
            ("task_kill", "requested cancellation of task subagent-1"),
            ("task_list", "subagent-1 [subagent] stopping — Run tests"),
        ]
        record = rt.tasks.get("subagent-1", lead.id)
        assert (record.status, record.reported) == ("stopping", True)

        linger.set()
        await rt.wait_quiescent()
        assert (record.status, record.detail) == ("killed", "no longer needed")
        assert turns(lead) == 1  # no notice woke the lead
        assert tester.disposed
        assert events(tester.session.records, TurnEnd)[-1] == TurnEnd(
            turn=1, reason="aborted", cause="disposed"
        )
        assert [(e.name, e.stop_reason) for e in lifecycle.ended] == [("tester", "aborted")]

        await rt.run("Check the task", agent=lead)
        killed = "[status: killed, no longer needed]"
        assert [(r.name, r.content) for r in replies(lead)[4:]] == [
            ("task_output", f"(no new output)\n{killed}"),
            ("task_kill", f"task subagent-1 had already finished {killed}"),
        ]
    model.assert_complete()


# -- ownership and capacity --------------------------------------------------------------------


async def test_another_owners_task_is_fenced() -> None:
    gates = Gates()
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
{START_TESTER}
  - text: Started.
  - text: Noted.
other:
  - calls:
      - {{tool: task_output, args: {{task_id: subagent-1}}}}
      - {{tool: task_output, args: {{task_id: subagent-1, wait: true}}}}
      - {{tool: task_kill, args: {{task_id: subagent-1}}}}
      - {{tool: task_list}}
  - text: Not mine.
{TESTER}
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        other = await rt.create_agent(config=AgentConfig(name="other"))
        await lead.followup("go")
        await wait_turn(rt, lead, 1)
        await other.followup("look")  # not rt.run: that waits for the held tester too
        await wait_turn(rt, other, 1)
        fenced = ToolReply(
            "task_output",
            "Error: task subagent-1 belongs to another session",
            True,
            ErrorCode.UNAUTHORIZED,
        )
        assert replies(other) == [
            fenced,
            fenced,
            ToolReply(
                "task_kill",
                "Error: task subagent-1 belongs to another session",
                True,
                ErrorCode.UNAUTHORIZED,
            ),
            ToolReply("task_list", "(no background tasks)", False, None),
        ]
        assert rt.tasks.get("subagent-1", lead.id).status == "running"
        gates.release("tester")
        await rt.wait_quiescent()
        assert turns(other) == 1  # the notice went to the owner only
        assert entered(lead)[-1][1] == "notice"
    model.assert_complete()


async def test_the_per_owner_capacity_refuses_and_spawns_nothing() -> None:
    gates = Gates()
    rt, model = one_shot_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: a, description: A, prompt: A, run_in_background: true}}
      - {tool: subagent, args: {name: b, description: B, prompt: B, run_in_background: true}}
      - {tool: subagent, args: {name: c, description: C, prompt: C, run_in_background: true}}
  - text: Two started.
  - text: A is done.
  - text: B is done.
a:
  - calls: [{tool: hold, args: {label: a}}]
  - text: a finished
b:
  - calls: [{tool: hold, args: {label: b}}]
  - text: b finished
""",
        tools=[gates.tool()],
        delegation=DelegationOptions(task_capacity=2),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await wait_turn(rt, lead, 1)
        assert replies(lead)[2] == ToolReply(
            "subagent",
            "Error: background task limit reached for this owner (limit: 2); use task_kill to "
            "stop an unneeded task, wait for one to finish, then retry",
            True,
            ErrorCode.TASK_LIMIT,
        )
        assert [r.id for r in rt.tasks.list(lead.id)] == ["subagent-1", "subagent-2"]
        assert sorted(str(e.name) for e in catalog(lead)) == ["a", "b"]
        assert sorted(e.name for e in lifecycle.started) == ["a", "b"]
        assert await session_count(rt) == 3

        gates.release("a")
        await wait_turn(rt, lead, 2)
        gates.release("b")
        await rt.wait_quiescent()
        assert [(t, text) for t, _, text in entered(lead)[1:]] == [
            (2, notice("subagent-1", "A", "completed")),
            (3, notice("subagent-2", "B", "completed")),
        ]
    model.assert_complete()


# -- notices -----------------------------------------------------------------------------------


async def test_a_notice_joins_a_busy_owners_next_step() -> None:
    gates = Gates()
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
{START_TESTER}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - text: The tester finished meanwhile.
{TESTER}
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("lead").wait()
        await gates.started("tester").wait()
        gates.release("tester")
        text = notice("subagent-1", "Run tests", "completed")
        # The lead is busy: the notice waits in its inbox for the next step.
        await wait_for_record(
            rt,
            lead,
            lambda r: (
                isinstance(r.event, InboxSpliced)
                and r.event.target == "next-step"
                and [m.text for m in r.event.inserted] == [text]
            ),
        )
        assert lead.status == "running"
        gates.release("lead")
        await rt.wait_quiescent()
        assert entered(lead) == [(1, "user", "go"), (1, "notice", text)]
        assert turns(lead) == 1
        last = model.requests_of("lead")[-1].messages[-1]
        assert isinstance(last, UserMessage)
        assert last.text == text
    model.assert_complete()


async def test_notice_wakes_are_bounded_until_the_next_user_message() -> None:
    gates = Gates()
    names = ["t1", "t2", "t3", "t4", "t5"]
    children = "".join(
        f"{n}:\n  - calls: [{{tool: hold, args: {{label: {n}}}}}]\n  - text: {n} done\n"
        for n in names
    )
    start = "".join(
        f"      - {{tool: subagent, args: {{name: {n}, description: Task {n}, prompt: Do {n}, "
        "run_in_background: true}}\n"
        for n in names[:4]
    )
    rt, model = one_shot_runtime(
        f"""
lead:
  - calls:
{start}
  - text: Four started.
  - text: noted 1
  - text: noted 2
  - text: noted 3
  - calls:
      - {{tool: subagent, args: {{name: t5, description: Task t5, prompt: Do t5,
                                  run_in_background: true}}}}
  - text: t5 started.
  - text: noted 5
{children}
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await wait_turn(rt, lead, 1)
        for k in (1, 2, 3):  # each settlement wakes the idle lead: a new turn
            gates.release(f"t{k}")
            await wait_turn(rt, lead, k + 1)
        assert rt.tasks.max_consecutive_wakes == 3
        gates.release("t4")
        await rt.wait_quiescent()
        # The fourth notice in a row is injected without a turn.
        assert turns(lead) == 4
        assert lead.status == "idle"
        assert [m.text for m in lead.inbox.next_step] == [
            notice("subagent-4", "Task t4", "completed")
        ]

        # A user message resets the budget: the next notice wakes the lead again.
        await lead.followup("carry on")
        await wait_turn(rt, lead, 5)
        gates.release("t5")
        await rt.wait_quiescent()
        assert [(t, source, text) for t, source, text in entered(lead)] == [
            (1, "user", "go"),
            (2, "notice", notice("subagent-1", "Task t1", "completed")),
            (3, "notice", notice("subagent-2", "Task t2", "completed")),
            (4, "notice", notice("subagent-3", "Task t3", "completed")),
            (5, "notice", notice("subagent-4", "Task t4", "completed")),
            (5, "user", "carry on"),
            (6, "notice", notice("subagent-5", "Task t5", "completed")),
        ]
    model.assert_complete()


async def test_a_failed_background_child_is_reported_as_failed() -> None:
    rt, model = one_shot_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: breaker, description: Break, prompt: Break,
                                run_in_background: true}}
  - text: Started.
  - calls: [{tool: task_output, args: {task_id: subagent-1}}]
  - text: It failed.
breaker:
  - error: upstream exploded
"""
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await rt.wait_quiescent()
        # Why it failed, in one line, with whether a retry may help.
        why = (
            "failed, error; Diagnostic: MODEL_ERROR: upstream exploded "
            "(retrying will not help until the cause is fixed)"
        )
        assert notice("subagent-1", "Break", why) in [t for _, _, t in entered(lead)]
        assert replies(lead)[-1] == ToolReply(
            "task_output", f"(no new output)\n[status: {why}]", False, None
        )
    model.assert_complete()


# -- teardown ----------------------------------------------------------------------------------


async def test_disposing_the_owner_kills_and_awaits_its_tasks() -> None:
    gates = Gates()
    rt, model = one_shot_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: a, description: A, prompt: A, run_in_background: true}}
      - {tool: subagent, args: {name: b, description: B, prompt: B, run_in_background: true}}
  - text: Started both.
a:
  - calls: [{tool: hold, args: {label: a}}]
b:
  - calls: [{tool: hold, args: {label: b}}]
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        before = len(asyncio.all_tasks())
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("a").wait()
        await gates.started("b").wait()
        await wait_turn(rt, lead, 1)
        children = [await lifecycle.child(n, rt) for n in ("a", "b")]
        assert rt.tasks.live_count() == 2

        await lead.dispose()
        assert rt.tasks.live_count() == 0
        assert rt.tasks.list(lead.id) == []
        assert rt.agents == {}
        assert all(c.disposed for c in children)
        for child in children:
            assert events(child.session.records, TurnEnd) == [
                TurnEnd(turn=1, reason="aborted", cause="disposed")
            ]
        assert sorted((e.name, e.stop_reason) for e in lifecycle.ended) == [
            ("a", "aborted"),
            ("b", "aborted"),
        ]
        assert turns(lead) == 1  # no notice
        assert rt.work.active == 0
        assert len(asyncio.all_tasks()) == before
    model.assert_complete()
