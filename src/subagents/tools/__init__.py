"""Tools: definitions, the `@tool` decorator, registries and the execution pipeline."""

from ._definition import (
    Escalation as Escalation,
    EscalationCheck as EscalationCheck,
    ToolContext as ToolContext,
    ToolHandler as ToolHandler,
    ToolResult as ToolResult,
    ToolSpec as ToolSpec,
    tool as tool,
)
from ._pipeline import (
    CheckedCall as CheckedCall,
    ToolOutcome as ToolOutcome,
    check_call as check_call,
    execute_tool as execute_tool,
    parse_arguments as parse_arguments,
    run_checked as run_checked,
    validate_arguments as validate_arguments,
)
from ._registry import Guard as Guard, ToolRegistry as ToolRegistry, ToolScope as ToolScope

__all__ = [
    "CheckedCall",
    "Escalation",
    "EscalationCheck",
    "Guard",
    "ToolContext",
    "ToolHandler",
    "ToolOutcome",
    "ToolRegistry",
    "ToolResult",
    "ToolScope",
    "ToolSpec",
    "check_call",
    "execute_tool",
    "parse_arguments",
    "run_checked",
    "tool",
    "validate_arguments",
]
