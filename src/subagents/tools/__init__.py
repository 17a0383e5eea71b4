"""Tools: definitions, the `@tool` decorator, registries and the execution pipeline.

Each name is imported from its module on first use (PEP 562), so that a CLI command pays only
for the modules it touches (startup time; see tests/cli/test_startup.py).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
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
        raised_outcome as raised_outcome,
        returned_outcome as returned_outcome,
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
    "raised_outcome",
    "returned_outcome",
    "run_checked",
    "tool",
    "validate_arguments",
]

# The module of each name (the imports above say the same for pyright).
_SOURCES = {
    "._definition": (
        "Escalation",
        "EscalationCheck",
        "ToolContext",
        "ToolHandler",
        "ToolResult",
        "ToolSpec",
        "tool",
    ),
    "._pipeline": (
        "CheckedCall",
        "ToolOutcome",
        "check_call",
        "execute_tool",
        "parse_arguments",
        "raised_outcome",
        "returned_outcome",
        "run_checked",
        "validate_arguments",
    ),
    "._registry": ("Guard", "ToolRegistry", "ToolScope"),
}
__getattr__, __dir__ = lazy_names(__name__, globals(), _SOURCES)
