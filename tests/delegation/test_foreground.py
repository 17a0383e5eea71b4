"""Conformance tests for foreground delegation through the `subagent` tool (docs/design.md
§7.3).

Every scenario is a scripted tree (docs/design.md §6.2) run by the public `Runtime`. A child is held
at a known point with the `hold` tool or with `GatedClock` (scripted `sleep:`), never by timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from delegation_support import (
    GatedClock,
    Gates,
    Lifecycle,
    ToolReply,
    catalog,
    context_of,
    conversation,
    events,
    kinds,
    make_runtime,
    replies,
    session_count,
)

from subagents import AgentConfig, DelegationOptions
from subagents.errors import ErrorCode
from subagents.ids import SessionId
from subagents.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from subagents.sessions import SessionEndSeed, SqliteEventStore, TurnEnd
from subagents.tools import tool

PERMANENT = " (retrying will not help until the cause is fixed)"
"""What a diagnostic adds for a failure its error called permanent (the scripted model's)."""
DEPTH_ERROR = (
    "Error: subagent depth {} exceeds maxDepth {}; carry out the work directly instead of "
    "delegating"
)


def texts(messages: Sequence[Message]) -> list[str]:
    out: list[str] = []
    for message in messages:
        match message:
            case UserMessage():
                out.append(f"user:{message.text}")
            case AssistantMessage():
                out.extend(f"call:{c.name}" for c in message.tool_calls)
                if message.text:
                    out.append(f"assistant:{message.text}")
            case ToolResultMessage():
                out.append(f"tool:{message.content}")
    return out


# -- results ---------------------------------------------------------------------------------


async def test_success_returns_the_childs_last_non_empty_text() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls:
      - tool: subagent
        args: {name: reviewer, description: Review the code, prompt: Review app.py}
  - text: The reviewer approved app.py.
reviewer:
  - text: Looking at app.py.
    calls: [{tool: task_list}]
  - text: app.py looks correct.
    calls: [{tool: task_list}]
  - text: ""
"""
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("Review app.py")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert result.output == "The reviewer approved app.py."
        assert replies(lead) == [ToolReply("subagent", "app.py looks correct.", False, None)]
        (ended,) = lifecycle.ended
        assert (ended.stop_reason, ended.last_message) == ("completed", "app.py looks correct.")
    model.assert_complete()


PARTIAL = "\nPartial output before the run ended:\n"


@pytest.mark.parametrize(
    ("child_script", "stop_reason", "expected"),
    [
        pytest.param(
            "  - text: Halfway there.\n    calls: [{tool: task_list}]\n"
            "  - error: upstream exploded\n",
            "error",
            "Error: subagent run failed\nDiagnostic: MODEL_ERROR: upstream exploded"
            + PERMANENT
            + PARTIAL
            + "Halfway there.",
            id="error-with-partial",
        ),
        pytest.param(
            "  - error: upstream exploded\n",
            "error",
            # Why it failed, with the stable code: the parent need not read the child's log.
            "Error: subagent run failed\nDiagnostic: MODEL_ERROR: upstream exploded" + PERMANENT,
            id="error-without-output",
        ),
        pytest.param(
            "  - {text: The first half of the, stop: max-tokens}\n",
            "max-tokens",
            "Error: subagent run hit its token limit before finishing"
            + PARTIAL
            + "The first half of the",
            id="max-tokens",
        ),
        pytest.param(
            "  - {text: I will not review that., stop: refusal}\n",
            "refusal",
            "Error: subagent declined the task" + PARTIAL + "I will not review that.",
            id="refusal",
        ),
    ],
)
async def test_a_child_that_does_not_complete_is_an_error_result(
    child_script: str, stop_reason: str, expected: str
) -> None:
    rt, model = make_runtime(
        """
lead:
  - calls:
      - tool: subagent
        args: {name: reviewer, description: Review the code, prompt: Review app.py}
  - text: The reviewer could not finish.
reviewer:
"""
        + child_script
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("Review app.py")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        # Partial output is never reported as success.
        assert replies(lead) == [ToolReply("subagent", expected, True, ErrorCode.TOOL_FAILED)]
        assert [e.stop_reason for e in lifecycle.ended] == [stop_reason]
        assert result.ok
    model.assert_complete()


async def test_a_cancelled_child_is_reported_as_cancelled() -> None:
    gates = Gates()
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: worker, description: Do the work, prompt: Work}}
  - text: The worker was stopped.
worker:
  - calls: [{tool: hold, args: {label: worker}}]
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("worker").wait()
        worker = await lifecycle.child("worker", rt)
        await worker.cancel("user")
        await rt.wait_quiescent()
        assert replies(lead)[0] == ToolReply(
            "subagent", "Error: subagent run was cancelled", True, ErrorCode.TOOL_FAILED
        )
        assert events(worker.session.records, TurnEnd) == [
            TurnEnd(turn=1, reason="aborted", cause="user")
        ]
        assert [e.stop_reason for e in lifecycle.ended] == ["aborted"]
    model.assert_complete()


async def test_a_foreground_childs_turn_runs_in_the_task_that_waits_for_it() -> None:
    """Its parent only waits: the child's turn runs in the parent's task, with no task of its
    own (a fan-out of thousands holds one task per child fewer)."""
    seen: list[tuple[str, asyncio.Task[object] | None]] = []

    @tool(name="probe")
    async def probe(label: str) -> str:
        """Note which task runs this call."""
        seen.append((label, asyncio.current_task()))
        return label

    rt, model = make_runtime(
        """
lead:
  - calls: [{tool: probe, args: {label: lead}}]
  - calls: [{tool: subagent, args: {name: kid, description: Probe, prompt: Probe}}]
  - text: done
kid:
  - calls: [{tool: probe, args: {label: kid}}]
  - text: probed
""",
        tools=[probe],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        before = len(asyncio.all_tasks())
        lead = await rt.create_agent()
        await lead.followup("go")
        await rt.wait_quiescent()
        assert [label for label, _ in seen] == ["lead", "kid"]
        assert seen[0][1] is not None
        assert seen[1][1] is seen[0][1]
        assert replies(lead)[1] == ToolReply("subagent", "probed", False, None)
        assert [(e.name, e.stop_reason) for e in lifecycle.ended] == [("kid", "completed")]
        assert len(asyncio.all_tasks()) == before
    model.assert_complete()


async def test_a_child_and_its_parent_cancelled_together_both_end_aborted() -> None:
    """Both cancels reach the one task that runs them: the child's turn takes back its own,
    and the parent's turn still ends with its own cause."""
    gates = Gates()
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: worker, description: Do the work, prompt: Work}}
worker:
  - calls: [{tool: hold, args: {label: worker}}]
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("worker").wait()
        worker = await lifecycle.child("worker", rt)
        # Both start in one loop iteration: the task sees both before it runs again.
        async with asyncio.TaskGroup() as tg:
            tg.create_task(worker.cancel("user"))
            tg.create_task(lead.cancel("user"))
        await rt.wait_quiescent()
        assert events(worker.session.records, TurnEnd) == [
            TurnEnd(turn=1, reason="aborted", cause="user")
        ]
        assert events(lead.session.records, TurnEnd) == [
            TurnEnd(turn=1, reason="aborted", cause="user")
        ]
        assert [(e.name, e.stop_reason) for e in lifecycle.ended] == [("worker", "aborted")]
        assert list(rt.agents) == [lead.id]
    model.assert_complete()


