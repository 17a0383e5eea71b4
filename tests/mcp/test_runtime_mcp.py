"""MCP servers in a running tree: who gets which server, one shared process, search, failures.

Real stdio servers (tests/mcp/servers) under the default workspace-write policy, confined by
the machine's sandbox backend, driven by the scripted model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from pathlib import Path

from delegation_support import ToolReply, events, replies, scripted
from mcp_support import processes_with, stdio
from process_support import zombie

from subagents import DelegationOptions
from subagents.definitions import AgentDefinition
from subagents.delegation import DelegationRuntime, McpOptions
from subagents.sessions import (
    InMemoryEventStore,
    McpScopeSet,
    RequestHeader,
    ToolResultEvent,
    UserMessageEvent,
)
from subagents.testing import FakeClock


def runtime(
    workspace: Path,
    script: str,
    *servers: str,
    definitions: dict[str, AgentDefinition] | None = None,
    threshold: int = 20,
    many: tuple[str, ...] = (),
) -> DelegationRuntime:
    configs = {name: stdio(name, "stdio_server.py") for name in servers}
    configs |= {name: stdio(name, "stdio_server.py", "many") for name in many}
    clock = FakeClock()
    return DelegationRuntime(
        model=scripted(script, clock),
        store=InMemoryEventStore(),
        clock=clock,
        cwd=str(workspace),
        delegation=DelegationOptions(definitions=definitions or {}),
        mcp=McpOptions(servers=configs, search_threshold=threshold),
    )


def definition(name: str, **fields: object) -> AgentDefinition:
    base = AgentDefinition(name=name, description=f"The {name}.", body=f"You are the {name}.")
    return dataclasses.replace(base, **fields)


async def member_replies(rt: DelegationRuntime, depth: int) -> list[ToolReply]:
    """The tool results the member at `depth` saw, read from its log."""
    headers = await rt.store.list_headers(tenant="default", roots_only=False)
    member = next(h for h in headers if h.depth == depth)
    return [
        ToolReply(e.message.name, e.message.content, e.message.is_error, e.code)
        for e in events(await rt.read_log(member.id), ToolResultEvent)
    ]


async def member_scopes(rt: DelegationRuntime, depth: int) -> list[McpScopeSet]:
    headers = await rt.store.list_headers(tenant="default", roots_only=False)
    member = next(h for h in headers if h.depth == depth)
    return events(await rt.read_log(member.id), McpScopeSet)


async def offered(rt: DelegationRuntime, depth: int) -> set[str]:
    """The tools the first model request of the member at `depth` offered."""
    headers = await rt.store.list_headers(tenant="default", roots_only=False)
    member = next(h for h in headers if h.depth == depth)
    return set(events(await rt.read_log(member.id), RequestHeader)[0].tools)


async def test_parent_and_child_share_one_server_process(workspace: Path) -> None:
    script = (
        "lead:\n  - calls: [{tool: mcp__tools__echo, args: {text: from the lead}}]\n"
        "  - calls: [{tool: subagent, args: {name: a, description: d, prompt: p}}]\n"
        "  - text: done\n"
        "a:\n  - calls: [{tool: mcp__tools__echo, args: {text: from the child}}]\n"
        "  - text: child done\n"
    )
    async with runtime(workspace, script, "tools") as rt:
        assert rt.mcp.hubs() == []  # nothing starts before an agent needs it
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead)[0] == ToolReply("mcp__tools__echo", "from the lead", False, None)
        child = await member_replies(rt, 1)
        assert child[0] == ToolReply("mcp__tools__echo", "from the child", False, None)
        (hub,) = rt.mcp.hubs()
        assert hub.starts("tools") == 1
        pid = hub.pid("tools")
        assert pid is not None
        assert _alive(pid)
        assert "mcp__tools__echo" in await offered(rt, 1)
    assert not _alive(pid)  # closed with the runtime


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting to be reaped has ended)."""
    return not zombie(pid)


async def test_a_child_gets_the_server_its_definition_names_and_not_the_other(
    workspace: Path,
) -> None:
    script = (
        "lead:\n  - calls: [{tool: subagent, args: {name: a, description: d, prompt: p, "
        "agent: narrow}}]\n  - text: done\n"
        "a:\n  - calls: [{tool: mcp__two__echo, args: {text: hi}}]\n"
        "  - calls: [{tool: mcp__one__echo, args: {text: hi}}]\n  - text: ok\n"
    )
    narrow = definition("narrow", mcp_servers=("one",))
    async with runtime(workspace, script, "one", "two", definitions={"narrow": narrow}) as rt:
        await rt.run("go")
        lead_tools, child_tools = await offered(rt, 0), await offered(rt, 1)
        results = await member_replies(rt, 1)
        scopes = await member_scopes(rt, 1)
    assert {"mcp__one__echo", "mcp__two__echo"} <= lead_tools
    assert "mcp__one__echo" in child_tools
    assert not {t for t in child_tools if t.startswith("mcp__two__")}
    assert results[0].is_error
    assert results[0].code == "UNKNOWN_TOOL"
    assert results[1] == ToolReply("mcp__one__echo", "hi", False, None)
    assert [s.servers for s in scopes] == [("one",)]


