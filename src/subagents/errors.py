"""The exception tree of `subagents`; every error carries a stable code.

```
SubagentsError
├── UsageError                      programmer or configuration mistake, raised eagerly
│   ├── ConfigError                 bad model spec, missing model, unreadable script, bad store URL
│   ├── DuplicateError              a tool or session registered twice
│   └── ClosedError                 a resource used after aclose()
└── RunError                        failure while running
    ├── ModelError                  a model call failed (codes from the adapter)
    ├── ToolError                   a tool failed; its text goes back to the model
    │   └── ToolArgsError           arguments did not match the tool's schema
    ├── SubagentError               delegation refused or failed (provider, name, depth, task)
    ├── WorkflowError               a workflow refused at start, misused by its script, or failed
    ├── StoreError                  the event store could not read or write
    │   ├── ConcurrencyConflict     an append raced another writer of the same session
    │   ├── SchemaVersionError      the store's schema is newer or older than this build
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
    # sandbox
    SANDBOX_UNAVAILABLE = "SANDBOX_UNAVAILABLE"
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
    default_code = ErrorCode.USAGE


class ConfigError(UsageError):
    default_code = ErrorCode.CONFIG


class DuplicateError(UsageError):
    default_code = ErrorCode.DUPLICATE


class ClosedError(UsageError):
    default_code = ErrorCode.CLOSED


class RunError(SubagentsError):
    default_code = ErrorCode.INTERNAL


class ModelError(RunError):
    default_code = ErrorCode.MODEL_ERROR


class ToolError(RunError):
    default_code = ErrorCode.TOOL_FAILED


class ToolArgsError(ToolError):
    default_code = ErrorCode.INVALID_ARGS


class SubagentError(RunError):
    default_code = ErrorCode.INTERNAL


class WorkflowError(RunError):
    """A workflow refused at start, misused by its script, or failed (its code says which)."""

    default_code = ErrorCode.WORKFLOW_FAILED


class StoreError(RunError):
    default_code = ErrorCode.STORE


class ConcurrencyConflict(StoreError):
    default_code = ErrorCode.CONCURRENCY_CONFLICT


class SchemaVersionError(StoreError):
    default_code = ErrorCode.SCHEMA_VERSION


class NotFoundError(StoreError):
    default_code = ErrorCode.NOT_FOUND


class SandboxUnavailable(RunError):
    """No confinement backend can enforce the requested file policy; the command did not run."""

    default_code = ErrorCode.SANDBOX_UNAVAILABLE


class LimitExceeded(RunError):
    default_code = ErrorCode.LIMIT_EXCEEDED


class RunCancelled(RunError):
    default_code = ErrorCode.CANCELLED