# -- no leaks --------------------------------------------------------------------------------


async def test_foreground_delegations_leave_no_agents_or_tasks_behind() -> None:
    gates = Gates()
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: good, description: Succeed, prompt: Succeed}}
  - calls:
      - {tool: subagent, args: {name: bad, description: Fail, prompt: Fail}}
  - calls:
      - {tool: subagent, args: {name: stopped, description: Be stopped, prompt: Wait}}
  - text: All three came back.
good:
  - text: fine
bad:
  - error: it broke
stopped:
  - calls: [{tool: hold, args: {label: stopped}}]
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        before = len(asyncio.all_tasks())
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("stopped").wait()
        await (await lifecycle.child("stopped", rt)).cancel("user")
        await rt.wait_quiescent()
        assert [(r.content, r.is_error) for r in replies(lead)] == [
            ("fine", False),
            ("Error: subagent run failed\nDiagnostic: MODEL_ERROR: it broke" + PERMANENT, True),
            ("Error: subagent run was cancelled", True),
        ]
        assert list(rt.agents) == [lead.id]
        assert len(asyncio.all_tasks()) == before
        # Nor state per child released: a long-lived runtime must not grow with every child.
        assert list(rt.modes._modes) == [lead.id]
        assert list(rt.mcp._agents) == [lead.id]
        assert rt.subagents.budgets._ledgers == {}
        assert [(e.name, e.stop_reason) for e in lifecycle.ended] == [
            ("good", "completed"),
            ("bad", "error"),
            ("stopped", "aborted"),
        ]
    model.assert_complete()


