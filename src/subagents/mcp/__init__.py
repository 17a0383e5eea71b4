"""MCP servers' tools for agents: configuration, a shared lazy hub, and search (docs/mcp.md).

Servers are declared in Claude Code's `.mcp.json` format (`parse_mcp_json`, `read_mcp_json`,
`parse_servers`). An `McpHub` per runtime and tenant starts each server on first use, shares
its one session among agents, restarts it after a crash, confines stdio servers like `bash`
and kills them all on close. Its tools become `ToolSpec`s named `mcp__<server>__<tool>`;
`offer_tools` defers the tools of big servers behind one `mcp_search` tool.

Each name is imported from its module on first use (PEP 562), so that a CLI command pays only
for the modules it touches (startup time; see tests/cli/test_startup.py).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._config import (
        MAX_MCP_JSON_BYTES as MAX_MCP_JSON_BYTES,
        SERVER_NAME as SERVER_NAME,
        McpServerConfig as McpServerConfig,
        check_executable as check_executable,
        parse_mcp_json as parse_mcp_json,
        parse_servers as parse_servers,
        read_mcp_json as read_mcp_json,
    )
    from ._hub import (
        DEFAULT_CALL_TIMEOUT as DEFAULT_CALL_TIMEOUT,
        DEFAULT_CONNECT_TIMEOUT as DEFAULT_CONNECT_TIMEOUT,
        MCP_SERVER_LIMITS as MCP_SERVER_LIMITS,
        McpHub as McpHub,
        McpProblem as McpProblem,
    )
    from ._naming import model_tool_name as model_tool_name
    from ._search import (
        DEFERRED_TOOL_THRESHOLD as DEFERRED_TOOL_THRESHOLD,
        MCP_SEARCH_TOOL as MCP_SEARCH_TOOL,
        McpOffer as McpOffer,
        offer_tools as offer_tools,
        search_tools as search_tools,
    )

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFERRED_TOOL_THRESHOLD",
    "MAX_MCP_JSON_BYTES",
    "MCP_SEARCH_TOOL",
    "MCP_SERVER_LIMITS",
    "McpHub",
    "McpOffer",
    "McpProblem",
    "McpServerConfig",
    "SERVER_NAME",
    "check_executable",
    "model_tool_name",
    "offer_tools",
    "parse_mcp_json",
    "parse_servers",
    "read_mcp_json",
    "search_tools",
]

# The module of each name (the imports above say the same for pyright).
_SOURCES = {
    "._config": (
        "MAX_MCP_JSON_BYTES",
        "SERVER_NAME",
        "McpServerConfig",
        "check_executable",
        "parse_mcp_json",
        "parse_servers",
        "read_mcp_json",
    ),
    "._hub": (
        "DEFAULT_CALL_TIMEOUT",
        "DEFAULT_CONNECT_TIMEOUT",
        "MCP_SERVER_LIMITS",
        "McpHub",
        "McpProblem",
    ),
    "._naming": ("model_tool_name",),
    "._search": (
        "DEFERRED_TOOL_THRESHOLD",
        "MCP_SEARCH_TOOL",
        "McpOffer",
        "offer_tools",
        "search_tools",
    ),
}
__getattr__, __dir__ = lazy_names(__name__, globals(), _SOURCES)
