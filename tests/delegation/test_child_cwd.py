"""A child's cwd (its workspace) must lie inside its parent's workspace.

Under `read-only` and `workspace-write`, `subagent(cwd=...)`, `subagent_fork(cwd=...)` and the
Python entries that start a child refuse a directory that is outside the parent's canonical
session cwd once symlinks are resolved (`CWD_OUTSIDE_WORKSPACE`). Otherwise a child could
get a wider workspace than its parent and write anywhere on the host. The refusal creates
nothing: no session, no name, no budget, no event but the call and its error. Under
`danger-full-access` the parent has no boundary, so any accessible directory is accepted.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from delegation_support import (
    Lifecycle,
    ToolReply,
    catalog,
    events,
    kinds,
    replies,
    session_count,
)

from subagents import Budget, DelegationOptions
from subagents.core import Agent, AgentConfig
from subagents.delegation import DelegationRuntime
from subagents.errors import ErrorCode, SubagentError
from subagents.ids import SessionId
from subagents.messages import JsonObject
from subagents.policy import SandboxMode
from subagents.sessions import SubagentCatalog, ToolResultEvent
from subagents.testing import FakeClock, InMemoryEventStore, RecordingModel
from subagents.workflows._children import ServiceStarter
from subagents.workflows._host import ChildRequest

Start = Literal["foreground", "continuable", "one-shot"]
CONFINED: list[SandboxMode] = ["workspace-write", "read-only"]
STARTS: list[Start] = ["foreground", "continuable", "one-shot"]

# What one turn holds when its only call is refused: the call and its error, nothing else.
ONE_REFUSED_CALL = [
    "turn/start",
    "step/start",
    "user/message",  # the runtime context, entered before the first call
    "user/message",
    "request/header",
    "assistant/message",
    "tool/call",
    "tool/result",
    "step/end",
    "step/start",
    "assistant/message",
    "step/end",
    "turn/end",
]


@dataclass(frozen=True, slots=True)
class World:
    """The lead's workspace `base/ws` and the directories around it (all canonical).

    `ws` holds `sub`, `link -> base/outside` and `inlink -> ws/sub`; `base/sibling` and
    `base/outside` lie outside it.
    """

    base: Path
    ws: Path
    sub: Path
    sibling: Path
    outside: Path

    def spell(self, template: str) -> str:
        """`template` with `{base}`, `{ws}`, `{sub}`, `{sibling}`, `{outside}` filled in."""
        return template.format(
            base=self.base, ws=self.ws, sub=self.sub, sibling=self.sibling, outside=self.outside
        )


@pytest.fixture
def world(tmp_path: Path) -> World:
    base = tmp_path.resolve()
    ws = base / "ws"
    (ws / "sub").mkdir(parents=True)
    (base / "sibling").mkdir()
    (base / "outside").mkdir()
    (ws / "link").symlink_to(base / "outside", target_is_directory=True)
    (ws / "inlink").symlink_to(ws / "sub", target_is_directory=True)
    return World(base, ws, ws / "sub", base / "sibling", base / "outside")


def make(
    script: str,
    world: World,
    *,
    sandbox: SandboxMode,
    start: Start = "foreground",
    budget: Budget | None = None,
) -> tuple[DelegationRuntime, RecordingModel]:
    clock = FakeClock()
    model = RecordingModel.from_yaml(script, clock=clock)
    assert isinstance(model, RecordingModel)
    options = DelegationOptions(
        definitions={},
        background_mode="one-shot" if start == "one-shot" else "continuable",
        budget=budget,
    )
    runtime = DelegationRuntime(
        model=model,
        store=InMemoryEventStore(),
        clock=clock,
        cwd=str(world.ws),
        sandbox=sandbox,
        delegation=options,
    )
    return runtime, model


def call(tool: str, start: Start, **args: str) -> str:
    """One scripted call, as a YAML flow mapping (JSON is YAML)."""
    arguments: JsonObject = {"description": "Delegate", "prompt": "Work", **args}
    if start != "foreground":
        arguments["run_in_background"] = True
    return json.dumps({"tool": tool, "args": arguments})


def refusal(asked: str, resolved: Path | str, workspace: Path) -> str:
    return (
        f"Error: cwd {asked!r} resolves to {resolved}, outside your workspace {workspace}; "
        f"give a directory inside {workspace} or omit cwd"
    )


# (what the parent asks, where it resolves), as `World.spell` templates.
OUTSIDE: list[pytest.ParameterSet] = [
    pytest.param("..", "{base}", id="dotdot"),
    pytest.param("/", "/", id="root"),
    pytest.param("{base}", "{base}", id="absolute-above"),
    pytest.param("{sibling}", "{sibling}", id="sibling"),
    pytest.param("../sibling", "{sibling}", id="relative-sibling"),
    pytest.param("link", "{outside}", id="symlink-out"),
    pytest.param("sub/../link/.", "{outside}", id="symlink-out-spelled"),
]


async def child_log(
    rt: DelegationRuntime, name: str, parent: Agent
) -> tuple[str, list[ToolResultEvent]]:
    """The cwd and tool results of `parent`'s catalogued child `name` (from the store)."""
    (entry,) = [e for e in catalog(parent) if e.name == name]
    child_id = SessionId(entry.child_id)
    header = await rt.read_header(child_id)
    return header.cwd, events(await rt.read_log(child_id), ToolResultEvent)


