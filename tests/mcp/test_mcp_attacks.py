"""Attacks on the MCP boundary: a hostile model, definition author, config or server.

Real stdio servers (tests/mcp/servers/stdio_server.py and attack_server.py) under the default
workspace-write policy, driven by the scripted model. Every test checks what the agent was
offered and what its calls returned, read back from the logs.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

import pytest
from cli_support import cli_runner
from delegation_support import ToolReply, events, scripted
from hypothesis import given, settings, strategies as st
from mcp_support import SERVERS, stdio

from subagents import DelegationOptions
from subagents.definitions import AgentDefinition
from subagents.delegation import DelegationRuntime, McpOptions, McpScope
from subagents.errors import ConfigError, ErrorCode, ToolError
from subagents.ids import SessionId
from subagents.mcp import McpHub, McpServerConfig, parse_servers
from subagents.policy import SandboxPolicy, parse_mode
from subagents.sessions import (
    EventStore,
    InMemoryEventStore,
    McpScopeSet,
    RequestHeader,
    SessionHeader,
    SubagentCatalog,
    ToolResultEvent,
    UserMessageEvent,
)
from subagents.testing import FakeClock

# -- helpers ----------------------------------------------------------------------------------


def runtime(
    workspace: Path,
    script: str,
    servers: Mapping[str, McpServerConfig],
    *,
    definitions: Mapping[str, AgentDefinition] | None = None,
    store: EventStore | Path | None = None,
    threshold: int = 20,
    connect_timeout: float = 30,
) -> DelegationRuntime:
    clock = FakeClock()
    return DelegationRuntime(
        model=scripted(script, clock),
        store=store if store is not None else InMemoryEventStore(),
        clock=clock,
        cwd=str(workspace),
        delegation=DelegationOptions(definitions=dict(definitions or {})),
        mcp=McpOptions(
            servers=servers, search_threshold=threshold, connect_timeout=connect_timeout
        ),
    )


def plain(*names: str) -> dict[str, McpServerConfig]:
    return {name: stdio(name, "stdio_server.py") for name in names}


def definition(name: str, **fields: object) -> AgentDefinition:
    base = AgentDefinition(name=name, description=f"The {name}.", body=f"You are the {name}.")
    return dataclasses.replace(base, **fields)


def spawn(name: str, agent: str | None = None, *, background: bool = False) -> str:
    """One scripted `subagent` call, as a YAML response line."""
    extra = "" if agent is None else f", agent: {agent}"
    extra += ", run_in_background: true" if background else ""
    args = f"name: {name}, description: d, prompt: p{extra}"
    return f"  - calls: [{{tool: subagent, args: {{{args}}}}}]\n"


def call(tool: str, **args: object) -> str:
    """One scripted tool call, as a YAML response line (`tool` quoted: it may hold spaces)."""
    shown = ", ".join(f"{k}: {v}" for k, v in args.items())
    return f'  - calls: [{{tool: "{tool}", args: {{{shown}}}}}]\n'


async def member(rt: DelegationRuntime, name: str) -> SessionHeader:
    """The stored header of the tree member with full name `name` (the lead is `lead`)."""
    headers = await rt.store.list_headers(tenant="default", roots_only=False)
    by_id = {h.id: h for h in headers}
    names = {h.id: "lead" for h in headers if h.parent is None}
    pending = [h for h in headers if h.parent is None]
    while pending:
        creator = pending.pop()
        for entry in events(await rt.read_log(creator.id), SubagentCatalog):
            child = by_id.get(SessionId(entry.child_id))
            if child is None or entry.name is None:
                continue
            own = entry.name
            if names[creator.id] != "lead" and not own.startswith(names[creator.id] + "/"):
                own = f"{names[creator.id]}/{own}"
            names[child.id] = own
            pending.append(child)
    found = [by_id[i] for i, n in names.items() if n == name]
    assert len(found) == 1, f"no one member {name!r}: {sorted(names.values())}"
    return found[0]


async def results_of(rt: DelegationRuntime, name: str) -> list[ToolReply]:
    header = await member(rt, name)
    return [
        ToolReply(e.message.name, e.message.content, e.message.is_error, e.code)
        for e in events(await rt.read_log(header.id), ToolResultEvent)
    ]


async def offered_to(rt: DelegationRuntime, name: str) -> set[str]:
    """Every tool any model request of member `name` listed."""
    header = await member(rt, name)
    found: set[str] = set()
    for request in events(await rt.read_log(header.id), RequestHeader):
        found |= set(request.tools)
    return found


async def scopes_of(rt: DelegationRuntime, name: str) -> list[McpScopeSet]:
    header = await member(rt, name)
    return events(await rt.read_log(header.id), McpScopeSet)


async def told_to(rt: DelegationRuntime, name: str) -> str:
    header = await member(rt, name)
    records = await rt.read_log(header.id)
    return "\n".join(e.message.text for e in events(records, UserMessageEvent))


def mcp_of(tools: set[str]) -> set[str]:
    return {t for t in tools if t.startswith("mcp")}


def unknown(reply: ToolReply) -> bool:
    return reply.is_error and reply.code == "UNKNOWN_TOOL"


OK_ECHO = ToolReply("mcp__one__echo", "hi", False, None)


# -- a narrowed child calls what it was not given -------------------------------------------


async def test_a_child_narrowed_to_one_tool_cannot_reach_any_other_by_name(
    workspace: Path,
) -> None:
    script = (
        "lead:\n" + spawn("a", "picky") + "  - text: done\n"
        "a:\n"
        + call("mcp__two__echo", text="hi")
        + call("mcp__one__pid")
        + call("MCP__one__echo", text="hi")
        + call("mcp__One__echo", text="hi")
        + call("mcp__one__echo ", text="hi")
        + call(" mcp__one__echo", text="hi")
        + call("mcp__one__dotted.name")
        + call("mcp__one")
        + call("mcp__one__echo", text="hi")
        + "  - text: ok\n"
    )
    picky = definition("picky", mcp_servers=("one",), tools=("mcp__one__echo",))
    async with runtime(workspace, script, plain("one", "two"), definitions={"picky": picky}) as rt:
        await rt.run("go")
        results = await results_of(rt, "a")
        tools = await offered_to(rt, "a")
        scopes = await scopes_of(rt, "a")
    assert mcp_of(tools) == {"mcp__one__echo"}
    assert [unknown(r) for r in results[:-1]] == [True] * 8, results
    assert results[-1] == OK_ECHO
    assert [(s.servers, s.allow) for s in scopes] == [(("one",), ("mcp__one__echo",))]


async def test_a_denied_tool_or_server_is_unknown_to_the_child(workspace: Path) -> None:
    script = (
        "lead:\n" + spawn("a", "denied") + "  - text: done\n"
        "a:\n"
        + call("mcp__one__fail", reason="x")
        + call("mcp__two__echo", text="hi")
        + call("mcp__two__pid")
        + call("mcp__one__echo", text="hi")
        + "  - text: ok\n"
    )
    denied = definition("denied", disallowed_tools=("mcp__one__fail", "mcp__two"))
    async with runtime(
        workspace, script, plain("one", "two"), definitions={"denied": denied}
    ) as rt:
        await rt.run("go")
        results = await results_of(rt, "a")
        tools = await offered_to(rt, "a")
        lead_tools = await offered_to(rt, "lead")
    assert {"mcp__one__fail", "mcp__two__echo"} <= lead_tools
    assert "mcp__one__fail" not in tools
    assert not {t for t in tools if t.startswith("mcp__two")}
    assert "mcp__one__echo" in tools
    assert [unknown(r) for r in results[:3]] == [True] * 3, results
    assert results[3] == OK_ECHO


async def test_search_finds_nothing_of_a_server_or_tool_the_child_may_not_use(
    workspace: Path,
) -> None:
    script = (
        "lead:\n" + spawn("a", "bigone") + "  - text: done\n"
        "a:\n"
        + call("mcp_search", query="echo", limit=20)
        + call("mcp_search", query="create weather", server="big2", limit=20)
        + call("mcp_search", query="create weather", limit=20)
        + call("mcp__big2__echo", text="hi")
        + call("mcp__big__echo", text="hi")
        + call("mcp__big__create_weather")
        + "  - text: ok\n"
    )
    bigone = definition("bigone", mcp_servers=("big",), disallowed_tools=("mcp__big__echo",))
    servers = {n: stdio(n, "stdio_server.py", "many") for n in ("big", "big2")}
    async with runtime(workspace, script, servers, definitions={"bigone": bigone}) as rt:
        await rt.run("go")
        results = await results_of(rt, "a")
    every, other, weather, denied_echo, other_echo, allowed = results
    assert "big2" not in every.content
    assert "mcp__big__echo" not in every.content
    assert other.is_error
    assert other.code == "MCP_SERVER_UNKNOWN"
    assert "mcp__big__create_weather" in weather.content
    assert "big2" not in weather.content
    assert unknown(denied_echo)
    assert unknown(other_echo)
    assert allowed == ToolReply("mcp__big__create_weather", "create weather done", False, None)


# -- inheritance: a grandchild, a server the parent lacks -----------------------------------


async def test_a_grandchild_without_a_definition_inherits_its_parents_scope_exactly(
    workspace: Path,
) -> None:
    script = (
        "lead:\n" + spawn("a", "picky") + "  - text: done\n"
        "a:\n" + spawn("b") + "  - text: ok\n"
        "a/b:\n"
        + call("mcp__two__echo", text="hi")
        + call("mcp__one__pid")
        + call("mcp__one__fail", reason="x")
        + call("mcp__one__echo", text="hi")
        + "  - text: ok\n"
    )
    picky = definition(
        "picky",
        mcp_servers=("one",),
        tools=("mcp__one__echo", "mcp__one__fail", "subagent"),
        disallowed_tools=("mcp__one__fail",),
    )
    async with runtime(workspace, script, plain("one", "two"), definitions={"picky": picky}) as rt:
        await rt.run("go")
        child, grandchild = await scopes_of(rt, "a"), await scopes_of(rt, "a/b")
        results = await results_of(rt, "a/b")
        tools = await offered_to(rt, "a/b")
    assert mcp_of(tools) == {"mcp__one__echo"}
    assert [unknown(r) for r in results[:3]] == [True] * 3, results
    assert results[3] == OK_ECHO
    assert [(s.servers, s.allow, s.deny) for s in grandchild] == [
        (s.servers, s.allow, s.deny) for s in child
    ]
    assert grandchild[0].servers == ("one",)


async def test_a_definition_cannot_name_a_server_its_parent_may_not_use(workspace: Path) -> None:
    script = (
        "lead:\n" + spawn("a", "grabby") + "  - text: done\n"
        "a:\n" + call("mcp__two__echo", text="hi") + spawn("b", "grabby2") + "  - text: ok\n"
        "a/b:\n"
        + call("mcp__two__echo", text="hi")
        + call("mcp__one__echo", text="hi")
        + "  - text: ok\n"
    )
    lonely = definition("lonely", mcp_servers=("one",))
    grabby = definition("grabby", mcp_servers=("two", "one"))
    grabby2 = definition("grabby2", mcp_servers=("two", "one", "three"))
    definitions = {"lonely": lonely, "grabby": grabby, "grabby2": grabby2}
    async with runtime(
        workspace, script, plain("one", "two", "three"), definitions=definitions
    ) as rt:
        lead = await rt.create_agent_from("lonely")
        await rt.run("go", agent=lead)
        child, grandchild = await results_of(rt, "a"), await results_of(rt, "a/b")
        scopes = [(await scopes_of(rt, n))[0].servers for n in ("lead", "a", "a/b")]
        (hub,) = rt.mcp.hubs()
        started = {n: hub.starts(n) for n in ("one", "two", "three")}
    assert scopes == [("one",), ("one",), ("one",)]
    assert unknown(child[0])
    assert unknown(grandchild[0])
    assert grandchild[1] == OK_ECHO
    assert started == {"one": 1, "two": 0, "three": 0}


# -- a definition's inline server under a configured name -----------------------------------


async def test_an_inline_server_cannot_replace_a_configured_one(workspace: Path) -> None:
    script = (
        "lead:\n"
        + spawn("a", "hijack")
        + spawn("c")
        + call("mcp__one__create_weather")
        + call("mcp__one__echo", text="hi")
        + "  - text: done\n"
        "a:\n"
        + call("mcp__one__create_weather")
        + call("mcp__one__echo", text="hi")
        + spawn("b")
        + "  - text: ok\n"
        "a/b:\n"
        + call("mcp__one__create_weather")
        + call("mcp__one__echo", text="hi")
        + "  - text: ok\n"
        "c:\n"
        + call("mcp__one__create_weather")
        + call("mcp__one__echo", text="hi")
        + "  - text: ok\n"
    )
    configured = stdio("one", "stdio_server.py")
    evil = {"one": {"command": sys.executable, "args": [str(SERVERS / "stdio_server.py"), "many"]}}
    hijack = definition("hijack", mcp_servers=("one",), mcp_inline=evil)
    async with runtime(
        workspace, script, {"one": configured}, definitions={"hijack": hijack}
    ) as rt:
        await rt.run("go")
        (hub,) = rt.mcp.hubs()
        config, starts = hub.config("one"), hub.starts("one")
        told = await told_to(rt, "a")
        a, b = await results_of(rt, "a"), await results_of(rt, "a/b")
        c, lead = await results_of(rt, "c"), await results_of(rt, "lead")
        a_tools = await offered_to(rt, "a")
    assert config == configured
    assert starts == 1
    assert "one: " in told
    assert "differs" in told
    assert not mcp_of(a_tools)
    assert [unknown(r) for r in (a[0], a[1], b[0], b[1])] == [True] * 4, (a, b)
    for others in (c, lead[2:]):  # the lead's first two results are its children's answers
        assert unknown(others[0]), others
        assert others[1] == OK_ECHO, others


async def test_an_inline_server_under_a_name_its_parent_lacks_is_refused_too(
    workspace: Path,
) -> None:
    """A configured name the parent may not use, redefined inline with another command: the
    child is refused (told why) rather than getting either server; the configured one keeps
    its config and stays out of the child's reach."""
    script = (
        "lead:\n" + spawn("a", "own") + call("mcp__two__echo", text="hi") + "  - text: done\n"
        "a:\n" + call("mcp__two__create_weather") + "  - text: ok\n"
    )
    mine = {"two": {"command": sys.executable, "args": [str(SERVERS / "stdio_server.py"), "many"]}}
    lonely = definition("lonely", mcp_servers=("one",))
    own = definition("own", mcp_servers=("two",), mcp_inline=mine)
    definitions = {"lonely": lonely, "own": own}
    async with runtime(workspace, script, plain("one", "two"), definitions=definitions) as rt:
        lead = await rt.create_agent_from("lonely")
        await rt.run("go", agent=lead)
        (hub,) = rt.mcp.hubs()
        a, lead_results = await results_of(rt, "a"), await results_of(rt, "lead")
        told = await told_to(rt, "a")
    assert unknown(lead_results[1])
    # The configured `two` keeps its config: the inline one under its name is refused, and
    # the child is told so, rather than silently getting either server.
    assert hub.config("two").args == (str(SERVERS / "stdio_server.py"),)
    assert unknown(a[0]), a
    assert "differs" in told, told


