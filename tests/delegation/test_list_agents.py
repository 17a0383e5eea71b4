"""Conformance tests for `list_agents` (docs/design.md §7.7:
a default cap, "N more" and cursor paging).

Rows are `<full name> [<status>] — <label>`; the descendants scope adds `parent=` and `depth=`
in pre-order; one-shot children are omitted; an unreadable child is a diagnostic row.
"""

from __future__ import annotations

from continuable_support import Settlements, background, wait_turn
from delegation_support import Gates, Lifecycle, ToolReply, make_runtime, replies

from subagents.delegation.tools._control import children_page, list_rows
from subagents.sessions import SubagentCatalog


def listing(content: str) -> ToolReply:
    return ToolReply("list_agents", content, False, None)


async def test_children_and_descendants_with_running_idle_and_ready() -> None:
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("busy", "Busy work", "Work until released")}
  - calls:
      - {background("waiting", "Wait on a helper", "Start a helper and wait")}
  - calls:
      - {background("done", "Finish fast", "Finish at once")}
  - calls:
      - {{tool: subagent, args: {{name: helper, description: One-shot help, prompt: Help}}}}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - calls:
      - {{tool: list_agents, args: {{}}}}
      - {{tool: list_agents, args: {{scope: children}}}}
      - {{tool: list_agents, args: {{scope: descendants}}}}
  - text: Listed.
  - text: Busy is done.
  - text: Waiting is done.
busy:
  - calls: [{{tool: hold, args: {{label: busy}}}}]
  - text: busy done
waiting:
  - calls:
      - {background("sub", "Sub work", "Work until released")}
  - text: Waiting for sub.
  - text: Sub is done.
waiting/sub:
  - calls: [{{tool: hold, args: {{label: sub}}}}]
  - text: sub done
done:
  - text: finished
helper:
  - text: helped
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        settled = Settlements(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("busy").wait()
        await gates.started("sub").wait()
        await gates.started("lead").wait()
        await wait_turn(rt, await lifecycle.child("waiting", rt), 1)
        await settled.reached(2)
        assert sorted(e.name for e in settled.ended) == ["done", "helper"]
        gates.release("lead")
        await wait_turn(rt, lead, 1)
        children = listing(
            "busy [running] — Busy work\n"
            "waiting [idle] — Wait on a helper\n"
            "done [ready] — Finish fast"
        )
        assert replies(lead)[-3:] == [
            children,
            children,
            listing(
                "busy [running] parent=lead depth=1 — Busy work\n"
                "waiting [idle] parent=lead depth=1 — Wait on a helper\n"
                "waiting/sub [running] parent=waiting depth=2 — Sub work\n"
                "done [ready] parent=lead depth=1 — Finish fast"
            ),
        ]
        gates.release("busy")  # one at a time: each notice gets a turn of its own
        await settled.reached(3)
        await wait_turn(rt, lead, 2)
        gates.release("sub")
        await rt.wait_quiescent()
    model.assert_complete()


async def test_no_continuable_children_lists_as_none() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls: [{tool: subagent, args: {name: helper, description: Help, prompt: Help}}]
  - calls:
      - {tool: list_agents, args: {}}
      - {tool: list_agents, args: {scope: descendants}}
  - text: Nothing in the background.
helper:
  - text: helped
"""
    )
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead)[1:] == [listing("(no subagents)")] * 2
    model.assert_complete()


async def test_a_long_listing_is_capped_and_paged_with_a_cursor() -> None:
    gates = Gates()
    starts = "\n".join(f"      - {background(f'c{n:02d}', f'Job {n}', 'Work')}" for n in range(60))
    rt, model = make_runtime(
        f"""
lead:
  - calls:
{starts}
  - calls: [{{tool: hold, args: {{label: lead}}}}]
  - calls: [{{tool: list_agents, args: {{}}}}]
  - calls: [{{tool: list_agents, args: {{cursor: 50}}}}]
  - calls: [{{tool: list_agents, args: {{scope: descendants, cursor: 55, limit: 3}}}}]
  - calls: [{{tool: list_agents, args: {{cursor: 60}}}}]
  - text: Sixty children, all ready.
"*":
  - text: done
""",
        tools=[gates.tool()],
    )
    async with rt:
        settled = Settlements(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("lead").wait()
        await settled.reached(60)  # continuable children are not capped by task capacity
        gates.release("lead")
        await rt.wait_quiescent()
        first, second, third, past = (r.content.split("\n") for r in replies(lead)[-4:])
        rows = [f"c{n:02d} [ready] — Job {n}" for n in range(60)]
        assert first == [*rows[:50], "… 10 more; call list_agents with cursor 50 for the next page"]
        assert second == rows[50:]
        assert third == [
            *(f"c{n:02d} [ready] parent=lead depth=1 — Job {n}" for n in range(55, 58)),
            "… 2 more; call list_agents with cursor 58 for the next page",
        ]
        assert past == ["(no subagents at cursor 60)"]
    model.assert_complete()


async def test_a_child_whose_log_cannot_be_read_is_a_diagnostic_row() -> None:
    ghost = "0b6f3c1e-5a8d-4c9e-9f41-2d7a6b3e8c10"
    gates = Gates()
    rt, model = make_runtime(
        f"""
lead:
  - calls:
      - {background("reviewer", "Review the code", "Review app.py")}
  - text: Started.
  - text: The reviewer is done.
  - calls:
      - {{tool: list_agents, args: {{}}}}
      - {{tool: list_agents, args: {{scope: descendants}}}}
  - text: One is unreadable.
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
        lead.record(SubagentCatalog(child_id=ghost, name="ghost", mode="continuable", label="Lost"))
        await lead.followup("list them")
        await rt.wait_quiescent()
        assert replies(lead)[-2:] == [
            listing(f"reviewer [ready] — Review the code\n{ghost} [diagnostic: unavailable]"),
            listing(
                "reviewer [ready] parent=lead depth=1 — Review the code\n"
                f"{ghost} [diagnostic: unavailable] parent=lead depth=1"
            ),
        ]
    model.assert_complete()


async def test_failed_and_interrupted_children_are_told_apart_from_ready_ones() -> None:
    gates = Gates()
    rt, _ = make_runtime(
        f"""
lead:
  - calls:
      - {background("fine", "Finish fine", "Finish")}
      - {background("broken", "Break", "Fail")}
      - {background("halted", "Hold on", "Hold until stopped")}
  - text: ok
  - text: ok
  - text: ok
  - text: ok
fine:
  - text: finished
broken:
  - error: upstream exploded
halted:
  - calls: [{{tool: hold, args: {{label: halted}}}}]
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("halted").wait()
        halted = await lifecycle.child("halted", rt)
        await rt.continuable.interrupt(lead, halted.id)
        await rt.wait_quiescent()
        page, total = await children_page(rt.continuable, lead, offset=0, limit=10)
        deep = await list_rows(rt.continuable, lead)
    expected = [("fine", "ready"), ("broken", "failed"), ("halted", "aborted")]
    assert total == 3
    assert [(r.name, r.status) for r in page] == expected
    assert [(r.name, r.status) for r in deep] == expected
    assert page[1].render(descendants=False) == "broken [failed] — Break"
