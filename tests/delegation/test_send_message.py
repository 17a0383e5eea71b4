"""Conformance tests for `send_message` (docs/design.md §7.4,
§7.7; agent references, §7.6).

Only the exact direct parent delivers; a message to a working child is its next turn; a settled
child is cold-resumed from its own log; an accepted message is durable before the tool answers
and is replayed after a restart.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from continuable_support import (
    HookedModel,
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
    conversation,
    inputs,
    make_runtime,
    replies,
)

from subagents.core import replay_inbox
from subagents.core._inspect import MessageTrace, trace_message
from subagents.delegation import DelegationRuntime
from subagents.errors import ErrorCode
from subagents.ids import SessionId
from subagents.messages import AssistantMessage, MessageSource, UserMessage, user_message
from subagents.sessions import InboxSpliced, SqliteEventStore
from subagents.testing import FakeClock

QUEUED = re.compile(
    r"message queued as the next turn for subagent (?P<name>\S+) \(message (?P<id>[0-9a-f-]{36})\)"
    r"; you will be notified when it settles"
)


def queued(reply: ToolReply) -> tuple[str, str]:
    """(full name, message id) of a successful `send_message` result."""
    match = QUEUED.fullmatch(reply.content)
    assert match is not None, reply
    assert not reply.is_error
    return match["name"], match["id"]


def finished(full_name: str, closing: str) -> str:
    return (
        f"Background subagent {full_name} finished and will do no further work unless you send "
        f"it more.\nIts closing message:\n{closing}"
    )


PARENT = MessageSource(kind="parent", name="lead")


async def test_a_settled_child_is_reached_by_name_path_and_id_and_cold_resumed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sequential_session_ids(monkeypatch)
    gates = Gates()
    looks = "\n".join(
        f"  - calls: [{{tool: hold, args: {{label: look{n}}}}}]\n  - text: look {n}"
        for n in range(1, 5)
    )
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - calls: [{{tool: send_message, args: {{agent: reviewer, message: Second look}}}}]
  - text: Asked by name.
  - calls: [{{tool: send_message, args: {{agent: /reviewer, message: Third look}}}}]
  - text: Asked by path.
  - calls: [{{tool: send_message, args: {{agent: "{sid(2)}", message: Fourth look}}}}]
  - text: Asked by id.
  - text: All four looks are done.
reviewer:
{looks}
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        assert lead.id == sid(1)
        await lead.followup("Review app.py")
        for n in range(1, 5):
            # Each look waits until the lead's turn that asked for it has ended, so every
            # notice gets a turn of its own.
            await gates.started(f"look{n}").wait()
            await wait_turn(rt, lead, n)
            gates.release(f"look{n}")
        await rt.wait_quiescent()
        sends = [r for r in replies(lead) if r.name == "send_message"]
        assert [queued(r)[0] for r in sends] == ["reviewer"] * 3
        # Every send cold-resumed the settled child: a new activation (new run id), one session.
        assert [(e.name, e.child_id) for e in lifecycle.started] == [("reviewer", sid(2))] * 4
        assert len({e.run_id for e in lifecycle.started}) == 4
        assert sorted((e.run_id, e.stop_reason) for e in lifecycle.ended) == sorted(
            (e.run_id, "completed") for e in lifecycle.started
        )
        records = await rt.read_log(SessionId(sid(2)))
        assert [(e.turn, e.message.source, e.message.text) for e in inputs(records)] == [
            (1, MessageSource(kind="parent", name="lead"), "Review app.py"),
            (2, PARENT, "Second look"),
            (3, PARENT, "Third look"),
            (4, PARENT, "Fourth look"),
        ]
        # The conversation is intact across resumes: the fourth request holds every turn.
        last = model.requests_of("reviewer")[-1]
        texts = [
            m.text for m in conversation(last) if isinstance(m, UserMessage | AssistantMessage)
        ]
        assert [t for t in texts if t] == [
            "Review app.py",
            "look 1",
            "Second look",
            "look 2",
            "Third look",
            "look 3",
            "Fourth look",
        ]
        assert [text for _, kind, text in entered(lead) if kind == "subagent-settled"] == [
            finished("reviewer", f"look {n}") for n in range(1, 5)
        ]
    model.assert_complete()


async def test_only_the_direct_parent_may_send(monkeypatch: pytest.MonkeyPatch) -> None:
    sequential_session_ids(monkeypatch)
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - calls:
      - {{tool: send_message, args: {{agent: reviewer/checker, message: From the lead}}}}
      - {{tool: send_message, args: {{agent: /reviewer/checker, message: From the lead}}}}
      - {{tool: send_message, args: {{agent: "{sid(3)}", message: From the lead}}}}
  - text: Only the reviewer may talk to its checker.
reviewer:
  - calls:
      - {background("checker", "Check style", "Check the style")}
  - text: Started the checker.
  - calls: [{{tool: send_message, args: {{agent: /reviewer/checker, message: Once more}}}}]
  - text: Asked the checker again.
  - text: The checker checked twice.
reviewer/checker:
  - calls: [{{tool: hold, args: {{label: check1}}}}]
  - text: check 1
  - calls: [{{tool: hold, args: {{label: check2}}}}]
  - text: check 2
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("Review app.py")
        await gates.started("check1").wait()
        reviewer = await lifecycle.child("reviewer", rt)
        await wait_turn(rt, reviewer, 1)
        await wait_turn(rt, lead, 1)
        gates.release("check1")
        await gates.started("check2").wait()
        await wait_turn(rt, reviewer, 2)
        gates.release("check2")
        await rt.wait_quiescent()
        refused = (
            f'Error: subagent "{sid(3)}" belongs to another parent session; only its direct '
            "parent can send it messages (the message was not delivered)"
        )
        assert [r for r in replies(lead) if r.name == "send_message"] == [
            ToolReply("send_message", refused, True, ErrorCode.UNAUTHORIZED)
        ] * 3
        checker = await rt.read_log(SessionId(sid(3)))
        assert [(e.turn, e.message.text) for e in inputs(checker)] == [
            (1, "Check the style"),
            (2, "Once more"),
        ]
        assert [e.name for e in lifecycle.started] == [
            "reviewer",
            "reviewer/checker",
            "reviewer/checker",
        ]
    model.assert_complete()


async def test_a_one_shot_child_is_not_resumable_and_nothing_is_written() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls: [{tool: subagent, args: {name: helper, description: Help, prompt: Help out}}]
  - calls: [{tool: send_message, args: {agent: helper, message: More please}}]
  - text: The helper cannot be continued.
helper:
  - text: helped
"""
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        (start,) = lifecycle.started
        reply = replies(lead)[1]
        assert reply == ToolReply(
            "send_message",
            f'Error: subagent "{start.child_id}" has no supported continuation state and cannot '
            "be resumed; do not retry send_message with this id (the message was not delivered)",
            True,
            ErrorCode.NOT_RESUMABLE,
        )
        helper = await rt.read_log(SessionId(start.child_id))
        assert [e.message.text for e in inputs(helper)] == ["Help out"]
        assert not any(isinstance(r.event, InboxSpliced) for r in helper[-3:])
        assert len(lifecycle.started) == 1
    model.assert_complete()


