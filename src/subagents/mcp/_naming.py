"""Model-facing names of MCP tools: `mcp__<server>__<tool>`, Claude Code's convention.

Our tool names must match `^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`. A server's tool name that fits
after the prefix is kept as is. Any other one (a `.` or `/` in it, non-ASCII letters, too long)
is rewritten deterministically: every other character becomes `_`, the result is cut to fit,
and `_` plus the first 8 hex digits of the SHA-256 of the original name is appended, so two
names that differ only in what was replaced still get different model-facing names. The hub
calls the server with the original name.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["MAX_TOOL_NAME", "TOOL_PREFIX", "model_tool_name", "tool_prefix"]

TOOL_PREFIX = "mcp__"
MAX_TOOL_NAME = 64
_KEPT = re.compile(r"^[A-Za-z0-9_-]+$")
_REPLACED = re.compile(r"[^A-Za-z0-9_-]")
_HASH = 8


def tool_prefix(server: str) -> str:
    """What every model-facing name of `server`'s tools starts with."""
    return f"{TOOL_PREFIX}{server}__"


def model_tool_name(server: str, tool: str) -> str:
    """The model-facing name of `server`'s tool `tool` (see the module docstring)."""
    prefix = tool_prefix(server)
    if _KEPT.match(tool) and len(prefix) + len(tool) <= MAX_TOOL_NAME:
        return prefix + tool
    digest = hashlib.sha256(tool.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH]
    room = MAX_TOOL_NAME - len(prefix) - _HASH - 1
    return f"{prefix}{_REPLACED.sub('_', tool)[:room]}_{digest}"
