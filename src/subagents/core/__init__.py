"""Core: the agent loop, the inbox, live events and the `Runtime` composition root."""

from ._agent import (
    CONTEXT_SOURCE as CONTEXT_SOURCE,
    Agent as Agent,
    AgentConfig as AgentConfig,
    CancelCause as CancelCause,
    check_max_tokens as check_max_tokens,
)
from ._approvals import (
    ApprovalDesk as ApprovalDesk,
    ApprovalPolicy as ApprovalPolicy,
    ApprovalWaiting as ApprovalWaiting,
    check_reason as check_reason,
    denied_outcome as denied_outcome,
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
    root_row as root_row,
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
from ._status import Status as Status, live_status as live_status, stored_status as stored_status
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
    "iso",
    "lease_alive",
    "list_sessions",
    "live_status",
    "pick_request",
    "replay_inbox",
    "root_row",
    "run_result",
    "stored_status",
    "stream_while",
    "total_usage",
    "usage_json",
    "wake_holder",
]
