from __future__ import annotations

import asyncio
import os
import select
import signal
from pathlib import Path

import pytest
from mcp_support import SERVERS, FakeContext, exited, processes_with, stdio

from subagents.errors import ConfigError, ErrorCode, ToolError
from subagents.mcp import McpHub, McpServerConfig, parse_servers
from subagents.policy import SandboxPolicy
from subagents.tools import ToolSpec


def hub_of(
    workspace: Path,
    *configs: McpServerConfig,
    connect_timeout: float = 30.0,
    call_timeout: float = 300.0,
) -> McpHub:
    policy = SandboxPolicy(mode="danger-full-access", workspace_root=str(workspace))
    return McpHub(
        {c.name: c for c in configs},
        policy=policy,
        readable=[str(SERVERS)],
        connect_timeout=connect_timeout,
        call_timeout=call_timeout,
    )


def spec(specs: tuple[ToolSpec, ...], name: str) -> ToolSpec:
    return next(s for s in specs if s.name == name)


async def call(specs: tuple[ToolSpec, ...], tool: str, **args: object) -> object:
    return await spec(specs, tool).handler(args, FakeContext())


def read_fifo(path: Path) -> str:
    with path.open() as fifo:
        return fifo.readline()


async def test_stdio_server_lists_and_calls(workspace: Path) -> None:
    async with hub_of(workspace, stdio("t", "stdio_server.py")) as hub:
        specs = await hub.tools("t")
        names = {s.name for s in specs}
        assert {"mcp__t__echo", "mcp__t__pid", "mcp__t__fail"} <= names
        echo = spec(specs, "mcp__t__echo")
        assert echo.description == "Return the text it was given."
        assert echo.parameters["properties"]["text"]["type"] == "string"
        assert await call(specs, "mcp__t__echo", text="hello") == "hello"
        with pytest.raises(ToolError) as caught:
            await call(specs, "mcp__t__fail", reason="because")
        assert caught.value.code == ErrorCode.MCP_TOOL_ERROR
        assert "failed on purpose: because" in caught.value.message


async def test_names_that_do_not_fit_are_rewritten_and_still_called(workspace: Path) -> None:
    async with hub_of(workspace, stdio("t", "stdio_server.py")) as hub:
        specs = await hub.tools("t")
        dotted = [s.name for s in specs if s.name.startswith("mcp__t__dotted_name_")]
        assert len(dotted) == 1
        assert len(dotted[0]) == len("mcp__t__dotted_name_") + 8
        assert await call(specs, dotted[0]) == "dotted"


async def test_bad_schema_is_skipped_with_a_problem(workspace: Path) -> None:
    async with hub_of(workspace, stdio("t", "stdio_server.py")) as hub:
        names = {s.name for s in await hub.tools("t")}
        assert "mcp__t__bad_schema" not in names
        (problem,) = hub.problems("t")
        assert problem.code == ErrorCode.MCP_SCHEMA_INVALID
        assert problem.tool == "bad_schema"
        assert "'bad_schema' skipped" in problem.message


async def test_an_earlier_protocol_revision_with_pagination_works(workspace: Path) -> None:
    async with hub_of(workspace, stdio("old", "legacy_server.py")) as hub:
        specs = await hub.tools("old")
        assert [s.name for s in specs] == [f"mcp__old__tool{i}" for i in range(5)]
        assert await call(specs, "mcp__old__tool3", n=7) == "tool3 got 7 over 2024-11-05"


async def test_servers_start_lazily_and_once_under_concurrent_first_use(workspace: Path) -> None:
    async with hub_of(
        workspace, stdio("t", "stdio_server.py"), stdio("u", "stdio_server.py")
    ) as hub:
        assert hub.not_started() == ("t", "u")
        assert hub.pid("t") is None
        async with asyncio.TaskGroup() as group:
            first = group.create_task(hub.tools("t"))
            second = group.create_task(hub.tools("t"))
        assert first.result() is second.result()
        assert hub.starts("t") == 1
        assert hub.not_started() == ("u",)
        specs = first.result()
        async with asyncio.TaskGroup() as group:
            pids = [group.create_task(call(specs, "mcp__t__pid")) for _ in range(4)]
        assert {p.result() for p in pids} == {str(hub.pid("t"))}
        assert hub.starts("t") == 1


