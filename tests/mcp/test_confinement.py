from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from mcp_support import SERVERS, FakeContext, exited, stdio

from subagents.mcp import McpHub
from subagents.policy import SandboxPolicy, confinement, parse_mode


async def require_sandbox() -> None:
    verdict = await asyncio.to_thread(confinement)
    if verdict.backend is None:
        pytest.skip(f"no sandbox backend works on this machine: {verdict.detail}")


async def test_workspace_write_confines_the_server_like_bash(
    workspace: Path, tmp_path: Path
) -> None:
    await require_sandbox()
    outside = tmp_path / "outside"
    outside.mkdir()
    policy = SandboxPolicy(mode="workspace-write", workspace_root=str(workspace))
    servers = {"t": stdio("t", "stdio_server.py")}
    async with McpHub(servers, policy=policy, readable=[str(SERVERS)]) as hub:
        write = next(s for s in await hub.tools("t") if s.name == "mcp__t__write_file")
        inside = await write.handler(
            {"path": str(workspace / "in.txt"), "text": "ok"},
            FakeContext(),
        )
        escaped = await write.handler(
            {"path": str(outside / "out.txt"), "text": "leak"},
            FakeContext(),
        )
    assert inside == "written"
    assert (workspace / "in.txt").read_text() == "ok"
    assert isinstance(escaped, str)
    assert escaped.startswith("refused")
    assert not (outside / "out.txt").exists()


async def test_read_only_refuses_writes_even_in_the_workspace(workspace: Path) -> None:
    await require_sandbox()
    policy = SandboxPolicy(mode="read-only", workspace_root=str(workspace))
    servers = {"t": stdio("t", "stdio_server.py")}
    async with McpHub(servers, policy=policy, readable=[str(SERVERS)]) as hub:
        write = next(s for s in await hub.tools("t") if s.name == "mcp__t__write_file")
        result = await write.handler(
            {"path": str(workspace / "in.txt"), "text": "no"},
            FakeContext(),
        )
    assert isinstance(result, str)
    assert result.startswith("refused")
    assert not (workspace / "in.txt").exists()


@pytest.mark.parametrize("mode", ["danger-full-access", "workspace-write"])
async def test_no_server_survives_a_sigkill_of_the_process_holding_the_hub(
    mode: str, workspace: Path
) -> None:
    if mode != "danger-full-access":
        await require_sandbox()
    parse_mode(mode)
    holder = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SERVERS / "holder.py"),
        mode,
        str(workspace),
        stdout=asyncio.subprocess.PIPE,
    )
    assert holder.stdout is not None
    line = (await holder.stdout.readline()).decode()
    assert line.startswith("PID "), line
    server = int(line.split()[1])
    os.kill(holder.pid, signal.SIGKILL)
    await holder.wait()
    await exited(server)  # the pidfd says it exited (it may linger unreaped as a zombie)
