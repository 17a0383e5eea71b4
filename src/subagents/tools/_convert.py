"""From a `@tool` parameter's type hint to its JSON Schema and back from JSON to that type.

The model sends JSON; a handler declares Python types. Plain JSON types (str, int, lists and
dicts of them) pass through untouched. Dataclasses, msgspec Structs, enums and tuples, at any
depth, are built with `msgspec.convert`, which shares its type rules with `msgspec.json.schema`,
so the schema the model sees and the decoding agree. Annotations that contain a pydantic model
go through a pydantic `TypeAdapter` instead (pydantic is optional: it is only consulted when the
user's code has imported it, since only then can an annotation hold one of its models).
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from ..errors import ToolArgsError
from ..messages import JsonObject

__all__ = ["ParamCodec", "json_default", "param_codec"]

_PASS_THROUGH: frozenset[object] = frozenset(
    {str, int, float, bool, type(None), list, dict, object, msgspec.UnsetType}
)
"""Types whose JSON value already is the Python value the handler expects (`UnsetType` only
marks a parameter the model may leave out: it never arrives as JSON)."""


@dataclass(frozen=True, slots=True)
class ParamCodec:
    """One parameter's schema and the conversion of its JSON value (None: pass it as is)."""

    schema: JsonObject
    convert: Callable[[Any], Any] | None


def param_codec(name: str, annotation: Any) -> ParamCodec:
    """The codec of parameter `name`; `TypeError` if no JSON Schema describes `annotation`.

    A value that does not convert raises `ToolArgsError` (code INVALID_ARGS), which the tool
    pipeline hands back to the model as an error result it can correct.
    """
    if _mentions_pydantic_model(annotation):
        return _pydantic_codec(name, annotation)
    schema = dict(msgspec.json.schema(annotation, ref_template="#/$defs/{name}"))
    if not _needs_conversion(annotation):
        return ParamCodec(schema, None)

    def convert(value: Any) -> Any:
        try:
            return msgspec.convert(value, type=annotation)
        except msgspec.ValidationError as exc:
            raise ToolArgsError(f"invalid arguments: {name}: {exc}") from exc

    return ParamCodec(schema, convert)


def json_default(value: Any) -> Any:
    """A parameter's default as JSON for the schema, or None when it has no JSON form."""
    if value is msgspec.UNSET:
        return None  # optional, with no default to advertise
    try:
        return msgspec.to_builtins(value)
    except TypeError:
        pass
    dump = getattr(value, "model_dump", None)  # a pydantic model instance
    if callable(dump):
        return dump(mode="json")
    return None  # the default is only a hint to the model: leave it out


def _walk(annotation: Any) -> Iterator[Any]:
    """`annotation` and every type nested in it (Literal values and forward refs excluded)."""
    yield annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return
    if origin is typing.Annotated:
        yield from _walk(typing.get_args(annotation)[0])
        return
    supertype = getattr(annotation, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        yield from _walk(supertype)
    for arg in typing.get_args(annotation):
        if arg is not Ellipsis and not isinstance(arg, typing.ForwardRef | str):
            yield from _walk(arg)


def _needs_conversion(annotation: Any) -> bool:
    for item in _walk(annotation):
        origin = typing.get_origin(item)
        if origin in (typing.Union, types.UnionType, typing.Annotated, typing.Literal):
            continue
        if origin is not None:
            if origin not in _PASS_THROUGH:
                return True  # tuple, set, frozenset, ...: msgspec builds the declared container
            continue
        if isinstance(item, type) and item not in _PASS_THROUGH:
            return True
    return False


def _mentions_pydantic_model(annotation: Any) -> bool:
    if "pydantic" not in sys.modules:
        return False
    from pydantic import BaseModel

    return any(isinstance(t, type) and issubclass(t, BaseModel) for t in _walk(annotation))


def _pydantic_codec(name: str, annotation: Any) -> ParamCodec:
    from pydantic import PydanticSchemaGenerationError, TypeAdapter, ValidationError

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        schema = adapter.json_schema(ref_template="#/$defs/{model}")
    except PydanticSchemaGenerationError as exc:
        raise TypeError(str(exc)) from exc

    def convert(value: Any) -> Any:
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            problems = "; ".join(
                "/".join([name, *(str(p) for p in error["loc"])]) + f": {error['msg']}"
                for error in exc.errors()
            )
            raise ToolArgsError(f"invalid arguments: {problems}") from exc

    return ParamCodec(schema, convert)