# -- aborting the parent -----------------------------------------------------------------------


async def test_aborting_the_parents_step_cancels_the_live_child() -> None:
    clock = GatedClock()
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: slow, description: Take long, prompt: Take long}}
slow:
  - {text: too late, sleep: 30}
""",
        clock=clock,
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        before = len(asyncio.all_tasks())
        lead = await rt.create_agent()
        await lead.followup("go")
        await clock.next_sleeper()  # the child's model call is open; never released
        child = await lifecycle.child("slow", rt)
        await lead.cancel("user")
        await lead.when_idle()
        assert child.disposed
        assert kinds(child.session.records)[-2:] == ["step/end", "turn/end"]
        assert events(child.session.records, TurnEnd) == [
            TurnEnd(turn=1, reason="aborted", cause="disposed")
        ]
        assert events(lead.session.records, TurnEnd) == [
            TurnEnd(turn=1, reason="aborted", cause="user")
        ]
        assert replies(lead) == [
            # spec subagents 5.4: an aborted foreground child reads `subagent run was cancelled`
            ToolReply("subagent", "Error: subagent run was cancelled", True, ErrorCode.ABORTED)
        ]
        assert [(e.name, e.stop_reason) for e in lifecycle.ended] == [("slow", "aborted")]
        await rt.wait_quiescent()
        assert list(rt.agents) == [lead.id]
        assert len(asyncio.all_tasks()) == before
        # Nor state per child released: a long-lived runtime must not grow with every child.
        assert list(rt.modes._modes) == [lead.id]
        assert list(rt.mcp._agents) == [lead.id]
        assert rt.subagents.budgets._ledgers == {}
    model.assert_complete()


async def test_aborting_before_the_delegation_starts_spawns_no_child() -> None:
    gates = Gates()
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: prepare, args: {label: prepare}}
      - {tool: subagent, args: {name: never, description: Never runs, prompt: Nothing}}
never:
  - text: unreachable
""",
        tools=[gates.tool(name="prepare", parallel_safe=False)],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("prepare").wait()
        await lead.cancel("user")
        await lead.when_idle()
        assert replies(lead) == [
            ToolReply("prepare", "Error: tool call aborted", True, ErrorCode.ABORTED),
            ToolReply(
                "subagent",
                "Error: tool call aborted before dispatch",
                True,
                ErrorCode.ABORTED_BEFORE_DISPATCH,
            ),
        ]
        assert lifecycle.events == []
        assert catalog(lead) == []
        assert await session_count(rt) == 1
        assert list(rt.agents) == [lead.id]
    assert model.requests_of("never") == []


