"""`@tool` parameters typed as dataclasses, msgspec Structs or pydantic models (issue 11).

The handler must receive the declared type (at any depth), the model must be offered a schema
that describes its fields, and arguments that do not fit come back as an INVALID_ARGS result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

import msgspec
import pytest

from subagents.errors import ErrorCode
from subagents.messages import JsonObject, ToolCallBlock
from subagents.testing import ToolCallContext
from subagents.tools import ToolOutcome, ToolRegistry, ToolSpec, execute_tool, tool


async def call(spec: ToolSpec, arguments: JsonObject) -> ToolOutcome:
    ctx = ToolCallContext(spec.name)
    block = ToolCallBlock(id="call-1", name=spec.name, arguments=json.dumps(arguments))
    return await execute_tool(ToolRegistry([spec]).scope(), block, ctx, concluded=ctx.concluded)


def resolve(parameters: JsonObject, schema: JsonObject) -> JsonObject:
    """Follow a `$ref` into the tool's `$defs`."""
    ref = schema.get("$ref")
    if ref is None:
        return schema
    return parameters["$defs"][str(ref).removeprefix("#/$defs/")]


@dataclass
class Point:
    x: int
    y: int = 0


class Shade(Enum):
    LIGHT = "light"
    DARK = "dark"


class Polygon(msgspec.Struct):
    name: str
    corners: list[Point]
    shade: Shade = Shade.LIGHT


@tool
async def describe(origin: Point, shape: Polygon, extra: list[Point], size: tuple[int, int]) -> str:
    """Describe a shape."""
    # Attribute access is the point: a plain dict would raise AttributeError here.
    corners = ",".join(f"{c.x}/{c.y}" for c in shape.corners)
    return (
        f"{type(origin).__name__}({origin.x},{origin.y}) {shape.name}[{corners}] "
        f"{shape.shade.name} {[type(p).__name__ for p in extra]} {size!r}"
    )


async def test_dataclass_struct_and_nested_list_arrive_as_declared_types() -> None:
    outcome = await call(
        describe,
        {
            "origin": {"x": 1},
            "shape": {"name": "tri", "corners": [{"x": 1, "y": 2}, {"x": 3}], "shade": "dark"},
            "extra": [{"x": 5}, {"x": 6, "y": 7}],
            "size": [2, 3],
        },
    )
    assert outcome == ToolOutcome("Point(1,0) tri[1/2,3/0] DARK ['Point', 'Point'] (2, 3)")


def test_schema_describes_dataclass_and_struct_fields() -> None:
    params = describe.parameters
    point = resolve(params, params["properties"]["origin"])
    assert point["type"] == "object"
    assert set(point["properties"]) == {"x", "y"}
    assert point["required"] == ["x"]
    polygon = resolve(params, params["properties"]["shape"])
    assert polygon["required"] == ["name", "corners"]
    corners = polygon["properties"]["corners"]
    assert corners["type"] == "array"
    assert resolve(params, corners["items"]) == point
    extra = params["properties"]["extra"]
    assert resolve(params, extra["items"]) == point


async def test_missing_nested_field_is_an_invalid_args_result() -> None:
    outcome = await call(
        describe,
        {
            "origin": {"x": 1},
            "shape": {"name": "t", "corners": [{"y": 2}]},
            "extra": [],
            "size": [1, 2],
        },
    )
    assert outcome.is_error
    assert outcome.code == ErrorCode.INVALID_ARGS
    assert "'x' is a required property" in outcome.content


@tool
async def bounded(point: Point) -> str:
    """Takes a point."""
    return f"{point.x}"


async def test_conversion_errors_are_invalid_args_even_without_schema_validation() -> None:
    # A tool that turns validation off still must not see a dict in place of a Point.
    unchecked = ToolSpec(
        name="bounded",
        description="no schema check",
        parameters=bounded.parameters,
        handler=bounded.handler,
        validate=False,
    )
    outcome = await call(unchecked, {"point": {"x": "one"}})
    assert outcome.is_error
    assert outcome.code == ErrorCode.INVALID_ARGS
    assert outcome.content.startswith("Error: invalid arguments: point: ")
    assert "Expected `int`, got `str`" in outcome.content
    assert "\n" not in outcome.content


async def test_plain_json_parameters_are_passed_untouched() -> None:
    seen: list[Any] = []

    @tool
    async def raw(data: dict[str, Any], items: list[int]) -> str:
        """Keep the values."""
        seen.extend([data, items])
        return "ok"

    payload = {"nested": {"k": [1, 2]}}
    assert await call(raw, {"data": payload, "items": [1, 2]}) == ToolOutcome("ok")
    assert seen == [payload, [1, 2]]
    assert type(seen[0]) is dict


# -- pydantic (installed in the dev venv as a dependency of openai; skipped if absent) --------

pydantic = pytest.importorskip("pydantic")


class Address(pydantic.BaseModel):
    street: str
    number: int

    @pydantic.field_validator("number")
    @classmethod
    def positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("house numbers start at 1")
        return value


class Person(pydantic.BaseModel):
    name: str
    homes: list[Address] = pydantic.Field(default_factory=list)
    where: Point | None = None


@tool
async def register(person: Person, others: list[Address]) -> str:
    """Register a person."""
    homes = ";".join(f"{h.street} {h.number}" for h in person.homes)
    where = f"{type(person.where).__name__}({person.where.x})" if person.where else "-"
    return f"{type(person).__name__} {person.name} [{homes}] {where} {len(others)}"


async def test_pydantic_models_arrive_validated_and_nested() -> None:
    outcome = await call(
        register,
        {
            "person": {
                "name": "Ada",
                "homes": [{"street": "Main", "number": 3}],
                "where": {"x": 4},
            },
            "others": [{"street": "Side", "number": 1}],
        },
    )
    assert outcome == ToolOutcome("Person Ada [Main 3] Point(4) 1")


def test_pydantic_schema_describes_the_model() -> None:
    params = register.parameters
    person = resolve(params, params["properties"]["person"])
    assert person["type"] == "object"
    assert set(person["properties"]) == {"name", "homes", "where"}
    assert person["required"] == ["name"]
    address = resolve(params, params["properties"]["others"]["items"])
    assert set(address["properties"]) == {"street", "number"}


async def test_pydantic_validator_failure_is_an_invalid_args_result() -> None:
    outcome = await call(
        register, {"person": {"name": "Ada"}, "others": [{"street": "Side", "number": 0}]}
    )
    assert outcome.is_error
    assert outcome.code == ErrorCode.INVALID_ARGS
    assert outcome.content.startswith("Error: invalid arguments: others/0/number: ")
    assert "house numbers start at 1" in outcome.content