async def test_unknown_names_and_ids_are_errors_naming_them() -> None:
    ghost_id = "0b6f3c1e-5a8d-4c9e-9f41-2d7a6b3e8c10"
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {{tool: send_message, args: {{agent: ghost, message: Hello}}}}
      - {{tool: send_message, args: {{agent: "{ghost_id}", message: Hello}}}}
  - text: Nobody there.
"""
    )
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [
            ToolReply(
                "send_message",
                "Error: no agent named 'ghost' among the agents you started; list_agents shows "
                "the names (the message was not delivered)",
                True,
                ErrorCode.NOT_FOUND,
            ),
            ToolReply(
                "send_message",
                f'Error: subagent "{ghost_id}" is unavailable; list_agents shows your children '
                "(the message was not delivered)",
                True,
                ErrorCode.NOT_RESUMABLE,
            ),
        ]
    model.assert_complete()


async def test_a_message_to_a_working_child_is_its_next_turn_and_durable_at_once(
    tmp_path: Path,
) -> None:
    gates = Gates()
    path = tmp_path / "state.db"
    clock = FakeClock()
    model = HookedModel.from_yaml(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - calls: [{{tool: send_message, args: {{agent: reviewer, message: Also check the tests}}}}]
  - text: Asked for the tests too.
  - text: Heard back.
reviewer:
  - calls: [{{tool: hold, args: {{label: reviewer}}}}]
  - text: app.py is fine.
  - text: the tests are fine too.
""",
        clock=clock,
    )
    assert isinstance(model, HookedModel)
    rt = DelegationRuntime(
        model=model, store=SqliteEventStore(path), tools=[gates.tool()], clock=clock
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        stored: list[UserMessage] = []

        async def read_durable() -> None:
            # The model now sees the send's result: the message must be in the child's log.
            (reply,) = [r for r in replies(lead) if r.name == "send_message"]
            _, message_id = queued(reply)
            async with SqliteEventStore(path) as fresh:
                records = await fresh.read(SessionId(child.id), tenant="default")
            stored.extend(
                m
                for r in records
                if isinstance(r.event, InboxSpliced)
                for m in r.event.inserted
                if m.id == message_id
            )

        model.hooks[("lead", 3)] = read_durable
        await lead.followup("Review app.py")
        await gates.started("reviewer").wait()
        child = await lifecycle.child("reviewer", rt)
        await gates.started("lead").wait()
        gates.release("lead")
        await wait_turn(rt, lead, 1)
        assert [m.text for m in stored] == ["Also check the tests"]
        assert stored[0].source == PARENT
        # The child is still in its first turn; the message waits behind it.
        assert child.status == "running"
        assert [(t, text) for t, _, text in entered(child)] == [(1, "Review app.py")]

        gates.release("reviewer")
        await rt.wait_quiescent()
        assert [(t, text) for t, _, text in entered(child)] == [
            (1, "Review app.py"),
            (2, "Also check the tests"),
        ]
        # It did not steer the first turn: that turn's second request never saw it.
        first_turn = model.requests_of("reviewer")[1]
        assert "Also check the tests" not in [getattr(m, "text", None) for m in first_turn.messages]
        # One activation ran both turns; the lead heard once, after both. (Live events come in
        # log order: the child's end follows its records, once they are durable.)
        await rt.store.flush()
        assert len(lifecycle.started) == len(lifecycle.ended) == 1
        assert [text for _, kind, text in entered(lead) if kind == "subagent-settled"] == [
            finished("reviewer", "the tests are fine too.")
        ]
        # L12: the message id leads to the turn that handled it and that turn's answer.
        assert trace_message(child.session.records, stored[0].id) == MessageTrace(
            stored[0].id, 2, "completed", "the tests are fine too."
        )
    model.assert_complete()


async def test_a_child_waiting_on_its_own_child_wakes_without_a_new_activation() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - calls: [{{tool: send_message, args: {{agent: reviewer, message: Status please}}}}]
  - text: Asked.
  - text: Done.
reviewer:
  - calls:
      - {background("checker", "Check style", "Check the style")}
  - text: Waiting for the checker.
  - text: Still waiting for the checker.
  - text: The checker is done.
reviewer/checker:
  - calls: [{{tool: hold, args: {{label: checker}}}}]
  - text: ok
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("checker").wait()
        reviewer = await lifecycle.child("reviewer", rt)
        await wait_turn(rt, reviewer, 1)
        await wait_turn(rt, lead, 1)
        await lead.followup("Ask the reviewer for its status")
        await wait_turn(rt, lead, 2)
        await wait_turn(rt, reviewer, 2)
        assert rt.get_agent(reviewer.id) is reviewer  # the same agent ran the message
        assert [e.name for e in lifecycle.started] == ["reviewer", "reviewer/checker"]
        gates.release("checker")
        await rt.wait_quiescent()
        assert [(t, kind) for t, kind, _ in entered(reviewer)] == [
            (1, "parent"),
            (2, "parent"),
            (3, "subagent-settled"),
        ]
    model.assert_complete()


RESTART_SCRIPT = f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - text: The reviewer finished.
  - text: The reviewer finished again.
reviewer:
  - calls: [{{tool: hold, args: {{label: first}}}}]
  - text: first review
  - text: second review
"""


async def test_an_accepted_message_survives_a_restart_and_runs(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    gates = Gates()
    rt, _ = make_runtime(RESTART_SCRIPT, store=SqliteEventStore(path), tools=[gates.tool()])
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

    # Accepted but never claimed: written into the stored child's log while nothing loads it.
    rt, _ = make_runtime(RESTART_SCRIPT, store=SqliteEventStore(path))
    async with rt:
        message = user_message("Review it again", source=PARENT)
        await rt.deliver(reviewer_id, message)
        assert rt.get_agent(reviewer_id) is None

    rt, model = make_runtime(RESTART_SCRIPT, store=SqliteEventStore(path))
    async with rt:
        settled = Settlements(rt)
        root = await rt.store.get_header(lead_id, tenant="default")
        resumed = await rt.continuable.resume_unsettled(root)
        assert [a.full_name for a in resumed] == ["reviewer"]
        await settled.reached(1)
        await rt.wait_quiescent()
        await rt.store.flush()
        records = await rt.store.read(reviewer_id, tenant="default")
        assert trace_message(records, message.id) == MessageTrace(
            message.id, 2, "completed", "second review"
        )
        # The lead was not loaded: its notice waits in its log, pending for its next resume.
        lead_log = await rt.store.read(lead_id, tenant="default")
        pending = replay_inbox(lead_log)
        assert [m.text for m in pending.next_turn] == [finished("reviewer", "second review")]
        lead = await rt.resume_agent(lead_id)
        assert lead.wake()
        await rt.wait_quiescent()
        assert entered(lead)[-1] == (
            3,
            "subagent-settled",
            finished("reviewer", "second review"),
        )
    model.assert_complete()
