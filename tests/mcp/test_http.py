from __future__ import annotations

import socket
from pathlib import Path

import pytest
from mcp_support import FakeContext

from subagents.errors import ErrorCode, ToolError
from subagents.mcp import McpHub, parse_servers
from subagents.policy import SandboxPolicy


def hub_for(workspace: Path, servers: object) -> McpHub:
    configs = parse_servers(servers, source="test", environ={"TOKEN": "s3cret"})
    policy = SandboxPolicy(mode="workspace-write", workspace_root=str(workspace))
    return McpHub(configs, policy=policy, connect_timeout=20)


async def test_http_server_lists_and_calls_with_headers(workspace: Path, http_server: int) -> None:
    url = f"http://127.0.0.1:{http_server}/mcp"
    servers = {"web": {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${TOKEN}"}}}
    async with hub_for(workspace, servers) as hub:
        assert hub.not_started() == ("web",)
        specs = {s.name: s for s in await hub.tools("web")}
        assert set(specs) == {"mcp__web__echo", "mcp__web__whoami"}
        ctx = FakeContext()
        echo = await specs["mcp__web__echo"].handler({"text": "over http"}, ctx)
        assert echo == "over http"
        whoami = await specs["mcp__web__whoami"].handler({}, ctx)
        assert whoami == "Bearer s3cret"
        assert hub.pid("web") is None


async def test_a_url_that_is_not_an_mcp_endpoint_is_a_protocol_error(
    workspace: Path, http_server: int
) -> None:
    servers = {"web": {"type": "http", "url": f"http://127.0.0.1:{http_server}/nothing?key=k"}}
    async with hub_for(workspace, servers) as hub:
        with pytest.raises(ToolError) as caught:
            await hub.tools("web")
    assert caught.value.code == ErrorCode.MCP_PROTOCOL
    assert "is not an MCP endpoint" in caught.value.message
    assert "key=k" not in caught.value.message
    assert "\n" not in caught.value.message


async def test_a_closed_port_is_a_server_failure(workspace: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # the port is free again: nothing listens on it
    servers = {"web": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}}
    async with hub_for(workspace, servers) as hub:
        with pytest.raises(ToolError) as caught:
            await hub.tools("web")
    assert caught.value.code == ErrorCode.MCP_SERVER_FAILED
    assert "cannot connect" in caught.value.message
