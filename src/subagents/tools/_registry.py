"""Tool registries: one global layer, and per-agent layers that shadow it and unwind on close."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import TypeAlias

from ..errors import DuplicateError
from ..messages import JsonObject
from ..models import ToolSchema
from ._definition import ToolContext, ToolSpec

__all__ = ["Guard", "ToolRegistry", "ToolScope", "offered"]

Guard: TypeAlias = Callable[[ToolSpec, JsonObject, ToolContext], str | None]
"""A guard returns a reason to deny the call, or None to let it through."""

_NO_NAMES: frozenset[str] = frozenset()
"""What a scope starts with for its name sets: one shared empty set, not three per agent
(every agent has a scope, and a fan-out holds thousands)."""
_NO_SPECS: Mapping[str, ToolSpec] = MappingProxyType({})
"""And for its own tools: one shared empty mapping, which nothing can change in place."""


def offered(specs: Iterable[ToolSpec], own: Iterable[ToolSpec] = ()) -> tuple[ToolSchema, ...]:
    """The schemas a model is sent, in the order that keeps requests prefix-stable.

    Untagged tools first, then tagged ones (the delegation tools, which a leaf does not
    get), then the agent's own (a child's `report`, a structured answer): each group sorted
    by name, so agents of a tree that differ only in those share the longest prefix with a
    server's cache. A description is rendered for the names offered (`ToolSpec.describe`).
    """
    shared = sorted(specs, key=lambda s: (bool(s.tags), s.name))
    ordered = [*shared, *sorted(own, key=lambda s: s.name)]
    names = frozenset(s.name for s in ordered)
    return tuple(
        ToolSchema(s.name, s.describe(names) if s.describe else s.description, s.parameters)
        for s in ordered
    )


class ToolRegistry:
    """The global layer: tools every agent of a runtime can see, and global guards."""

    def __init__(self, tools: tuple[ToolSpec, ...] | list[ToolSpec] = ()) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._guards: list[Guard] = []
        self.generation = 0
        self._schemas: tuple[ToolSchema, ...] | None = None
        self._schemas_generation = -1
        """Bumped on every change, so agent scopes know their cached schemas are stale."""
        for spec in tools:
            self.register(spec)

    def register(self, spec: ToolSpec) -> None:
        if spec.name in self._tools:
            raise DuplicateError(f"tool {spec.name!r} is already registered in this layer")
        self._tools[spec.name] = spec
        self.generation += 1

    def unregister(self, name: str) -> None:
        if self._tools.pop(name, None) is not None:
            self.generation += 1

    def add_guard(self, guard: Guard) -> Callable[[], None]:
        """Add a guard; returns a function that removes it."""
        self._guards.append(guard)
        return lambda: self._guards.remove(guard) if guard in self._guards else None

    def get(self, name: str) -> ToolSpec | None:
        return self._tools.get(name)

    def names(self) -> Iterator[str]:
        return iter(self._tools)

    def schemas(self) -> tuple[ToolSchema, ...]:
        """Schemas of every tool (in `offered` order); shared by the scopes that add nothing."""
        if self._schemas is None or self._schemas_generation != self.generation:
            self._schemas_generation = self.generation
            self._schemas = offered(self._tools.values())
        return self._schemas

    @property
    def guards(self) -> tuple[Guard, ...]:
        return tuple(self._guards)

    def scope(self) -> ToolScope:
        """A new agent layer over this registry."""
        return ToolScope(self)


class ToolScope:
    """One agent's view of the tools.

    Its own tools shadow global ones of the same name; `allow`/`deny` masks narrow what it
    inherits (never its own registrations), hidden tags what it lists; `close()` unwinds it.
    """

    # One per agent: no dict each (a fan-out holds thousands).
    __slots__ = (
        "_allow",
        "_base",
        "_deny",
        "_guards",
        "_hidden_tags",
        "_own",
        "_schemas",
        "_schemas_generation",
        "_unlisted",
        "closed",
    )

    def __init__(self, base: ToolRegistry) -> None:
        self._base = base
        self._own: Mapping[str, ToolSpec] = _NO_SPECS
        """Its own tools (a mapping replaced on change: most agents register none)."""
        self._unlisted = _NO_NAMES
        self._guards: tuple[Guard, ...] = ()
        """Its own guards (a tuple replaced on change: most agents add none)."""
        self._allow: frozenset[str] | None = None
        self._deny = _NO_NAMES
        self._hidden_tags = _NO_NAMES
        self._schemas: tuple[ToolSchema, ...] | None = None
        self._schemas_generation = base.generation
        self.closed = False

    def register(self, spec: ToolSpec, *, listed: bool = True) -> None:
        """Add a tool of this agent's own.

        An unlisted one is callable but never offered: a tool the model finds through a
        search tool, which returned its schema.
        """
        if spec.name in self._own:
            raise DuplicateError(f"tool {spec.name!r} is already registered for this agent")
        self._own = {**self._own, spec.name: spec}
        if not listed:
            self._unlisted = self._unlisted | {spec.name}
        self._schemas = None

    def unregister(self, name: str) -> None:
        """Remove a tool of this agent's own (a search tool replaced by a wider one)."""
        if name in self._own:
            self._own = {n: s for n, s in self._own.items() if n != name}
            self._unlisted = self._unlisted - {name}
            self._schemas = None

    def add_guard(self, guard: Guard) -> None:
        self._guards = (*self._guards, guard)

    def restrict(
        self, *, allow: frozenset[str] | None = None, deny: frozenset[str] = frozenset()
    ) -> None:
        """Narrow the inherited tools; masks intersect, so a later call never widens."""
        if allow is not None:
            self._allow = allow if self._allow is None else self._allow & allow
        self._deny = self._deny | deny
        self._schemas = None

    def hide(self, tags: Iterable[str]) -> None:
        """Stop offering inherited tools with any of `tags` (a leaf's delegation tools, say).

        Hiding is about what the model is shown, not a permission (`restrict` is): a hidden
        tool is not listed, but a call to it still reaches it, so its own refusal says why
        (a fork that remembers its parent calling `subagent` learns its depth is spent).
        """
        self._hidden_tags = self._hidden_tags | frozenset(tags)
        self._schemas = None

    def get(self, name: str) -> ToolSpec | None:
        own = self._own.get(name)
        if own is not None:
            return own
        if name in self._deny or (self._allow is not None and name not in self._allow):
            return None
        return self._base.get(name)

    def visible(self) -> list[ToolSpec]:
        """The tools this scope offers (a hidden one can still be called, see `hide`)."""
        names = set(self._own) | set(self._base.names())
        specs = [self.get(n) for n in sorted(names)]
        return [
            s
            for s in specs
            if s is not None
            and s.name not in self._unlisted
            and (s.name in self._own or not s.tags & self._hidden_tags)
        ]

    def schemas(self) -> tuple[ToolSchema, ...]:
        """Schemas of the visible tools, in `offered` order (recomputed only after a change)."""
        if not self._own and self._allow is None and not self._deny and not self._hidden_tags:
            return self._base.schemas()  # nothing of its own: the registry's cached tuple
        if self._schemas is None or self._schemas_generation != self._base.generation:
            self._schemas_generation = self._base.generation
            inherited = [s for s in self.visible() if s.name not in self._own]
            own = [s for s in self._own.values() if s.name not in self._unlisted]
            self._schemas = offered(inherited, own)
        return self._schemas

    def invalidate(self) -> None:
        """Forget cached schemas (after the global layer changed)."""
        self._schemas = None

    def guards(self) -> tuple[Guard, ...]:
        return (*self._base.guards, *self._guards)

    def close(self) -> None:
        self._own = _NO_SPECS
        self._unlisted = _NO_NAMES
        self._guards = ()
        self._schemas = None
        self.closed = True
