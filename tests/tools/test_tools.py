"""Conformance tests for the tools layer (docs/design.md §5.3).

The pipeline is driven through `execute_tool` with a small context object (the loop provides
the real one); registry scoping is checked through `ToolRegistry` / `ToolScope` and, where the
agent owns the scope, through a `AgentRuntime` agent.
"""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest
from hypothesis import given, settings, strategies as st

from subagents.core import AgentRuntime
from subagents.errors import DuplicateError, ErrorCode, ToolError, UsageError
from subagents.messages import JsonObject, JsonValue, ToolCallBlock
from subagents.sessions import ToolResultEvent
from subagents.testing import FakeClock, InMemoryEventStore, ScriptedModel, ToolCallContext
from subagents.tools import (
    ToolContext,
    ToolOutcome,
    ToolRegistry,
    ToolResult,
    ToolScope,
    ToolSpec,
    execute_tool,
    parse_arguments,
    tool,
)

# -- helpers ---------------------------------------------------------------------------------


async def call(scope: ToolScope, name: str, arguments: str | JsonObject) -> ToolOutcome:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    ctx = ToolCallContext(name)
    return await execute_tool(
        scope, ToolCallBlock(id="call-1", name=name, arguments=raw), ctx, concluded=ctx.concluded
    )


def spec(
    name: str,
    result: JsonValue = "ok",
    *,
    parameters: JsonObject | None = None,
    calls: list[JsonObject] | None = None,
    description: str | None = None,
) -> ToolSpec:
    """A raw `ToolSpec` that records its arguments and returns `result`."""

    async def handler(args: JsonObject, ctx: ToolContext) -> JsonValue:
        if calls is not None:
            calls.append(args)
        return result

    return ToolSpec(
        name=name,
        description=description or f"the {name} tool",
        parameters=parameters or {"type": "object", "properties": {}},
        handler=handler,
    )


# -- the decorator ---------------------------------------------------------------------------


@tool
async def read_lines(
    ctx: ToolContext,
    path: str,
    count: int = 3,
    ratio: float = 0.5,
    follow: bool = False,
    tags: list[str] | None = None,
    mode: Literal["head", "tail"] = "head",
) -> str:
    """Read lines from a file.

    A longer body paragraph that is not part of the description.

    Args:
        path: The file to read.
        count (int): How many lines
            to read.
        ratio: A ratio.

    Returns:
        The lines.
    """
    return f"{ctx.tool_name}:{path}:{count}:{mode}"


@tool(name="sum-two", description="Add two integers.", parallel_safe=True)
async def add(a: int, b: int) -> int:
    return a + b


@tool
async def with_kwargs(a: int, **extra: JsonValue) -> JsonObject:
    """Echo the declared argument and whatever else came."""
    return {"a": a, "extra": extra}


def test_decorator_derives_schema_from_hints_defaults_and_docstring() -> None:
    assert read_lines.name == "read_lines"
    assert read_lines.description == "Read lines from a file."
    assert read_lines.parallel_safe is False
    assert read_lines.parameters == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The file to read."},
            "count": {"type": "integer", "description": "How many lines to read.", "default": 3},
            "ratio": {"type": "number", "description": "A ratio.", "default": 0.5},
            "follow": {"type": "boolean", "default": False},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
            "mode": {"enum": ["head", "tail"], "default": "head"},
        },
        "required": ["path"],
    }
    # The leading ToolContext parameter is not a property.
    assert "ctx" not in read_lines.parameters["properties"]


def test_decorator_options_override_name_description_and_parallel_safety() -> None:
    assert add.name == "sum-two"
    assert add.description == "Add two integers."
    assert add.parallel_safe is True
    assert add.parameters["required"] == ["a", "b"]


def test_decorator_without_docstring_uses_the_function_name() -> None:
    async def bare(x: int) -> int:
        return x

    assert tool(bare).description == "bare"


