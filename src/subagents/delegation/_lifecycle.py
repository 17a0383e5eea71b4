"""Live events of delegation: providers coming and going, definitions loaded, starts and ends."""

from __future__ import annotations

import msgspec

__all__ = [
    "DefinitionsChanged",
    "ProviderAdded",
    "ProviderRemoved",
    "SubagentEnded",
    "SubagentStarted",
]


class ProviderAdded(msgspec.Struct, frozen=True, gc=False):
    """A subagent provider was registered under `name`."""

    name: str


class ProviderRemoved(msgspec.Struct, frozen=True, gc=False):
    """The subagent provider `name` was removed."""

    name: str


class DefinitionsChanged(msgspec.Struct, frozen=True, gc=False):
    """The runtime's agent definitions were (re)loaded: tools derived from them re-derive."""

    names: tuple[str, ...]


class SubagentStarted(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A child's run began (`subagent/start`); its `SubagentEnded` has the same `run_id`."""

    run_id: str
    provider: str
    child_id: str
    name: str
    parent_id: str
    local: bool

    def ended(self, stop_reason: str, last_message: str | None = None) -> SubagentEnded:
        """The `subagent/end` that closes this run."""
        return SubagentEnded(
            run_id=self.run_id,
            provider=self.provider,
            child_id=self.child_id,
            name=self.name,
            parent_id=self.parent_id,
            local=self.local,
            stop_reason=stop_reason,
            last_message=last_message,
        )


class SubagentEnded(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A child's run ended (`subagent/end`), how, and the last thing it said."""

    run_id: str
    provider: str
    child_id: str
    name: str
    parent_id: str
    local: bool
    stop_reason: str
    last_message: str | None = None
