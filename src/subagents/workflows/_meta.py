"""Workflow meta: identity data that rides beside the script, validated and normalized.

Meta is data, never code. `parse_meta` lists every violation at once (`META_INVALID`) and
returns a normalized copy holding only the known fields, so the caller's object is never
aliased.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from ..errors import ErrorCode, WorkflowError
from ..messages import JsonObject

__all__ = ["PhaseMeta", "WorkflowMeta", "parse_meta"]

_META_FIELDS = ("name", "description", "whenToUse", "phases")
_PHASE_FIELDS = ("title", "detail", "provider", "model")


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseMeta:
    """One declared phase (progress vocabulary only; titles are not checked against it)."""

    title: str
    detail: str | None = None
    provider: str | None = None
    model: str | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"title": self.title}
        for key in ("detail", "provider", "model"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowMeta:
    """A workflow's identity: a short kebab-case name, a one-line description, and more."""

    name: str
    description: str
    when_to_use: str | None = None
    phases: tuple[PhaseMeta, ...] | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"name": self.name, "description": self.description}
        if self.when_to_use is not None:
            out["whenToUse"] = self.when_to_use
        if self.phases is not None:
            out["phases"] = [p.to_json() for p in self.phases]
        return out


def _non_empty(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def parse_meta(meta: object) -> WorkflowMeta:
    """The normalized meta, or `WorkflowError(META_INVALID)` listing every violation."""
    if not isinstance(meta, dict):
        raise _invalid(["meta must be an object"])
    fields = cast("JsonObject", meta)
    problems: list[str] = [
        f"meta.{key} is not a recognized field (name/description/whenToUse/phases)"
        for key in fields
        if key not in _META_FIELDS
    ]
    name, description = fields.get("name"), fields.get("description")
    if not _non_empty(name):
        problems.append("meta.name must be a non-empty string")
    if not _non_empty(description):
        problems.append("meta.description must be a non-empty string")
    when = fields.get("whenToUse")
    if "whenToUse" in fields and not isinstance(when, str):
        problems.append("meta.whenToUse must be a string")
    phases: list[PhaseMeta] | None = None
    if "phases" in fields:
        raw = fields["phases"]
        if isinstance(raw, list):
            phases = []
            for index, item in enumerate(cast("list[object]", raw)):
                phase = _phase(item, f"meta.phases[{index}]", problems)
                if phase is not None:
                    phases.append(phase)
        else:
            problems.append("meta.phases must be an array")
    if problems:
        raise _invalid(problems)
    return WorkflowMeta(
        name=cast("str", name),
        description=cast("str", description),
        when_to_use=cast("str | None", when),
        phases=tuple(phases) if phases is not None else None,
    )


def _phase(item: object, path: str, problems: list[str]) -> PhaseMeta | None:
    if not isinstance(item, dict):
        problems.append(f"{path} must be an object")
        return None
    fields = cast("JsonObject", item)
    before = len(problems)
    problems.extend(
        f"{path}.{key} is not a recognized field (title/detail/provider/model)"
        for key in fields
        if key not in _PHASE_FIELDS
    )
    if not _non_empty(fields.get("title")):
        problems.append(f"{path}.title must be a non-empty string")
    problems.extend(
        f"{path}.{key} must be a string"
        for key in ("detail", "provider", "model")
        if key in fields and not isinstance(fields[key], str)
    )
    if len(problems) > before:
        return None
    return PhaseMeta(
        title=fields["title"],
        detail=fields.get("detail"),
        provider=fields.get("provider"),
        model=fields.get("model"),
    )


def _invalid(problems: list[str]) -> WorkflowError:
    return WorkflowError(
        "invalid meta: " + "; ".join(problems), code=ErrorCode.META_INVALID, problems=problems
    )
