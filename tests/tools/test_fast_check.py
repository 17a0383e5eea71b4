"""The fast argument check never accepts what `jsonschema` refuses, on every shipped tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from subagents import Runtime
from subagents.messages import JsonObject
from subagents.testing import InMemoryEventStore, ScriptedModel
from subagents.tools import ToolSpec, tool, validate_arguments
from subagents.tools._fast_check import fast_check

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


async def _shipped_specs(tmp_path: Path) -> list[ToolSpec]:
    """Every tool a runtime with delegation offers its lead (the built-in tools included)."""
    async with Runtime(
        model=ScriptedModel({"lead": []}), store=InMemoryEventStore(), cwd=str(tmp_path)
    ) as rt:
        agent = await rt.create_agent()
        agent.prepared()
        return [s for s in (agent.tools.get(t.name) for t in agent.tools.schemas()) if s]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> list[ToolSpec]:
    import asyncio

    specs = asyncio.run(_shipped_specs(tmp_path_factory.mktemp("fast")))
    assert len(specs) >= 10
    assert all(s.fast_valid is not None for s in specs)  # every shipped schema compiles
    return specs


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_what_the_fast_check_accepts_jsonschema_accepts(
    shipped: list[ToolSpec], data: st.DataObject
) -> None:
    spec = data.draw(st.sampled_from(shipped))
    properties: dict[str, Any] = spec.parameters.get("properties", {})
    keys = st.sampled_from(sorted(properties)) if properties else st.text(max_size=4)
    args: JsonObject = data.draw(st.dictionaries(keys | st.text(max_size=4), values, max_size=4))
    assert spec.fast_valid is not None
    fast = spec.fast_valid(args)
    slow = not list(spec.validator.iter_errors(args))  # pyright: ignore[reportUnknownMemberType]
    if fast:
        assert slow, (spec.name, args)
    assert (validate_arguments(spec, args) is None) == slow  # the reference decides


def test_a_schema_the_fast_check_cannot_compile_is_checked_by_jsonschema_alone() -> None:
    # A pattern Python's `re` takes and Rust's regex engine refuses (a named backreference
    # in Python's own spelling).
    schema: JsonObject = {"type": "object", "properties": {"x": {"pattern": r"(?P<n>a)(?P=n)"}}}
    assert fast_check(schema) is None

    @tool(name="echo_pattern")
    async def echo(x: str) -> str:
        return x

    spec = ToolSpec(name="patterned", description="d", parameters=schema, handler=echo.handler)
    assert spec.fast_valid is None
    assert validate_arguments(spec, {"x": "aa"}) is None
    refused = validate_arguments(spec, {"x": "ab"})
    assert refused is not None
    assert "does not match" in refused.content
