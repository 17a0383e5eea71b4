"""Conformance tests for the delegation lifecycle events (docs/design.md
§5.6 and §7.2): `SubagentStarted` / `SubagentEnded` pairs and listener containment.
"""

from __future__ import annotations

import pytest
from delegation_support import Gates, Lifecycle, events, make_runtime, wait_for_record

from subagents.delegation import (
    ResumeRequest,
    StartRequest,
    SubagentChild,
    SubagentEnded,
    SubagentStarted,
)
from subagents.delegation._providers import Capability
from subagents.errors import SubagentError
from subagents.sessions import TurnEnd

SCRIPT = """
lead:
  - calls:
      - {tool: subagent, args: {name: reviewer, description: Review, prompt: Review app.py}}
      - {tool: subagent, args: {name: broken, description: Break, prompt: Break}}
      - {tool: subagent_fork, args: {name: forked, description: Fork, prompt: Think again}}
      - {tool: subagent, args: {name: bg, description: Background, prompt: Later,
                                run_in_background: true}}
  - text: All four came back.
  - text: The background one finished too.
reviewer:
  - calls:
      - {tool: subagent, args: {name: checker, description: Check, prompt: Check style}}
  - text: Reviewed.
reviewer/checker:
  - text: Checked.
broken:
  - error: upstream exploded
forked:
  - {text: Half an answer, stop: max-tokens}
bg:
  - calls: [{tool: hold, args: {label: bg}}]
  - text: Done in the background.
"""


async def test_started_and_ended_come_in_pairs_start_first() -> None:
    gates = Gates()
    rt, model = make_runtime(SCRIPT, tools=[gates.tool()])
    async with rt:
        resolvable: list[bool] = []

        def at_start(event: object) -> None:
            if isinstance(event, SubagentStarted):
                # The in-process child is live while start listeners run.
                resolvable.append(rt.get_agent(event.child_id) is not None)

        rt.subscribe(at_start, types=(SubagentStarted,))
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        await lead.followup("go")
        await wait_for_record(rt, lead, lambda r: isinstance(r.event, TurnEnd))
        await lead.when_idle()
        gates.release("bg")  # after the lead's turn, so its notice opens the second turn
        await rt.wait_quiescent()
        assert [e.reason for e in events(lead.session.records, TurnEnd)] == [
            "completed",
            "completed",
        ]
        lead_id = lead.id

        run_ids = [e.run_id for e in lifecycle.started]
        assert len(run_ids) == len(set(run_ids)) == 5
        assert resolvable == [True] * 5
        for run_id in run_ids:
            pair = [e for e in lifecycle.events if e.run_id == run_id]
            assert [type(e) for e in pair] == [SubagentStarted, SubagentEnded], run_id
            start, end = pair
            assert (start.provider, start.child_id, start.name, start.parent_id, start.local) == (
                end.provider,
                end.child_id,
                end.name,
                end.parent_id,
                end.local,
            )
            assert start.local is True

        ended = {e.name: e for e in lifecycle.ended}
        assert {n: (e.provider, e.stop_reason, e.last_message) for n, e in ended.items()} == {
            "reviewer": ("spawn", "completed", "Reviewed."),
            "reviewer/checker": ("spawn", "completed", "Checked."),
            "broken": ("spawn", "error", None),
            "forked": ("fork", "max-tokens", "Half an answer"),
            "bg": ("spawn", "completed", "Done in the background."),
        }
        reviewer_id = ended["reviewer"].child_id
        assert {n: e.parent_id for n, e in ended.items()} == {
            "reviewer": lead_id,
            "reviewer/checker": reviewer_id,
            "broken": lead_id,
            "forked": lead_id,
            "bg": lead_id,
        }
    model.assert_complete()


async def test_a_listener_that_raises_is_logged_and_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gates = Gates()
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: reviewer, description: Review, prompt: Review app.py}}
  - text: Reviewed.
reviewer:
  - calls: [{tool: hold, args: {label: reviewer}}]
  - text: app.py looks correct.
""",
        tools=[gates.tool()],
    )
    async with rt:
        calls: list[str] = []

        def explode(event: object) -> None:
            calls.append(type(event).__name__)
            raise RuntimeError("listener bug")

        rt.subscribe(explode, types=(SubagentStarted, SubagentEnded))
        lifecycle = Lifecycle(rt)  # subscribed after the raising listener
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("reviewer").wait()
        gates.release("reviewer")
        await rt.wait_quiescent()

        assert calls == ["SubagentStarted", "SubagentEnded"]
        assert [type(e) for e in lifecycle.events] == [SubagentStarted, SubagentEnded]
        assert lifecycle.ended[0].stop_reason == "completed"
        assert "live event listener failed on SubagentStarted" in caplog.text
        assert "live event listener failed on SubagentEnded" in caplog.text
        assert lead.session.records[-1].kind == "turn/end"
        assert list(rt.agents) == [lead.id]
    model.assert_complete()


class RejectingProvider:
    name = "rejecting"
    capabilities: frozenset[Capability] = frozenset({"depth_limit"})
    inherits_parent_context = False

    async def start(self, request: StartRequest) -> SubagentChild:
        raise SubagentError("the backend refused")

    async def resume(self, request: ResumeRequest) -> SubagentChild:
        raise SubagentError("the backend refused")

    def list(self) -> list[SubagentChild]:
        return []


async def test_a_start_that_fails_emits_no_lifecycle_event() -> None:
    rt, _ = make_runtime("{}")
    async with rt:
        lifecycle = Lifecycle(rt)
        rt.subagents.register_provider(RejectingProvider())
        lead = await rt.create_agent()
        with pytest.raises(SubagentError, match="the backend refused"):
            await rt.subagents.launch(
                rt.subagents.admit("rejecting", parent=lead, prompt="p", label="l")
            )
        with pytest.raises(SubagentError):
            await rt.subagents.launch(
                rt.subagents.admit("spawn", parent=lead, prompt="p", label="l", cwd="/nowhere")
            )
        assert lifecycle.events == []
