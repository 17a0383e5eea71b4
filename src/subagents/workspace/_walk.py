"""Race-free path resolution: walk a path one component at a time, holding directory fds.

`realpath` followed by `open(path)` checks one thing and opens another by name. Between the
two, a concurrent rename (say `renameat2(RENAME_EXCHANGE)` of a workspace directory with a
symlink to the hidden store) can send the open where the check never looked; `O_NOFOLLOW`
covers only the last component. In this module the walk is the resolution. Starting from an
`O_PATH` fd of `/`, each component is opened with `O_NOFOLLOW` relative to the directory fd
the walk holds. A symlink is read through the fd of that very link, and its target is walked
from the fds already held: `..` pops back to the fd actually walked and never reopens a string.
So the canonical path is the path of the objects the walk holds, and the caller opens the
final name relative to the parent fd it was found in. Whatever a rename does after the check,
the file opened is the one at the checked path.

Resolution follows non-strict `os.path.realpath`: every symlink is followed (an absolute one
restarts at `/`), and `..` drops the last canonical component. A component that is missing, or
that lies below a non-directory, ends the real walk; the rest is taken lexically, so a file to
create still has a canonical path. A chain of more than `MAX_LINKS` links is ELOOP.

Linux only (`O_PATH`, `readlink` of an `O_PATH` fd). Every function blocks: the tools call them
in a worker thread. Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_LINKS",
    "DirStack",
    "NotRegularFile",
    "Opened",
    "PathRaced",
    "Resolved",
    "open_walked",
    "resolve",
]

MAX_LINKS = 40
"""Symlinks one resolution may follow, as the kernel allows (more is ELOOP)."""
MAX_ATTEMPTS = 16
"""Walks one open may take when the final name keeps turning into a symlink."""

_STEP = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_ROOT = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC

DirStack = Sequence[tuple[str, int]]
"""Directories from `/` down, as (component, fd) pairs; `/` itself is ("", fd)."""


class PathRaced(OSError):
    """The final name kept turning into a symlink (or appearing) between the walk and the open.

    This happens only while something renames entries concurrently. Giving up after
    `MAX_ATTEMPTS` walks keeps the worker thread bounded, and nothing has been written by then.
    """


class NotRegularFile(OSError):
    """The final name is a FIFO, a socket or a device where a regular file was required."""


def _fail(code: int) -> OSError:
    return OSError(code, os.strerror(code))  # OSError picks the subclass (FileNotFoundError...)


class _Walker:
    """One walk's state: the directories held from `/` down, and what lies beyond the last one.

    `beyond` holds components below the last directory held that could not be walked into: the
    final name (always, once `walk` returns, unless the path is `/`), and before it any missing
    directories or a non-directory. `beyond_errno` says why the first of them was not walked.
    """

    def __init__(self, base: DirStack) -> None:
        self._dirs: list[tuple[str, int, bool]] = [(name, fd, False) for name, fd in base]
        if not self._dirs:
            self._dirs.append(("", os.open("/", _ROOT), True))
        self.beyond: list[str] = []
        self.beyond_errno = 0
        self._links = 0

    def close(self) -> None:
        while self._dirs:
            self._pop()

    def _pop(self) -> None:
        _, fd, owned = self._dirs.pop()
        if owned:
            os.close(fd)

    @property
    def path(self) -> str:
        return "/" + "/".join([name for name, _, _ in self._dirs[1:]] + self.beyond)

    @property
    def stack(self) -> tuple[tuple[str, int], ...]:
        return tuple((name, fd) for name, fd, _ in self._dirs)

    def walk(self, path: str) -> None:
        todo = path.split("/")[::-1]  # a stack: the next component is last
        if path.startswith("/"):
            self._to_root()
        while todo:
            name = todo.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if self.beyond:
                    self.beyond.pop()
                elif len(self._dirs) > 1:
                    self._pop()
            elif self.beyond:
                self.beyond.append(name)
            else:
                self._step(name, todo)
        if not self.beyond and len(self._dirs) > 1:
            # The final component is a directory: it is opened by name like any other.
            name = self._dirs[-1][0]
            self._pop()
            self.beyond = [name]

    def _to_root(self) -> None:
        while len(self._dirs) > 1:
            self._pop()
        self.beyond = []

    def _step(self, name: str, todo: list[str]) -> None:
        try:
            fd = os.open(name, _STEP, dir_fd=self._dirs[-1][1])
        except OSError as exc:
            self.beyond, self.beyond_errno = [name], exc.errno or errno.ENOENT
            return
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                self._dirs.append((name, fd, True))
                fd = -1  # kept
                return
            if not stat.S_ISLNK(mode):
                self.beyond, self.beyond_errno = [name], errno.ENOTDIR
                return
            target = os.readlink("", dir_fd=fd)  # the link just opened, not whatever has its name
        finally:
            if fd >= 0:
                os.close(fd)
        self._links += 1
        if self._links > MAX_LINKS:
            raise _fail(errno.ELOOP)
        if target.startswith("/"):
            self._to_root()
        todo.extend(target.split("/")[::-1])

    def final(self) -> tuple[int, str]:
        """The parent directory's fd and the final name ("." for `/` itself)."""
        if not self.beyond:
            return self._dirs[-1][1], "."
        return self._dirs[-1][1], self.beyond[-1]

    def make_parents(self) -> bool:
        """Create the missing directories before the final name; False when a race got in."""
        while len(self.beyond) > 1:
            name, top = self.beyond[0], self._dirs[-1][1]
            with suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=top)
            try:
                fd = os.open(name, _STEP, dir_fd=top)
            except FileNotFoundError:
                return False  # removed again at once: walk again
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                self._dirs.append((name, fd, True))
                self.beyond.pop(0)
                continue
            os.close(fd)
            if stat.S_ISLNK(mode):
                return False  # a symlink took the name: walk again, and check where it leads
            raise _fail(errno.ENOTDIR)
        return True


