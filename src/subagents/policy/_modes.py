"""Sandbox modes and policy resolution (docs/design.md §10).

A mode names file effects only: `read-only` (no writes but the null device), `workspace-write`
(writes under the workspace root and a private temp area), `danger-full-access` (no file
confinement). A session's mode is a pure fold: the explicit mode of the call, else the last
`sandbox/mode` the session recorded, else the deployment default.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError, ErrorCode

__all__ = [
    "SANDBOX_MODES",
    "SandboxMode",
    "SandboxPolicy",
    "canonical_root",
    "narrower",
    "parse_mode",
    "resolve_policy",
    "store_paths",
    "within",
]

STORE_SUFFIXES = ("", "-wal", "-shm", "-journal")
"""The files SQLite keeps for a database: itself, its WAL, its shared memory, its journal."""

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("read-only", "workspace-write", "danger-full-access")


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxPolicy:
    """The file policy of one call: its mode, the canonical workspace root, and the session."""

    mode: SandboxMode
    workspace_root: str
    session_id: str | None = None
    hidden: tuple[str, ...] = ()
    """Paths no confined run may see beyond $HOME and $SUBAGENTS_HOME (the runtime's store
    files): a confined process finds them empty, the file tools refuse them."""
    granted: tuple[str, ...] = ()
    """What a person approved beyond `mode` for this one call: `read:PATH` (that canonical
    path and what lies under it) or `write:PATH` (that path only). Never the store or /proc."""


def parse_mode(text: str) -> SandboxMode:
    """`text` as a mode; anything else is a `ConfigError` naming the three modes."""
    if text in SANDBOX_MODES:
        return text
    raise ConfigError(
        f"unknown sandbox mode {text!r}; use one of {', '.join(SANDBOX_MODES)}",
        code=ErrorCode.USAGE,
        mode=text,
    )


def canonical_root(path: str) -> str:
    """The filesystem identity of `path`: resolve symlinks first, then normalize.

    Resolving first makes `<dir>/<symlink>/..` land where a `chdir` would (the symlink target's
    parent), which lexical normalization alone gets wrong. A part that cannot be resolved is
    kept as spelled. This touches the filesystem: call it off the event loop.
    """
    return os.path.normpath(os.path.realpath(path))


def within(path: str, root: str) -> bool:
    """Whether canonical `path` is `root` or lies below it (a string test: no disk access)."""
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def store_paths(database: str) -> tuple[str, ...]:
    """What a SQLite store at `database` must keep hidden, whether or not each exists yet.

    That is its directory and every file SQLite keeps beside it (`-wal`, `-shm`, `-journal`).
    A hidden directory that contains the workspace hides nothing inside it but these names.
    Touches the filesystem (canonicalises): call it off the event loop.
    """
    base = canonical_root(database)
    return (os.path.dirname(base), *(base + suffix for suffix in STORE_SUFFIXES))


def resolve_policy(
    *,
    cwd: str,
    session_modes: Iterable[str] = (),
    mode: SandboxMode | None = None,
    default: SandboxMode = "workspace-write",
    session_id: str | None = None,
) -> SandboxPolicy:
    """A call's policy: `mode` ?? the last of `session_modes` ?? `default`.

    `session_modes` are the modes of a session's `sandbox/mode` events in log order; an unknown
    one is an error (the log invariant rejects it), so a corrupt log never widens the policy.
    """
    last: SandboxMode | None = None
    for recorded in session_modes:
        last = parse_mode(recorded)
    chosen = mode if mode is not None else last if last is not None else default
    return SandboxPolicy(
        mode=parse_mode(chosen), workspace_root=canonical_root(cwd), session_id=session_id
    )


def narrower(a: SandboxMode, b: SandboxMode) -> SandboxMode:
    """The stricter of two modes (`read-only` < `workspace-write` < `danger-full-access`).

    A child's mode is `narrower(parent, requested)`: children can narrow, never widen.
    """
    return a if SANDBOX_MODES.index(a) <= SANDBOX_MODES.index(b) else b
