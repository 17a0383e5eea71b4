"""subagents: a runtime for LLM agents that delegate work to named child agents."""

from importlib.metadata import version as _version

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

__version__ = _version("subagents")

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
