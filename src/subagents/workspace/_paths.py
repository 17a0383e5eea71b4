"""Where a tool may read and write: the per-mode file rules, applied to walked paths.

A path is resolved by walking it one component at a time from `/`, holding directory fds
(`_walk.py`). The rules below are checked on the canonical path the walk produced, and the
file is then opened relative to the fd of its parent. A concurrent rename that swaps a
directory for a symlink therefore cannot redirect an open that was already checked; neither
`..` nor a symlink can lead a call out of bounds. Two more checks need the open file itself
(`check_file`): a write to a file with other hard links is refused, because those names may lie
outside the workspace, and a hidden store file opened under another name is refused too.

The rules (checked in the tools themselves, on top of the OS sandbox that confines `bash`):

- `danger-full-access`: no restriction.
- `read-only`: every write is refused.
- `workspace-write`: writes only under the policy's `workspace_root`.
- Under both confined modes, reads are allowed under the workspace root and anywhere else the
  confined process could see, except the hidden places: `$HOME` (unless the path is inside the
  workspace, which often lives under `$HOME`), `/proc` (the host process's environment holds
  credentials) and the store: `$SUBAGENTS_HOME`, the directory of `$SUBAGENTS_STORE` and the
  policy's `hidden` entries (the store's directory and its files). The store stays hidden, for
  reading and for writing, even when it lies inside the workspace, because it holds every
  tenant's log. The one exception is an entry that contains the workspace: it hides nothing
  inside the workspace. A store directory that contains the workspace thus hides only its own
  file names, which `hidden` lists one by one.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

from ..errors import ConfigError, ErrorCode, ToolError
from ..policy import SandboxPolicy, canonical_root, within
from ..sessions import parse_store_url
from ..tools import Escalation
from ._walk import MAX_LINKS, NotRegularFile, PathRaced

__all__ = [
    "Access",
    "Check",
    "denial_marker",
    "os_error",
    "require_text",
    "store_roots",
]


def denial_marker(mode: str) -> str:
    """The marker every refusal carries, as the sandbox spec words it."""
    return f"[sandbox: file access denied under {mode} mode]"


def require_text(what: str, value: str) -> None:
    """Refuse a string argument holding a lone surrogate, which is not encodable text.

    JSON can spell one (a `u` escape from D800 to DFFF), but it has no UTF-8 form: a file
    name, a file's content or a command line cannot hold it, and a pattern or an edit with one
    could only match bytes that are not UTF-8. Refused before anything is touched, so the call
    changes nothing.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = ord(value[exc.start])
        raise ToolError(
            f"{what} contains a lone surrogate (U+{char:04X} at index {exc.start}), which is not "
            "valid Unicode text; remove it or write the character it stands for",
            code=ErrorCode.INVALID_ARGS,
        ) from exc


