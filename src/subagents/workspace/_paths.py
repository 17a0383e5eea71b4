"""Where a tool may read and write: path resolution and the per-mode file rules.

Every path is resolved against the calling agent's working directory and canonicalized with
`realpath` before it is checked, so neither `..` nor a symlink can lead a call out of bounds; the
tools then operate on the canonical path.

The rules (checked in the tools themselves, on top of the OS sandbox that confines `bash`):

- `danger-full-access`: no restriction.
- `read-only`: every write is refused.
- `workspace-write`: writes only under the policy's `workspace_root`.
- Under both confined modes, reads are allowed under the workspace root and anywhere else the
  confined process could see, except the hidden places: `$HOME` (unless the path is inside the
  workspace, which often lives under `$HOME`), `/proc` (the host process's environment holds
  credentials) and the store: `$SUBAGENTS_HOME` and the directory of `$SUBAGENTS_STORE`. The
  store stays hidden, for reading and for writing, even when it lies inside the workspace,
  because it holds every tenant's log; it is visible only when it contains the workspace.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..errors import ConfigError, ErrorCode, ToolError
from ..policy import SandboxPolicy
from ..sessions import parse_store_url

__all__ = ["Access", "denial_marker", "os_error", "store_roots", "within"]


def denial_marker(mode: str) -> str:
    """The marker every refusal carries, as the sandbox spec words it."""
    return f"[sandbox: file access denied under {mode} mode]"


def within(path: str, root: str) -> bool:
    """Whether canonical `path` is `root` or lies below it."""
    if path == root or root == "/":
        return True
    return path.startswith(root.rstrip("/") + "/")


def _canonical(path: str) -> str:
    return os.path.normpath(os.path.realpath(path))


def store_roots() -> list[str]:
    """The store's directories: `$SUBAGENTS_HOME` and the directory of `$SUBAGENTS_STORE`."""
    home = os.environ.get("SUBAGENTS_HOME") or str(Path.home() / ".subagents")
    roots = [_canonical(home)]
    url = os.environ.get("SUBAGENTS_STORE", "")
    if url:
        try:
            store = parse_store_url(url)
        except ConfigError:
            return roots  # the runtime refuses such a store; there is nothing to hide
        roots.append(_canonical(os.path.dirname(os.path.abspath(store))))
    return roots


def _home() -> str | None:
    home = os.environ.get("HOME")
    return _canonical(home) if home else None


@dataclass(frozen=True)
class Access:
    """One call's view of the file system: the agent's policy and working directory.

    The hidden places are read from the environment once per call, on first use (in the
    worker thread: canonicalizing touches the disk).
    """

    policy: SandboxPolicy
    cwd: str

    @cached_property
    def _real_cwd(self) -> str:
        return _canonical(self.cwd)

    @cached_property
    def _stores(self) -> list[str]:
        return [s for s in (*store_roots(), *map(_canonical, self.policy.hidden)) if s != "/"]

    @cached_property
    def _home(self) -> str | None:
        home = _home()
        return home if home != "/" else None

    @property
    def mode(self) -> str:
        return self.policy.mode

    def resolve(self, path: str, *, what: str = "path") -> str:
        """The canonical absolute form of `path` (relative paths start at the agent's cwd)."""
        if not path:
            raise ToolError(f"{what} must not be empty", code=ErrorCode.INVALID_ARGS)
        if "\0" in path:
            raise ToolError(f"{what} contains a NUL character", code=ErrorCode.INVALID_ARGS)
        return _canonical(os.path.join(self.cwd, path))

    def show(self, real: str) -> str:
        """How a canonical path is shown to the model: relative to the cwd when inside it."""
        cwd = self._real_cwd
        if real == cwd:
            return "."
        if within(real, cwd):
            return os.path.relpath(real, cwd)
        return real

    def read_denial(self, real: str) -> str | None:
        """Why reading `real` is refused, or None when it is allowed."""
        if self.policy.mode == "danger-full-access":
            return None
        root = self.policy.workspace_root
        inside = within(real, root)
        for store in self._stores:
            if within(real, store) and not (inside and within(root, store)):
                return "the subagents store is hidden from agents"
        if inside:
            return None
        if within(real, "/proc"):
            return "/proc is hidden from agents (it exposes the host process)"
        home = self._home
        if home is not None and within(real, home):
            return "the home directory is hidden from agents outside the workspace"
        return None

    def write_denial(self, real: str) -> str | None:
        """Why writing `real` is refused, or None when it is allowed."""
        mode = self.policy.mode
        if mode == "danger-full-access":
            return None
        if mode == "read-only":
            return "the session is read-only"
        root = self.policy.workspace_root
        if not within(real, root):
            return f"it is outside the workspace {root}"
        return self.read_denial(real)

    def check_read(self, path: str, real: str) -> None:
        reason = self.read_denial(real)
        if reason is not None:
            raise self._denied("read", path, real, reason)

    def check_write(self, path: str, real: str) -> None:
        reason = self.write_denial(real)
        if reason is not None:
            raise self._denied("write", path, real, reason)

    def _denied(self, op: str, path: str, real: str, reason: str) -> ToolError:
        target = repr(path) if path == real else f"{path!r} (resolves to {real})"
        return ToolError(
            f"{op} of {target} denied: {reason} {denial_marker(self.mode)}",
            code=ErrorCode.SANDBOX_DENIED,
            path=real,
            mode=self.mode,
        )


def os_error(exc: OSError, path: str) -> ToolError:
    """A tool error for a failed file operation, with a stable code per cause."""
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"{path!r} does not exist", code=ErrorCode.FILE_NOT_FOUND, path=path)
    if isinstance(exc, IsADirectoryError):
        return ToolError(
            f"{path!r} is a directory, not a file", code=ErrorCode.NOT_A_FILE, path=path
        )
    if isinstance(exc, NotADirectoryError):
        return ToolError(
            f"{path!r}: a parent of it is not a directory", code=ErrorCode.NOT_A_DIRECTORY
        )
    return ToolError(f"{path!r}: {reason}", code=ErrorCode.FILE_ERROR, path=path)