async def test_decorated_handler_receives_context_and_arguments() -> None:
    scope = ToolRegistry([read_lines]).scope()
    outcome = await call(scope, "read_lines", {"path": "a.txt", "mode": "tail"})
    # Defaults are applied by Python, not by validation.
    assert outcome == ToolOutcome("read_lines:a.txt:3:tail")


def test_decorator_rejects_a_sync_function() -> None:
    def sync(x: int) -> int:
        return x

    with pytest.raises(UsageError, match="must be an async function"):
        tool(sync)  # pyright: ignore[reportArgumentType]


def test_decorator_rejects_an_unsupported_parameter_type() -> None:
    async def takes_event(event: asyncio.Event) -> str:
        return ""

    with pytest.raises(UsageError, match="event"):
        tool(takes_event)


def test_decorator_rejects_a_context_parameter_that_is_not_first() -> None:
    async def late_context(a: int, ctx: ToolContext) -> str:
        return ""

    with pytest.raises(UsageError, match="first parameter"):
        tool(late_context)


def test_decorator_var_keyword_is_not_a_property() -> None:
    assert with_kwargs.parameters == {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
    }


# -- ToolSpec validation ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "1abc", "has space", "dot.name", "x" * 65, "ünïcode"])
def test_invalid_tool_names_raise_usage_error(name: str) -> None:
    with pytest.raises(UsageError, match="invalid tool name"):
        spec(name)


@pytest.mark.parametrize("name", ["a", "read_file", "sum-two", "A1", "x" * 64])
def test_valid_tool_names(name: str) -> None:
    assert spec(name).name == name


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "string"},
        {"properties": {}},
        {"type": "object", "properties": {"a": {"type": "no-such-type"}}},
        {"type": "object", "required": "a"},
    ],
)
def test_invalid_parameter_schemas_raise_usage_error(parameters: JsonObject) -> None:
    with pytest.raises(UsageError, match="parameters"):
        spec("t", parameters=parameters)


# -- registry and scopes ---------------------------------------------------------------------


def test_duplicate_registrations_raise_in_each_layer() -> None:
    registry = ToolRegistry([spec("a")])
    with pytest.raises(DuplicateError, match="'a'") as global_error:
        registry.register(spec("a"))
    assert global_error.value.code == ErrorCode.DUPLICATE
    with pytest.raises(DuplicateError):
        ToolRegistry([spec("b"), spec("b")])
    scope = registry.scope()
    scope.register(spec("a"))  # shadowing the global layer is not a duplicate
    with pytest.raises(DuplicateError, match="'a'"):
        scope.register(spec("a"))


async def test_agent_scope_shadows_global_and_unwinds_on_close() -> None:
    registry = ToolRegistry([spec("echo", "global"), spec("other")])
    mine, theirs = registry.scope(), registry.scope()
    mine.register(spec("echo", "agent", description="agent echo"))
    mine.register(spec("private"))

    assert (await call(mine, "echo", {})).content == "agent"
    assert (await call(theirs, "echo", {})).content == "global"
    # What the agent shares with the others comes first, its own tools after (prefix-stable).
    assert [s.name for s in mine.schemas()] == ["other", "echo", "private"]
    assert mine.schemas()[1].description == "agent echo"
    assert [s.name for s in theirs.schemas()] == ["echo", "other"]
    assert (await call(theirs, "private", {})).code == ErrorCode.UNKNOWN_TOOL

    mine.close()
    assert mine.closed
    assert mine.get("private") is None
    assert (await call(mine, "echo", {})).content == "global"
    assert [s.name for s in mine.schemas()] == ["echo", "other"]


