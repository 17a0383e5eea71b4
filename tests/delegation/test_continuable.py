"""Conformance tests for continuable children: start, settlement and ownership (docs/design.md
§7.4; `run_in_background`, §7.3).

`run_in_background: true` starts a continuable child by default. It is held with the `hold` tool
until the test releases it; every wait is on a log record, an idle agent or quiescence.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from continuable_support import (
    Settlements,
    background,
    entered,
    own_records,
    turns,
    wait_turn,
)
from delegation_support import (
    Gates,
    Lifecycle,
    ToolReply,
    catalog,
    events,
    inputs,
    make_runtime,
    replies,
)

from subagents.core import SessionEventPosted, replay_inbox
from subagents.ids import SessionId
from subagents.messages import MessageSource, UserMessage
from subagents.sessions import (
    AssistantMessageEvent,
    InboxSpliced,
    RequestHeader,
    SqliteEventStore,
    SubagentDescriptor,
)


def started(name: str) -> str:
    return (
        f'started background subagent "{name}": it works on its own and you will be notified '
        f'when it settles; continue it with send_message(agent="{name}") once it has, or stop '
        "it with interrupt_agent"
    )


def finished(full_name: str, closing: str) -> str:
    return (
        f"Background subagent {full_name} finished and will do no further work unless you send "
        f"it more.\nIts closing message:\n{closing}"
    )


async def test_a_background_start_returns_at_once_with_a_continuable_child() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started the reviewer.
  - text: Noted the review.
reviewer:
  - calls: [{{tool: hold, args: {{label: reviewer}}}}]
  - text: app.py looks correct.
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("Review app.py in the background")
        await gates.started("reviewer").wait()
        await wait_turn(rt, lead, 1)  # the lead's turn ended while the child works
        assert replies(lead) == [ToolReply("subagent", started("reviewer"), False, None)]
        reviewer = await lifecycle.child("reviewer", rt)
        assert reviewer.status == "running"
        assert [(e.name, e.mode, e.label, e.child_id) for e in catalog(lead)] == [
            ("reviewer", "continuable", "Review the code", reviewer.id)
        ]
        # One own descriptor, written before the child's first model request.
        kinds = [r.kind for r in own_records(reviewer)]
        (descriptor,) = events(own_records(reviewer), SubagentDescriptor)
        assert (descriptor.mode, descriptor.label, descriptor.provider) == (
            "continuable",
            "Review the code",
            "spawn",
        )
        assert kinds.index("subagent/descriptor") < kinds.index("request/header")
        assert len(events(own_records(reviewer), RequestHeader)) == 1
        assert lifecycle.ended == []

        gates.release("reviewer")
        await rt.wait_quiescent()
        # Exactly one notice, which gave the idle lead one new turn.
        assert entered(lead) == [
            (1, "user", "Review app.py in the background"),
            (2, "subagent-settled", finished("reviewer", "app.py looks correct.")),
        ]
        (notice,) = [
            e.message
            for e in inputs(lead.session.records)
            if e.message.source.kind == "subagent-settled"
        ]
        assert notice.source == MessageSource(kind="subagent-settled", name="reviewer")
        assert turns(lead) == 2
        (start,) = lifecycle.started
        (end,) = lifecycle.ended
        assert (start.name, start.parent_id, start.child_id) == ("reviewer", lead.id, reviewer.id)
        assert (end.run_id, end.stop_reason, end.last_message) == (
            start.run_id,
            "completed",
            "app.py looks correct.",
        )
        assert rt.continuable.get(reviewer.id) is None
        assert list(rt.agents) == [lead.id]
    model.assert_complete()


async def test_a_child_without_assistant_text_left_no_closing_message() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("quiet", "Say nothing", "Do nothing")}
  - text: Started.
  - text: Noted.
quiet:
  - calls: [{{tool: hold, args: {{label: quiet}}}}]
  - text: ""
""",
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("quiet").wait()
        await wait_turn(rt, lead, 1)
        gates.release("quiet")
        await rt.wait_quiescent()
        assert entered(lead)[1] == (
            2,
            "subagent-settled",
            "Background subagent quiet finished and will do no further work unless you send it "
            "more.\nIt left no closing message.",
        )
    model.assert_complete()


async def test_a_grandchild_notice_names_it_in_full_and_reaches_only_its_parent() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started the reviewer.
  - text: The review is complete.
reviewer:
  - calls:
      - {background("checker", "Check style", "Check the style")}
  - text: Waiting for the checker.
  - text: The checker approved; the review is done.
