"""Durable event kinds: one tagged union, one codec.

Every event carries `kind` (the spec's slash name, frozen once written) and `v` (its payload
version). Readers accept every version listed in `SUPPORTED_VERSIONS` and refuse the rest.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from ..errors import ErrorCode, StoreError
from ..ids import SessionId
from ..messages import AssistantMessage, JsonObject, ToolResultMessage, Usage, UserMessage

__all__ = [
    "AssistantMessageEvent",
    "EVENT_KINDS",
    "EventRecord",
    "HEADER_VERSION",
    "InboxSpliced",
    "InboxTarget",
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


class SessionHeader(msgspec.Struct, frozen=True, kw_only=True):
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


class _Event(msgspec.Struct, frozen=True, tag_field="kind", kw_only=True, omit_defaults=True):
    v: int = 1


class TurnStart(_Event, frozen=True, tag="turn/start"):
    turn: int


class TurnEnd(_Event, frozen=True, tag="turn/end"):
    turn: int
    reason: StopReason
    cause: str | None = None
    """For `aborted`: who cancelled (`user`, `parent`, `disposed`, ...)."""
    error_code: str | None = None
    error_message: str | None = None


class StepStart(_Event, frozen=True, tag="step/start"):
    turn: int
    step: int


class StepEnd(_Event, frozen=True, tag="step/end"):
    turn: int
    step: int


class UserMessageEvent(_Event, frozen=True, tag="user/message"):
    message: UserMessage
    turn: int | None = None


class AssistantMessageEvent(_Event, frozen=True, tag="assistant/message"):
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


class ToolCallEvent(_Event, frozen=True, tag="tool/call"):
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


class ToolResultEvent(_Event, frozen=True, tag="tool/result"):
    turn: int
    step: int
    message: ToolResultMessage
    code: str | None = None
    concludes_turn: bool = False


class InboxSpliced(_Event, frozen=True, tag="agent/inbox/spliced"):
    target: InboxTarget
    start: int
    removed: int = 0
    inserted: tuple[UserMessage, ...] = ()
    outcome: Literal["canceled"] | None = None


class RequestHeader(_Event, frozen=True, tag="request/header"):
    reason: Literal["initial", "resume", "change"]
    provider: str
    model: str
    system: str
    tools: tuple[str, ...]


class SessionEndSeed(_Event, frozen=True, tag="session/end-seed"):
    pass


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
    """The definition's body, as it was when the child started."""
    tools_allow: tuple[str, ...] | None = None
    tools_deny: tuple[str, ...] = ()
    depth_cap: int | None = None
    """Its resolved scope: a resume applies exactly this, never re-reading definitions."""
    output_schema: JsonObject | None = None
    """The schema its answers must match (through `structured_output`), if any."""
    budget_tokens: int | None = None
    budget_model_calls: int | None = None
    budget_children: int | None = None
    """Its budget as resolved at start (already narrowed to what its parent had left)."""


class SandboxModeSet(_Event, frozen=True, kw_only=True, tag="sandbox/mode"):
    """The session's file policy from here on (the last one in its log counts).

    `runtime`: chosen when the session was created; `delegation`: fixed from the parent's
    policy when a child was created (after any fork seed, so it beats the seeded state).
    """

    mode: Literal["read-only", "workspace-write", "danger-full-access"]
    source: Literal["runtime", "delegation", "user"] = "runtime"


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
    task_id: str
    owner: str
    """The claiming agent's session id (names are resolved when shown)."""


class TeamTaskUpdated(_Event, frozen=True, kw_only=True, tag="team/task-updated"):
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


class EventRecord(msgspec.Struct, frozen=True):
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