async def test_an_unlisted_tool_is_callable_but_never_offered_in_its_scope_only() -> None:
    registry = ToolRegistry([spec("shared")])
    mine, theirs = registry.scope(), registry.scope()
    mine.register(spec("found", "found it"), listed=False)
    mine.register(spec("listed"))
    assert [s.name for s in mine.schemas()] == ["shared", "listed"]
    assert (await call(mine, "found", {})).content == "found it"
    theirs.register(spec("found"))  # the other scope's own tool is listed there
    assert [s.name for s in theirs.schemas()] == ["shared", "found"]
    # Unregistered, then registered again as listed: offered from now on.
    mine.unregister("found")
    assert mine.get("found") is None
    mine.register(spec("found"))
    assert [s.name for s in mine.schemas()] == ["shared", "found", "listed"]
    # Closing forgets what was unlisted: a later registration is listed.
    mine.register(spec("hidden"), listed=False)
    mine.close()
    mine.register(spec("hidden"))
    assert [s.name for s in mine.schemas()] == ["shared", "hidden"]


def test_restrict_masks_intersect_and_never_hide_own_registrations() -> None:
    registry = ToolRegistry([spec("a"), spec("b"), spec("c"), spec("d")])
    scope = registry.scope()
    scope.register(spec("own"))
    scope.restrict(allow=frozenset({"a", "b", "c"}))
    assert [s.name for s in scope.visible()] == ["a", "b", "c", "own"]
    scope.restrict(allow=frozenset({"b", "c", "d"}))  # intersects: never widens back to d
    assert [s.name for s in scope.visible()] == ["b", "c", "own"]
    scope.restrict(deny=frozenset({"c", "own"}))  # own registrations are never masked
    assert [s.name for s in scope.visible()] == ["b", "own"]
    assert [s.name for s in scope.schemas()] == ["b", "own"]
    assert scope.get("d") is None
    # An own tool shadowing a masked global name is still visible.
    scope.register(spec("a"))
    assert scope.get("a") is not None
    # Another agent's view is unaffected.
    assert [s.name for s in registry.scope().visible()] == ["a", "b", "c", "d"]


async def test_restricted_tool_is_unknown_to_the_agent() -> None:
    scope = ToolRegistry([spec("secret")]).scope()
    scope.restrict(deny=frozenset({"secret"}))
    outcome = await call(scope, "secret", {})
    assert outcome == ToolOutcome('Error: unknown tool "secret"', True, ErrorCode.UNKNOWN_TOOL)


def test_global_registration_after_a_scope_exists_reaches_its_schemas() -> None:
    registry = ToolRegistry([spec("a")])
    scope = registry.scope()
    assert [s.name for s in scope.schemas()] == ["a"]
    registry.register(spec("b"))
    assert [s.name for s in scope.schemas()] == ["a", "b"]
    registry.unregister("a")
    assert [s.name for s in scope.schemas()] == ["b"]


# -- guards ----------------------------------------------------------------------------------


async def test_guard_denies_with_its_reason_and_the_handler_is_not_called() -> None:
    calls: list[JsonObject] = []
    registry = ToolRegistry([spec("rm", parameters=None, calls=calls)])
    seen: list[tuple[str, JsonObject, str]] = []

    def no_rm(s: ToolSpec, args: JsonObject, ctx: ToolContext) -> str | None:
        seen.append((s.name, args, ctx.call_id))
        return "rm is not allowed here" if s.name == "rm" else None

    registry.add_guard(no_rm)
    outcome = await call(registry.scope(), "rm", {"path": "/"})
    assert outcome == ToolOutcome("Error: rm is not allowed here", True, ErrorCode.DENIED)
    assert calls == []
    assert seen == [("rm", {"path": "/"}, "call-1")]


