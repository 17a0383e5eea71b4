"""Conformance tests for the team task board (docs/design.md §7.9:
statuses pending / in_progress / completed, `team/*` events in the root's log).

Results name owners by full name; storage keeps session ids. A claim is atomic: of two claimers
exactly one wins. Blockers must be completed before a claim; only the owner updates a task.
"""

from __future__ import annotations

from pathlib import Path

from continuable_support import wait_turn
from delegation_support import Gates, ToolReply, events, make_runtime, replies

from subagents.core import Agent
from subagents.delegation import DelegationRuntime
from subagents.errors import ErrorCode
from subagents.ids import SessionId
from subagents.sessions import (
    SqliteEventStore,
    SubagentCatalog,
    TeamTaskClaimed,
    TeamTaskCreated,
    TeamTaskUpdated,
    ToolResultEvent,
)


def ok(tool: str, content: str) -> ToolReply:
    return ToolReply(tool, content, False, None)


def err(tool: str, content: str, code: ErrorCode) -> ToolReply:
    return ToolReply(tool, f"Error: {content}", True, code)


async def child_replies(rt: DelegationRuntime, child_id: str) -> list[ToolReply]:
    return [
        ToolReply(e.message.name, e.message.content, e.message.is_error, e.code)
        for e in events(await rt.read_log(SessionId(child_id)), ToolResultEvent)
    ]


BOARD_SCRIPT = """
lead:
  - calls:
      - {tool: team_task_create, args: {subject: Write the parser}}
      - {tool: team_task_create, args: {subject: Test the parser, blocked_by: [T1]}}
      - {tool: team_task_create, args: {subject: Document it, description: A README section}}
  - calls: [{tool: subagent, args: {name: writer, description: Write, prompt: Write it}}]
  - calls: [{tool: subagent, args: {name: tester, description: Test, prompt: Test it}}]
  - calls:
      - {tool: team_task_list}
      - {tool: team_task_claim, args: {id: T9}}
      - {tool: team_task_update, args: {id: T9, status: completed}}
      - {tool: team_task_create, args: {subject: Ship it, blocked_by: [T2, T7]}}
  - text: The board is done.
writer:
  - calls:
      - {tool: team_task_claim, args: {id: T1}}
      - {tool: team_task_claim, args: {id: T2}}
  - calls: [{tool: team_task_update, args: {id: T1, status: completed, note: parser written}}]
  - text: Parser written.
tester:
  - calls:
      - {tool: team_task_claim, args: {id: T1}}
      - {tool: team_task_update, args: {id: T1, status: pending}}
      - {tool: team_task_claim, args: {id: T2}}
  - calls: [{tool: subagent, args: {name: aide, description: Document, prompt: Document it}}]
  - calls: [{tool: team_task_update, args: {id: T2, status: completed}}]
  - text: Tested.
tester/aide:
  - calls: [{tool: team_task_claim, args: {id: T3}}]
  - text: Documenting.
"""


async def test_create_claim_update_and_list_name_owners_by_full_name() -> None:
    rt, model = make_runtime(BOARD_SCRIPT)
    async with rt:
        result = await rt.run("Plan the parser work")
        assert result.output == "The board is done."
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead)[:3] == [
            ok("team_task_create", "created T1 [pending] Write the parser — owner nobody"),
            ok(
                "team_task_create",
                "created T2 [pending] Test the parser — owner nobody blocked by T1",
            ),
            ok("team_task_create", "created T3 [pending] Document it — owner nobody"),
        ]
        ids = {e.name: e.child_id for e in lead_catalog(lead)}
        writer, tester = ids["writer"], ids["tester"]
        assert await child_replies(rt, writer) == [
            ok("team_task_claim", "claimed T1 [in_progress] Write the parser — owner writer"),
            err(
                "team_task_claim",
                "team task T2 is blocked by T1; claim it once they are completed",
                ErrorCode.USAGE,
            ),
            ok("team_task_update", "updated T1 [completed] Write the parser — owner writer"),
        ]
        tester_replies = await child_replies(rt, tester)
        assert tester_replies[:3] == [
            err(
                "team_task_claim",
                "team task T1 is already claimed by writer",
                ErrorCode.DUPLICATE,
            ),
            err(
                "team_task_update",
                "team task T1 belongs to writer; only its owner updates it",
                ErrorCode.UNAUTHORIZED,
            ),
            ok(
                "team_task_claim",
                "claimed T2 [in_progress] Test the parser — owner tester blocked by T1",
            ),
        ]
        assert tester_replies[-1] == ok(
            "team_task_update",
            "updated T2 [completed] Test the parser — owner tester blocked by T1",
        )
        assert replies(lead)[5:] == [
            ok(
                "team_task_list",
                "T1 [completed] Write the parser — owner writer\n"
                "T2 [completed] Test the parser — owner tester blocked by T1\n"
                "T3 [in_progress] Document it — owner tester/aide",
            ),
            err(
                "team_task_claim",
                "unknown team task T9; team_task_list shows the ids",
                ErrorCode.UNKNOWN_TASK,
            ),
            err(
                "team_task_update",
                "unknown team task T9; team_task_list shows the ids",
                ErrorCode.UNKNOWN_TASK,
            ),
            err(
                "team_task_create",
                "unknown blocking task(s): T7; team_task_list shows the ids",
                ErrorCode.UNKNOWN_TASK,
            ),
        ]
        # The root's log keeps session ids, never names; failed calls wrote nothing.
        records = lead.session.records
        assert [(e.task_id, e.subject, e.blocked_by) for e in events(records, TeamTaskCreated)] == [
            ("T1", "Write the parser", ()),
            ("T2", "Test the parser", ("T1",)),
            ("T3", "Document it", ()),
        ]
        (aide,) = events(await rt.read_log(SessionId(tester)), SubagentCatalog)
        aide_id = aide.child_id
        assert [(e.task_id, e.owner) for e in events(records, TeamTaskClaimed)] == [
            ("T1", writer),
            ("T2", tester),
            ("T3", aide_id),
        ]
        assert [(e.task_id, e.status, e.note, e.by) for e in events(records, TeamTaskUpdated)] == [
            ("T1", "completed", "parser written", writer),
            ("T2", "completed", "", tester),
        ]
        assert all(len(e.owner) == 36 for e in events(records, TeamTaskClaimed))
    model.assert_complete()


