"""Tool definitions: `ToolSpec`, the `ToolContext` a handler receives, and the `@tool` decorator.

The decorator derives the JSON Schema of the parameters from the handler's type hints (through
msgspec's schema generator, or pydantic's for pydantic models) and the descriptions from its
Google-style docstring; arguments reach the handler converted to the declared types.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Awaitable, Callable, Set
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, overload

from jsonschema import Draft202012Validator, SchemaError

from ..errors import ErrorCode, UsageError
from ..messages import JsonObject, JsonValue
from ._convert import ParamCodec, json_default, param_codec
from ._fast_check import fast_check

__all__ = [
    "Escalation",
    "EscalationCheck",
    "ToolContext",
    "ToolHandler",
    "ToolResult",
    "ToolSpec",
    "tool",
]

_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")


class ToolContext(Protocol):
    """What a tool handler can see of the call and the calling agent (provided by `core`)."""

    @property
    def call_id(self) -> str: ...

    @property
    def tool_name(self) -> str: ...

    @property
    def agent_id(self) -> str: ...

    @property
    def agent_name(self) -> str: ...

    @property
    def grant(self) -> str | None:
        """An approved escalation's grant for this one call (`Escalation.grant`), or None."""
        ...

    def conclude_turn(self) -> None:
        """Make this call's successful result the last step of the turn."""
        ...


@dataclass(frozen=True, slots=True)
class Escalation:
    """A call that needs more than its agent's sandbox mode allows, asking instead of failing.

    Made under the approval policy's `sandbox:ask`; a person decides it like a gated call.
    """

    reason: str
    """What the call needs and why, as the person deciding reads it."""
    grant: str
    """Handed back to the call as `ToolContext.grant` once approved, and only to that call."""


EscalationCheck: TypeAlias = "Callable[[ToolContext, JsonObject], Awaitable[Escalation | None]]"
"""Whether a call with these arguments needs an escalation (never a permission: the tool still
enforces its policy, widened only by a grant)."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """An explicit result.

    `content` goes to the model as is; `is_error` marks a failure the model should see and
    correct.
    """

    content: str
    is_error: bool = False
    code: str | None = None


ToolHandler: TypeAlias = Callable[[JsonObject, ToolContext], Awaitable[JsonValue | ToolResult]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A model-facing tool: name, description, JSON Schema parameters and an async handler.

    The handler returns a string (sent as is), a `ToolResult`, or any JSON value (sent as
    compact JSON). `parallel_safe` lets calls of one response run at once.

    The runtime awaits what the handler returns in the same expression that calls it, so a
    handler may be a plain function that does its checks in the call and returns the
    coroutine doing the rest (the `subagent` tool admits the child that way: one frame fewer
    per waiting child). Whoever calls a handler must do the same: the call may already hold
    resources that only the awaited coroutine gives back.
    """

    name: str
    description: str
    parameters: JsonObject
    handler: ToolHandler
    parallel_safe: bool = False
    validate: bool = True
    """Check arguments against `parameters` before the handler runs. A tool that must see
    invalid attempts too (to count them against a budget) turns it off and calls
    `validate_arguments` itself."""
    checkpoint: bool = True
    """Make the log durable before the handler runs. Only tools whose every effect is written
    to our own log after the call (delegation, task control) may turn it off."""
    aborted_text: str | None = None
    """What the model reads when a cancellation cuts a started call (None: the loop's
    generic `tool call aborted`); a delegation tool says its child's run was cancelled."""
    tags: frozenset[str] = frozenset()
    """What the tool needs to be of use, for scopes that hide by tag (`ToolScope.hide`):
    `delegation` marks the tools that start or address children."""
    describe: Callable[[Set[str]], str] | None = None
    """The description for a scope, given the names of the tools that scope offers, so it
    names only tools the agent has (None: `description` everywhere)."""
    checked: JsonObject | None = None
    """The schema arguments are checked against (None: `parameters`). A tool whose handler
    refuses a rule `parameters` states with a more precise error and code (a child name's
    grammar, an unknown definition) checks a schema without that rule; a constrained decoder
    still enforces it from `parameters`."""
    escalation: EscalationCheck | None = None
    """How a call of it can ask for more than its agent's sandbox mode (None: it cannot)."""
    validator: Draft202012Validator = field(init=False, repr=False, compare=False)
    fast_valid: Callable[[Any], bool] | None = field(init=False, repr=False, compare=False)
    """A quick yes for valid arguments (`_fast_check.py`); None: ask `validator`."""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise UsageError(
                f"invalid tool name {self.name!r}: use 1-64 letters, digits, '_' or '-', "
                "starting with a letter",
                code=ErrorCode.USAGE,
            )
        if self.parameters.get("type") != "object":
            raise UsageError(
                f"tool {self.name!r}: parameters must be a JSON Schema with type 'object'"
            )
        _check_schema(self.name, self.parameters)
        checked = self.parameters if self.checked is None else self.checked
        if checked is not self.parameters:
            _check_schema(self.name, checked)
        object.__setattr__(self, "validator", Draft202012Validator(checked))
        object.__setattr__(self, "fast_valid", fast_check(checked))