# -- depth -----------------------------------------------------------------------------------


async def test_depth_is_taken_from_the_persisted_header() -> None:
    rt, model = make_runtime(
        """
deep/er:
  - calls:
      - {tool: subagent, args: {name: deeper, description: Go deeper, prompt: Deeper}}
  - text: I will do it myself.
""",
        delegation=DelegationOptions(max_depth=2),
    )
    async with rt:
        lead = await rt.create_agent()
        deep = await rt.create_child(lead, config=AgentConfig(name="deep"))
        deeper = await rt.create_child(deep, config=AgentConfig(name="deep/er"))
        assert deeper.session.header.depth == 2
        count = await session_count(rt)
        await deeper.followup("delegate")
        await rt.wait_quiescent()
        assert replies(deeper) == [
            ToolReply("subagent", DEPTH_ERROR.format(3, 2), True, ErrorCode.DEPTH_EXCEEDED)
        ]
        assert catalog(deeper) == []
        assert await session_count(rt) == count
    model.assert_complete()


RESUME_SCRIPT = """
lead:
  - calls:
      - {tool: subagent, args: {name: reviewer, description: Review, prompt: Review app.py}}
  - text: Reviewed.
reviewer:
  - text: First review done.
  - calls:
      - {tool: subagent, args: {name: checker, description: Check, prompt: Check style}}
  - text: Checked as well.
reviewer/checker:
  - text: Style is clean.
"""


@pytest.mark.parametrize(
    ("max_depth", "expected"),
    [
        pytest.param(
            1,
            ToolReply("subagent", DEPTH_ERROR.format(2, 1), True, ErrorCode.DEPTH_EXCEEDED),
            id="refused",
        ),
        pytest.param(3, ToolReply("subagent", "Style is clean.", False, None), id="allowed"),
    ],
)
async def test_a_resumed_child_delegates_from_its_persisted_depth(
    tmp_path: Path, max_depth: int, expected: ToolReply
) -> None:
    path = tmp_path / "state.db"
    rt, _ = make_runtime(RESUME_SCRIPT, store=SqliteEventStore(path))
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        assert result.output == "Reviewed."
        (started,) = lifecycle.started
        reviewer_id = started.child_id

    # A new process's model: the lead's responses were consumed before the restart.
    rt, _ = make_runtime(
        RESUME_SCRIPT,
        store=SqliteEventStore(path),
        delegation=DelegationOptions(max_depth=max_depth),
    )
    async with rt:
        count = await session_count(rt)
        reviewer = await rt.resume_agent(reviewer_id, config=AgentConfig(name="reviewer"))
        assert reviewer.session.header.depth == 1
        await reviewer.followup("Check the style too")
        await rt.wait_quiescent()
        assert replies(reviewer) == [expected]
        if expected.is_error:
            assert catalog(reviewer) == []
            assert await session_count(rt) == count
        else:
            (entry,) = catalog(reviewer)
            await rt.store.flush()
            header = await rt.store.get_header(SessionId(entry.child_id), tenant=rt.tenant)
            assert header.depth == 2
            assert header.parent == reviewer_id


@pytest.mark.parametrize("tool_name", ["subagent", "subagent_fork"])
async def test_max_depth_zero_refuses_every_delegation(tool_name: str) -> None:
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {{tool: {tool_name}, args: {{name: helper, description: Help, prompt: Help me}}}}
  - text: Doing it myself.