# -- resume: the recorded scope, whatever the configuration says by then -------------------

FIRST_LEAD = spawn("a", "{agent}", background=True) + "  - text: started\n  - text: noted\n"
FIRST_RUN = "lead:\n" + FIRST_LEAD + "a:\n  - text: first\n"
# The scripted model answers by how many replies an agent's history holds: a resumed agent's
# script repeats what it answered before.
SECOND_RUN = (
    "lead:\n"
    + FIRST_LEAD
    + call("mcp__two__echo", text="hi")
    + "  - calls: [{tool: send_message, args: {agent: a, message: again}}]\n"
    "  - text: sent\n  - text: noted again\n"
    "a:\n  - text: first\n"
    + call("mcp__two__echo", text="hi")
    + call("mcp__one__echo", text="hi")
    + "  - text: second\n"
)


async def test_a_resumed_child_gets_only_its_recorded_servers(
    workspace: Path, tmp_path: Path
) -> None:
    store = tmp_path / "state.db"
    worker = definition("worker", mcp_servers=("one",))
    definitions = {"worker": worker}
    first_script = FIRST_RUN.replace("{agent}", "worker")
    async with runtime(
        workspace, first_script, plain("one"), definitions=definitions, store=store
    ) as rt:
        first = await rt.run("go")
        recorded = (await scopes_of(rt, "a"))[0]
    assert recorded.servers == ("one",)
    async with runtime(
        workspace,
        SECOND_RUN.replace("{agent}", "worker"),
        plain("one", "two"),
        definitions=definitions,
        store=store,
    ) as rt:
        await rt.resume(first.session_id, "again")
        a, lead = await results_of(rt, "a"), await results_of(rt, "lead")
        tools = await offered_to(rt, "a")
        scopes = await scopes_of(rt, "a")
    assert unknown(lead[-2]), lead
    assert unknown(a[0]), a
    assert a[1] == OK_ECHO, a
    assert not {t for t in tools if t.startswith("mcp__two")}
    assert [s.servers for s in scopes] == [("one",)]


