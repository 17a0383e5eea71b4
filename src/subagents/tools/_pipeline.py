"""One tool call, from the model's raw arguments to the outcome the model sees.

Every failure the model can act on (unknown tool, bad JSON, schema violation, a guard's denial,
a raising handler) becomes an error outcome, never an exception out of the run.
Cancellation is not caught here: the caller records it as `ABORTED`.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, cast

import msgspec

from ..errors import ErrorCode, SubagentsError
from ..messages import JsonObject, ToolCallBlock
from ._definition import ToolContext, ToolResult, ToolSpec
from ._registry import ToolScope

if TYPE_CHECKING:  # annotations only
    from jsonschema import ValidationError

__all__ = [
    "CheckedCall",
    "ToolOutcome",
    "check_call",
    "execute_tool",
    "parse_arguments",
    "raised_outcome",
    "returned_outcome",
    "run_checked",
    "validate_arguments",
]

log = logging.getLogger("subagents.tools")


class ToolOutcome(msgspec.Struct, frozen=True, gc=False):
    """What a tool call gives the model.

    Its result text, whether it failed (with a stable `code`), and whether the handler
    concluded the agent's turn.
    """

    content: str
    is_error: bool = False
    code: str | None = None
    concludes_turn: bool = False


def error_outcome(message: str, code: str) -> ToolOutcome:
    return ToolOutcome(f"Error: {message}", is_error=True, code=code)


_decode_json = msgspec.json.Decoder().decode


def parse_arguments(raw: str) -> JsonObject | ToolOutcome:
    """Parse the model's argument string: empty means `{}`; anything but an object is an error.

    msgspec parses what it accepts as `json.loads` would, in a sixth of the time (every tool
    call pays it); what it refuses goes to `json.loads`, which also takes `NaN`, `1e400`,
    surrogates (escaped, or raw in the string, which msgspec cannot encode to UTF-8) and `str`
    subclasses, and whose message names the position of real errors.
    """
    if not raw.strip():
        return {}
    try:
        value: Any = _decode_json(raw)
    except (msgspec.DecodeError, UnicodeEncodeError, TypeError):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            return error_outcome(
                f"invalid arguments: not valid JSON ({exc.msg} at position {exc.pos})",
                ErrorCode.INVALID_ARGS,
            )
    if not isinstance(value, dict):
        return error_outcome(
            f"invalid arguments: expected a JSON object, got {type(value).__name__}",
            ErrorCode.INVALID_ARGS,
        )
    return cast("JsonObject", value)


def validate_arguments(spec: ToolSpec, args: JsonObject) -> ToolOutcome | None:
    """Check `args` against the tool's schema; every violation is listed with its path."""
    if spec.fast_valid is not None and spec.fast_valid(args):
        return None
    found: list[ValidationError] = list(spec.validator.iter_errors(args))  # pyright: ignore[reportUnknownMemberType]
    errors = sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    return error_outcome(
        "invalid arguments: " + "; ".join(_describe(e) for e in errors), ErrorCode.INVALID_ARGS
    )


def _describe(error: ValidationError) -> str:
    path = "/".join(str(p) for p in error.absolute_path)
    return f"{path}: {error.message}" if path else error.message


def render_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class CheckedCall(msgspec.Struct, frozen=True):
    """A call that passed lookup, parsing, validation and the guards: ready to run."""

    spec: ToolSpec
    args: JsonObject


def check_call(
    tools: ToolScope, call: ToolCallBlock, ctx: ToolContext
) -> CheckedCall | ToolOutcome:
    """Lookup, parsing, validation and guards: the checked call, or the error it gets."""
    spec = tools.get(call.name)
    if spec is None:
        return error_outcome(f'unknown tool "{call.name}"', ErrorCode.UNKNOWN_TOOL)
    args = parse_arguments(call.arguments)
    if isinstance(args, ToolOutcome):
        return args
    invalid = validate_arguments(spec, args) if spec.validate else None
    if invalid is not None:
        return invalid
    for guard in tools.guards():
        reason = guard(spec, args, ctx)
        if reason is not None:
            return error_outcome(reason, ErrorCode.DENIED)
    return CheckedCall(spec, args)


async def run_checked(
    checked: CheckedCall, call: ToolCallBlock, ctx: ToolContext, *, concluded: list[bool]
) -> ToolOutcome:
    """Run a checked call's handler; whatever it raises or returns becomes an outcome."""
    try:
        value = await checked.spec.handler(checked.args, ctx)
    except Exception as exc:
        return raised_outcome(call, exc)
    return returned_outcome(call, value, concluded=concluded[0])


def raised_outcome(call: ToolCallBlock, exc: Exception) -> ToolOutcome:
    """The outcome of a handler that raised `exc`."""
    if isinstance(exc, SubagentsError):
        return error_outcome(exc.message, exc.code)
    log.debug("tool %s raised", call.name, exc_info=exc)
    return error_outcome(f"{type(exc).__name__}: {exc}", ErrorCode.TOOL_FAILED)


def returned_outcome(call: ToolCallBlock, value: object, *, concluded: bool) -> ToolOutcome:
    """The outcome of a handler that returned `value` (`concluded`: it concluded the turn)."""
    if isinstance(value, ToolResult):
        if value.is_error:
            return ToolOutcome(value.content, True, value.code or ErrorCode.TOOL_FAILED)
        return ToolOutcome(value.content, concludes_turn=concluded)
    try:
        content = render_value(value)
    except (TypeError, ValueError) as exc:
        return error_outcome(
            f'tool "{call.name}" returned invalid output: {exc}', ErrorCode.INVALID_TOOL_OUTPUT
        )
    return ToolOutcome(content, concludes_turn=concluded)


async def execute_tool(
    tools: ToolScope, call: ToolCallBlock, ctx: ToolContext, *, concluded: list[bool]
) -> ToolOutcome:
    """Run one call through lookup, parsing, validation, guards and the handler.

    `concluded` is a one-element cell the context's `conclude_turn()` sets.
    """
    checked = check_call(tools, call, ctx)
    if isinstance(checked, ToolOutcome):
        return checked
    return await run_checked(checked, call, ctx, concluded=concluded)