async def test_a_tools_list_offers_only_the_mcp_tools_it_names(workspace: Path) -> None:
    script = (
        "lead:\n  - calls: [{tool: subagent, args: {name: a, description: d, prompt: p, "
        "agent: picky}}]\n  - text: done\na:\n  - text: ok\n"
    )
    picky = definition("picky", tools=("read_file", "mcp__one__echo", "mcp__two"))
    async with runtime(workspace, script, "one", "two", definitions={"picky": picky}) as rt:
        await rt.run("go")
        child_tools = await offered(rt, 1)
    mcp = {t for t in child_tools if t.startswith("mcp__")}
    assert "mcp__one__echo" in mcp
    assert not {t for t in mcp if t.startswith("mcp__one__")} - {"mcp__one__echo"}
    assert {"mcp__two__echo", "mcp__two__pid"} <= mcp  # a whole server by its name
    assert "bash" not in child_tools


async def test_a_child_whose_definition_allows_no_server_never_starts_one(
    workspace: Path,
) -> None:
    script = "lead:\n  - text: nothing needed\n"
    lead = definition("lonely", mcp_servers=())
    async with runtime(workspace, script, "tools", definitions={"lonely": lead}) as rt:
        agent = await rt.create_agent_from("lonely")
        await rt.run("go", agent=agent)
        assert rt.mcp.hubs() == []
        assert not {t for t in await offered(rt, 0) if t.startswith("mcp__")}


async def test_a_big_server_is_searched_and_its_tools_called_by_name(workspace: Path) -> None:
    script = (
        "lead:\n  - calls: [{tool: mcp_search, args: {query: echo}}]\n"
        "  - calls: [{tool: mcp__big__echo, args: {text: found}}]\n  - text: done\n"
    )
    async with runtime(workspace, script, many=("big",)) as rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        results = replies(lead)
        tools = await offered(rt, 0)
    assert "mcp_search" in tools
    assert not {t for t in tools if t.startswith("mcp__big__")}
    assert "mcp__big__echo" in results[0].content
    assert not results[0].is_error
    assert results[1] == ToolReply("mcp__big__echo", "found", False, None)


async def test_a_server_killed_mid_call_is_an_error_result_then_restarted(
    workspace: Path,
) -> None:
    fifo = workspace / "started"  # where the confined server can reach it
    os.mkfifo(fifo)
    script = (
        f"lead:\n  - calls: [{{tool: mcp__tools__slow, args: {{fifo: {fifo}}}}}]\n"
        "  - calls: [{tool: mcp__tools__echo, args: {text: again}}]\n  - text: done\n"
    )
    async with runtime(workspace, script, "tools") as rt, asyncio.TaskGroup() as group:
        run = group.create_task(rt.run("go"))
        started = await asyncio.to_thread(fifo.read_text)
        assert started.strip() == "started"
        (hub,) = rt.mcp.hubs()
        first = hub.pid("tools")
        assert first is not None
        os.kill(first, signal.SIGKILL)
        result = await run
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        results = replies(lead)
        assert results[0].is_error
        assert results[0].code == "MCP_SERVER_FAILED"
        assert results[1] == ToolReply("mcp__tools__echo", "again", False, None)
        assert hub.starts("tools") == 2
        assert hub.pid("tools") not in (None, first)


async def test_a_server_that_cannot_start_is_told_and_the_run_goes_on(workspace: Path) -> None:
    garbage = stdio("junk", "garbage_server.py")
    clock = FakeClock()
    rt = DelegationRuntime(
        model=scripted("lead:\n  - text: carried on\n", clock),
        store=InMemoryEventStore(),
        clock=clock,
        cwd=str(workspace),
        mcp=McpOptions(servers={"junk": garbage}, connect_timeout=30),
    )
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        told = [e.message.text for e in events(lead.session.records, UserMessageEvent)]
    assert result.output == "carried on"
    assert any("junk: " in text and "could not start" in text for text in told)


async def test_processes_of_a_closed_runtime_are_gone(workspace: Path) -> None:
    marker = "stdio_server.py"
    before = set(processes_with(marker))
    script = "lead:\n  - calls: [{tool: mcp__tools__pid, args: {}}]\n  - text: done\n"
    async with runtime(workspace, script, "tools") as rt:
        await rt.run("go")
        assert set(processes_with(marker)) - before
    assert not {p for p in set(processes_with(marker)) - before if not zombie(p)}


async def test_a_definitions_inline_server_is_its_own_and_its_childrens(
    workspace: Path,
) -> None:
    script = (
        "lead:\n  - calls: [{tool: subagent, args: {name: a, description: d, prompt: p, "
        "agent: owner}}]\n  - text: done\n"
        "a:\n  - calls: [{tool: mcp__own__echo, args: {text: mine}}]\n"
        "  - calls: [{tool: subagent, args: {name: b, description: d, prompt: p}}]\n"
        "  - text: ok\n"
        "a/b:\n  - calls: [{tool: mcp__own__echo, args: {text: inherited}}]\n  - text: ok\n"
    )
    own = stdio("own", "stdio_server.py")
    inline = {"own": {"command": own.command, "args": list(own.args)}}
    owner = definition("owner", mcp_servers=("own",), mcp_inline=inline)
    async with runtime(workspace, script, "tools", definitions={"owner": owner}) as rt:
        await rt.run("go")
        lead_tools = await offered(rt, 0)
        child, grandchild = await member_replies(rt, 1), await member_replies(rt, 2)
        scopes = await member_scopes(rt, 1)
    assert not {t for t in lead_tools if t.startswith("mcp__own__")}
    assert child[0] == ToolReply("mcp__own__echo", "mine", False, None)
    assert grandchild[0] == ToolReply("mcp__own__echo", "inherited", False, None)
    assert scopes[0].servers == ("own",)
    assert scopes[0].inline == inline  # as written: a resume starts it again
