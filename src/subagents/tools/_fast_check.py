"""A fast first look at tool arguments: `jsonschema-rs` says quickly whether they are valid.

The `jsonschema` package stays the reference (its messages are what the model reads when
arguments are wrong), but walking a schema in Python costs some 15 us for the smallest tool,
once per call. Arguments `jsonschema-rs` finds valid (nearly all of them) pass in well under a
microsecond; anything else is looked at by `jsonschema` itself, whose verdict stands, so a
schema the two read differently is never refused by the fast one. A schema `jsonschema-rs`
cannot compile is checked by `jsonschema` alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..messages import JsonObject

__all__ = ["fast_check"]

FastCheck = Callable[[Any], bool]

_compiled: dict[str, FastCheck | None] = {}
"""Compiled checks by canonical schema: every runtime builds its tool specs afresh."""


def fast_check(schema: JsonObject) -> FastCheck | None:
    """A function telling whether a value is valid against `schema`, or None: check it slowly.

    Compiled once per schema (formats are not asserted, as `jsonschema` does not by default).
    """
    try:
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    if key in _compiled:
        return _compiled[key]
    check: FastCheck | None
    try:
        import jsonschema_rs

        check = jsonschema_rs.Draft202012Validator(schema, validate_formats=False).is_valid
    except Exception:
        check = None
    _compiled[key] = check
    return check