reviewer/checker:
  - calls: [{{tool: hold, args: {{label: checker}}}}]
  - text: Style is clean.
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("Review app.py")
        await gates.started("checker").wait()
        reviewer = await lifecycle.child("reviewer", rt)
        checker = await lifecycle.child("reviewer/checker", rt)
        await wait_turn(rt, reviewer, 1)
        await wait_turn(rt, lead, 1)
        # The reviewer's turn ended, but it owns a running child: it stays resident (waiting).
        resident = rt.continuable.get(reviewer.id)
        assert resident is not None
        assert not resident.closing
        assert lifecycle.ended == []
        assert turns(lead) == 1

        gates.release("checker")
        await rt.wait_quiescent()
        # The grandchild's notice went to its direct parent, by full name, and woke it first.
        assert entered(reviewer)[1] == (
            2,
            "subagent-settled",
            finished("reviewer/checker", "Style is clean."),
        )
        assert entered(lead) == [
            (1, "user", "Review app.py"),
            (
                2,
                "subagent-settled",
                finished("reviewer", "The checker approved; the review is done."),
            ),
        ]
        # Child-first release: the checker ended before the reviewer.
        assert [(e.name, e.child_id, e.parent_id) for e in lifecycle.ended] == [
            ("reviewer/checker", checker.id, reviewer.id),
            ("reviewer", reviewer.id, lead.id),
        ]
        assert [e.name for e in lifecycle.started] == ["reviewer", "reviewer/checker"]
    model.assert_complete()


async def test_a_continuable_parent_is_released_only_after_its_child_and_hears_it_first() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - text: Done.
reviewer:
  - calls:
      - {background("checker", "Check style", "Check the style")}
  - text: Started the checker.
  - text: Heard from the checker.
reviewer/checker:
  - calls: [{{tool: hold, args: {{label: checker}}}}]
  - text: ok
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        order: list[str] = []

        def on_event(event: object) -> None:
            from subagents.core import AgentDisposed

            if isinstance(event, AgentDisposed):
                order.append(f"disposed {event.name}")

        rt.subscribe(on_event)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("checker").wait()
        reviewer = await lifecycle.child("reviewer", rt)
        await wait_turn(rt, reviewer, 1)
        await wait_turn(rt, lead, 1)
        assert rt.get_agent(reviewer.id) is reviewer  # still loaded while its child runs

        gates.release("checker")
        await rt.wait_quiescent()
        assert order == ["disposed reviewer/checker", "disposed reviewer"]
        # The reviewer handled the checker's notice in a turn before it was itself released.
        (notice_turn,) = [t for t, kind, _ in entered(reviewer) if kind == "subagent-settled"]
        answers = events(reviewer.session.records, AssistantMessageEvent)
        assert [a.message.text for a in answers if a.turn == notice_turn] == [
            "Heard from the checker."
        ]
    model.assert_complete()


async def test_a_busy_parent_takes_two_notices_in_its_next_step_without_a_new_turn() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("one", "First job", "Do one")}
      - {background("two", "Second job", "Do two")}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - text: Both finished.
one:
  - calls: [{{tool: hold, args: {{label: one}}}}]
  - text: one done
two:
  - calls: [{{tool: hold, args: {{label: two}}}}]
  - text: two done
""",
        tools=[gates.tool()],
    )
    async with rt:
        settled = Settlements(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("lead").wait()
        # The children finish only once the lead is in its step (they are quicker otherwise).
        gates.release("one")
        gates.release("two")
        await settled.reached(2)  # both children settled while the lead was in a step
        assert lead.status == "running"
        gates.release("lead")
        await rt.wait_quiescent()
        notices = [(t, text) for t, kind, text in entered(lead) if kind == "subagent-settled"]
        assert sorted(notices) == [
            (1, finished("one", "one done")),
            (1, finished("two", "two done")),
        ]
        assert turns(lead) == 1
        last = model.requests_of("lead")[-1]
        assert sorted(m.text for m in last.messages[-2:] if isinstance(m, UserMessage)) == [
            finished("one", "one done"),
            finished("two", "two done"),
        ]
    model.assert_complete()


FIRST_RUN = f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - text: The reviewer is done.
reviewer:
  - calls:
      - {background("checker", "Check style", "Check the style")}
  - text: Started the checker.
  - text: The checker passed.
reviewer/checker:
  - calls: [{{tool: hold, args: {{label: checker}}}}]
  - text: check 1
"""
# Each agent continues at its own response index: earlier entries are placeholders.
SECOND_RUN = """
reviewer:
  - text: (first run)
  - text: (first run)
  - text: (first run)
  - text: The checker passed again.
reviewer/checker:
  - text: (first run)
  - text: (first run)
  - text: check 2
"""


