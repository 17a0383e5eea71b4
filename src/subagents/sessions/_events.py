"""Durable event kinds: one tagged union, one codec.

Every event carries `kind` (the spec's slash name, frozen once written) and `v` (its payload
version). Readers accept every version listed in `SUPPORTED_VERSIONS` and refuse the rest.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, final

import msgspec

from ..errors import ErrorCode, StoreError
from ..ids import SessionId
from ..messages import (
    AssistantMessage,
    JsonObject,
    JsonValue,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = [
    "ApprovalDecided",
    "ApprovalPolicySet",
    "ApprovalRequested",
    "AssistantMessageEvent",
    "EVENT_KINDS",
    "EventRecord",
    "HEADER_VERSION",
    "InboxSpliced",
    "InboxTarget",
    "McpScopeSet",
    "ModelErrorEvent",
    "RequestHeader",
    "SandboxModeSet",
    "SessionEndSeed",
    "SessionEvent",
    "SessionHeader",
    "StepEnd",
    "StepStart",
    "StopReason",
    "SubagentCatalog",
    "SubagentDescriptor",
    "SubagentSettled",
    "TeamTaskClaimed",
    "TeamTaskCreated",
    "TeamTaskUpdated",
    "ToolCallEvent",
    "ToolResultEvent",
    "ToolWorkflowAgentEnd",
    "ToolWorkflowAgentStart",
    "ToolWorkflowRunEnd",
    "ToolWorkflowRunStart",
    "TurnEnd",
    "TurnStart",
    "UserMessageEvent",
    "decode_event",
    "decode_header",
    "encode_event",
    "encode_header",
]

StopReason: TypeAlias = Literal[
    "completed", "aborted", "error", "max-tokens", "refusal", "interrupted", "budget"
]
"""How a turn ended; `interrupted` is written only by crash repair, `budget` (turn/end v2) when
a usage budget was spent before a model call."""

InboxTarget: TypeAlias = Literal["next-turn", "next-step"]

HEADER_VERSION = 1
"""v1: id, tenant, created_at, cwd, parent, root, origin, depth, model_spec, seed_length."""


class SessionHeader(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Immutable facts about a session, stored beside its log."""

    id: SessionId
    tenant: str
    created_at: float
    cwd: str
    parent: SessionId | None = None
    root: SessionId | None = None
    """The root session of the tree; None means this session is a root."""
    origin: Literal["user", "subagent"] = "user"
    depth: int = 0
    model_spec: str | None = None
    seed_length: int = 0
    """How many leading events were inherited from the parent (a fork's seed)."""
    v: int = HEADER_VERSION

    @property
    def root_id(self) -> SessionId:
        return self.root if self.root is not None else self.id


# gc=False: events are immutable data that never hold a reference back to anything that holds
# them, so the collector need not track them; a tree of thousands of children keeps hundreds of
# thousands in memory, and tracking them made every collection scan them all.
class _Event(
    msgspec.Struct, frozen=True, tag_field="kind", kw_only=True, omit_defaults=True, gc=False
):
    v: int = 1


class TurnStart(_Event, frozen=True, tag="turn/start"):
    """A turn began; written before its first step.

    `turn` numbers the agent's turns from 1 and continues across resumes. Every `turn/start`
    is closed by a `turn/end` (by crash repair when the process died in between).
    """

    turn: int


class TurnEnd(_Event, frozen=True, tag="turn/end"):
    """A turn ended, and why (`reason`); written after its last step closed.

    v2 adds the `budget` reason. `error_code` and `error_message` are set for `error` (the
    failure that ended the turn) and `budget` (`BUDGET_EXHAUSTED` and what was spent);
    `retryable` (added later, absent from older logs) says whether an `error` is transient.
    """

    turn: int
    reason: StopReason
    cause: str | None = None
    """For `aborted`: who cancelled (`user`, `parent`, `disposed`, ...)."""
    error_code: str | None = None
    error_message: str | None = None
    retryable: bool | None = None
    """For `error`: whether trying again may succeed (a transient failure), as the error
    that ended the turn said; None when it did not say."""
    command: int | None = None
    """For `aborted`: the control command (another process's `interrupt`) that stopped it,
    so a holder that dies before marking the command done does not run it again."""


