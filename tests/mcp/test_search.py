from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_support import SERVERS, FakeContext, stdio

from subagents.errors import ConfigError, ErrorCode
from subagents.mcp import (
    DEFERRED_TOOL_THRESHOLD,
    MCP_SEARCH_TOOL,
    McpHub,
    offer_tools,
    parse_servers,
)
from subagents.policy import SandboxPolicy


def hub_for(workspace: Path) -> McpHub:
    servers = {
        "big": stdio("big", "stdio_server.py", "many"),
        "old": stdio("old", "legacy_server.py"),
        "broken": stdio("broken", "garbage_server.py"),
        "unused": stdio("unused", "stdio_server.py"),
        **parse_servers({"missing": {"command": "no-such-mcp-server"}}, source="test"),
    }
    policy = SandboxPolicy(mode="danger-full-access", workspace_root=str(workspace))
    return McpHub(servers, policy=policy, readable=[str(SERVERS)])


async def test_big_servers_are_deferred_behind_search(workspace: Path) -> None:
    async with hub_for(workspace) as hub:
        offer = await offer_tools(hub, ["big", "old", "broken", "missing"])
        assert hub.not_started() == ("broken", "unused", "missing")
        assert [s.name for s in offer.listed] == [f"mcp__old__tool{i}" for i in range(5)]
        assert len(offer.deferred) > DEFERRED_TOOL_THRESHOLD
        assert all(s.name.startswith("mcp__big__") for s in offer.deferred)
        problems = {(p.server, p.code) for p in offer.problems}
        assert problems == {
            ("big", ErrorCode.MCP_SCHEMA_INVALID),
            ("broken", ErrorCode.MCP_PROTOCOL),
            ("missing", ErrorCode.MCP_SERVER_NOT_EXECUTABLE),
        }
        assert all("\n" not in p.message for p in offer.problems)

        search = offer.search
        assert search is not None
        assert search.name == MCP_SEARCH_TOOL
        ctx = FakeContext()
        raw = await search.handler({"query": "create an invoice", "limit": 3}, ctx)
        assert isinstance(raw, str)
        hits = json.loads(raw)
        assert hits[0]["name"] == "mcp__big__create_invoice"
        assert hits[0]["description"] == "Create a invoice item."
        assert hits[0]["input_schema"]["type"] == "object"
        assert len(hits) <= 3

        deferred = {s.name: s for s in offer.callable}
        result = await deferred[hits[0]["name"]].handler({}, ctx)
        assert result == "create invoice done"

        nothing = await search.handler({"query": "zebra"}, ctx)
        assert isinstance(nothing, str)
        assert nothing.startswith("No MCP tool matches")


async def test_small_servers_need_no_search(workspace: Path) -> None:
    async with hub_for(workspace) as hub:
        offer = await offer_tools(hub, ["old"])
        assert offer.search is None
        assert offer.deferred == ()
        assert offer.problems == ()


async def test_an_unknown_server_fails_before_anything_starts(workspace: Path) -> None:
    async with hub_for(workspace) as hub:
        with pytest.raises(ConfigError) as caught:
            await offer_tools(hub, ["old", "nope"])
        assert caught.value.code == ErrorCode.MCP_SERVER_UNKNOWN
        assert hub.not_started() == hub.names
