"""Core: the agent loop, the inbox, live events and the `Runtime` composition root.

Each name is imported from its module on first use (PEP 562), so that a CLI command pays only
for the modules it touches (startup time; see tests/cli/test_startup.py).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._agent import (
        CONTEXT_SOURCE as CONTEXT_SOURCE,
        Agent as Agent,
        AgentConfig as AgentConfig,
        CancelCause as CancelCause,
        check_max_tokens as check_max_tokens,
    )
    from ._approvals import (
        SANDBOX_ASK as SANDBOX_ASK,
        ApprovalDesk as ApprovalDesk,
        ApprovalPolicy as ApprovalPolicy,
        ApprovalWaiting as ApprovalWaiting,
        check_reason as check_reason,
        denied_outcome as denied_outcome,
        is_text as is_text,
        pick_request as pick_request,
    )
    from ._budget import Budget as Budget, Ledger as Ledger
    from ._bus import (
        AgentCreated as AgentCreated,
        AgentDisposed as AgentDisposed,
        AgentFailed as AgentFailed,
        AgentReasoningDelta as AgentReasoningDelta,
        AgentStatusChanged as AgentStatusChanged,
        AgentTextDelta as AgentTextDelta,
        EventBus as EventBus,
        LiveEvent as LiveEvent,
        SessionEventPosted as SessionEventPosted,
    )
    from ._control import (
        ControlServer as ControlServer,
        wake_holder as wake_holder,
    )
    from ._inbox import Inbox as Inbox, replay_inbox as replay_inbox
    from ._inspect import (
        SessionRow as SessionRow,
        TreeRow as TreeRow,
        event_json as event_json,
        is_held as is_held,
        iso as iso,
        lease_alive as lease_alive,
        list_sessions as list_sessions,
        total_usage as total_usage,
        usage_json as usage_json,
    )
    from ._runtime import (
        AgentRuntime as AgentRuntime,
        RunResult as RunResult,
        WorkTracker as WorkTracker,
        default_store_path as default_store_path,
        run_result as run_result,
    )
    from ._status import (
        Status as Status,
        live_status as live_status,
        stored_status as stored_status,
    )
    from ._stream import (
        PostedRecords as PostedRecords,
        RunFinished as RunFinished,
        StreamEvent as StreamEvent,
        stream_while as stream_while,
    )

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentCreated",
    "AgentDisposed",
    "AgentFailed",
    "AgentReasoningDelta",
    "AgentRuntime",
    "AgentStatusChanged",
    "AgentTextDelta",
    "ApprovalDesk",
    "ApprovalPolicy",
    "ApprovalWaiting",
    "Budget",
    "CONTEXT_SOURCE",
    "CancelCause",
    "ControlServer",
    "EventBus",
    "Inbox",
    "Ledger",
    "LiveEvent",
    "PostedRecords",
    "RunFinished",
    "RunResult",
    "SANDBOX_ASK",
    "SessionEventPosted",
    "SessionRow",
    "Status",
    "StreamEvent",
    "TreeRow",
    "WorkTracker",
    "check_max_tokens",
    "check_reason",
    "default_store_path",
    "denied_outcome",
    "event_json",
    "is_held",
    "is_text",
    "iso",
    "lease_alive",
    "list_sessions",
    "live_status",
    "pick_request",
    "replay_inbox",
    "run_result",
    "stored_status",
    "stream_while",
    "total_usage",
    "usage_json",
    "wake_holder",
]

# The module of each name (the imports above say the same for pyright).
_SOURCES = {
    "._agent": ("CONTEXT_SOURCE", "Agent", "AgentConfig", "CancelCause", "check_max_tokens"),
    "._approvals": (
        "SANDBOX_ASK",
        "ApprovalDesk",
        "ApprovalPolicy",
        "ApprovalWaiting",
        "check_reason",
        "denied_outcome",
        "is_text",
        "pick_request",
    ),
    "._budget": ("Budget", "Ledger"),
    "._bus": (
        "AgentCreated",
        "AgentDisposed",
        "AgentFailed",
        "AgentReasoningDelta",
        "AgentStatusChanged",
        "AgentTextDelta",
        "EventBus",
        "LiveEvent",
        "SessionEventPosted",
    ),
    "._control": ("ControlServer", "wake_holder"),
    "._inbox": ("Inbox", "replay_inbox"),
    "._inspect": (
        "SessionRow",
        "TreeRow",
        "event_json",
        "is_held",
        "iso",
        "lease_alive",
        "list_sessions",
        "total_usage",
        "usage_json",
    ),
    "._runtime": ("AgentRuntime", "RunResult", "WorkTracker", "default_store_path", "run_result"),
    "._status": ("Status", "live_status", "stored_status"),
    "._stream": ("PostedRecords", "RunFinished", "StreamEvent", "stream_while"),
}
__getattr__, __dir__ = lazy_names(__name__, globals(), _SOURCES)