class StepStart(_Event, frozen=True, tag="step/start"):
    """A step began: one model request and the tool calls it asks for (docs/design.md §5.2).

    Written before the step's claimed input (`user/message`) and its model call; `step`
    counts from 1 within the turn.
    """

    turn: int
    step: int


class StepEnd(_Event, frozen=True, tag="step/end"):
    """A step closed; in a step that ran to its end, its response and tool results precede it.

    Also written when a cancellation or a spent budget cuts the step, and by crash repair.
    """

    turn: int
    step: int


class UserMessageEvent(_Event, frozen=True, tag="user/message"):
    """A user message entered the transcript, taken from the inbox at the start of a step.

    It is also the claim (docs/design.md §5.1): replaying the inbox drops a message once its
    `user/message` is in the log. `turn` is the turn it entered.
    """

    message: UserMessage
    turn: int | None = None


class AssistantMessageEvent(_Event, frozen=True, tag="assistant/message"):
    """A model response, written when its stream ended, before any of its tool calls runs.

    Attributes:
        finish: The stream's finish reason (`stop`, `tool-calls`, `max-tokens`, `refusal`).
        usage: The tokens the model reported for this call; None when it reported none.
        interrupted: The call was cancelled mid-stream: `message` is the visible prefix that
            had streamed, without tool calls. A cut call with no visible text is not recorded.
    """

    turn: int
    step: int
    message: AssistantMessage
    finish: str = "stop"
    usage: Usage | None = None
    interrupted: bool = False


class ModelErrorEvent(_Event, frozen=True, tag="model/error"):
    """A model call that failed; it still consumed a scripted response."""

    turn: int
    step: int
    code: str
    message: str
    retryable: bool | None = None
    """Whether the adapter judged the failure transient (None: it did not say)."""


class ToolCallEvent(_Event, frozen=True, tag="tool/call"):
    """A tool call was dispatched: written before its handler starts.

    So crash repair can tell a call that never started from one whose outcome is unknown
    (docs/design.md §12). A tool marked `checkpoint` starts only once this record is durable.
    A call a cancellation kept from starting gets this record with its `ABORTED_BEFORE_DISPATCH`
    result. `arguments` is the raw JSON string the model wrote.
    """

    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


class ToolResultEvent(_Event, frozen=True, tag="tool/result"):
    """A tool call's result, committed in the order of the calls in the response.

    Also written for calls a cancellation cut (`ABORTED`, `ABORTED_BEFORE_DISPATCH`) and by
    crash repair (`TOOL_NOT_STARTED`, `TOOL_OUTCOME_UNKNOWN`).

    Attributes:
        code: The error code of a failed call; None when it succeeded.
        concludes_turn: The tool ended the turn with this result (`conclude_turn()`), so the
            model is not called again for it.
    """

    turn: int
    step: int
    message: ToolResultMessage
    code: str | None = None
    concludes_turn: bool = False


class InboxSpliced(_Event, frozen=True, tag="agent/inbox/spliced"):
    """A change to one pending inbox list: `removed` items at `start` replaced by `inserted`.

    The inbox is a projection of these (docs/design.md §5.1). Written when a message is
    queued (also into a stored session no process has loaded), when pending messages are
    cancelled (`outcome="canceled"`), and by crash repair, which queues a turn's retry first in
    `next-turn`. Taking a message out to run it writes no splice: its `user/message` does that.
    """

    target: InboxTarget
    start: int
    removed: int = 0
    inserted: tuple[UserMessage, ...] = ()
    outcome: Literal["canceled"] | None = None


class RequestHeader(_Event, frozen=True, tag="request/header"):
    """What the model is called with: provider, model, system prompt and tool names.

    Written before a step's model call when these differ from the last header this agent
    logged. `reason`: `initial` (the first in the session's log), `resume` (the first request of
    an agent loaded from a log that already has a header) or `change` (one of them changed).
    """

    reason: Literal["initial", "resume", "change"]
    provider: str
    model: str
    system: str
    tools: tuple[str, ...]


