"""Core: the agent loop, the inbox, live events and the `Runtime` composition root."""

from ._agent import Agent as Agent, AgentConfig as AgentConfig, CancelCause as CancelCause
from ._budget import Budget as Budget, Ledger as Ledger
from ._bus import (
    AgentCreated as AgentCreated,
    AgentDisposed as AgentDisposed,
    AgentFailed as AgentFailed,
    AgentStatusChanged as AgentStatusChanged,
    EventBus as EventBus,
    LiveEvent as LiveEvent,
    SessionEventPosted as SessionEventPosted,
)
from ._inbox import replay_inbox as replay_inbox
from ._runtime import (
    AgentRuntime as AgentRuntime,
    LeaseHeld as LeaseHeld,
    RunResult as RunResult,
    WorkTracker as WorkTracker,
    default_store_path as default_store_path,
    run_result as run_result,
)

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentCreated",
    "AgentDisposed",
    "AgentFailed",
    "AgentRuntime",
    "AgentStatusChanged",
    "Budget",
    "CancelCause",
    "EventBus",
    "LeaseHeld",
    "Ledger",
    "LiveEvent",
    "RunResult",
    "SessionEventPosted",
    "WorkTracker",
    "default_store_path",
    "replay_inbox",
    "run_result",
]
