"""The exception tree of `subagents`; every error carries a stable code.

```
SubagentsError
├── UsageError                      programmer or configuration mistake, raised eagerly
│   ├── ConfigError                 bad model spec, missing model, unreadable script, bad store URL
│   │   └── LeaseHeld               another live process holds the tree
│   ├── DuplicateError              a tool, session or provider registered twice
│   └── ClosedError                 a resource used after aclose()
└── RunError                        failure while running
    ├── ModelError                  a model call failed (codes from the adapter)
    ├── ToolError                   a tool failed; its text goes back to the model
    │   └── ToolArgsError           arguments did not match the tool's schema
    ├── SubagentError               delegation refused or failed (provider, name, depth, task)
    ├── WorkflowError               a workflow refused at start, misused by its script, or failed
    ├── StoreError                  the event store could not read or write
    │   ├── ConcurrencyConflict     an append raced another writer of the same session
    │   ├── SchemaVersionError      the store's schema is newer than this build
    │   └── NotFoundError           no such session (for this tenant)
    ├── SandboxUnavailable          a sandbox mode cannot be enforced on this machine
    ├── LimitExceeded               a configured limit was reached
    └── RunCancelled                our own cancellation, seen at the run edge
```

The CLI maps `UsageError` and `NotFoundError` to exit status 2. Every error pickles and has a
JSON form (`to_json`), because errors cross process boundaries.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Self

__all__ = [
    "ClosedError",
    "ConcurrencyConflict",
    "ConfigError",
    "DuplicateError",
    "ErrorCode",
    "LeaseHeld",
    "LimitExceeded",
    "ModelError",
    "NotFoundError",
    "RunCancelled",
    "RunError",
    "SandboxUnavailable",
    "SchemaVersionError",
    "StoreError",
    "SubagentError",
    "SubagentsError",
    "ToolArgsError",
    "ToolError",
    "UsageError",
    "WorkflowError",
]


class ErrorCode(StrEnum):
    """Stable, machine-readable error codes. A code is never renamed once released."""

    USAGE = "USAGE"
    CONFIG = "CONFIG"
    MODEL_MISSING = "MODEL_MISSING"
    MODEL_SPEC_INVALID = "MODEL_SPEC_INVALID"
    SCRIPT_UNREADABLE = "SCRIPT_UNREADABLE"
    SCRIPT_INVALID = "SCRIPT_INVALID"
    SCRIPT_EXHAUSTED = "SCRIPT_EXHAUSTED"
    DUPLICATE = "DUPLICATE"
    CLOSED = "CLOSED"
    # model failures (adapter codes)
    MODEL_ERROR = "MODEL_ERROR"
    AUTH = "AUTH"
    RATE_LIMIT = "RATE_LIMIT"
    SERVER = "SERVER"
    TRANSPORT = "TRANSPORT"
    TIMEOUT = "TIMEOUT"
    INVALID_REQUEST = "INVALID_REQUEST"
    CONTEXT_WINDOW_EXCEEDED = "CONTEXT_WINDOW_EXCEEDED"
    MALFORMED_RESPONSE = "MALFORMED_RESPONSE"
    EMPTY_RESPONSE = "EMPTY_RESPONSE"
    MISSING_CREDENTIAL = "MISSING_CREDENTIAL"
    # tool failures
    TOOL_FAILED = "TOOL_FAILED"
    INVALID_ARGS = "INVALID_ARGS"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    INVALID_TOOL_OUTPUT = "INVALID_TOOL_OUTPUT"
    DENIED = "DENIED"
    ABORTED = "ABORTED"
    ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"
    TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
    TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
    CRASH_RETRIES_EXHAUSTED = "CRASH_RETRIES_EXHAUSTED"
    # built-in file and shell tools (workspace)
    SANDBOX_DENIED = "SANDBOX_DENIED"
    FILE_NOT_FOUND = "FILE_NOT_FOUND"
    NOT_A_FILE = "NOT_A_FILE"
    NOT_A_DIRECTORY = "NOT_A_DIRECTORY"
    BINARY_FILE = "BINARY_FILE"
    FILE_TOO_LARGE = "FILE_TOO_LARGE"
    FILE_ERROR = "FILE_ERROR"
    NO_MATCH = "NO_MATCH"
    AMBIGUOUS_MATCH = "AMBIGUOUS_MATCH"
    INVALID_PATTERN = "INVALID_PATTERN"
    # store failures
    STORE = "STORE"
    STORE_UNWRITABLE = "STORE_UNWRITABLE"
    STORE_CORRUPT = "STORE_CORRUPT"
    CONCURRENCY_CONFLICT = "CONCURRENCY_CONFLICT"
    SCHEMA_VERSION = "SCHEMA_VERSION"
    EVENT_UNSUPPORTED = "EVENT_UNSUPPORTED"
    NOT_FOUND = "NOT_FOUND"
    SESSION_EXISTS = "SESSION_EXISTS"
    OPEN_TURN = "OPEN_TURN"
    # delegation
    NO_PROVIDER = "NO_PROVIDER"
    DUPLICATE_PROVIDER = "DUPLICATE_PROVIDER"
    UNSUPPORTED_CAPABILITY = "UNSUPPORTED_CAPABILITY"
    INVALID_NAME = "INVALID_NAME"
    DUPLICATE_NAME = "DUPLICATE_NAME"
    DEPTH_EXCEEDED = "DEPTH_EXCEEDED"
    INVALID_CWD = "INVALID_CWD"
    CWD_OUTSIDE_WORKSPACE = "CWD_OUTSIDE_WORKSPACE"
    BACKGROUND_DISABLED = "BACKGROUND_DISABLED"
    TASK_LIMIT = "TASK_LIMIT"
    UNKNOWN_TASK = "UNKNOWN_TASK"
    UNAUTHORIZED = "UNAUTHORIZED"
    NOT_RESUMABLE = "NOT_RESUMABLE"
    IN_FLIGHT = "IN_FLIGHT"
    DRAINING = "DRAINING"
    LEASE_HELD = "LEASE_HELD"
    BAD_COMMAND = "BAD_COMMAND"
    HOLDER_UNREACHABLE = "HOLDER_UNREACHABLE"
    NO_CALLER = "NO_CALLER"
    UNKNOWN_DEFINITION = "UNKNOWN_DEFINITION"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    # workflows (docs/design.md §9)
    SCRIPT_PARSE = "SCRIPT_PARSE"
    META_INVALID = "META_INVALID"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    UNSUPPORTED_OPTION = "UNSUPPORTED_OPTION"
    UNSUPPORTED_SCHEMA = "UNSUPPORTED_SCHEMA"
    AGENT_CAP = "AGENT_CAP"
    ITEM_CAP = "ITEM_CAP"
    AGENT_START = "AGENT_START"
    AGENT_RESULT = "AGENT_RESULT"
    RESULT_UNSERIALIZABLE = "RESULT_UNSERIALIZABLE"
    WORKFLOW_FAILED = "WORKFLOW_FAILED"
    # web console (docs/web.md)
    APPROVAL_DENIED = "APPROVAL_DENIED"
    NO_PENDING_REQUEST = "NO_PENDING_REQUEST"
    AMBIGUOUS_REQUEST = "AMBIGUOUS_REQUEST"
    ALREADY_DECIDED = "ALREADY_DECIDED"
    BAD_REQUEST = "BAD_REQUEST"
    BAD_ORIGIN = "BAD_ORIGIN"
    BAD_HOST = "BAD_HOST"
    # sandbox
    SANDBOX_UNAVAILABLE = "SANDBOX_UNAVAILABLE"
    # configuration files (docs/config.md) and MCP servers (docs/mcp.md)
    CONFIG_INVALID = "CONFIG_INVALID"
    MODEL_ALIAS_UNKNOWN = "MODEL_ALIAS_UNKNOWN"
    MCP_CONFIG_INVALID = "MCP_CONFIG_INVALID"
    MCP_SERVER_UNKNOWN = "MCP_SERVER_UNKNOWN"
    MCP_SERVER_NOT_EXECUTABLE = "MCP_SERVER_NOT_EXECUTABLE"
    MCP_SERVER_FAILED = "MCP_SERVER_FAILED"
    MCP_PROTOCOL = "MCP_PROTOCOL"
    MCP_TIMEOUT = "MCP_TIMEOUT"
    MCP_TOOL_ERROR = "MCP_TOOL_ERROR"
    MCP_SCHEMA_INVALID = "MCP_SCHEMA_INVALID"
    # run failures
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    CANCELLED = "CANCELLED"
    INTERNAL = "INTERNAL"


class SubagentsError(Exception):
    """Root of every error raised by `subagents`."""

    default_code: ClassVar[ErrorCode] = ErrorCode.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode | None = None,
        retryable: bool | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code: ErrorCode = code if code is not None else self.default_code
        self.retryable = retryable
        self.fields: dict[str, Any] = fields

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self.message, self.code, self.retryable, self.fields))

    def to_json(self) -> dict[str, Any]:
        """The error's JSON form: `code`, `message`, `retryable` and its typed fields."""
        return {
            "type": type(self).__name__,
            "code": str(self.code),
            "message": self.message,
            "retryable": self.retryable,
            **self.fields,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """Rebuild an error from `to_json` output (the class is the caller's)."""
        fields = {
            k: v for k, v in data.items() if k not in {"type", "code", "message", "retryable"}
        }
        return cls(
            str(data["message"]),
            code=ErrorCode(data["code"]),
            retryable=data.get("retryable"),
            **fields,
        )


def _restore(
    cls: type[SubagentsError],
    message: str,
    code: ErrorCode,
    retryable: bool | None,
    fields: dict[str, Any],
) -> SubagentsError:
    return cls(message, code=code, retryable=retryable, **fields)


class UsageError(SubagentsError):
    """A programmer or configuration mistake, raised at the call that made it.

    Examples: an invalid tool name or parameters schema, a non-async tool function, a message
    queued twice, a CLI reference that matches several sessions. The CLI exits 2 on it.
    """

    default_code = ErrorCode.USAGE


class ConfigError(UsageError):
    """Invalid configuration: fix the setting named in the message and try again.

    Raised for a bad model spec or missing credential, an unreadable or invalid scripted-model
    script, a bad store URL or store option, an invalid tenant id, an unreadable definitions
    folder or a definition naming unknown tools, an unknown sandbox mode or a child widening
    its parent's, and out-of-range options (`crash_retries`, `Limits`, workflow options).
    """

    default_code = ErrorCode.CONFIG


class LeaseHeld(ConfigError):
    """Another live process holds the tree: wait for it to finish or stop that process.

    Raised when a runtime loads a session whose tree another process is running; the message
    names that process (`pid` is in the fields).
    """

    default_code = ErrorCode.LEASE_HELD


class DuplicateError(UsageError):
    """Something registered twice: a tool in one layer, a session id, a subagent provider."""

    default_code = ErrorCode.DUPLICATE


class ClosedError(UsageError):
    """A resource used outside its lifetime: after `aclose()`, or before `async with` opened it.

    Raised by a closed or unopened runtime, event store, model or workflow engine, and by a
    disposed agent given input.
    """

    default_code = ErrorCode.CLOSED


class RunError(SubagentsError):
    """Base of the failures that happen while running; never raised itself, only its subclasses."""

    default_code = ErrorCode.INTERNAL


class ModelError(RunError):
    """A model call failed, after the adapter's own retries of transient failures.

    `code` is the adapter's (`AUTH`, `RATE_LIMIT`, `TIMEOUT`, ...) and `retryable` says whether
    a later retry may succeed. The agent loop wraps any other exception from an adapter in a
    `ModelError` (`MODEL_ERROR`), records it as `model/error`, and ends the turn `error`.
    """

    default_code = ErrorCode.MODEL_ERROR


class ToolError(RunError):
    """A tool failed; raised by a handler, it becomes an error result for the model.

    The tool pipeline catches it (like any `SubagentsError` from a handler) and gives the model
    its message and code, so it never ends the run. The built-in workspace tools raise it with
    codes such as `FILE_NOT_FOUND` or `SANDBOX_DENIED`.
    """

    default_code = ErrorCode.TOOL_FAILED


class ToolArgsError(ToolError):
    """A tool argument cannot be built into its declared parameter type (`INVALID_ARGS`).

    Raised by a `tool()` handler before it calls the function, when a dataclass, Struct or
    pydantic parameter cannot be built from its JSON object; the model gets an error result to
    correct. Schema violations found earlier become error results without raising.
    """

    default_code = ErrorCode.INVALID_ARGS


class SubagentError(RunError):
    """Delegation was refused or failed: a bad name, depth, provider, task or permission.

    Raised by the delegation service, its tools and the team board; its code says which (for
    example `INVALID_NAME`, `DEPTH_EXCEEDED`, `NO_PROVIDER`, `UNKNOWN_TASK`, `UNAUTHORIZED`).
    """

    default_code = ErrorCode.INTERNAL


class WorkflowError(RunError):
    """A workflow refused at start, misused by its script, or failed (its code says which)."""

    default_code = ErrorCode.WORKFLOW_FAILED


class StoreError(RunError):
    """The event store could not read or write.

    Its code says why: `STORE_UNWRITABLE`, `STORE_CORRUPT`, `EVENT_UNSUPPORTED` (a record from
    a newer build) or `STORE` (a failed commit, `retryable` when trying again may succeed).
    """

    default_code = ErrorCode.STORE


class ConcurrencyConflict(StoreError):
    """An append raced another writer: its `seq` is not the next one in the session's log.

    Carries `expected_seq` and `seq` when known; read the log again before appending.
    """

    default_code = ErrorCode.CONCURRENCY_CONFLICT


class SchemaVersionError(StoreError):
    """The store records a schema version newer than this build knows; nothing was written."""

    default_code = ErrorCode.SCHEMA_VERSION


class NotFoundError(StoreError):
    """No such session for this tenant, or a CLI reference that names none; the CLI exits 2."""

    default_code = ErrorCode.NOT_FOUND


class SandboxUnavailable(RunError):
    """No confinement backend can enforce the requested file policy; the command did not run."""

    default_code = ErrorCode.SANDBOX_UNAVAILABLE


class LimitExceeded(RunError):
    """A configured limit was reached (code `LIMIT_EXCEEDED`); no code path raises it yet."""

    default_code = ErrorCode.LIMIT_EXCEEDED


class RunCancelled(RunError):
    """Our own cancellation, seen at the run edge (code `CANCELLED`); no code path raises it yet."""

    default_code = ErrorCode.CANCELLED