async def test_a_server_killed_mid_call_fails_that_call_and_restarts(
    workspace: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    async with hub_of(workspace, stdio("t", "stdio_server.py")) as hub:
        specs = await hub.tools("t")
        first = hub.pid("t")
        assert first is not None

        async def slow_call() -> ToolError:
            with pytest.raises(ToolError) as caught:
                await call(specs, "mcp__t__slow", fifo=str(fifo))
            return caught.value

        async with asyncio.TaskGroup() as group:
            pending = group.create_task(slow_call())
            assert await asyncio.to_thread(read_fifo, fifo) == "started\n"
            os.kill(first, signal.SIGKILL)
        error = pending.result()
        assert error.code == ErrorCode.MCP_SERVER_FAILED
        assert "was killed by SIGKILL" in error.message
        assert "\n" not in error.message
        assert await call(specs, "mcp__t__pid") == str(hub.pid("t"))
        assert hub.pid("t") not in (None, first)
        assert hub.starts("t") == 2


async def test_a_timeout_is_an_error_result_and_the_server_stays_usable(workspace: Path) -> None:
    # `slow` never answers, so it times out however long the timeout; a generous one keeps
    # the echo after it from timing out on a loaded machine.
    async with hub_of(workspace, stdio("t", "stdio_server.py"), call_timeout=5) as hub:
        specs = await hub.tools("t")
        pid = hub.pid("t")
        with pytest.raises(ToolError) as caught:
            await call(specs, "mcp__t__slow")
        assert caught.value.code == ErrorCode.MCP_TIMEOUT
        assert await call(specs, "mcp__t__echo", text="still here") == "still here"
        assert hub.pid("t") == pid


async def test_garbage_on_stdout_is_a_protocol_error_and_no_process_is_left(
    workspace: Path, tmp_path: Path
) -> None:
    marker = f"garbage-{tmp_path.name}"
    config = stdio("g", "garbage_server.py", marker)
    async with hub_of(workspace, config, connect_timeout=30) as hub:
        with pytest.raises(ToolError) as caught:
            await hub.tools("g")
        assert caught.value.code == ErrorCode.MCP_PROTOCOL
        assert "does not speak JSON-RPC" in caught.value.message
        assert hub.pid("g") is None
        assert processes_with(marker) == []


async def test_a_command_that_is_not_executable_starts_nothing(workspace: Path) -> None:
    script = workspace / "server.sh"
    script.write_text("#!/bin/sh\n")
    servers = parse_servers(
        {"plain": {"command": str(script)}, "missing": {"command": "no-such-mcp-server"}},
        source="test",
    )
    async with hub_of(workspace, *servers.values()) as hub:
        for name in ("plain", "missing"):
            with pytest.raises(ConfigError) as caught:
                await hub.tools(name)
            assert caught.value.code == ErrorCode.MCP_SERVER_NOT_EXECUTABLE
            assert hub.starts(name) == 0


async def test_an_unknown_server_is_refused(workspace: Path) -> None:
    async with hub_of(workspace) as hub:
        with pytest.raises(ConfigError) as caught:
            await hub.tools("nope")
        assert caught.value.code == ErrorCode.MCP_SERVER_UNKNOWN


async def test_the_server_environment_is_scrubbed(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARENT_SECRET", "hunter2")
    config = stdio("t", "stdio_server.py", env={"GIVEN": "yes"})
    async with hub_of(workspace, config) as hub:
        specs = await hub.tools("t")
        assert await call(specs, "mcp__t__env", name="PARENT_SECRET") == "<unset>"
        assert await call(specs, "mcp__t__env", name="GIVEN") == "yes"
        assert await call(specs, "mcp__t__env", name="PATH") == os.environ["PATH"]
        home = await call(specs, "mcp__t__env", name="HOME")
        assert home not in (os.environ.get("HOME"), "<unset>")


async def test_aclose_kills_every_server(workspace: Path) -> None:
    hub = hub_of(workspace, stdio("t", "stdio_server.py"), stdio("old", "legacy_server.py"))
    async with hub:
        await hub.tools("t")
        await hub.tools("old")
        pids = [hub.pid("t"), hub.pid("old")]
        fds = [os.pidfd_open(pid) for pid in pids if pid is not None]
    try:
        assert len(fds) == 2
        ready, _, _ = select.select(fds, [], [], 0)
        assert sorted(ready) == sorted(fds)  # every one has exited already
    finally:
        for fd in fds:
            os.close(fd)
    for pid in pids:
        assert pid is not None
        await exited(pid)