async def test_notices_climb_a_stored_tree_nobody_has_loaded(tmp_path: Path) -> None:
    """A person messages a stored grandchild; its parent is resumed to hear it settle, and
    the root, not loaded, finds the parent's notice pending in its log."""
    path = tmp_path / "state.db"
    gates = Gates()
    rt, model = make_runtime(FIRST_RUN, store=SqliteEventStore(path), tools=[gates.tool()])
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("Review app.py")
        await gates.started("checker").wait()
        await wait_turn(rt, await lifecycle.child("reviewer", rt), 1)
        await wait_turn(rt, lead, 1)
        gates.release("checker")
        await rt.wait_quiescent()
        lead_id = lead.id
        reviewer_id, checker_id = (SessionId(e.child_id) for e in lifecycle.started)
    model.assert_complete()

    rt, model = make_runtime(SECOND_RUN, store=SqliteEventStore(path))
    async with rt:
        lifecycle = Lifecycle(rt)
        await rt.continuable.deliver_as_user(checker_id, "Check it again")
        await rt.wait_quiescent()
        assert [e.name for e in lifecycle.started] == ["reviewer/checker", "reviewer"]
        assert sorted((e.name, e.stop_reason) for e in lifecycle.ended) == [
            ("reviewer", "completed"),
            ("reviewer/checker", "completed"),
        ]
        assert rt.get_agent(lead_id) is None
        await rt.store.flush()
        reviewer = await rt.store.read(reviewer_id, tenant="default")
        assert [(e.turn, e.message.source.kind, e.message.text) for e in inputs(reviewer)][-1] == (
            3,
            "subagent-settled",
            finished("reviewer/checker", "check 2"),
        )
        pending = replay_inbox(await rt.store.read(lead_id, tenant="default"))
        assert [(m.source.kind, m.text) for m in pending.next_turn] == [
            ("subagent-settled", finished("reviewer", "The checker passed again."))
        ]
    model.assert_complete()


SETTLING_RUN = f"""
lead:
  - calls:
      - {background("helper", "Help out", "Gather the facts")}
  - text: Started.
  - text: Heard the helper.
  - text: Heard the helper again.
helper:
  - text: facts 1
  - text: facts 2
"""


async def test_a_message_during_a_settlement_goes_to_the_next_epoch_of_the_whole_log(
    tmp_path: Path,
) -> None:
    """A message for a child whose settlement notice is being delivered waits until that
    activation is released, then resumes it from its finished log.

    The activation stays registered until its last write (the `subagent/settled` marker after
    the notice): a resume in between would load a second copy of the session from a log
    missing that marker, and its writes would collide with it (seen after crash resume: a
    parent's next epoch lost the notice of a grandchild).
    """
    rt, model = make_runtime(SETTLING_RUN, store=SqliteEventStore(tmp_path / "state.db"))
    async with rt, asyncio.TaskGroup() as senders:
        lifecycle = Lifecycle(rt)
        registered: list[bool] = []
        sent: list[asyncio.Task[tuple[object, UserMessage, bool]]] = []

        def on_posted(event: object) -> None:
            assert isinstance(event, SessionEventPosted)
            spliced = event.record.event
            if event.name != "lead" or not isinstance(spliced, InboxSpliced) or sent:
                return
            if any(m.source.kind == "subagent-settled" for m in spliced.inserted):
                helper = SessionId(lifecycle.started[0].child_id)
                # The notice is durable in the lead's log; the helper's marker is not yet.
                registered.append(rt.continuable.get(helper) is not None)
                sent.append(senders.create_task(rt.continuable.deliver_as_user(helper, "More")))

        rt.subscribe(on_posted, types=(SessionEventPosted,))
        lead = await rt.create_agent()
        await lead.followup("Get the facts")
        await rt.wait_quiescent()
        assert len(sent) == 1, "the helper's settlement never reached the lead"
        await sent[0]
        await rt.wait_quiescent()
        helper_id = SessionId(lifecycle.started[0].child_id)
        helper = await rt.store.read(helper_id, tenant="default")
        lead_log = await rt.store.read(lead.id, tenant="default")
    model.assert_complete()
    assert [r.seq for r in helper] == list(range(len(helper)))
    assert [e.message.text for e in inputs(helper)] == [
        "Gather the facts",
        "More",
    ]
    assert [r.kind for r in helper].count("subagent/settled") == 2
    notices = [
        e.message.text for e in inputs(lead_log) if e.message.source.kind == "subagent-settled"
    ]
    assert notices == [finished("helper", "facts 1"), finished("helper", "facts 2")]
    assert registered == [True]


async def test_the_bus_posts_every_record_of_a_settling_child_including_its_marker(
    tmp_path: Path,
) -> None:
    """A follower of the bus sees a settled child's whole log, seqs 0..n without a gap.

    The `subagent/settled` marker is written after the notice, once the child is disposed
    and no longer posts its log: it was never posted, so a follower that heard the child's
    next activation saw its log with a hole (found by the crash campaign).
    """
    rt, model = make_runtime(SETTLING_RUN, store=SqliteEventStore(tmp_path / "state.db"))
    posted: dict[str, list[tuple[int, str]]] = {}

    def on_posted(event: object) -> None:
        assert isinstance(event, SessionEventPosted)
        posted.setdefault(event.agent_id, []).append((event.record.seq, event.record.kind))

    async with rt:
        lifecycle = Lifecycle(rt)
        rt.subscribe(on_posted, types=(SessionEventPosted,))
        lead = await rt.create_agent()
        await lead.followup("Get the facts")
        await rt.wait_quiescent()
        helper = SessionId(lifecycle.started[0].child_id)
        await rt.continuable.deliver_as_user(helper, "More")
        await rt.wait_quiescent()
        await rt.store.flush()
        stored = [(r.seq, r.kind) for r in await rt.store.read(helper, tenant="default")]
    model.assert_complete()
    assert [kind for _, kind in stored].count("subagent/settled") == 2
    assert posted[helper] == stored