_CHECKED_SCHEMAS: set[str] = set()
"""Schemas already found valid, as canonical JSON: each runtime builds its tool specs afresh,
and checking a schema against the metaschema costs milliseconds."""


def _check_schema(name: str, schema: JsonObject) -> None:
    try:
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        key = None  # not JSON: let the metaschema check say what is wrong
    if key is not None and key in _CHECKED_SCHEMAS:
        return
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise UsageError(f"tool {name!r}: invalid parameters schema: {exc.message}") from exc
    if key is not None:
        _CHECKED_SCHEMAS.add(key)


@overload
def tool(fn: Callable[..., Awaitable[Any]], /) -> ToolSpec: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: bool = False,
    validate: bool = True,
    checkpoint: bool = True,
    aborted_text: str | None = None,
    tags: Set[str] = frozenset(),
    describe: Callable[[Set[str]], str] | None = None,
) -> Callable[[Callable[..., Awaitable[Any]]], ToolSpec]: ...


def tool(
    fn: Callable[..., Awaitable[Any]] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: bool = False,
    validate: bool = True,
    checkpoint: bool = True,
    aborted_text: str | None = None,
    tags: Set[str] = frozenset(),
    describe: Callable[[Set[str]], str] | None = None,
) -> ToolSpec | Callable[[Callable[..., Awaitable[Any]]], ToolSpec]:
    """Turn an async function into a `ToolSpec`, deriving its schema from type hints.

    A first parameter annotated `ToolContext` receives the call context; every other parameter
    becomes a property (required unless it has a default). `typing.Annotated` with
    `msgspec.Meta` adds constraints and a description to a property (`Meta(min_length=1)`,
    `Meta(ge=0, le=10)`, `Meta(description=...)`; an `Args:` entry of the docstring wins over
    its description). A default of `msgspec.UNSET` (annotated `T | msgspec.UnsetType`) makes a
    property optional without advertising a default: the handler sees `UNSET` when the model
    leaves it out. A `**kwargs` parameter receives the undeclared keys of the call as well.

    Args:
        fn: The handler (bare `@tool`); omitted when the decorator is called with options.
        name: The model-facing name (default: the function's name).
        description: The model-facing description (default: the docstring's summary).
        parallel_safe: Calls of one response may run at once.
        validate: Check arguments against the schema before the handler runs. A tool that
            checks them itself turns it off; its handler then gets whatever the model sent, so
            it needs a default for every parameter the model may leave out (and `**kwargs` to
            see the raw arguments).
        checkpoint: Make the log durable before the handler runs (see `ToolSpec.checkpoint`).
        aborted_text: What the model reads when a cancellation cuts a started call (default:
            the loop's generic text).
        tags: What the tool needs to be of use (see `ToolSpec.tags`).
        describe: The description for a scope, from the names of the tools it offers (see
            `ToolSpec.describe`).
    """

    def build(func: Callable[..., Awaitable[Any]]) -> ToolSpec:
        return _spec_from_function(
            func,
            name=name,
            description=description,
            parallel_safe=parallel_safe,
            validate=validate,
            checkpoint=checkpoint,
            aborted_text=aborted_text,
            tags=frozenset(tags),
            describe=describe,
        )

    return build(fn) if fn is not None else build