class SessionEndSeed(_Event, frozen=True, tag="session/end-seed"):
    """The end of a fork's seed: the events before it are the parent's, copied at the fork.

    Written once, right after the seed, in the forked child's first append;
    `SessionHeader.seed_length` counts the seed and this marker.
    """


@final  # read by an exact type test (`delegation.catalog_entries`)
class SubagentCatalog(_Event, frozen=True, kw_only=True, tag="subagent/catalog"):
    """The creator's record of a child (in the creator's log); v3 carries the child's name."""

    v: int = 3
    child_id: str
    name: str | None = None
    mode: Literal["one-shot", "continuable"] = "one-shot"
    provider: str = ""
    label: str = ""
    created_at: float = 0.0
    call_id: str | None = None
    """The creator's tool call that started a one-shot child (its answer goes back there)."""


class SubagentDescriptor(_Event, frozen=True, kw_only=True, tag="subagent/descriptor"):
    """A child's identity in its own log: how it was created and how to resume it."""

    v: int = 3
    mode: Literal["one-shot", "continuable"] = "one-shot"
    provider: str = ""
    label: str = ""
    agent_model: str | None = None
    definition: str | None = None
    """The agent definition it runs, by name (for display; the fields below are what count)."""
    instructions: str | None = None
    """Its own instructions as they were when it started: the definition's body, else what
    it inherited from the agent that started it."""
    tools_allow: tuple[str, ...] | None = None
    tools_deny: tuple[str, ...] = ()
    depth_cap: int | None = None
    """Its resolved scope: a resume applies exactly this, never re-reading definitions."""
    output_schema: JsonObject | None = None
    """The schema its answers must match (through `structured_output`), if any."""
    max_tokens: int | None = None
    """Its cap on each model response as resolved at start (its definition's, else the one
    it inherited), so a resume sends the same."""
    budget_tokens: int | None = None
    budget_model_calls: int | None = None
    budget_children: int | None = None
    """Its budget as resolved at start (already narrowed to what its parent had left)."""
    approval: tuple[str, ...] = ()
    approval_timeout: float | None = None
    """The gates its definition adds to its parent's (its own `approval/policy` records the
    joined result, which is what a resume reads)."""
    approver: Literal["person", "parent"] = "person"
    """`parent`: its parent agent may decide its requests too (`approve_request`)."""


class SandboxModeSet(_Event, frozen=True, kw_only=True, tag="sandbox/mode"):
    """The session's file policy from here on (the last one in its log counts).

    `runtime`: chosen when the session was created; `delegation`: fixed from the parent's
    policy when a child was created (after any fork seed, so it beats the seeded state).
    """

    mode: Literal["read-only", "workspace-write", "danger-full-access"]
    source: Literal["runtime", "delegation", "user"] = "runtime"


class McpScopeSet(_Event, frozen=True, kw_only=True, tag="mcp/scope"):
    """Which MCP servers' tools the session's agent may use from here on (the last one counts).

    `servers` are names of the runtime's servers or of `inline` ones (a definition's own, as
    written, so a resume starts them again with the environment of that process). `allow`
    (None: every tool of those servers) and `deny` hold tool names (`mcp__github__get_issue`)
    or whole servers (`mcp__github`). `runtime`: fixed when a root was created; `delegation`:
    when a child was, narrowed from its parent's, so a child never gets a server its parent
    could not use unless its definition configures it.
    """

    servers: tuple[str, ...] = ()
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    inline: JsonObject = msgspec.field(default_factory=dict[str, JsonValue])
    source: Literal["runtime", "delegation"] = "runtime"


class ApprovalPolicySet(_Event, frozen=True, kw_only=True, tag="approval/policy"):
    """Which of the session's tool calls wait for a person's decision (the last one counts).

    `tools` are tool-name patterns (`bash`, `mcp__*`; `*` gates every call). `runtime`: set
    when a root was created; `delegation`: fixed at a child's creation from its parent's gates
    and its definition's, so a child can only add to what its parent had. `timeout` is how many
    seconds a request waits before it is denied (None: it waits until someone decides).
    """

    tools: tuple[str, ...]
    timeout: float | None = None
    source: Literal["runtime", "delegation"] = "runtime"