async def test_a_resumed_child_that_had_no_server_still_has_none(
    workspace: Path, tmp_path: Path
) -> None:
    store = tmp_path / "state.db"
    definitions = {"none": definition("none", mcp_servers=())}
    async with runtime(
        workspace,
        FIRST_RUN.replace("{agent}", "none"),
        plain("one"),
        definitions=definitions,
        store=store,
    ) as rt:
        first = await rt.run("go")
    # A new process without that definition loaded (its descriptor carries the rest).
    async with runtime(
        workspace, SECOND_RUN.replace("{agent}", "none"), plain("one", "two"), store=store
    ) as rt:
        await rt.resume(first.session_id, "again")
        a = await results_of(rt, "a")
        tools = await offered_to(rt, "a")
    assert not mcp_of(tools), tools
    assert unknown(a[1]), a


async def test_a_resumed_agent_whose_server_was_removed_is_told_and_goes_on(
    workspace: Path, tmp_path: Path
) -> None:
    store = tmp_path / "state.db"
    async with runtime(
        workspace, "lead:\n  - text: first\n", plain("one", "two"), store=store
    ) as rt:
        first = await rt.run("go")
    script = "lead:\n  - text: first\n" + call("mcp__one__echo", text="hi") + "  - text: second\n"
    async with runtime(workspace, script, plain("one"), store=store) as rt:
        result = await rt.resume(first.session_id, "again")
        lead = await results_of(rt, "lead")
        told = await told_to(rt, "lead")
    assert result.output == "second"
    assert lead == [OK_ECHO]
    assert "two: " in told


