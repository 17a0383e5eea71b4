"""`TreeView`: a stored tree folded record by record, as `watch` and the web console see it."""

from __future__ import annotations

from subagents.delegation import TreeView
from subagents.ids import SessionId, new_message_id, new_session_id
from subagents.messages import ToolResultMessage, user_message
from subagents.sessions import (
    EventRecord,
    SandboxModeSet,
    SessionHeader,
    SubagentCatalog,
    SubagentDescriptor,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)


def header(
    session_id: SessionId, parent: SessionId | None, root: SessionId, depth: int
) -> SessionHeader:
    return SessionHeader(
        id=session_id,
        tenant="default",
        created_at=100.0 + depth,
        cwd="/",
        parent=parent,
        root=None if parent is None else root,
        depth=depth,
    )


def test_a_chain_deeper_than_the_recursion_limit_lists_in_pre_order() -> None:
    root = new_session_id()
    view = TreeView(header(root, None, root, 0))
    parent = root
    ids = [root]
    for depth in range(1, 1500):
        child = new_session_id()
        view.apply(
            header(parent, None if parent == root else ids[-2], root, depth - 1),
            EventRecord(depth, 100.0, SubagentCatalog(child_id=child, name="c", mode="one-shot")),
        )
        view.apply(header(child, parent, root, depth), EventRecord(0, 101.0, TurnStart(turn=1)))
        ids.append(child)
        parent = child
    rows = view.rows(held=True, now=200.0)
    assert [r.session_id for r in rows] == ids
    assert [view.row(i, held=True, now=200.0) for i in ids[:5]] == rows[:5]
    assert rows[3].name == "c/c/c"
    assert rows[3].parent == "c/c"
    assert rows[-1].status == "running"
    assert view.rows(held=False, now=200.0)[-1].status == "crashed"


def test_turns_calls_details_and_the_timeline_of_a_settled_tree() -> None:
    root = new_session_id()
    child = new_session_id()
    lead = header(root, None, root, 0)
    kid = header(child, root, root, 1)
    view = TreeView(lead)
    prompt = user_message("Survey it")
    result = ToolResultMessage(id=new_message_id(), call_id="c1", name="subagent", content="ok")
    for seq, (time, event) in enumerate(
        [
            (100.0, SandboxModeSet(mode="read-only")),
            (100.0, TurnStart(turn=1)),
            (100.1, UserMessageEvent(message=prompt, turn=1)),
            (101.0, ToolCallEvent(turn=1, step=1, call_id="c1", name="subagent", arguments="{}")),
            (101.5, SubagentCatalog(child_id=child, name="scout", label="Scout", call_id="c1")),
            (104.0, ToolResultEvent(turn=1, step=1, message=result)),
            (105.0, TurnEnd(turn=1, reason="completed")),
        ]
    ):
        view.apply(lead, EventRecord(seq, time, event))
    for seq, (time, event) in enumerate(
        [
            (
                101.6,
                SubagentDescriptor(
                    definition="scout",
                    budget_tokens=500,
                    output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
                ),
            ),
            (101.7, TurnStart(turn=1)),
            (102.0, ToolCallEvent(turn=1, step=1, call_id="g", name="grep", arguments="{}")),
            (103.0, TurnEnd(turn=1, reason="aborted")),
        ]
    ):
        view.apply(kid, EventRecord(seq, time, event))

    lead_row, scout_row = view.rows(held=False, now=999.0)
    assert view.row(child, held=False, now=999.0) == scout_row
    assert view.row(root, held=False, now=999.0) == lead_row
    assert (scout_row.name, scout_row.label, scout_row.status) == ("scout", "Scout", "aborted")
    assert scout_row.budget_tokens == 500
    assert (scout_row.turn_start, scout_row.turn_end) == (101.7, 103.0)
    assert lead_row.elapsed == 5.0

    details = view.details(root)
    assert details["prompt"] == "Survey it"
    assert details["sandbox"] == "read-only"
    assert details["children"] == [
        {"session_id": child, "name": "scout", "mode": "one-shot", "label": "Scout"}
    ]
    assert view.details(child)["definition"] == "scout"
    assert view.details(child)["output_schema"]["properties"] == {"n": {"type": "integer"}}
    assert view.details(root)["output_schema"] is None

    timeline = view.timeline(held=False, now=999.0)
    assert timeline["now"] == 105.0  # the last recorded moment, not the reader's clock
    lanes = {lane["name"]: lane for lane in timeline["lanes"]}
    assert lanes["lead"]["calls"] == [
        {"start": 101.0, "end": 104.0, "label": "subagent", "call_id": "c1"}
    ]
    # A call its turn's end cut off ends with the turn.
    assert lanes["scout"]["calls"][0]["end"] == 103.0
    assert timeline["links"] == [{"parent": root, "child": child, "call_id": "c1", "at": 101.0}]
    assert view.timeline(held=True, now=999.0)["now"] == 999.0
