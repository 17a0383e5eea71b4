"""What the model reads of an MCP tool result.

Text content is joined by newlines. Without text, `structuredContent` is sent as compact JSON.
Images, audio and binary resources cannot travel in a text result: each is summarised in one
bracketed line (its kind, MIME type and size), so the model knows it was there. A result the
server marks `isError` becomes a `ToolError` (`MCP_TOOL_ERROR`) carrying the server's text, so
the model can correct the call.
"""

from __future__ import annotations

import base64
import binascii
import json

import mcp_types

from ..errors import ErrorCode, ToolError

__all__ = ["render_result"]


def _size(data: str) -> str:
    try:
        count = len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        count = len(data)
    return f"{count} bytes"


def _block(block: mcp_types.ContentBlock) -> tuple[str, bool]:
    """One content block as text, and whether it was the server's own text."""
    if isinstance(block, mcp_types.TextContent):
        return block.text, True
    if isinstance(block, mcp_types.ImageContent):
        return f"[image: {block.mime_type}, {_size(block.data)}; not shown]", False
    if isinstance(block, mcp_types.AudioContent):
        return f"[audio: {block.mime_type}, {_size(block.data)}; not shown]", False
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text, True
        mime = resource.mime_type or "application/octet-stream"
        return f"[resource {resource.uri}: {mime}, {_size(resource.blob)}; not shown]", False
    link = block
    named = f" ({link.name})" if link.name else ""
    return f"[resource link: {link.uri}{named}]", False


MAX_RESULT_BYTES = 1_000_000
"""The most of a result's text the model gets (as for `bash`): the rest is discarded, said."""


def _capped(text: str) -> str:
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_RESULT_BYTES:
        return text
    kept = data[:MAX_RESULT_BYTES].decode("utf-8", "ignore")
    return f"{kept}\n[the result passed {MAX_RESULT_BYTES} bytes; the rest was discarded]"


def render_result(result: mcp_types.CallToolResult, *, tool: str) -> str:
    """The text of a successful result, at most `MAX_RESULT_BYTES`.

    Raises `ToolError` for a result marked `isError`.
    """
    parts = [_block(block) for block in result.content]
    text = "\n".join(part for part, _ in parts)
    has_text = any(is_text for _, is_text in parts)
    if not has_text and result.structured_content is not None:
        structured = json.dumps(result.structured_content, separators=(",", ":"), default=str)
        text = f"{structured}\n{text}" if text else structured
    text = _capped(text)
    if result.is_error:
        raise ToolError(
            text or f"the MCP tool {tool!r} reported an error without a message",
            code=ErrorCode.MCP_TOOL_ERROR,
        )
    return text
