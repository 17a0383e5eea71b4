"""What a continuable child's own log says: how it was started, whether it settled, what waits.

The descriptor records the scope, schema, model and budget a resume must restore (never the
current definition files); `subagent/settled` markers tell which endings its parent heard of.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core import replay_inbox
from ..sessions import EventRecord, SubagentDescriptor, SubagentSettled, TurnEnd
from ._providers import ToolFilter
from ._scope import AgentProfile

__all__ = [
    "descriptor_mode",
    "has_pending",
    "last_settled",
    "own_descriptor",
    "restored_profile",
    "unsettled",
]


def restored_profile(descriptor: SubagentDescriptor) -> AgentProfile | None:
    """The scope a child's descriptor recorded (None when nothing narrowed it)."""
    if (
        descriptor.tools_allow is None
        and not descriptor.tools_deny
        and descriptor.depth_cap is None
        and descriptor.instructions is None
        and descriptor.max_tokens is None
    ):
        return None
    allow = frozenset(descriptor.tools_allow) if descriptor.tools_allow is not None else None
    return AgentProfile(
        tool_filter=ToolFilter(allow=allow, deny=frozenset(descriptor.tools_deny)),
        depth_cap=descriptor.depth_cap,
        instructions=descriptor.instructions,
        max_tokens=descriptor.max_tokens,
    )


def own_descriptor(records: Sequence[EventRecord]) -> SubagentDescriptor | None:
    """The first descriptor of a child's own records (after any fork seed), or None."""
    return next((r.event for r in records if isinstance(r.event, SubagentDescriptor)), None)


def descriptor_mode(records: Sequence[EventRecord]) -> str | None:
    """The mode of the first own descriptor of a child's log, or None."""
    descriptor = own_descriptor(records)
    return descriptor.mode if descriptor is not None else None


def last_settled(records: Sequence[EventRecord]) -> int:
    """The index after the last `subagent/settled` marker (0 when there is none)."""
    for index in range(len(records) - 1, -1, -1):
        if isinstance(records[index].event, SubagentSettled):
            return index + 1
    return 0


def unsettled(records: Sequence[EventRecord]) -> bool:
    """Whether turns ran after the last settlement the parent was told about."""
    return any(isinstance(r.event, TurnEnd) for r in records[last_settled(records) :])


def has_pending(records: Sequence[EventRecord]) -> bool:
    """Whether a log holds accepted input no turn has claimed."""
    return bool(replay_inbox(records))
