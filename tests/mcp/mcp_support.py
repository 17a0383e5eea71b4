"""Helpers of the MCP tests: configs for the test servers, a call context, process waits."""

from __future__ import annotations

import sys
from pathlib import Path

from process_support import exited as exited, processes_with as processes_with

from subagents.mcp import McpServerConfig, parse_servers

SERVERS = Path(__file__).parent / "servers"


def stdio(name: str, script: str, *args: str, env: dict[str, str] | None = None) -> McpServerConfig:
    """A config running `tests/mcp/servers/<script>` with this venv's Python."""
    raw: dict[str, object] = {"command": sys.executable, "args": [str(SERVERS / script), *args]}
    if env is not None:
        raw["env"] = env
    return parse_servers({name: raw}, source="test")[name]


class FakeContext:
    """The call context a tool handler receives (the agent loop provides the real one)."""

    call_id = "call-1"
    tool_name = "mcp_tool"
    agent_id = "agent-1"
    agent_name = "main"
    grant = None

    def conclude_turn(self) -> None:
        pass