async def test_a_resumed_root_whose_definition_allowed_no_server_still_has_none(
    workspace: Path, tmp_path: Path
) -> None:
    store = tmp_path / "state.db"
    definitions = {"lonely": definition("lonely", mcp_servers=())}
    script = "lead:\n  - text: first\n" + call("mcp__one__echo", text="hi") + "  - text: second\n"
    async with runtime(workspace, script, plain("one"), definitions=definitions, store=store) as rt:
        lead = await rt.create_agent_from("lonely")
        first = await rt.run("go", agent=lead)
    # The same configuration and definitions: only the process changed.
    async with runtime(workspace, script, plain("one"), definitions=definitions, store=store) as rt:
        await rt.resume(first.session_id, "again")
        results = await results_of(rt, "lead")
        tools = await offered_to(rt, "lead")
    assert not mcp_of(tools), tools
    assert unknown(results[0]), results


# -- bad input to the Python API ------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"servers": [("one", None)]},
        {"servers": "one"},
        {"servers": {"one": {"command": "python"}}},
        {"servers": None},
        {"search_threshold": True},
        {"search_threshold": -1},
        {"search_threshold": 2.5},
        {"search_threshold": "20"},
        {"tool_timeout": 0},
        {"tool_timeout": -1.0},
        {"tool_timeout": math.nan},
        {"tool_timeout": math.inf},
        {"tool_timeout": "5"},
        {"tool_timeout": False},
        {"connect_timeout": 0},
        {"connect_timeout": math.nan},
        {"connect_timeout": math.inf},
        {"connect_timeout": "5"},
    ],
)
def test_bad_options_are_one_line_config_errors(fields: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as caught:
        McpOptions(**fields)  # pyright: ignore[reportArgumentType]
    message = caught.value.message
    assert message
    assert "\n" not in message
    name = next(iter(fields))
    assert name in message or "McpOptions" in message


# -- hostile servers ------------------------------------------------------------------------

HUGE_MB = 50
BIG_MB = 6  # under the 16 MiB line limit of a stdio server (sent twice: text and structured)
RESULT_CAP = 1_000_000  # what `bash` keeps of its output (BASH_MAX_OUTPUT_BYTES)


def attack(name: str, mode: str) -> McpServerConfig:
    return stdio(name, "attack_server.py", mode)


@dataclasses.dataclass(frozen=True, slots=True)
class HugeRun:
    output: str
    results: list[ToolReply]
    starts: int
    leaks: list[str]
    """The ResourceWarnings of objects left open, once the runtime is closed and collected."""


async def huge_run(workspace: Path, mb: int) -> HugeRun:
    """Call `huge(mb)`, then `echo`; what the lead saw and what the runtime left behind.

    Resource warnings are recorded here (then collected), not raised where the garbage
    collector happens to run, so a leak is this test's finding and no other test's error.
    """
    script = (
        "lead:\n"
        + call("mcp__big__huge", mb=mb)
        + call("mcp__big__echo", text="hi")
        + "  - text: survived\n"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        async with runtime(workspace, script, {"big": attack("big", "huge")}) as rt:
            result = await rt.run("go")
            results = await results_of(rt, "lead")
            (hub,) = rt.mcp.hubs()
            starts = hub.starts("big")
        del rt, hub
        gc.collect()
    leaks = [str(w.message)[:200] for w in caught if issubclass(w.category, ResourceWarning)]
    return HugeRun(result.output, results, starts, leaks)


async def test_a_50_mib_tool_result_is_a_one_line_error_and_the_agent_goes_on(
    workspace: Path,
) -> None:
    run = await huge_run(workspace, HUGE_MB)
    assert run.output == "survived"
    first, second = run.results
    assert first.is_error, first
    assert first.code == "MCP_PROTOCOL", first
    assert "\n" not in first.content
    assert len(first.content) < 300
    assert second == ToolReply("mcp__big__echo", "hi", False, None)
    assert run.starts == 2  # the server that broke the protocol was replaced


async def test_a_server_over_the_line_limit_leaves_nothing_open(workspace: Path) -> None:
    run = await huge_run(workspace, 20)
    assert run.results[0].code == "MCP_PROTOCOL"
    assert run.leaks == []


async def test_a_6_mib_tool_result_does_not_kill_the_agent(workspace: Path) -> None:
    run = await huge_run(workspace, BIG_MB)
    assert run.output == "survived"
    assert run.leaks == []
    assert not run.results[0].is_error
    assert run.results[0].content.startswith("xxxx")
    assert run.results[1] == ToolReply("mcp__big__echo", "hi", False, None)


async def test_a_big_tool_result_is_capped_like_bash_output(workspace: Path) -> None:
    run = await huge_run(workspace, BIG_MB)
    assert len(run.results[0].content) <= RESULT_CAP + 1000


async def test_tools_whose_names_collide_after_sanitising_are_one_tool_and_a_problem(
    workspace: Path,
) -> None:
    collide = attack("c", "collide")
    script = "lead:\n" + call("mcp__c__echo", text="hi") + "  - text: done\n"
    async with runtime(workspace, script, {"c": collide}) as rt:
        result = await rt.run("go")
        (hub,) = rt.mcp.hubs()
        problems = hub.problems("c")
        tools = await offered_to(rt, "lead")
        lead = await results_of(rt, "lead")
    names = {t for t in tools if t.startswith("mcp__c__a_b_")}
    assert len(names) == 1, tools
    assert [p.code for p in problems] == ["MCP_SCHEMA_INVALID"]
    assert "already taken" in problems[0].message
    assert "\n" not in problems[0].message
    assert result.output == "done"
    assert lead == [ToolReply("mcp__c__echo", "hi", False, None)]


async def test_the_sanitised_winner_calls_the_server_tool_it_was_listed_for(
    workspace: Path,
) -> None:
    collide = attack("c", "collide")
    async with runtime(workspace, "lead:\n  - text: x\n", {"c": collide}) as rt:
        await rt.run("go")
        (name,) = {t for t in await offered_to(rt, "lead") if t.startswith("mcp__c__a_b_")}
        (hub,) = rt.mcp.hubs()
        spec = next(s for s in await hub.tools("c") if s.name == name)
        skipped = hub.problems("c")[0].tool
    expected = "dotted" if skipped != "a.b" else "plain"
    description = {
        "dotted": "The dotted one.",
        "plain": "The one named like the dotted one's rewrite.",
    }
    assert spec.description == description[expected]


async def test_a_server_that_never_answers_initialize_is_told_and_the_run_goes_on(
    workspace: Path,
) -> None:
    # Only the mute server: it times out however loaded the machine is, while a working
    # server might not start within so short a timeout on a busy machine.
    script = "lead:\n" + call("mcp__mute__echo", text="hi") + "  - text: carried on\n"
    servers = {"mute": attack("mute", "silent")}
    async with runtime(workspace, script, servers, connect_timeout=1.0) as rt:
        result = await rt.run("go")
        told = await told_to(rt, "lead")
        lead = await results_of(rt, "lead")
        tools = await offered_to(rt, "lead")
    assert result.output == "carried on"
    assert "mute: " in told
    assert "could not start" in told
    assert unknown(lead[0]), lead
    assert not {t for t in tools if t.startswith("mcp__mute")}


async def test_descriptions_with_control_characters_or_a_megabyte_do_not_break_the_run(
    workspace: Path,
) -> None:
    script = "lead:\n" + call("mcp__d__controls") + call("mcp__d__wordy") + "  - text: done\n"
    async with runtime(workspace, script, {"d": attack("d", "descr")}) as rt:
        result = await rt.run("go")
        lead = await results_of(rt, "lead")
    assert result.output == "done"
    assert lead == [
        ToolReply("mcp__d__controls", "controls", False, None),
        ToolReply("mcp__d__wordy", "wordy", False, None),
    ]


# -- concurrency ----------------------------------------------------------------------------


async def test_sibling_background_children_meet_in_one_server_process(workspace: Path) -> None:
    """`meet(2)` answers only while both calls are in flight, so both children's calls run at
    once on the one process (a serialised hub would leave each at its tool timeout)."""
    script = (
        "lead:\n  - calls: [{tool: subagent, args: {name: a, description: d, prompt: p, "
        "run_in_background: true}}, {tool: subagent, args: {name: b, description: d, "
        "prompt: p, run_in_background: true}}]\n"
        "  - text: started\n  - text: one back\n  - text: both back\n"
        "a:\n" + call("mcp__m__meet", n=2) + "  - text: a done\n"
        "b:\n" + call("mcp__m__meet", n=2) + "  - text: b done\n"
    )
    clock = FakeClock()
    rt = DelegationRuntime(
        model=scripted(script, clock),
        store=InMemoryEventStore(),
        clock=clock,
        cwd=str(workspace),
        mcp=McpOptions(servers={"m": attack("m", "meet")}, tool_timeout=60),
    )
    async with rt:
        await rt.run("go")
        await rt.wait_quiescent()
        a, b = await results_of(rt, "a"), await results_of(rt, "b")
        (hub,) = rt.mcp.hubs()
        starts = hub.starts("m")
    assert a == b == [ToolReply("mcp__m__meet", "met 2", False, None)]
    assert starts == 1


# -- server names with `__` ----------------------------------------------------------------


async def test_a_server_name_with_a_double_underscore_is_refused() -> None:
    # `mcp__x__y__echo` must name one server and one tool: `x__y` would make the server part
    # ambiguous, so a deny list of `mcp__x__y` could be dodged.
    for name in ("x__y", "x_", "_x"):
        with pytest.raises(ConfigError) as caught:
            parse_servers({name: {"command": "python3"}}, source="test")
        assert caught.value.code == ErrorCode.MCP_CONFIG_INVALID
        assert "\n" not in caught.value.message


# -- fuzzing McpScope.narrowed ---------------------------------------------------------------

SERVER_NAMES = ("one", "two", "x", "x__y", "mine")
CONFIGURED = ("one", "two", "x", "x__y")
TOOL_NAMES = ("echo", "pid", "y__echo")
ENTRIES = (
    "mcp__one",
    "mcp__one__echo",
    "mcp__one__pid",
    "mcp__two",
    "mcp__two__echo",
    "mcp__x",
    "mcp__x__y",
    "mcp__x__y__echo",
    "mcp__mine",
    "mcp__mine__pid",
    "mcp__One__echo",
    "mcp__one__echo ",
    "mcp__",
    "mcp____echo",
    "read_file",
    "subagent",
)
INLINE = {"mine": {"command": "mine"}, "one": {"command": "other"}, "two": {"command": "two"}}


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    """A definition and the definitions of the children an agent started from it starts."""

    definition: AgentDefinition
    children: tuple[Node, ...] = ()


@st.composite
def definitions(draw: st.DrawFn) -> AgentDefinition:
    servers: tuple[str, ...] | None = None
    inline: dict[str, object] = {}
    if draw(st.booleans()):
        names = draw(st.lists(st.sampled_from((*SERVER_NAMES, "nope")), max_size=4))
        inline = {n: INLINE[n] for n in draw(st.lists(st.sampled_from(tuple(INLINE)), max_size=2))}
        servers = tuple(dict.fromkeys([*names, *inline]))
    tools = draw(st.none() | st.lists(st.sampled_from(ENTRIES), max_size=4).map(tuple))
    denied = tuple(draw(st.lists(st.sampled_from(ENTRIES), max_size=3)))
    return definition(
        "fuzzed", mcp_servers=servers, mcp_inline=inline, tools=tools, disallowed_tools=denied
    )


def with_children(inner: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    return st.builds(Node, definitions(), st.lists(inner, max_size=3).map(tuple))


trees = st.recursive(st.builds(Node, definitions()), with_children, max_leaves=8)


def usable(scope: McpScope) -> set[tuple[str, str]]:
    """The (server, tool) pairs an agent of `scope` is offered."""
    return {(s, t) for s in scope.servers for t in TOOL_NAMES if scope.allows(f"mcp__{s}__{t}")}


def check_edges(parent: McpScope, node: Node | None) -> None:
    """The invariant on every edge of the tree below `parent` (None: a child without one)."""
    own = None if node is None else node.definition
    child = parent.narrowed(own)
    inline: set[str] = set() if own is None else set(own.mcp_inline)
    widened = {(s, t) for s, t in usable(child) - usable(parent) if s not in inline}
    assert not widened, (parent, own, child)
    assert child.deny >= parent.deny
    assert set(child.servers) <= set(parent.servers) | inline
    if own is None:
        assert child == parent
    assert McpScope.recorded(child.record(source="delegation")) == child
    for below in () if node is None else node.children:
        check_edges(child, below)
    if node is not None:
        check_edges(child, None)  # a child started without a definition


@settings(max_examples=300, deadline=None)
@given(trees)
def test_a_narrowed_scope_never_allows_what_its_parent_did_not(tree: Node) -> None:
    runtime_scope = McpScope(servers=CONFIGURED)
    root = runtime_scope.narrowed(tree.definition, root=True)
    assert set(root.servers) <= set(CONFIGURED) | set(tree.definition.mcp_inline)
    for child in tree.children:
        check_edges(root, child)
    check_edges(root, None)


# -- what a person sees of a hostile server, and how long a mute one holds things up ---------


def test_mcp_check_does_not_print_a_servers_terminal_escapes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    descr = attack("d", "descr")
    server = {"command": descr.command, "args": list(descr.args)}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"d": server}}))
    checked = cli_runner(home, tmp_path)("mcp", "check", "d")
    assert checked.returncode == 0, checked.stderr
    assert "mcp__d__controls" in checked.stdout
    assert not {c for c in checked.stdout if ord(c) < 32 and c not in "\n\t"}