def _spec_from_function(
    func: Callable[..., Awaitable[Any]],
    *,
    name: str | None,
    description: str | None,
    parallel_safe: bool,
    validate: bool,
    checkpoint: bool,
    aborted_text: str | None,
    tags: frozenset[str],
    describe: Callable[[Set[str]], str] | None,
) -> ToolSpec:
    if not inspect.iscoroutinefunction(func):
        raise UsageError(f"tool {func.__name__!r} must be an async function")
    # With the extras: an `Annotated[T, msgspec.Meta(...)]` parameter keeps its constraints.
    hints = typing.get_type_hints(func, include_extras=True)
    summary, arg_docs = _parse_docstring(inspect.getdoc(func) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    converters: dict[str, Callable[[Any], Any]] = {}
    wants_context = False
    params, takes_extra = _named_parameters(func)
    for index, param in enumerate(params):
        annotation = hints.get(param.name, Any)
        if index == 0 and annotation is ToolContext:
            wants_context = True
            continue
        codec = _param_codec(func, param.name, annotation)
        if codec.convert is not None:
            converters[param.name] = codec.convert
        schema = dict(codec.schema)
        defs.update(schema.pop("$defs", {}))
        if param.name in arg_docs:
            schema["description"] = arg_docs[param.name]
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        elif param.default is not None and (default := json_default(param.default)) is not None:
            schema["default"] = default
        properties[param.name] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    if defs:
        parameters["$defs"] = defs

    declared = frozenset(properties)

    async def handler(args: JsonObject, ctx: ToolContext) -> Any:
        # Undeclared keys pass validation; a function without **kwargs cannot take them.
        kwargs = args if takes_extra else {k: v for k, v in args.items() if k in declared}
        # Dataclasses, Structs and pydantic models arrive as JSON objects: build the declared
        # type, or raise ToolArgsError (INVALID_ARGS) for the model to correct.
        kwargs = {k: converters[k](v) if k in converters else v for k, v in kwargs.items()}
        if wants_context:
            return await func(ctx, **kwargs)
        return await func(**kwargs)

    return ToolSpec(
        name=name or func.__name__,
        description=description or summary or func.__name__,
        parameters=parameters,
        handler=handler,
        parallel_safe=parallel_safe,
        validate=validate,
        checkpoint=checkpoint,
        aborted_text=aborted_text,
        tags=tags,
        describe=describe,
    )


def _named_parameters(func: Callable[..., Awaitable[Any]]) -> tuple[list[inspect.Parameter], bool]:
    """The parameters that become properties, and whether a `**kwargs` takes undeclared keys."""
    params = list(inspect.signature(func).parameters.values())
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    takes_extra = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    return [p for p in params if p.kind not in variadic], takes_extra


def _param_codec(func: Callable[..., Awaitable[Any]], name: str, annotation: Any) -> ParamCodec:
    if annotation is ToolContext:
        raise UsageError(
            f"tool {func.__name__!r}: a ToolContext parameter must be the first parameter"
        )
    try:
        return param_codec(name, annotation)
    except TypeError as exc:
        raise UsageError(
            f"tool {func.__name__!r}: parameter {name!r} has a type with no JSON Schema "
            f"({annotation!r}); use JSON types, msgspec Structs, dataclasses or pydantic models"
        ) from exc


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary paragraph and the `Args:` descriptions of a Google-style docstring."""
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    section = "summary"
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in {"Args:", "Arguments:", "Parameters:"}:
            section = "args"
            continue
        if stripped.endswith(":") and stripped[:-1] in {"Returns", "Raises", "Yields", "Note"}:
            section = "other"
            continue
        if section == "summary":
            if not stripped and summary_lines:
                section = "body"
            elif stripped:
                summary_lines.append(stripped)
        elif section == "args" and stripped:
            match = re.match(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", stripped)
            if match and line.startswith(" " * 4) and not line.startswith(" " * 8):
                current = str(match.group(1))
                args[current] = str(match.group(2))
            elif current is not None:
                args[current] = f"{args[current]} {stripped}".strip()
    return " ".join(summary_lines), args