def lead_catalog(lead: Agent) -> list[SubagentCatalog]:
    return events(lead.session.records, SubagentCatalog)


async def test_of_two_claimers_in_one_response_exactly_one_wins() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls: [{tool: team_task_create, args: {subject: The only task}}]
  - calls:
      - {tool: subagent, args: {name: one, description: Claim, prompt: Claim T1}}
      - {tool: subagent, args: {name: two, description: Claim, prompt: Claim T1}}
  - text: Claimed once.
one:
  - calls: [{tool: team_task_claim, args: {id: T1}}]
  - text: tried
two:
  - calls: [{tool: team_task_claim, args: {id: T1}}]
  - text: tried
"""
    )
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        ids = {e.name: e.child_id for e in lead_catalog(lead)}
        outcomes = {name: (await child_replies(rt, ids[name]))[0] for name in ("one", "two")}
        winners = [name for name, reply in outcomes.items() if not reply.is_error]
        assert len(winners) == 1
        (winner,) = winners
        (loser,) = {"one", "two"} - {winner}
        assert outcomes[winner] == ok(
            "team_task_claim", f"claimed T1 [in_progress] The only task — owner {winner}"
        )
        assert outcomes[loser] == err(
            "team_task_claim", f"team task T1 is already claimed by {winner}", ErrorCode.DUPLICATE
        )
        claims = events(lead.session.records, TeamTaskClaimed)
        assert [(e.task_id, e.owner) for e in claims] == [("T1", ids[winner])]
    model.assert_complete()


async def test_the_board_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first = """
lead:
  - calls:
      - {tool: team_task_create, args: {subject: Write the parser}}
      - {tool: team_task_claim, args: {id: T1}}
  - text: Claimed.
"""
    rt, model = make_runtime(first, store=SqliteEventStore(path))
    async with rt:
        result = await rt.run("go")
    model.assert_complete()

    second = """
lead:
  - text: (used in the first run)
  - text: (used in the first run)
  - calls:
      - {tool: team_task_list}
      - {tool: team_task_update, args: {id: T1, status: completed}}
      - {tool: team_task_create, args: {subject: Test the parser, blocked_by: [T1]}}
  - text: Still there.
"""
    rt, model = make_runtime(second, store=SqliteEventStore(path))
    async with rt:
        lead = await rt.resume_agent(result.session_id)
        await rt.run("Where are we?", agent=lead)
        assert replies(lead)[-3:] == [
            ok("team_task_list", "T1 [in_progress] Write the parser — owner lead"),
            ok("team_task_update", "updated T1 [completed] Write the parser — owner lead"),
            ok(
                "team_task_create",
                "created T2 [pending] Test the parser — owner nobody blocked by T1",
            ),
        ]
    model.assert_complete()


async def test_a_child_writes_the_board_around_mailbox_deliveries_to_an_unloaded_root(
    tmp_path: Path,
) -> None:
    """The root's log also takes reports and notices while nobody loads the root."""
    path = tmp_path / "state.db"
    first = """
lead:
  - calls:
      - {tool: team_task_create, args: {subject: Write the parser}}
      - tool: subagent
        args: {name: writer, description: Write, prompt: Wait, run_in_background: true}
  - text: Started.
  - text: Noted.
writer:
  - calls: [{tool: hold, args: {label: writer}}]
  - text: waiting
"""
    gates = Gates()
    rt, model = make_runtime(first, store=SqliteEventStore(path), tools=[gates.tool()])
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("writer").wait()
        await wait_turn(rt, lead, 1)
        gates.release("writer")
        await rt.wait_quiescent()
        writer = SessionId(lead_catalog(lead)[0].child_id)
        lead_id = lead.id
    model.assert_complete()

    second = """
writer:
  - text: (used in the first run)
  - text: (used in the first run)
  - calls: [{tool: team_task_claim, args: {id: T1}}]
  - calls: [{tool: report, args: {message: claimed T1}}]
  - calls: [{tool: team_task_update, args: {id: T1, status: completed}}]
  - calls: [{tool: report, args: {message: finished T1}}]
  - calls: [{tool: team_task_list}]
  - text: T1 is done.
"""
    rt, model = make_runtime(second, store=SqliteEventStore(path))
    async with rt:
        await rt.continuable.deliver_as_user(writer, "Take T1")
        await rt.wait_quiescent()
        assert rt.get_agent(lead_id) is None
        writer_replies = (await child_replies(rt, writer))[1:]  # after the first run's hold
        assert [r.is_error for r in writer_replies] == [False] * 5
        assert writer_replies[-1] == ok(
            "team_task_list", "T1 [completed] Write the parser — owner writer"
        )
        await rt.store.flush()
        root = await rt.store.read(lead_id, tenant="default")
        assert [r.kind for r in root[-5:]] == [
            "team/task-claimed",
            "agent/inbox/spliced",
            "team/task-updated",
            "agent/inbox/spliced",
            "agent/inbox/spliced",
        ]
    model.assert_complete()
