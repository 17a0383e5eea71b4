"""Tools: definitions, the `@tool` decorator, registries and the execution pipeline."""

from ._definition import (
    ToolContext as ToolContext,
    ToolHandler as ToolHandler,
    ToolResult as ToolResult,
    ToolSpec as ToolSpec,
    tool as tool,
)
from ._pipeline import (
    ToolOutcome as ToolOutcome,
    execute_tool as execute_tool,
    parse_arguments as parse_arguments,
    validate_arguments as validate_arguments,
)
from ._registry import Guard as Guard, ToolRegistry as ToolRegistry, ToolScope as ToolScope

__all__ = [
    "Guard",
    "ToolContext",
    "ToolHandler",
    "ToolOutcome",
    "ToolRegistry",
    "ToolResult",
    "ToolScope",
    "ToolSpec",
    "execute_tool",
    "parse_arguments",
    "tool",
    "validate_arguments",
]