def _lexical(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


def store_roots() -> list[str]:
    """The store's directories: `$SUBAGENTS_HOME` and the directory of `$SUBAGENTS_STORE`."""
    home = os.environ.get("SUBAGENTS_HOME") or str(Path.home() / ".subagents")
    roots = [canonical_root(home)]
    url = os.environ.get("SUBAGENTS_STORE", "")
    if url:
        try:
            store = parse_store_url(url)
        except ConfigError:
            return roots  # the runtime refuses such a store; there is nothing to hide
        roots.append(canonical_root(os.path.dirname(os.path.abspath(store))))
    return roots


def _home() -> str | None:
    home = os.environ.get("HOME")
    return canonical_root(home) if home else None


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
        return canonical_root(self.cwd)

    @cached_property
    def _stores(self) -> list[str]:
        # A hidden entry counts as spelled and as resolved: each form hides what lies under it.
        hidden = [form for h in self.policy.hidden for form in (canonical_root(h), _lexical(h))]
        return [s for s in dict.fromkeys((*store_roots(), *hidden)) if s != "/"]

    @cached_property
    def _hidden_files(self) -> frozenset[tuple[int, int]]:
        """(device, inode) of each hidden entry that is a regular file.

        A hard link gives a file another name; its identity stays the same.
        """
        found: set[tuple[int, int]] = set()
        for entry in self.policy.hidden:
            try:
                st = os.stat(entry, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.add((st.st_dev, st.st_ino))
        return frozenset(found)

    @cached_property
    def _home(self) -> str | None:
        home = _home()
        return home if home != "/" else None

    @property
    def mode(self) -> str:
        return self.policy.mode

    def absolute(self, path: str, *, what: str = "path") -> str:
        """`path` made absolute, but not resolved (relative paths start at the agent's cwd).

        The result is only a string to walk (see `_walk.open_walked`): normalizing it here
        would get `link/..` wrong, and resolving it here would be a check by name.
        """
        if not path:
            raise ToolError(f"{what} must not be empty", code=ErrorCode.INVALID_ARGS)
        if "\0" in path:
            raise ToolError(f"{what} contains a NUL character", code=ErrorCode.INVALID_ARGS)
        require_text(what, path)
        return os.path.join(os.getcwd(), self.cwd, path)

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
        never = self.never_granted(real)
        if never is not None:
            return never
        if within(real, self.policy.workspace_root) or self._granted("read", real):
            return None
        home = self._home
        if home is not None and within(real, home):
            return "the home directory is hidden from agents outside the workspace"
        return None

    def write_denial(self, real: str) -> str | None:
        """Why writing `real` is refused, or None when it is allowed."""
        mode = self.policy.mode
        if mode == "danger-full-access":
            return None
        if self._granted("write", real):
            return self.never_granted(real)
        if mode == "read-only":
            return "the session is read-only"
        root = self.policy.workspace_root
        if not within(real, root):
            return f"it is outside the workspace {root}"
        return self.read_denial(real)

    def never_granted(self, real: str) -> str | None:
        """What no mode short of danger-full-access, and no grant, ever opens."""
        root = self.policy.workspace_root
        inside = within(real, root)
        for store in self._stores:
            if within(real, store) and not (inside and within(root, store)):
                return "the subagents store is hidden from agents"
        if not inside and within(real, "/proc"):
            return "/proc is hidden from agents (it exposes the host process)"
        return None

    def _granted(self, op: Literal["read", "write"], real: str) -> bool:
        for grant in self.policy.granted:
            kind, _, path = grant.partition(":")
            if kind == "write" and real == path:
                return True
            if kind == "read" == op and within(real, path):
                return True
        return False

    def escalation(self, op: Literal["read", "write"], path: str) -> Escalation | None:
        """What a call of `op` on `path` would need a person to grant, or None.

        None when the call is allowed as it is, and when no grant could allow it (the store,
        /proc): such a call fails as usual. The tool still checks every path it walks.
        """
        try:
            real = canonical_root(self.absolute(path))
        except ToolError:
            return None  # the call fails with its own error
        denial = self.read_denial(real) if op == "read" else self.write_denial(real)
        if denial is None or self.never_granted(real) is not None:
            return None
        return Escalation(
            reason=f"{op} of {real} needs more than the {self.mode} sandbox allows: {denial}",
            grant=f"{op}:{real}",
        )

    def check_read(self, path: str, real: str) -> None:
        reason = self.read_denial(real)
        if reason is not None:
            raise self._denied("read", path, real, reason)

    def check_write(self, path: str, real: str) -> None:
        reason = self.write_denial(real)
        if reason is not None:
            raise self._denied("write", path, real, reason)

    def check(self, op: Literal["read", "write"], path: str) -> Check:
        """The check a walk of `path` runs on each canonical path it finds (see `Check`)."""
        return Check(self, op, path)

    def check_file(self, op: str, path: str, real: str, st: os.stat_result) -> None:
        """What only the open file can tell: its identity and, for a write, its other names.

        Runs after the open and before anything is read or changed. Under `danger-full-access`
        there is no confinement to keep.
        """
        if self.policy.mode == "danger-full-access":
            return
        if (st.st_dev, st.st_ino) in self._hidden_files:
            raise self._denied(op, path, real, "the subagents store is hidden from agents")
        if op == "write" and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            reason = (
                f"the file has {st.st_nlink} hard links; writing it would also change the file "
                "under its other names, which are outside the tool's control"
            )
            raise self._denied(op, path, real, reason)

    def _denied(self, op: str, path: str, real: str, reason: str) -> ToolError:
        target = repr(path) if path == real else f"{path!r} (resolves to {real})"
        return ToolError(
            f"{op} of {target} denied: {reason} {denial_marker(self.mode)}",
            code=ErrorCode.SANDBOX_DENIED,
            path=real,
            mode=self.mode,
        )


@dataclass
class Check:
    """One call's policy check, run by the walk on each canonical path it reaches.

    It remembers the last path it checked, so that a failure after the walk (a missing file,
    a directory) names the file as the model should see it.
    """

    access: Access
    op: Literal["read", "write"]
    path: str
    real: str | None = None

    def __call__(self, real: str) -> None:
        self.real = real
        if self.op == "read":
            self.access.check_read(self.path, real)
        else:
            self.access.check_write(self.path, real)

    @property
    def shown(self) -> str:
        """The walked path as the model sees it, or the path as given before any walk."""
        return self.path if self.real is None else self.access.show(self.real)

    def error(self, exc: OSError) -> ToolError:
        return os_error(exc, self.shown)


def os_error(exc: OSError, path: str) -> ToolError:
    """A tool error for a failed file operation, with a stable code per cause."""
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"{path!r} does not exist", code=ErrorCode.FILE_NOT_FOUND, path=path)
    if isinstance(exc, IsADirectoryError):
        return ToolError(f"{path!r} is a directory", code=ErrorCode.NOT_A_FILE, path=path)
    if isinstance(exc, NotRegularFile):
        return ToolError(f"{path!r} is not a regular file", code=ErrorCode.NOT_A_FILE, path=path)
    if isinstance(exc, PathRaced):
        return ToolError(
            f"{path!r} kept being replaced by a symlink while it was opened; nothing was "
            "changed, try again",
            code=ErrorCode.FILE_ERROR,
            path=path,
        )
    if exc.errno == errno.ELOOP:
        return ToolError(
            f"{path!r}: too many levels of symbolic links (a loop, or a chain of more than "
            f"{MAX_LINKS})",
            code=ErrorCode.FILE_ERROR,
            path=path,
        )
    if isinstance(exc, NotADirectoryError):
        return ToolError(
            f"{path!r}: a parent of it is not a directory", code=ErrorCode.NOT_A_DIRECTORY
        )
    return ToolError(f"{path!r}: {reason}", code=ErrorCode.FILE_ERROR, path=path)