async def test_a_mute_server_is_killed_when_its_connect_times_out(workspace: Path) -> None:
    """A handshake that never ends is not waited out: the server is gone once the start fails
    (before the fix, closing waited a fixed grace for a session task stuck in it)."""
    policy = SandboxPolicy(mode=parse_mode("workspace-write"), workspace_root=str(workspace))
    servers = {"mute": attack("mute", "silent")}
    async with McpHub(servers, policy=policy, connect_timeout=1.0) as hub:
        with pytest.raises(ToolError) as caught:
            await hub.tools("mute")
        assert hub.pid("mute") is None
        assert not hub.started("mute")
    assert caught.value.code == "MCP_TIMEOUT"


async def test_a_refused_inline_server_costs_the_child_only_that_server(workspace: Path) -> None:
    script = (
        "lead:\n" + spawn("a", "mixed") + "  - text: done\n"
        "a:\n" + call("mcp__one__echo", text="hi") + "  - text: ok\n"
    )
    clash = {"two": {"command": sys.executable, "args": [str(SERVERS / "attack_server.py")]}}
    mixed = definition("mixed", mcp_servers=("one", "two"), mcp_inline=clash)
    async with runtime(workspace, script, plain("one", "two"), definitions={"mixed": mixed}) as rt:
        await rt.run("go")
        results = await results_of(rt, "a")
        told = await told_to(rt, "a")
    assert "two: " in told
    assert "one: " not in told
    assert results == [OK_ECHO]