def _require_regular(mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise _fail(errno.EISDIR)
    if not stat.S_ISREG(mode):
        raise NotRegularFile(errno.EINVAL, "not a regular file")


def _is_link(parent: int, name: str) -> bool:
    """Whether `name` is a symlink now; refuses a directory, FIFO or device before any open.

    Opening a device or a FIFO can have effects of its own, so a required regular file is
    looked at first. The fd opened afterwards is checked again (`fstat`).
    """
    try:
        found = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(found.st_mode):
        return True
    _require_regular(found.st_mode)
    return False


def _open_final(
    walker: _Walker, flags: int, *, create: bool, regular: bool, mode: int
) -> tuple[int, bool] | None:
    """Open the final name relative to its parent fd: (fd, created), or None to walk again."""
    parent, name = walker.final()
    if regular and _is_link(parent, name):
        return None
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    created = False
    try:
        try:
            fd = os.open(name, flags, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, mode, dir_fd=parent)
            created = True
    except FileExistsError:
        return None  # created by someone else since: walk again
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None  # the name became a symlink after the walk
        if exc.errno == errno.ENXIO and regular:
            raise NotRegularFile(errno.ENXIO, "not a regular file") from exc  # a FIFO
        raise
    if regular:
        try:
            _require_regular(os.fstat(fd).st_mode)
        except OSError:
            os.close(fd)
            raise
    return fd, created


@dataclass(frozen=True, slots=True)
class Opened:
    """An open file or directory and where the walk found it (valid inside the `with`)."""

    fd: int
    path: str
    """The canonical path, as walked."""
    created: bool
    """Whether this open created the file."""
    parents: tuple[tuple[str, int], ...]
    """The directories from `/` to the parent of `path`, held open."""

    def as_dir(self) -> tuple[tuple[str, int], ...]:
        """The stack with the opened object on top, to walk names below it as a `base`."""
        if self.path == "/":
            return (("", self.fd),)
        return (*self.parents, (os.path.basename(self.path), self.fd))


class Resolved(NamedTuple):
    """One walk's result; the fds stay valid inside the `with` of `resolve`."""

    path: str
    """The canonical path, as walked."""
    parent: int
    """The fd of the deepest directory the walk holds: the final name's parent, unless
    `missing` is not empty."""
    name: str
    """The final component ("." for `/`)."""
    missing: tuple[str, ...]
    """The components between `parent` and `name` that are not directories to walk into."""


@contextmanager
def resolve(path: str, *, base: DirStack = ()) -> Generator[Resolved]:
    """Walk `path` once, without opening its final name.

    A relative `path` starts at the top of `base` (or at `/`). Missing components are taken
    lexically, as `realpath` does.

    Raises:
        OSError: ELOOP when more than `MAX_LINKS` symlinks are followed.
    """
    walker = _Walker(base)
    try:
        walker.walk(path)
        parent, name = walker.final()
        yield Resolved(walker.path, parent, name, tuple(walker.beyond[:-1]))
    finally:
        walker.close()


@contextmanager
def open_walked(
    path: str,
    flags: int,
    *,
    check: Callable[[str], None],
    base: DirStack = (),
    create: bool = False,
    make_parents: bool = False,
    regular: bool = False,
    mode: int = 0o666,
) -> Generator[Opened]:
    """Resolve `path`, `check` its canonical path, then open it relative to its parent fd.

    `check` raises to refuse; it runs on every walk, because a walk after a race may resolve
    elsewhere. The final open adds `O_NOFOLLOW`: if the name became a symlink after the walk,
    the path is walked (and checked) again, at most `MAX_ATTEMPTS` times. Missing parent
    directories (with `make_parents`) are created one by one with `mkdir` relative to the fd
    walked so far and opened with `O_NOFOLLOW` before going on. The fd is closed when the block
    ends.

    Args:
        path: Absolute, or relative to the top of `base`.
        flags: `os.open` flags for the final name (`O_NOFOLLOW` and `O_CLOEXEC` are added).
        check: Called with the canonical path before anything is created or opened.
        base: Directories already held, to resolve `path` from (see `Opened.as_dir`).
        create: Create the file (`O_CREAT | O_EXCL`) when it does not exist.
        make_parents: Create missing parent directories.
        regular: Refuse anything but a regular file (`IsADirectoryError`, `NotRegularFile`).
        mode: The mode of a created file (before the umask).

    Raises:
        OSError: As `os.open` would (FileNotFoundError, NotADirectoryError, ELOOP...).
        PathRaced: The final name kept changing, `MAX_ATTEMPTS` walks in a row.
    """
    for _ in range(MAX_ATTEMPTS):
        walker = _Walker(base)
        try:
            walker.walk(path)
            check(walker.path)
            if len(walker.beyond) > 1:
                if not make_parents:
                    raise _fail(walker.beyond_errno)
                if not walker.make_parents():
                    continue
            got = _open_final(walker, flags, create=create, regular=regular, mode=mode)
            if got is None:
                continue
            fd, created = got
            try:
                yield Opened(fd, walker.path, created, walker.stack)
            finally:
                os.close(fd)
            return
        finally:
            walker.close()
    raise PathRaced(errno.EAGAIN, f"it kept changing during {MAX_ATTEMPTS} attempts to open it")
