"""`runtime.subscribe` delivers live events in log order (issue 11).

Records are posted once durable (after a SQLite write), other events at once. A subscriber
must still see a child's last `assistant/message` and `turn/end` before its `idle` and its
`SubagentEnded`, and every session's status after the records that precede it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from delegation_support import make_runtime

import subagents
from subagents import (
    AgentStatusChanged,
    SessionEventPosted,
    SubagentEnded,
    SubagentStarted,
)
from subagents.sessions import SqliteEventStore

SCRIPT = """\
lead:
  - calls: [{tool: subagent, args: {description: d, prompt: "do it", name: kid}}]
  - text: done
kid:
  - text: kid answer
"""


def position(events: list[object], predicate: Callable[[object], bool]) -> list[int]:
    return [i for i, e in enumerate(events) if predicate(e)]


async def test_events_about_a_session_follow_its_records(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "state.db")
    rt, model = make_runtime(SCRIPT, store=store)
    seen: list[object] = []
    async with rt:
        rt.subscribe(seen.append)
        result = await rt.run("go")
        await rt.store.flush()
    assert result.output == "done"
    model.assert_complete()

    [started] = [e for e in seen if isinstance(e, SubagentStarted)]
    kid = started.child_id

    def record_of(session: str, kind: str) -> Callable[[object], bool]:
        def matches(e: object) -> bool:
            return (
                isinstance(e, SessionEventPosted)
                and e.agent_id == session
                and e.record.kind == kind
            )

        return matches

    def ended_kid(e: object) -> bool:
        return isinstance(e, SubagentEnded) and e.child_id == kid

    def kid_went_idle(e: object) -> bool:
        return isinstance(e, AgentStatusChanged) and e.agent_id == kid and e.status == "idle"

    kid_messages = position(seen, record_of(kid, "assistant/message"))
    kid_turn_ends = position(seen, record_of(kid, "turn/end"))
    [ended] = position(seen, ended_kid)
    kid_idle = position(seen, kid_went_idle)
    assert kid_messages
    assert kid_turn_ends
    assert kid_idle
    assert max(kid_messages) < max(kid_turn_ends) < kid_idle[-1] < ended

    # Per session: whenever an agent is reported idle, every turn it started has ended.
    for session in {kid, result.session_id}:
        open_turns = 0
        for event in seen:
            if isinstance(event, SessionEventPosted) and event.agent_id == session:
                kind = event.record.kind
                open_turns += 1 if kind == "turn/start" else -1 if kind == "turn/end" else 0
            elif (
                isinstance(event, AgentStatusChanged)
                and event.agent_id == session
                and event.status == "idle"
            ):
                assert open_turns == 0, f"{event} delivered before its turn/end"

    # Records of one session arrive in seq order, each once.
    for session in {kid, result.session_id}:
        seqs = [
            e.record.seq
            for e in seen
            if isinstance(e, SessionEventPosted) and e.agent_id == session
        ]
        assert seqs == sorted(set(seqs))


async def test_a_typed_listener_without_records_gets_its_events(tmp_path: Path) -> None:
    rt, _ = make_runtime(SCRIPT, store=SqliteEventStore(tmp_path / "state.db"))
    seen: list[object] = []
    async with rt:
        rt.subscribe(seen.append, types=(SubagentStarted, SubagentEnded))
        await rt.run("go")
    assert [type(e) for e in seen] == [SubagentStarted, SubagentEnded]


def test_the_event_classes_are_exported_from_the_package() -> None:
    for name in (
        "AgentCreated",
        "AgentDisposed",
        "AgentFailed",
        "AgentStatusChanged",
        "SessionEventPosted",
        "SubagentEnded",
        "SubagentStarted",
    ):
        assert name in subagents.__all__
        assert isinstance(getattr(subagents, name), type)
