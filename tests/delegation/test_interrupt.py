"""Conformance tests for `interrupt_agent` (docs/design.md §5.4 and
§7.7).

Any live ancestor may stop an agent's current turn; its queue, its activation and its children
stay. Children are held with the `hold` tool; `Gates.linger` keeps a cancelled child observably
"stopping" so the wake-gap case is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from continuable_support import (
    Settlements,
    background,
    entered,
    sequential_session_ids,
    sid,
    wait_turn,
)
from delegation_support import (
    Gates,
    Lifecycle,
    ToolReply,
    events,
    inputs,
    make_runtime,
    replies,
)

from subagents.errors import ErrorCode
from subagents.ids import SessionId
from subagents.sessions import EventRecord, ToolResultEvent, TurnEnd


def hold(label: str) -> str:
    return f"[{{tool: hold, args: {{label: {label}}}}}]"


def ends(records: Sequence[EventRecord]) -> list[tuple[int, str, str | None]]:
    return [(e.turn, e.reason, e.cause) for e in events(records, TurnEnd)]


def stopped(full_name: str) -> str:
    return (
        f"Background subagent {full_name} was stopped before it finished.\n"
        "It left no closing message."
    )


async def test_an_interrupt_stops_the_turn_keeps_the_queue_and_the_children() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - calls: {hold("lead1")}
  - calls: [{{tool: send_message, args: {{agent: reviewer, message: Then check the tests}}}}]
  - calls: {hold("lead2")}
  - calls: [{{tool: interrupt_agent, args: {{agent: reviewer}}}}]
  - text: Interrupted the reviewer.
  - text: The reviewer is done.
reviewer:
  - calls:
      - {background("checker", "Check style", "Check the style")}
  - calls: {hold("reviewer")}
  - text: the tests are fine.
  - text: heard from the checker.
reviewer/checker:
  - calls: {hold("checker")}
  - text: style ok
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("reviewer").wait()
        await gates.started("checker").wait()
        reviewer = await lifecycle.child("reviewer", rt)
        checker = await lifecycle.child("reviewer/checker", rt)
        gates.release("lead1")
        await gates.started("lead2").wait()  # the message is queued behind the held turn
        gates.release("lead2")
        await wait_turn(rt, lead, 1)
        assert replies(lead)[-1] == ToolReply(
            "interrupt_agent", "interrupt requested for agent reviewer", False, None
        )
        await wait_turn(rt, reviewer, 2)
        # Turn 1 ended aborted; the queued message ran as turn 2 on the same agent.
        assert ends(reviewer.session.records) == [
            (1, "aborted", "parent"),
            (2, "completed", None),
        ]
        assert [(t, text) for t, _, text in entered(reviewer)] == [
            (1, "Review app.py"),
            (2, "Then check the tests"),
        ]
        assert rt.get_agent(reviewer.id) is reviewer
        # The grandchild kept running, untouched.
        assert checker.status == "running"
        assert gates.cancelled == ["reviewer"]
        assert [e.name for e in lifecycle.ended] == []

        gates.release("checker")
        await rt.wait_quiescent()
        assert [(e.name, e.stop_reason) for e in lifecycle.ended] == [
            ("reviewer/checker", "completed"),
            ("reviewer", "completed"),
        ]
        assert len(lifecycle.started) == 2
    model.assert_complete()


async def test_a_grandparent_may_interrupt_by_path_and_the_parent_hears_it_stopped() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - calls: {hold("lead")}
  - calls:
      - {{tool: interrupt_agent, args: {{agent: reviewer/checker}}}}
  - text: Stopped the checker.
  - text: The reviewer is done.
reviewer:
  - calls:
      - {background("checker", "Check style", "Check the style")}
  - text: Waiting for the checker.
  - text: The checker was stopped.
reviewer/checker:
  - calls: {hold("checker")}
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        stopping = gates.linger("checker")  # the checker stops only once the lead's turn ended
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("checker").wait()
        await wait_turn(rt, await lifecycle.child("reviewer", rt), 1)
        await gates.started("lead").wait()
        gates.release("lead")
        await wait_turn(rt, lead, 1)
        assert replies(lead)[-1] == ToolReply(
            "interrupt_agent", "interrupt requested for agent reviewer/checker", False, None
        )
        stopping.set()
        await rt.wait_quiescent()
        checker = await rt.read_log(SessionId(lifecycle.started[1].child_id))
        assert ends(checker) == [(1, "aborted", "parent")]
        reviewer = await rt.read_log(SessionId(lifecycle.started[0].child_id))
        assert [(e.turn, e.message.source.kind, e.message.text) for e in inputs(reviewer)][1:] == [
            (2, "subagent-settled", stopped("reviewer/checker"))
        ]
        assert [(e.name, e.stop_reason) for e in lifecycle.ended] == [
            ("reviewer/checker", "aborted"),
            ("reviewer", "completed"),
        ]
    model.assert_complete()


async def test_self_and_sibling_interrupts_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    sequential_session_ids(monkeypatch)
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("one", "First", "Do one")}
      - {background("two", "Second", "Do two")}
  - calls:
      - {{tool: interrupt_agent, args: {{agent: /lead}}}}
      - {{tool: interrupt_agent, args: {{agent: "{sid(1)}"}}}}
  - text: Refused.
  - text: Heard from one.
  - text: Heard from two.
one:
  - calls: {hold("one")}
  - calls:
      - {{tool: interrupt_agent, args: {{agent: /two}}}}
      - {{tool: interrupt_agent, args: {{agent: "{sid(3)}"}}}}
      - {{tool: interrupt_agent, args: {{agent: /one}}}}
  - text: I may not stop my sibling or myself.
two:
  - calls: {hold("two")}
  - text: two done
""",
        tools=[gates.tool()],
    )
    async with rt:
        settled = Settlements(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("one").wait()
        await gates.started("two").wait()
        await wait_turn(rt, lead, 1)
        gates.release("one")
        await settled.reached(1)  # `one` tried, failed and settled; `two` is untouched
        assert [e.name for e in settled.ended] == ["one"]
        assert gates.cancelled == []
        await wait_turn(rt, lead, 2)  # the lead heard from `one` before `two` goes on
        gates.release("two")
        await rt.wait_quiescent()
        self_lead = ToolReply(
            "interrupt_agent",
            'Error: agent "lead" cannot interrupt itself',
            True,
            ErrorCode.UNAUTHORIZED,
        )
        assert replies(lead)[2:] == [self_lead, self_lead]
        sibling = ToolReply(
            "interrupt_agent",
            f'Error: subagent "{sid(3)}" is not a live descendant of agent "one"',
            True,
            ErrorCode.UNAUTHORIZED,
        )
        one = await rt.read_log(SessionId(sid(2)))
        assert [
            ToolReply(e.message.name, e.message.content, e.message.is_error, e.code)
            for e in events(one, ToolResultEvent)
        ][1:] == [
            sibling,
            sibling,
            ToolReply(
                "interrupt_agent",
                'Error: agent "one" cannot interrupt itself',
                True,
                ErrorCode.UNAUTHORIZED,
            ),
        ]
        two = await rt.read_log(SessionId(sid(3)))
        assert ends(two) == [(1, "completed", None)]
    model.assert_complete()


async def test_unknown_settled_and_one_shot_targets_are_accepted_no_ops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sequential_session_ids(monkeypatch)
    unknown = "0b6f3c1e-5a8d-4c9e-9f41-2d7a6b3e8c10"
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
      - {{tool: subagent, args: {{name: helper, description: Help, prompt: Help out}}}}
  - text: Started.
  - text: Noted.
  - calls:
      - {{tool: interrupt_agent, args: {{agent: "{unknown}"}}}}
      - {{tool: interrupt_agent, args: {{agent: reviewer}}}}
      - {{tool: interrupt_agent, args: {{agent: "{sid(2)}"}}}}
      - {{tool: interrupt_agent, args: {{agent: helper}}}}
  - text: Nothing to stop.
reviewer:
  - calls: {hold("reviewer")}
  - text: reviewed
helper:
  - text: helped
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("reviewer").wait()
        await wait_turn(rt, lead, 1)
        gates.release("reviewer")
        await rt.wait_quiescent()
        await rt.store.flush()
        before = {
            e.child_id: len(await rt.read_log(SessionId(e.child_id))) for e in lifecycle.started
        }
        await lead.followup("stop everything")
        await rt.wait_quiescent()
        assert [r.content for r in replies(lead)[2:]] == [
            f"interrupt requested for agent {unknown}",
            "interrupt requested for agent reviewer",
            f"interrupt requested for agent {sid(2)}",
            "interrupt requested for agent helper",
        ]
        assert not any(r.is_error for r in replies(lead))
        await rt.store.flush()
        after = {
            e.child_id: len(await rt.read_log(SessionId(e.child_id))) for e in lifecycle.started
        }
        assert after == before  # nothing was resumed, cancelled or written
        assert len(lifecycle.started) == 2
    model.assert_complete()


async def test_a_send_right_after_an_interrupt_always_runs() -> None:
    """L4: a waking message accepted while the interrupted turn is still stopping runs."""
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - calls: {hold("lead")}
  - calls: [{{tool: interrupt_agent, args: {{agent: reviewer}}}}]
  - calls: [{{tool: send_message, args: {{agent: reviewer, message: Start over}}}}]
  - text: Restarted the reviewer.
  - text: The reviewer is done.
reviewer:
  - calls: {hold("reviewer")}
  - text: started over and finished.
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        stopping = gates.linger("reviewer")  # the cancelled hold waits here: still stopping
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("reviewer").wait()
        reviewer = await lifecycle.child("reviewer", rt)
        await gates.started("lead").wait()
        gates.release("lead")
        await wait_turn(rt, lead, 1)
        # Both calls returned while the reviewer's interrupted turn had not closed yet.
        assert [r.name for r in replies(lead)][-2:] == ["interrupt_agent", "send_message"]
        assert gates.cancelled == ["reviewer"]
        assert reviewer.status == "running"
        assert ends(reviewer.session.records) == []

        stopping.set()
        await rt.wait_quiescent()
        assert ends(reviewer.session.records) == [
            (1, "aborted", "parent"),
            (2, "completed", None),
        ]
        assert [(t, text) for t, _, text in entered(reviewer)] == [
            (1, "Review app.py"),
            (2, "Start over"),
        ]
        assert len(lifecycle.started) == 1
        assert [text for _, kind, text in entered(lead) if kind == "subagent-settled"] == [
            "Background subagent reviewer finished and will do no further work unless you send "
            "it more.\nIts closing message:\nstarted over and finished."
        ]
    model.assert_complete()


async def test_an_interrupted_child_with_nothing_queued_settles_stopped_and_lists_aborted() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - calls: {hold("lead")}
  - calls: [{{tool: interrupt_agent, args: {{agent: reviewer}}}}]
  - text: Stopped it.
  - calls: [{{tool: list_agents, args: {{}}}}]
  - text: It can be resumed.
reviewer:
  - calls: {hold("reviewer")}
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        stopping = gates.linger("reviewer")
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("reviewer").wait()
        await gates.started("lead").wait()
        gates.release("lead")
        await wait_turn(rt, lead, 1)
        stopping.set()  # the reviewer stops, and settles, after the lead's turn ended
        await rt.wait_quiescent()
        assert [(t, kind, text) for t, kind, text in entered(lead)][1:] == [
            (2, "subagent-settled", stopped("reviewer"))
        ]
        assert replies(lead)[-1] == ToolReply(
            "list_agents", "reviewer [aborted] — Review the code", False, None
        )
        (end,) = lifecycle.ended
        assert (end.name, end.stop_reason) == ("reviewer", "aborted")
    model.assert_complete()