async def exists(path: Path) -> bool:
    return await asyncio.to_thread(path.exists)


# -- refused --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", CONFINED)
@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("tool", ["subagent", "subagent_fork"])
@pytest.mark.parametrize(("asked", "resolved"), OUTSIDE)
async def test_a_cwd_outside_the_workspace_is_refused_and_starts_nothing(
    world: World, mode: SandboxMode, start: Start, tool: str, asked: str, resolved: str
) -> None:
    cwd = world.spell(asked)
    # The tree may start one child in all: a refused start that counted would starve the next.
    rt, model = make(
        f"""
lead:
  - calls: [{call(tool, start, name="escape", cwd=cwd)}]
  - text: refused
  - calls: [{call("subagent", "foreground", name="escape")}]
  - text: delegated
escape:
  - text: worked inside
""",
        world,
        sandbox=mode,
        start=start,
        budget=Budget(children=1),
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        lead = await rt.create_agent()
        first = await rt.run("go", agent=lead)
        assert first.output == "refused"
        assert replies(lead) == [
            ToolReply(
                tool,
                refusal(cwd, world.spell(resolved), world.ws),
                True,
                ErrorCode.CWD_OUTSIDE_WORKSPACE,
            )
        ]
        logged = kinds(lead.session.records)
        assert logged[logged.index("turn/start") :] == ONE_REFUSED_CALL
        assert await session_count(rt) == 1
        assert catalog(lead) == []
        assert rt.tasks.list(lead.id) == []
        assert rt.continuable.resident() == []
        assert lifecycle.events == []
        assert lead.ledger is not None
        assert lead.ledger.children == 0
        # The parent can still delegate, under the very name the refused call asked for.
        second = await rt.run("again", agent=lead)
        assert second.output == "delegated"
        assert [e.name for e in catalog(lead)] == ["escape"]
        assert await child_log(rt, "escape", lead) == (str(world.ws), [])
        assert await session_count(rt) == 2
    model.assert_complete()


# -- accepted -------------------------------------------------------------------------------

INSIDE: list[pytest.ParameterSet] = [
    pytest.param("sub", id="relative"),
    pytest.param("{sub}", id="absolute"),
    pytest.param("inlink", id="symlink-in"),
    pytest.param("./sub/", id="spelled"),
]


@pytest.mark.parametrize("mode", CONFINED)
@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("asked", INSIDE)
async def test_a_directory_inside_becomes_the_childs_workspace(
    world: World, mode: SandboxMode, start: Start, asked: str
) -> None:
    # A background child settles with a notice that wakes the lead once more.
    woken = "  - text: noted\n" if start != "foreground" else ""
    rt, model = make(
        f"""
lead:
  - calls: [{call("subagent", start, name="inner", cwd=world.spell(asked))}]
  - text: delegated
{woken}inner:
  - calls: [{{tool: write_file, args: {{path: ../x.txt, content: escaped}}}}]
  - text: tried
""",
        world,
        sandbox=mode,
        start=start,
    )
    async with rt:
        lead = await rt.create_agent()
        await rt.run("go", agent=lead)
        [(tool, is_error, code)] = [(r.name, r.is_error, r.code) for r in replies(lead)]
        assert (tool, is_error, code) == ("subagent", False, None)
        cwd, results = await child_log(rt, "inner", lead)
        assert cwd == str(world.sub)  # canonical: a symlink inside is recorded resolved
        # The child's own policy holds it to that subdirectory, one level below its parent's.
        [denied] = results
        assert (denied.message.is_error, denied.code) == (True, ErrorCode.SANDBOX_DENIED)
        assert "x.txt" in denied.message.content
        assert not await exists(world.ws / "x.txt")
    model.assert_complete()


@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize(
    ("asked", "resolved"),
    [
        pytest.param("{outside}", "{outside}", id="absolute"),
        pytest.param("../sibling", "{sibling}", id="sibling"),
        pytest.param("link", "{outside}", id="symlink-out"),
    ],
)
async def test_full_access_has_no_boundary_to_widen(
    world: World, start: Start, asked: str, resolved: str
) -> None:
    woken = "  - text: noted\n" if start != "foreground" else ""
    rt, model = make(
        f"""
lead:
  - calls: [{call("subagent", start, name="wide", cwd=world.spell(asked))}]
  - text: delegated
{woken}wide:
  - text: worked
""",
        world,
        sandbox="danger-full-access",
        start=start,
    )
    async with rt:
        lead = await rt.create_agent()
        await rt.run("go", agent=lead)
        assert [(r.is_error, r.code) for r in replies(lead)] == [(False, None)]
        cwd, _ = await child_log(rt, "wide", lead)
        assert cwd == world.spell(resolved)
    model.assert_complete()


async def test_a_parent_narrowed_from_full_access_is_bounded_again(world: World) -> None:
    rt, model = make(
        f"""
lead:
  - calls: [{call("subagent", "foreground", name="wide", cwd="..")}]
  - text: refused
""",
        world,
        sandbox="danger-full-access",
    )
    async with rt:
        lead = await rt.create_agent()
        rt.set_sandbox_mode(lead, "workspace-write")
        await rt.run("go", agent=lead)
        assert [r.code for r in replies(lead)] == [ErrorCode.CWD_OUTSIDE_WORKSPACE]
        assert await session_count(rt) == 1
    model.assert_complete()


async def test_a_grandchild_is_bounded_by_its_parents_narrower_workspace(world: World) -> None:
    rt, model = make(
        f"""
lead:
  - calls: [{call("subagent", "foreground", name="inner", cwd="sub")}]
  - text: delegated
inner:
  - calls: [{call("subagent", "foreground", name="deeper", cwd="..")}]
  - text: refused
""",
        world,
        sandbox="workspace-write",
    )
    async with rt:
        lead = await rt.create_agent()
        await rt.run("go", agent=lead)
        (entry,) = catalog(lead)
        results = events(await rt.read_log(SessionId(entry.child_id)), ToolResultEvent)
        # `..` from the child is the lead's workspace: inside the lead's, outside the child's.
        assert [(r.message.content, r.code) for r in results] == [
            (refusal("..", world.ws, world.sub), ErrorCode.CWD_OUTSIDE_WORKSPACE)
        ]
        assert await session_count(rt) == 2
    model.assert_complete()


# -- the attack, end to end -----------------------------------------------------------------


async def test_a_child_cannot_write_outside_from_an_allowed_cwd(world: World) -> None:
    target = world.outside / "pwned.txt"
    rt, model = make(
        f"""
lead:
  - calls: [{call("subagent", "foreground", name="inner", cwd="sub")}]
  - text: delegated
inner:
  - calls:
      - {{tool: write_file, args: {{path: {json.dumps(str(target))}, content: pwned}}}}
      - {{tool: write_file, args: {{path: ../link/pwned.txt, content: pwned}}}}
      - {{tool: write_file, args: {{path: ../../outside/pwned.txt, content: pwned}}}}
  - text: tried
""",
        world,
        sandbox="workspace-write",
    )
    async with rt:
        lead = await rt.create_agent()
        await rt.run("go", agent=lead)
        _, results = await child_log(rt, "inner", lead)
        assert [r.code for r in results] == [ErrorCode.SANDBOX_DENIED] * 3
    assert not await exists(target)
    assert await asyncio.to_thread(lambda: list(world.outside.iterdir())) == []
    model.assert_complete()


# -- the Python entries ---------------------------------------------------------------------


async def test_the_service_refuses_an_outside_cwd_and_gives_everything_back(
    world: World,
) -> None:
    rt, model = make("{}", world, sandbox="workspace-write", budget=Budget(children=1))
    async with rt:
        lead = await rt.create_agent()
        with pytest.raises(SubagentError) as caught:
            await rt.subagents.launch(
                rt.subagents.admit(
                    "spawn", parent=lead, prompt="p", label="l", name="escape", cwd="link"
                )
            )
        assert caught.value.code == ErrorCode.CWD_OUTSIDE_WORKSPACE
        assert caught.value.message == refusal("link", world.outside, world.ws)[len("Error: ") :]
        assert caught.value.fields == {
            "cwd": "link",
            "resolved": str(world.outside),
            "workspace": str(world.ws),
        }
        assert await session_count(rt) == 1
        assert lead.ledger is not None
        assert lead.ledger.children == 0
        # The name and the budget are free again.
        rt.subagents.cancel(
            rt.subagents.admit("spawn", parent=lead, prompt="p", label="l", name="escape")
        )
    model.assert_complete()


async def test_a_continuable_start_that_skipped_the_check_is_still_refused(
    world: World,
) -> None:
    rt, model = make("{}", world, sandbox="read-only")
    async with rt:
        lead = await rt.create_agent()
        # `admit` only resolves the cwd; a caller may hand it on without `check_cwd`.
        admission = rt.subagents.admit(
            "spawn", parent=lead, prompt="p", label="l", name="escape", cwd="link"
        )
        with pytest.raises(SubagentError) as caught:
            await rt.continuable.start(admission)
        assert caught.value.code == ErrorCode.CWD_OUTSIDE_WORKSPACE
        assert await session_count(rt) == 1
        assert catalog(lead) == []
        rt.subagents.cancel(
            rt.subagents.admit("spawn", parent=lead, prompt="p", label="l", name="escape")
        )
    model.assert_complete()


@pytest.mark.parametrize("mode", CONFINED)
async def test_create_child_refuses_an_outside_cwd(world: World, mode: SandboxMode) -> None:
    rt, model = make("{}", world, sandbox=mode)
    async with rt:
        lead = await rt.create_agent()
        for outside in ("/", "..", str(world.sibling), "link"):
            with pytest.raises(SubagentError) as caught:
                await rt.create_child(lead, config=AgentConfig(name="escape"), cwd=outside)
            assert caught.value.code == ErrorCode.CWD_OUTSIDE_WORKSPACE
        assert await session_count(rt) == 1
        child = await rt.create_child(lead, config=AgentConfig(name="inner"), cwd="inlink")
        assert child.session.header.cwd == str(world.sub)
        assert rt.sandbox_policy(child.id).workspace_root == str(world.sub)
    model.assert_complete()


async def test_create_child_accepts_an_outside_cwd_under_full_access(world: World) -> None:
    rt, model = make("{}", world, sandbox="danger-full-access")
    async with rt:
        lead = await rt.create_agent()
        child = await rt.create_child(lead, config=AgentConfig(name="wide"), cwd="link")
        assert child.session.header.cwd == str(world.outside)
        with pytest.raises(SubagentError) as caught:
            await rt.create_child(lead, config=AgentConfig(name="gone"), cwd="nowhere")
        assert caught.value.code == ErrorCode.INVALID_CWD
    model.assert_complete()


async def test_a_workflow_directory_outside_the_workspace_starts_no_child(
    world: World,
) -> None:
    rt, model = make("{}", world, sandbox="workspace-write")
    async with rt:
        lead = await rt.create_agent()
        starter = ServiceStarter(
            rt.subagents, parent=lead, provider="spawn", label_prefix="wf", max_depth=None
        )
        starter.cwd = str(world.outside)  # as a custom `directory` selection could choose
        with pytest.raises(SubagentError) as caught:
            await starter(ChildRequest(prompt="p", name="escape"), call_id=1)
        assert caught.value.code == ErrorCode.CWD_OUTSIDE_WORKSPACE
        assert await session_count(rt) == 1
        assert [r for r in lead.session.records if isinstance(r.event, SubagentCatalog)] == []
    model.assert_complete()