async def test_two_definitions_inline_servers_under_one_name_never_swap(workspace: Path) -> None:
    """The first definition's `own` is started; the second's differs, so its child is told and
    gets neither: never the other definition's server under the name it wrote."""
    script = (
        "lead:\n" + spawn("a", "first") + spawn("b", "second") + "  - text: done\n"
        "a:\n" + call("mcp__own__create_weather") + "  - text: ok\n"
        "b:\n"
        + call("mcp__own__create_weather")
        + call("mcp__own__echo", text="hi")
        + "  - text: ok\n"
    )
    script_path = str(SERVERS / "stdio_server.py")
    first = definition(
        "first",
        mcp_servers=("own",),
        mcp_inline={"own": {"command": sys.executable, "args": [script_path, "many"]}},
    )
    second = definition(
        "second",
        mcp_servers=("own",),
        mcp_inline={"own": {"command": sys.executable, "args": [script_path]}},
    )
    definitions = {"first": first, "second": second}
    async with runtime(workspace, script, plain("one"), definitions=definitions) as rt:
        await rt.run("go")
        a, b = await results_of(rt, "a"), await results_of(rt, "b")
        told = await told_to(rt, "b")
        (hub,) = rt.mcp.hubs()
        own = hub.config("own")
    assert a == [ToolReply("mcp__own__create_weather", "create weather done", False, None)]
    assert own.args == (script_path, "many")
    assert "differs" in told
    assert [unknown(r) for r in b] == [True, True], b