class ApprovalRequested(_Event, frozen=True, kw_only=True, tag="tool/approval-requested"):
    """A gated tool call waits for a decision; durable before anything of the call runs.

    Written before the call's `tool/call`: a `tool/call` after it marks the call started, so a
    request with none after it never ran, whatever happened to the process. `agent` is the
    member's full name; `deadline` the wall-clock time an `approval_timeout` denies it at;
    `grant` what an approval lets this one call do beyond the member's sandbox mode (a call
    that asked for an escalation), so a resume runs it with the same grant.
    """

    turn: int
    step: int
    call_id: str
    name: str
    arguments: str
    agent: str
    reason: str
    deadline: float | None = None
    grant: str | None = None


class ApprovalDecided(_Event, frozen=True, kw_only=True, tag="tool/approval-decided"):
    """The decision on a request: written once, by whoever decided, and never changed.

    `by` says who decided (`cli:alice`, `web`, `api`, `timeout`, `parent:lead`); `reason`
    is a denial's reason as the model reads it; `command` the control command that carried
    the decision from another process, so a holder that dies after applying it does not
    apply it twice.
    """

    call_id: str
    approved: bool
    by: str
    reason: str | None = None
    command: int | None = None


class SubagentSettled(_Event, frozen=True, kw_only=True, tag="subagent/settled"):
    """In a continuable child's log: its activation settled and its parent was notified.

    Written after the notice, so a crash in between repeats the notice rather than losing it.
    """

    run_id: str
    stop_reason: str


class TeamTaskCreated(_Event, frozen=True, kw_only=True, tag="team/task-created"):
    """A task on the tree's shared board (stored in the root's log)."""

    task_id: str
    subject: str
    description: str = ""
    blocked_by: tuple[str, ...] = ()
    created_by: str


class TeamTaskClaimed(_Event, frozen=True, kw_only=True, tag="team/task-claimed"):
    """An agent claimed a task on the tree's shared board (in the root's log), now `in_progress`.

    Written once the claim was checked (unclaimed, every blocker completed) with no await in
    between, so of two claimers only one is recorded.
    """

    task_id: str
    owner: str
    """The claiming agent's session id (names are resolved when shown)."""


class TeamTaskUpdated(_Event, frozen=True, kw_only=True, tag="team/task-updated"):
    """A board task's status was set, by its owner (or anyone while unclaimed); in the root's log.

    Attributes:
        note: Text added to the task's notes; empty adds none.
        by: The updating agent's session id.
    """

    task_id: str
    status: Literal["pending", "in_progress", "completed"]
    note: str = ""
    by: str


class ToolWorkflowRunStart(_Event, frozen=True, kw_only=True, tag="tool-workflow/run-start"):
    """In the caller's log: the `workflow` tool started run `run_id` (log-only).

    The four `tool-workflow/*` records of a run (spec workflow-sandbox 1.6) are a continuous
    prefix of run-start, paired member starts and ends, run-end; nothing reads them back.
    """

    run_id: str
    name: str
    """The run's `meta.name`."""


class ToolWorkflowAgentStart(_Event, frozen=True, kw_only=True, tag="tool-workflow/agent-start"):
    """A member of run `run_id` started: the script's `agent()` call `seq` got child `child_id`."""

    run_id: str
    seq: int
    label: str
    child_id: str
    phase: str | None = None


class ToolWorkflowAgentEnd(_Event, frozen=True, kw_only=True, tag="tool-workflow/agent-end"):
    """Member `seq` of run `run_id` ended (`cancelled` also when the run settled around it)."""

    run_id: str
    seq: int
    outcome: Literal["completed", "failed", "cancelled"]


class ToolWorkflowRunEnd(_Event, frozen=True, kw_only=True, tag="tool-workflow/run-end"):
    """Run `run_id` settled and was disposed (every member released)."""

    run_id: str
    stop_reason: Literal["completed", "cancelled", "error"]


