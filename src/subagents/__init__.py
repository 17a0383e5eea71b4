"""subagents: a runtime for LLM agents that delegate work to named child agents.

The names below are imported on first use (PEP 562): `import subagents` (and so every CLI
command, which imports `subagents.cli`) must not pay for the runtime, the workflow engine, the
model SDKs, jsonschema or `importlib.metadata` before it needs them. `from subagents import
Runtime` imports exactly what `Runtime` needs.
"""

from typing import TYPE_CHECKING, Any

from ._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ._clock import Clock as Clock, SystemClock as SystemClock
    from .core import (
        Agent as Agent,
        AgentConfig as AgentConfig,
        AgentCreated as AgentCreated,
        AgentDisposed as AgentDisposed,
        AgentFailed as AgentFailed,
        AgentReasoningDelta as AgentReasoningDelta,
        AgentStatusChanged as AgentStatusChanged,
        AgentTextDelta as AgentTextDelta,
        Budget as Budget,
        LiveEvent as LiveEvent,
        RunFinished as RunFinished,
        RunResult as RunResult,
        SessionEventPosted as SessionEventPosted,
        StreamEvent as StreamEvent,
    )
    from .definitions import AgentDefinition as AgentDefinition
    from .delegation import (
        DelegationOptions as DelegationOptions,
        McpOptions as McpOptions,
        SubagentEnded as SubagentEnded,
        SubagentStarted as SubagentStarted,
    )
    from .errors import (
        ConfigError as ConfigError,
        ErrorCode as ErrorCode,
        ModelError as ModelError,
        RunError as RunError,
        StoreError as StoreError,
        SubagentsError as SubagentsError,
        ToolError as ToolError,
        UsageError as UsageError,
    )
    from .messages import (
        AssistantMessage as AssistantMessage,
        Message as Message,
        ToolResultMessage as ToolResultMessage,
        Usage as Usage,
        UserMessage as UserMessage,
    )
    from .models import Model as Model, ModelRequest as ModelRequest, open_model as open_model
    from .sessions import EventRecord as EventRecord, EventStore as EventStore
    from .tools import (
        ToolContext as ToolContext,
        ToolResult as ToolResult,
        ToolSpec as ToolSpec,
        tool as tool,
    )
    from .workflows import Runtime as Runtime

    __version__: str

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentCreated",
    "AgentDefinition",
    "AgentDisposed",
    "AgentFailed",
    "AgentReasoningDelta",
    "AgentStatusChanged",
    "AgentTextDelta",
    "AssistantMessage",
    "Budget",
    "Clock",
    "ConfigError",
    "DelegationOptions",
    "ErrorCode",
    "EventRecord",
    "EventStore",
    "LiveEvent",
    "McpOptions",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "RunError",
    "RunFinished",
    "RunResult",
    "Runtime",
    "SessionEventPosted",
    "StoreError",
    "StreamEvent",
    "SubagentEnded",
    "SubagentStarted",
    "SubagentsError",
    "SystemClock",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UsageError",
    "UserMessage",
    "__version__",
    "open_model",
    "tool",
]

# The module of each name (the imports above say the same for pyright);
# tests/test_conventions.py checks that every name of `__all__` resolves.
_SOURCES = {
    "._clock": ("Clock", "SystemClock"),
    ".core": (
        "Agent",
        "AgentConfig",
        "AgentCreated",
        "AgentDisposed",
        "AgentFailed",
        "AgentReasoningDelta",
        "AgentStatusChanged",
        "AgentTextDelta",
        "Budget",
        "LiveEvent",
        "RunFinished",
        "RunResult",
        "SessionEventPosted",
        "StreamEvent",
    ),
    ".definitions": ("AgentDefinition",),
    ".delegation": ("DelegationOptions", "McpOptions", "SubagentEnded", "SubagentStarted"),
    ".errors": (
        "ConfigError",
        "ErrorCode",
        "ModelError",
        "RunError",
        "StoreError",
        "SubagentsError",
        "ToolError",
        "UsageError",
    ),
    ".messages": ("AssistantMessage", "Message", "ToolResultMessage", "Usage", "UserMessage"),
    ".models": ("Model", "ModelRequest", "open_model"),
    ".sessions": ("EventRecord", "EventStore"),
    ".tools": ("ToolContext", "ToolResult", "ToolSpec", "tool"),
    ".workflows": ("Runtime",),
}
_names, __dir__ = _lazy_names(__name__, globals(), _SOURCES)


def __getattr__(name: str) -> Any:
    if name == "__version__":
        # importlib.metadata costs tens of milliseconds: only a caller that reads it pays.
        from importlib.metadata import version

        value: Any = version("subagents")
        globals()[name] = value
        return value
    return _names(name)
