"""The tools of the scripted demo: the motto and a deterministic text statistics helper."""

from __future__ import annotations

from ...tools import ToolSpec, tool

__all__ = ["MOTTO", "TOOLS", "project_motto", "text_stats"]

MOTTO = "Never orphan a child, never lose a message, show the whole tree live."


@tool(parallel_safe=True)
async def text_stats(text: str) -> dict[str, object]:
    """Count the words of a text and find its longest word.

    Args:
        text: The text to measure.
    """
    words = [w.strip(".,;:!?") for w in text.split()]
    longest = max(words, key=len) if words else ""
    return {"words": len(words), "longest": longest, "characters": len(text)}


@tool(parallel_safe=True)
async def project_motto() -> str:
    """Return the project's motto."""
    return MOTTO


TOOLS: list[ToolSpec] = [project_motto, text_stats]