SessionEvent: TypeAlias = (
    TurnStart
    | TurnEnd
    | StepStart
    | StepEnd
    | UserMessageEvent
    | AssistantMessageEvent
    | ModelErrorEvent
    | ToolCallEvent
    | ToolResultEvent
    | InboxSpliced
    | RequestHeader
    | SessionEndSeed
    | SubagentCatalog
    | SubagentDescriptor
    | SubagentSettled
    | SandboxModeSet
    | McpScopeSet
    | ApprovalPolicySet
    | ApprovalRequested
    | ApprovalDecided
    | TeamTaskCreated
    | TeamTaskClaimed
    | TeamTaskUpdated
    | ToolWorkflowRunStart
    | ToolWorkflowAgentStart
    | ToolWorkflowAgentEnd
    | ToolWorkflowRunEnd
)

EVENT_KINDS: dict[str, type[SessionEvent]] = {
    str(cls.__struct_config__.tag): cls
    for cls in (
        TurnStart,
        TurnEnd,
        StepStart,
        StepEnd,
        UserMessageEvent,
        AssistantMessageEvent,
        ModelErrorEvent,
        ToolCallEvent,
        ToolResultEvent,
        InboxSpliced,
        RequestHeader,
        SessionEndSeed,
        SubagentCatalog,
        SubagentDescriptor,
        SubagentSettled,
        SandboxModeSet,
        McpScopeSet,
        ApprovalPolicySet,
        ApprovalRequested,
        ApprovalDecided,
        TeamTaskCreated,
        TeamTaskClaimed,
        TeamTaskUpdated,
        ToolWorkflowRunStart,
        ToolWorkflowAgentStart,
        ToolWorkflowAgentEnd,
        ToolWorkflowRunEnd,
    )
}

KIND_OF: dict[type[SessionEvent], str] = {cls: kind for kind, cls in EVENT_KINDS.items()}

SUPPORTED_VERSIONS: dict[str, frozenset[int]] = {kind: frozenset({1}) for kind in EVENT_KINDS}
# Catalog payloads before v3 carry no names; they are read, never given invented names.
SUPPORTED_VERSIONS["subagent/catalog"] = frozenset({1, 2, 3})
SUPPORTED_VERSIONS["turn/end"] = frozenset({1, 2})  # v2: the `budget` reason
SUPPORTED_VERSIONS["subagent/descriptor"] = frozenset({2, 3})
# v3 adds output_schema and budget_*; v2 payloads read with those absent.


class EventRecord(msgspec.Struct, frozen=True, gc=False):
    """An event as committed: its position in the session's log and its time."""

    seq: int
    time: float
    event: SessionEvent

    @property
    def kind(self) -> str:
        return KIND_OF[type(self.event)]


_encoder = msgspec.json.Encoder()
_event_decoder: msgspec.json.Decoder[SessionEvent] = msgspec.json.Decoder(SessionEvent)
_header_decoder = msgspec.json.Decoder(SessionHeader)


def encode_event(event: SessionEvent) -> bytes:
    return _encoder.encode(event)


def decode_event(kind: str, v: int, payload: bytes) -> SessionEvent:
    """Decode a stored payload, refusing kinds and versions this build does not know."""
    versions = SUPPORTED_VERSIONS.get(kind)
    if versions is None:
        raise StoreError(
            f"unknown event kind {kind!r} in the store; it was written by a newer subagents: "
            "upgrade subagents to read it",
            code=ErrorCode.EVENT_UNSUPPORTED,
            kind=kind,
        )
    if v not in versions:
        raise StoreError(
            f"event {kind!r} has version {v}; this build reads versions "
            f"{sorted(versions)}: upgrade subagents to read it",
            code=ErrorCode.EVENT_UNSUPPORTED,
            kind=kind,
            version=v,
        )
    try:
        return _event_decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise StoreError(
            f"stored event {kind!r} is corrupt: {exc}", code=ErrorCode.STORE_CORRUPT
        ) from exc


def encode_header(header: SessionHeader) -> bytes:
    return _encoder.encode(header)


def decode_header(payload: bytes) -> SessionHeader:
    try:
        header = _header_decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise StoreError(
            f"stored session header is corrupt: {exc}", code=ErrorCode.STORE_CORRUPT
        ) from exc
    if header.v != HEADER_VERSION:
        raise StoreError(
            f"session header version {header.v} is not supported (this build reads "
            f"{HEADER_VERSION}): upgrade subagents",
            code=ErrorCode.EVENT_UNSUPPORTED,
        )
    return header