""",
        delegation=DelegationOptions(max_depth=0),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [
            ToolReply(tool_name, DEPTH_ERROR.format(1, 0), True, ErrorCode.DEPTH_EXCEEDED)
        ]
        # Not offered (the call was the model's own idea), yet answered with the reason.
        offered = [t.name for t in model.requests_of("lead")[0].tools]
        assert tool_name not in offered
        assert "workflow" not in offered
        assert "send_message" not in offered
        assert lifecycle.events == []
        assert catalog(lead) == []
        assert await session_count(rt) == 1
    model.assert_complete()


# -- working directory -----------------------------------------------------------------------


@pytest.fixture
def workdirs(tmp_path: Path) -> tuple[Path, Path]:
    """A working directory `work` (with `work/pkg`) and its sibling `sibling`, resolved."""
    base = tmp_path.resolve()
    (base / "work" / "pkg").mkdir(parents=True)
    (base / "sibling").mkdir()
    return base / "work", base / "sibling"


async def test_the_childs_cwd_defaults_to_and_resolves_against_the_parents(
    workdirs: tuple[Path, Path],
) -> None:
    work, shared = workdirs
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: same, description: Same dir, prompt: Work}}
      - {tool: subagent, args: {name: inner, description: Inner dir, prompt: Work, cwd: pkg}}
      - tool: subagent
        args: {name: sibling, description: Sibling dir, prompt: Work, cwd: ../sibling}
      - tool: subagent
        args: {name: missing, description: Missing dir, prompt: Work, cwd: nowhere}
  - text: done
"*":
  - text: worked
""",
        cwd=str(work),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        root = work
        assert lead.session.header.cwd == str(root)
        assert replies(lead) == [
            ToolReply("subagent", "worked", False, None),
            ToolReply("subagent", "worked", False, None),
            # A sibling is outside the parent's workspace: refused (tests/delegation/
            # test_child_cwd.py covers the rule).
            ToolReply(
                "subagent",
                f"Error: cwd '../sibling' resolves to {shared}, outside your workspace {root}; "
                f"give a directory inside {root} or omit cwd",
                True,
                ErrorCode.CWD_OUTSIDE_WORKSPACE,
            ),
            ToolReply(
                "subagent",
                f"Error: cwd {root / 'nowhere'} is not an accessible directory; give an existing "
                "directory or omit cwd to use yours",
                True,
                ErrorCode.INVALID_CWD,
            ),
        ]
        cwds: dict[str, str] = {}
        for started in lifecycle.started:
            header = await rt.store.get_header(SessionId(started.child_id), tenant=rt.tenant)
            cwds[started.name] = header.cwd
        assert cwds == {"same": str(root), "inner": str(root / "pkg")}
        # Parallel starts are catalogued in the order they complete, not in call order.
        assert sorted(str(e.name) for e in catalog(lead)) == ["inner", "same"]
        assert await session_count(rt) == 3
    model.assert_complete()


# -- spawn and fork --------------------------------------------------------------------------


async def test_a_spawned_child_has_a_fresh_context_and_a_complete_header() -> None:
    rt, model = make_runtime(
        """
lead:
  - text: The answer is 42.
  - calls:
      - {tool: subagent, args: {name: checker, description: Check, prompt: Check that 6*7=42}}
  - text: Checked.
checker:
  - text: Correct.
"""
    )
    async with rt:
        lead = await rt.create_agent()
        await rt.run("What is the answer?", agent=lead)
        await rt.run("Have it checked", agent=lead)
        (entry,) = catalog(lead)
        header = await rt.store.get_header(SessionId(entry.child_id), tenant=rt.tenant)
        assert (header.parent, header.root, header.origin, header.depth) == (
            lead.id,
            lead.id,
            "subagent",
            1,
        )
        assert header.cwd == lead.session.header.cwd
        assert header.seed_length == 0
        (request,) = model.requests_of("checker")
        assert texts(conversation(request)) == ["user:Check that 6*7=42"]
        assert 'You are the delegated subagent "checker", started by "lead".' in context_of(request)
        # One system prompt for the tree: what differs per agent is in its runtime context.
        assert all(r.system == request.system for r in model.requests_of("lead"))
        assert 'You are "lead", the root agent' in context_of(model.requests_of("lead")[0])
    model.assert_complete()


FORK_SCRIPT = """
lead:
  - text: The answer is 42.
  - calls:
      - {tool: subagent_fork, args: {name: checker, description: Check, prompt: Double-check it}}
  - text: Checked.
checker:
"""