async def test_a_guard_denial_cannot_be_overridden() -> None:
    calls: list[JsonObject] = []
    registry = ToolRegistry([spec("t", calls=calls)])
    order: list[str] = []

    def global_deny(s: ToolSpec, args: JsonObject, ctx: ToolContext) -> str | None:
        order.append("global")
        return "denied globally"

    def agent_allow(s: ToolSpec, args: JsonObject, ctx: ToolContext) -> str | None:
        order.append("agent")
        return None

    def agent_deny(s: ToolSpec, args: JsonObject, ctx: ToolContext) -> str | None:
        order.append("agent-deny")
        return "denied by the agent"

    registry.add_guard(global_deny)
    scope = registry.scope()
    scope.add_guard(agent_allow)
    scope.add_guard(agent_deny)
    outcome = await call(scope, "t", {})
    # Global guards run first; the first reason denies and nothing later can allow.
    assert outcome == ToolOutcome("Error: denied globally", True, ErrorCode.DENIED)
    assert order == ["global"]
    assert calls == []

    # Without the global denial, an allowing guard does not cancel a later denial.
    other = ToolRegistry([spec("t", calls=calls)]).scope()
    other.add_guard(agent_allow)
    other.add_guard(agent_deny)
    assert await call(other, "t", {}) == ToolOutcome(
        "Error: denied by the agent", True, ErrorCode.DENIED
    )
    assert calls == []


def test_removing_a_global_guard() -> None:
    registry = ToolRegistry()

    def guard(s: ToolSpec, args: JsonObject, ctx: ToolContext) -> str | None:
        return "no"

    remove = registry.add_guard(guard)
    assert registry.guards == (guard,)
    remove()
    remove()  # idempotent
    assert registry.guards == ()


# -- argument handling -----------------------------------------------------------------------

PATH_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "options": {
            "type": "object",
            "properties": {"recursive": {"type": "boolean"}},
            "additionalProperties": False,
        },
    },
    "required": ["path"],
}


async def test_missing_required_argument_is_invalid_args_and_handler_not_called() -> None:
    calls: list[JsonObject] = []
    scope = ToolRegistry([spec("read", parameters=PATH_SCHEMA, calls=calls)]).scope()
    outcome = await call(scope, "read", {})
    assert outcome.is_error
    assert outcome.code == ErrorCode.INVALID_ARGS
    assert outcome.content.startswith("Error: invalid arguments:")
    assert "'path' is a required property" in outcome.content
    assert calls == []


async def test_every_violation_is_listed_with_its_path() -> None:
    calls: list[JsonObject] = []
    scope = ToolRegistry([spec("read", parameters=PATH_SCHEMA, calls=calls)]).scope()
    outcome = await call(scope, "read", {"path": 3, "options": {"recursive": "yes", "x": 1}})
    assert outcome.code == ErrorCode.INVALID_ARGS
    assert "path: 3 is not of type 'string'" in outcome.content
    assert "options/recursive: 'yes' is not of type 'boolean'" in outcome.content
    assert "options: Additional properties are not allowed ('x' was unexpected)" in (
        outcome.content
    )
    assert calls == []


async def test_undeclared_keys_are_accepted_by_validation() -> None:
    calls: list[JsonObject] = []
    scope = ToolRegistry([spec("read", parameters=PATH_SCHEMA, calls=calls)]).scope()
    outcome = await call(scope, "read", {"path": "a", "extra": True})
    assert outcome == ToolOutcome("ok")
    assert calls == [{"path": "a", "extra": True}]


async def test_undeclared_keys_do_not_break_a_decorated_tool() -> None:
    scope = ToolRegistry([read_lines, with_kwargs]).scope()
    outcome = await call(scope, "read_lines", {"path": "a", "undeclared": 1})
    assert outcome == ToolOutcome("read_lines:a:3:head")
    outcome = await call(scope, "with_kwargs", {"a": 1, "b": [2]})
    assert outcome == ToolOutcome('{"a":1,"extra":{"b":[2]}}')


async def test_unknown_tool() -> None:
    scope = ToolRegistry([spec("known")]).scope()
    outcome = await call(scope, "nope", {})
    assert outcome == ToolOutcome('Error: unknown tool "nope"', True, ErrorCode.UNKNOWN_TOOL)


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        ('{"path": ', "not valid JSON"),
        ("not json", "not valid JSON"),
        ('["a"]', "expected a JSON object, got list"),
        ('"a"', "expected a JSON object, got str"),
        ("3", "expected a JSON object, got int"),
        ("null", "expected a JSON object, got NoneType"),
    ],
)
async def test_malformed_argument_strings_are_invalid_args(raw: str, detail: str) -> None:
    calls: list[JsonObject] = []
    scope = ToolRegistry([spec("t", calls=calls)]).scope()
    outcome = await call(scope, "t", raw)
    assert outcome.is_error
    assert outcome.code == ErrorCode.INVALID_ARGS
    assert outcome.content.startswith(f"Error: invalid arguments: {detail}")
    assert calls == []


