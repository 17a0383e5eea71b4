"""The runtime's verbs on a stored tree (what the command line is built on): `resume`,
`send`, `interrupt` and `tree`, each taking the tree's root and, where it matters, a member's
full name. Bad input is refused with a stable code and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from continuable_support import background, wait_turn
from delegation_support import Gates, make_runtime

from subagents.delegation import DelegationRuntime
from subagents.errors import ErrorCode, NotFoundError, SubagentsError
from subagents.ids import SessionId
from subagents.sessions import SqliteEventStore

LEAD_FIRST = f"""
  - calls:
      - {background("helper", "Help out", "Gather the facts")}
      - {{tool: subagent, args: {{name: once, description: Once, prompt: Once}}}}
  - text: Started.
  - text: Heard the helper."""
FIRST = f"""
lead:{LEAD_FIRST}
helper:
  - calls: [{{tool: hold, args: {{label: helper}}}}]
  - text: facts 1
once:
  - text: did it once
"""


def then(lead: str = "", helper: str = "") -> str:
    """The script of a later run: a scripted agent answers by its call index, so each agent's
    responses continue the first run's."""
    return f"""
lead:{LEAD_FIRST}{lead}
helper:
  - calls: [{{tool: hold, args: {{label: helper}}}}]
  - text: facts 1{helper}
once:
  - text: did it once
"""


SECOND = then(lead="\n  - text: Lead again.", helper="\n  - text: facts 2")


async def stored_tree(path: Path) -> SessionId:
    """A finished tree on disk: the lead, a continuable `helper` and a one-shot `once`."""
    gates = Gates()
    rt, model = make_runtime(FIRST, store=SqliteEventStore(path), tools=[gates.tool()])
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await wait_turn(rt, lead, 1)  # the helper settles after, so its notice is a turn
        gates.release("helper")
        await rt.wait_quiescent()
    model.assert_complete()
    return lead.id


def second(path: Path, script: str = SECOND, gates: Gates | None = None) -> DelegationRuntime:
    tools = [gates.tool()] if gates is not None else []
    rt, _ = make_runtime(script, store=SqliteEventStore(path), tools=tools)
    return rt


async def log_lengths(rt: DelegationRuntime, root: SessionId) -> dict[str, int]:
    return {m.row.name: len(m.records) for m in await rt.tree(root)}


async def test_tree_lists_the_members_by_full_name(tmp_path: Path) -> None:
    root = await stored_tree(tmp_path / "state.db")
    async with second(tmp_path / "state.db") as rt:
        members = await rt.tree(root)
    assert [(m.row.name, m.row.mode) for m in members] == [
        ("lead", "root"),
        ("helper", "continuable"),
        ("once", "one-shot"),
    ]


async def test_send_runs_a_continuable_child_as_the_user(tmp_path: Path) -> None:
    root = await stored_tree(tmp_path / "state.db")
    async with second(tmp_path / "state.db") as rt:
        result = await rt.send(root, "helper", "Gather more")
        assert (result.output, result.stop_reason) == ("facts 2", "completed")
        # The lead was loaded, so it took the settlement notice in and answered it.
        lead = await rt.read_log(root)
        assert lead[-1].kind == "turn/end"


async def test_send_to_the_lead_and_resume_with_a_prompt(tmp_path: Path) -> None:
    root = await stored_tree(tmp_path / "state.db")
    script = then(lead="\n  - text: Lead again.\n  - text: Third.")
    async with second(tmp_path / "state.db", script) as rt:
        sent = await rt.send(root, "lead", "Anything else?")
        assert sent.output == "Lead again."
        resumed = await rt.resume(root, "And now?")
        assert resumed.output == "Third."
        # Nothing pending and no prompt: where the lead stands.
        assert (await rt.resume(root)).output == "Third."


@pytest.mark.parametrize(
    ("name", "message", "code"),
    [
        ("once", "again", ErrorCode.NOT_RESUMABLE),  # a one-shot child ran once
        ("helper", "   ", ErrorCode.USAGE),
        ("helper/", "again", ErrorCode.INVALID_NAME),
        ("nobody", "again", ErrorCode.NOT_FOUND),
    ],
)
async def test_bad_sends_are_refused_and_change_nothing(
    tmp_path: Path, name: str, message: str, code: ErrorCode
) -> None:
    root = await stored_tree(tmp_path / "state.db")
    async with second(tmp_path / "state.db", then()) as rt:
        before = await log_lengths(rt, root)
        with pytest.raises(SubagentsError) as refused:
            await rt.send(root, name, message)
        assert refused.value.code == code
        assert await log_lengths(rt, root) == before


async def test_a_child_id_is_not_a_root_and_an_empty_prompt_is_refused(tmp_path: Path) -> None:
    root = await stored_tree(tmp_path / "state.db")
    async with second(tmp_path / "state.db", then()) as rt:
        helper = next(m.row.header.id for m in await rt.tree(root) if m.row.name == "helper")
        before = await log_lengths(rt, root)
        for call in (rt.tree(helper), rt.resume(helper), rt.interrupt(helper, "lead")):
            with pytest.raises(SubagentsError) as refused:
                await call
            assert refused.value.code == ErrorCode.USAGE
        with pytest.raises(SubagentsError) as empty:
            await rt.resume(root, "  ")
        assert empty.value.code == ErrorCode.USAGE
        with pytest.raises(NotFoundError):
            await rt.tree("00000000-0000-4000-8000-000000000000")
        assert await log_lengths(rt, root) == before


async def test_interrupt_stops_a_running_member_and_not_a_settled_one(tmp_path: Path) -> None:
    gates = Gates()
    rt, _ = make_runtime(
        "lead: [{calls: [{tool: hold, args: {label: lead}}]}, {text: after}]",
        store=SqliteEventStore(tmp_path / "state.db"),
        tools=[gates.tool()],
    )
    async with rt:
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("lead").wait()
        assert await rt.interrupt(lead.id, "lead")
        await rt.wait_quiescent()
        assert gates.cancelled == ["lead"]
        assert lead.session.records[-1].kind == "turn/end"
        assert not await rt.interrupt(lead.id, "lead")  # idle now: nothing to stop
