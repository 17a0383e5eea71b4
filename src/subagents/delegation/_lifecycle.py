"""Live events of delegation: providers coming and going, definitions loaded, starts and ends."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DefinitionsChanged",
    "ProviderAdded",
    "ProviderRemoved",
    "SubagentEnded",
    "SubagentStarted",
]


@dataclass(frozen=True, slots=True)
class ProviderAdded:
    name: str


@dataclass(frozen=True, slots=True)
class ProviderRemoved:
    name: str


@dataclass(frozen=True, slots=True)
class DefinitionsChanged:
    """The runtime's agent definitions were (re)loaded: tools derived from them re-derive."""

    names: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentStarted:
    run_id: str
    provider: str
    child_id: str
    name: str
    parent_id: str
    local: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentEnded:
    run_id: str
    provider: str
    child_id: str
    name: str
    parent_id: str
    local: bool
    stop_reason: str
    last_message: str | None = None