class _Text(str):
    """A `str` subclass, as a caller's own string type may be."""


def test_an_argument_string_of_a_str_subclass_parses_as_a_str() -> None:
    assert parse_arguments(_Text('{"a": [1, "b"]}')) == {"a": [1, "b"]}


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300)
@given(
    st.dictionaries(st.text(), _JSON_VALUES, max_size=4)
    | st.sampled_from(['{"a": NaN}', '{"a": 1e400}', '{"a": "\\ud800"}', '{"a": 1, "a": 2}'])
    | st.sampled_from(['{"a": "\udc00"}', '["\ud800"]', '{"\udfff": 1}'])  # raw surrogates
    | st.text(),
    st.booleans(),
)
def test_arguments_parse_as_the_standard_json_module_parses_them(
    value: JsonObject | str, ascii_only: bool
) -> None:
    raw = value if isinstance(value, str) else json.dumps(value, ensure_ascii=ascii_only)
    parsed = parse_arguments(raw)
    try:
        expected: object = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        assert isinstance(parsed, ToolOutcome)
        assert parsed.code == ErrorCode.INVALID_ARGS
        return
    if isinstance(expected, dict):
        assert parsed == expected or json.dumps(parsed) == json.dumps(expected)  # NaN != NaN
    else:
        assert isinstance(parsed, ToolOutcome)
        assert parsed.code == ErrorCode.INVALID_ARGS


@pytest.mark.parametrize("raw", ["", "   "])
async def test_empty_argument_string_means_an_empty_object(raw: str) -> None:
    calls: list[JsonObject] = []
    scope = ToolRegistry([spec("t", calls=calls)]).scope()
    assert await call(scope, "t", raw) == ToolOutcome("ok")
    assert calls == [{}]


# -- handler outcomes ------------------------------------------------------------------------


async def test_a_raising_handler_becomes_an_error_result() -> None:
    @tool
    async def broken() -> str:
        raise RuntimeError("disk on fire")

    outcome = await call(ToolRegistry([broken]).scope(), "broken", {})
    assert outcome == ToolOutcome("Error: RuntimeError: disk on fire", True, ErrorCode.TOOL_FAILED)


async def test_a_tool_error_keeps_its_message_and_code() -> None:
    @tool
    async def picky() -> str:
        raise ToolError("the file is locked; retry later", code=ErrorCode.TOOL_FAILED)

    outcome = await call(ToolRegistry([picky]).scope(), "picky", {})
    assert outcome == ToolOutcome(
        "Error: the file is locked; retry later", True, ErrorCode.TOOL_FAILED
    )


@pytest.mark.parametrize(
    ("value", "content"),
    [
        ("plain text", "plain text"),
        ({"b": 1, "a": [1.5, None, True]}, '{"b":1,"a":[1.5,null,true]}'),
        (["x", 2], '["x",2]'),
        (7, "7"),
        (None, "null"),
        ("ünï", "ünï"),
        ({"k": "ünï"}, '{"k":"ünï"}'),
    ],
)
async def test_json_values_are_rendered_compactly(value: JsonValue, content: str) -> None:
    outcome = await call(ToolRegistry([spec("t", value)]).scope(), "t", {})
    assert outcome == ToolOutcome(content)


@pytest.mark.parametrize(
    "value", [{1, 2}, object(), {"x": float("nan")}, [float("inf")], {"b": b"bytes"}]
)
async def test_a_non_json_return_is_invalid_tool_output(value: JsonValue) -> None:
    outcome = await call(ToolRegistry([spec("t", value)]).scope(), "t", {})
    assert outcome.is_error
    assert outcome.code == ErrorCode.INVALID_TOOL_OUTPUT
    assert outcome.content.startswith('Error: tool "t" returned invalid output: ')