async def test_a_fork_inherits_completed_turns_only() -> None:
    rt, model = make_runtime(FORK_SCRIPT + "  - text: Confirmed, 42.\n")
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await rt.run("What is the answer?", agent=lead)
        first_turn = len(lead.session.records)
        await rt.run("Have a fork check it", agent=lead)
        (started,) = lifecycle.started
        header = await rt.store.get_header(SessionId(started.child_id), tenant=rt.tenant)
        # The parent's first turn, then `session/end-seed`.
        assert header.seed_length == first_turn + 1
        child_records = await rt.store.read(SessionId(started.child_id), tenant=rt.tenant)
        seed = child_records[: header.seed_length]
        assert [r.event for r in seed[:-1]] == [r.event for r in lead.session.records[:first_turn]]
        assert isinstance(seed[-1].event, SessionEndSeed)
        # Its first request has the completed turn, not the in-flight one (no dangling call).
        (request,) = model.requests_of("checker")
        assert texts(conversation(request)) == [
            "user:What is the answer?",
            "assistant:The answer is 42.",
            "user:Double-check it",
        ]
        # It opens with the parent's own first request, its runtime context included, so a
        # server's cache serves it; the fork's own context comes after the inherited turns.
        lead_first = model.requests_of("lead")[0]
        assert request.system == lead_first.system
        assert texts(request.messages[:2]) == texts(lead_first.messages)
        assert texts(request.messages[3:4]) == [f"user:{context_of(request)}"]
        assert 'You are the delegated subagent "checker"' in context_of(request)
        assert replies(lead) == [ToolReply("subagent_fork", "Confirmed, 42.", False, None)]
        (ended,) = lifecycle.ended
        assert ended.last_message == "Confirmed, 42."
    model.assert_complete()


async def test_a_forks_result_never_contains_seeded_messages() -> None:
    rt, model = make_runtime(FORK_SCRIPT + "  - stop: max-tokens\n")
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await rt.run("What is the answer?", agent=lead)
        await rt.run("Have a fork check it", agent=lead)
        assert replies(lead) == [
            ToolReply(
                "subagent_fork",
                "Error: subagent run hit its token limit before finishing",
                True,
                ErrorCode.TOOL_FAILED,
            )
        ]
        (ended,) = lifecycle.ended
        assert (ended.stop_reason, ended.last_message) == ("max-tokens", None)
    model.assert_complete()


# -- parallel calls --------------------------------------------------------------------------


async def test_parallel_foreground_calls_overlap_and_commit_in_call_order() -> None:
    clock = GatedClock()
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: alpha, description: First, prompt: First part}}
      - {tool: subagent, args: {name: beta, description: Second, prompt: Second part}}
  - text: Both parts are done.
alpha:
  - {text: alpha result, sleep: 1}
beta:
  - {text: beta result, sleep: 1}
""",
        clock=clock,
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        # Both children are inside their model calls at once: they run concurrently.
        gates = [await clock.next_sleeper(), await clock.next_sleeper()]
        # A scripted call records its request and starts sleeping in one synchronous stretch,
        # so the gates come in the order of the requests.
        sleeping = [r.agent_name for r in model.requests if r.agent_name != "lead"]
        gate = dict(zip(sleeping, gates, strict=True))
        assert sorted(gate) == ["alpha", "beta"]
        gate["beta"].set()
        await (await lifecycle.child("beta", rt)).when_idle()
        gate["alpha"].set()
        await rt.wait_quiescent()
        assert [e.name for e in lifecycle.ended] == ["beta", "alpha"]
        assert replies(lead) == [
            ToolReply("subagent", "alpha result", False, None),
            ToolReply("subagent", "beta result", False, None),
        ]
        assert sorted(str(e.name) for e in catalog(lead)) == ["alpha", "beta"]
    model.assert_complete()
