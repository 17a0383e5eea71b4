"""Model-facing child names: the grammar, `agent-N` defaults, and per-creator reservations.

A name is 1-32 characters of `a-z`, `0-9` and `-`, starting with a letter, never `lead`; so a
36-character session id never parses as a name. Names are unique among one creator's
children. A start reserves its name synchronously (before its first await), so concurrent
sibling starts cannot pick the same one; the reservation ends when the creator's catalog entry
commits (the entry now holds the name) or when the start fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .errors import ErrorCode, SubagentError

__all__ = [
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "NameBook",
    "ROOT_NAME",
    "full_name",
    "is_name",
    "name_error",
]

ROOT_NAME = "lead"
MAX_NAME_LENGTH = 32
NAME_PATTERN = "^[a-z][a-z0-9-]{0,31}$"
"""The grammar as a JSON Schema `pattern` (anchored, in the subset every decoder knows)."""
_NAME = re.compile(NAME_PATTERN)


def is_name(text: str) -> bool:
    """Whether `text` is a valid child name (see `name_error` for why one is not)."""
    return _NAME.fullmatch(text) is not None and text != ROOT_NAME


def name_error(name: str) -> str | None:
    """Why `name` is not a valid child name, or None when it is."""
    if name == ROOT_NAME:
        return "`lead` is reserved for the root agent; choose another name"
    if _NAME.fullmatch(name) is None:
        return (
            f"invalid subagent name {name!r}: use 1-32 lower-case letters, digits or '-', "
            "starting with a letter (for example `reviewer` or `test-runner`)"
        )
    return None


def full_name(parent_full_name: str, name: str) -> str:
    """A child's path from the root, without the `lead/` prefix."""
    return name if parent_full_name == ROOT_NAME else f"{parent_full_name}/{name}"


class NameBook:
    """The names one creator has given (committed in its catalog) or is giving (reserved)."""

    __slots__ = ("_committed", "_next_default", "_reserved")

    def __init__(self, committed: Iterable[str] = ()) -> None:
        self._committed = set(committed)
        self._reserved: set[str] = set()
        self._next_default = 1  # no agent-N below it is free, so defaults never rescan

    def taken(self, name: str) -> bool:
        """Whether `name` is a child's (committed) or held by a start in flight (reserved)."""
        return name in self._committed or name in self._reserved

    def reserve(self, requested: str | None) -> str:
        """Reserve `requested`, or the first free `agent-N` when None; raise if unusable."""
        if requested is None:
            n = self._next_default
            while self.taken(f"agent-{n}"):
                n += 1
            self._next_default = n
            requested = f"agent-{n}"
        else:
            problem = name_error(requested)
            if problem is not None:
                raise SubagentError(problem, code=ErrorCode.INVALID_NAME, name=requested)
            if self.taken(requested):
                raise SubagentError(
                    f"a child named {requested!r} already exists here; choose another name "
                    "or address the existing one",
                    code=ErrorCode.DUPLICATE_NAME,
                    name=requested,
                )
        self._reserved.add(requested)
        return requested

    def committed(self, name: str) -> bool:
        """Whether `name` is in the creator's catalog (its child exists)."""
        return name in self._committed

    def commit(self, name: str) -> None:
        """The child named `name` exists now: its reservation becomes its name."""
        self._reserved.discard(name)
        self._committed.add(name)

    def release(self, name: str) -> None:
        """End a start's reservation of `name` (a no-op once the name is committed)."""
        if name in self._reserved:
            self._reserved.discard(name)
            if name.startswith("agent-") and name[6:].isdigit():
                self._next_default = min(self._next_default, int(name[6:]))