async def test_explicit_tool_results() -> None:
    registry = ToolRegistry(
        [
            spec("good", ToolResult("fine")),
            spec("bad", ToolResult("Error: try again", is_error=True)),
            spec("coded", ToolResult("Error: nope", is_error=True, code=ErrorCode.DENIED)),
        ]
    )
    scope = registry.scope()
    assert await call(scope, "good", {}) == ToolOutcome("fine")
    assert await call(scope, "bad", {}) == ToolOutcome(
        "Error: try again", True, ErrorCode.TOOL_FAILED
    )
    assert await call(scope, "coded", {}) == ToolOutcome("Error: nope", True, ErrorCode.DENIED)


async def test_conclude_turn_marks_only_a_successful_result() -> None:
    @tool
    async def finish(ctx: ToolContext) -> str:
        ctx.conclude_turn()
        return "done"

    @tool
    async def finish_then_fail(ctx: ToolContext) -> str:
        ctx.conclude_turn()
        raise RuntimeError("boom")

    scope = ToolRegistry([finish, finish_then_fail]).scope()
    assert await call(scope, "finish", {}) == ToolOutcome("done", concludes_turn=True)
    failed = await call(scope, "finish_then_fail", {})
    assert failed.is_error
    assert not failed.concludes_turn


# -- through an agent ------------------------------------------------------------------------

AGENT_SCRIPT = """
lead:
  - calls:
      - {tool: private, args: {}}
      - {tool: shared, args: {}}
  - text: done
"""


async def test_agent_scoped_tools_are_private_and_unwind_on_dispose(clock: FakeClock) -> None:
    model = ScriptedModel.from_yaml(AGENT_SCRIPT, clock=clock)
    async with AgentRuntime(
        model=model, store=InMemoryEventStore(), tools=[spec("shared", "global")], clock=clock
    ) as rt:
        lead = await rt.create_agent()
        other = await rt.create_agent()
        lead.tools.register(spec("private", "mine"))
        lead.tools.register(spec("shared", "shadowed"))
        assert other.tools.get("private") is None

        await lead.followup("go")
        await lead.when_idle()
        results = [r.event for r in lead.session.records if isinstance(r.event, ToolResultEvent)]
        assert [(e.message.name, e.message.content) for e in results] == [
            ("private", "mine"),
            ("shared", "shadowed"),
        ]

        await lead.dispose()
        assert lead.tools.closed
        assert lead.tools.get("private") is None
        shared = lead.tools.get("shared")
        assert shared is not None
        assert shared.description == "the shared tool"
    model.assert_complete()


GUARD_SCRIPT = """
lead:
  - calls:
      - {tool: rm, args: {path: /}}
  - text: I may not do that.
"""


async def test_a_denial_is_recorded_in_the_log_with_its_code(clock: FakeClock) -> None:
    calls: list[JsonObject] = []
    model = ScriptedModel.from_yaml(GUARD_SCRIPT, clock=clock)
    async with AgentRuntime(
        model=model, store=InMemoryEventStore(), tools=[spec("rm", calls=calls)], clock=clock
    ) as rt:

        def deny_root(s: ToolSpec, args: JsonObject, ctx: ToolContext) -> str | None:
            return "deleting / is not allowed" if args.get("path") == "/" else None

        rt.tools.add_guard(deny_root)
        result = await rt.run("clean up")
        assert result.stop_reason == "completed"
        agent = next(iter(rt.agents.values()))
        (event,) = [r.event for r in agent.session.records if isinstance(r.event, ToolResultEvent)]
        assert event.code == ErrorCode.DENIED
        assert event.message.content == "Error: deleting / is not allowed"
        assert event.message.is_error
        assert calls == []
    model.assert_complete()
