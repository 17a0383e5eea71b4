"""Conformance tests for `report` (docs/design.md §7.4, §7.7): a report or a settlement notice
to a parent that is not loaded waits, durably, in the parent's log until it is resumed.
"""

from __future__ import annotations

import re
from pathlib import Path

from continuable_support import Settlements, background, entered, wait_turn
from delegation_support import Gates, Lifecycle, events, make_runtime, replies

from subagents.core import replay_inbox
from subagents.ids import SessionId
from subagents.messages import MessageSource, UserMessage
from subagents.sessions import SqliteEventStore, TurnEnd, UserMessageEvent

ACCEPTED = re.compile(r"report accepted by the agent that started you as message [0-9a-f-]{36}")


def reported(full_name: str, text: str) -> str:
    return f"Background subagent {full_name} reported:\n{text}"


def finished(full_name: str, closing: str) -> str:
    return (
        f"Background subagent {full_name} finished and will do no further work unless you send "
        f"it more.\nIts closing message:\n{closing}"
    )


async def test_only_continuable_children_have_the_report_tool() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {{tool: subagent, args: {{name: helper, description: Help, prompt: Help}}}}
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - text: Done.
helper:
  - text: helped
reviewer:
  - calls: [{{tool: hold, args: {{label: reviewer}}}}]
  - text: reviewed
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("reviewer").wait()
        await wait_turn(rt, lead, 1)
        gates.release("reviewer")
        await rt.wait_quiescent()

        def tools(name: str) -> set[str]:
            (first, *_) = model.requests_of(name)
            return {t.name for t in first.tools}

        assert "report" not in tools("lead")
        assert "report" not in tools("helper")
        assert "report" in tools("reviewer")
        # The child's report tool does not leak into the shared registry.
        assert "report" not in {t.name for t in model.requests_of("lead")[-1].tools}
    model.assert_complete()


async def test_a_report_reaches_the_direct_parent_and_the_turn_goes_on() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - text: Noted the result.
reviewer:
  - calls:
      - {background("checker", "Check style", "Check the style")}
  - calls: [{{tool: hold, args: {{label: reviewer}}}}]
  - text: Review finished; the checker is done.
reviewer/checker:
  - calls: [{{tool: report, args: {{message: half the files are clean}}}}]
  - calls: [{{tool: report, args: {{message: all files are clean}}}}]
  - text: Style is clean.
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        settled = Settlements(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("reviewer").wait()
        reviewer = await lifecycle.child("reviewer", rt)
        checker = await lifecycle.child("reviewer/checker", rt)
        await settled.reached(1)  # the checker reported twice, finished and settled
        await wait_turn(rt, lead, 1)
        # Both reports were accepted mid-turn; the turn went on to its closing text.
        assert [bool(ACCEPTED.fullmatch(r.content)) for r in replies(checker)] == [True, True]
        assert [(t, kind) for t, kind, _ in entered(checker)] == [(1, "parent")]
        assert events(checker.session.records, TurnEnd) == [TurnEnd(turn=1, reason="completed")]
        # Only the direct parent heard them: nothing reached the lead.
        assert not any(kind == "subagent-report" for _, kind, _ in entered(lead))
        gates.release("reviewer")
        await rt.wait_quiescent()
        # The busy reviewer took both reports and the checker's notice at its next step.
        assert [(t, kind) for t, kind, _ in entered(reviewer)] == [
            (1, "parent"),
            (1, "subagent-report"),
            (1, "subagent-report"),
            (1, "subagent-settled"),
        ]
        messages = [
            e.message
            for e in (r.event for r in reviewer.session.records)
            if isinstance(e, UserMessageEvent)
        ]
        assert [(m.source, m.text) for m in messages if m.source.kind == "subagent-report"] == [
            (
                MessageSource(kind="subagent-report", name="reviewer/checker"),
                reported("reviewer/checker", "half the files are clean"),
            ),
            (
                MessageSource(kind="subagent-report", name="reviewer/checker"),
                reported("reviewer/checker", "all files are clean"),
            ),
        ]
        assert [text for _, kind, text in entered(lead) if kind == "subagent-settled"] == [
            finished("reviewer", "Review finished; the checker is done.")
        ]
    model.assert_complete()


async def test_a_report_to_an_idle_parent_wakes_it_once() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - text: Noted the progress.
  - text: Noted the result.
reviewer:
  - calls: [{{tool: hold, args: {{label: start}}}}]
  - calls: [{{tool: report, args: {{message: halfway there}}}}]
  - calls: [{{tool: hold, args: {{label: reviewer}}}}]
  - text: All reviewed.
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("start").wait()
        await wait_turn(rt, lead, 1)
        gates.release("start")  # the report reaches an idle lead
        await gates.started("reviewer").wait()
        await wait_turn(rt, lead, 2)
        assert entered(lead)[1:] == [(2, "subagent-report", reported("reviewer", "halfway there"))]
        gates.release("reviewer")
        await rt.wait_quiescent()
        assert entered(lead)[2:] == [(3, "subagent-settled", finished("reviewer", "All reviewed."))]
    model.assert_complete()


FIRST_RUN = f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - text: The reviewer finished.
reviewer:
  - calls: [{{tool: hold, args: {{label: first}}}}]
  - text: first review
"""
# Each agent continues at its own response index: earlier entries are placeholders.
CHILD_RUN = """
reviewer:
  - text: (used in the first run)
  - text: (used in the first run)
  - calls: [{tool: report, args: {message: still fine}}]
  - text: second review
"""
LEAD_RUN = """
lead:
  - text: (used in the first run)
  - text: (used in the first run)
  - text: (used in the first run)
  - text: Read the report.
  - text: Read the notice.
"""


async def test_reports_and_notices_to_an_unloaded_parent_wait_in_its_log(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    gates = Gates()
    rt, model = make_runtime(FIRST_RUN, store=SqliteEventStore(path), tools=[gates.tool()])
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        lead_id = lead.id
        await lead.followup("Review app.py")
        await gates.started("first").wait()
        await wait_turn(rt, lead, 1)
        gates.release("first")
        await rt.wait_quiescent()
        reviewer_id = SessionId(lifecycle.started[0].child_id)
    model.assert_complete()

    # A person talks to the stored child while nothing loads the lead.
    rt, model = make_runtime(CHILD_RUN, store=SqliteEventStore(path))
    async with rt:
        act, _, _ = await rt.continuable.deliver_as_user(reviewer_id, "Review it again")
        await rt.wait_quiescent()
        assert rt.get_agent(lead_id) is None
        agent = act.child.local_agent
        assert agent is not None
        assert ACCEPTED.fullmatch(replies(agent)[-1].content)
        await rt.store.flush()
        pending = replay_inbox(await rt.store.read(lead_id, tenant="default"))
        expected: list[tuple[str, str]] = [
            ("subagent-report", reported("reviewer", "still fine")),
            ("subagent-settled", finished("reviewer", "second review")),
        ]
        assert [(m.source.kind, m.text) for m in pending.next_turn] == expected
    model.assert_complete()

    # Resumed, the lead finds both pending and runs them.
    rt, model = make_runtime(LEAD_RUN, store=SqliteEventStore(path))
    async with rt:
        lead = await rt.resume_agent(lead_id)
        queued: list[UserMessage] = list(lead.inbox.next_turn)
        assert [(m.source.kind, m.text) for m in queued] == expected
        assert lead.wake()
        await rt.wait_quiescent()
        assert [(kind, text) for _, kind, text in entered(lead)[-2:]] == expected
    model.assert_complete()
