"""The search tools' work: `glob` (names) and `grep` (contents), as blocking functions.

Both walk the tree without following symlinked directories, skip `.git` directories and every
place the call may not read, and stop at fixed caps, saying so in their output. `grep` checks
each file's canonical path before opening it, so a symlink inside the workspace cannot expose
a hidden file. `grep` matches with RE2 (`_regex.py`), in time linear in each line.

The walk holds an fd for every directory on the way down: it lists a directory through its fd,
enters a subdirectory with `O_DIRECTORY | O_NOFOLLOW` relative to it, and opens each file
relative to the fd of the directory it was listed in (a symlinked file is resolved from the
same fds, see `_walk.py`). A directory swapped for a symlink while the walk runs is therefore
not entered, and every path checked is the path of what is actually read.
"""

from __future__ import annotations

import fnmatch
import functools
import io
import os
import stat
from collections.abc import Iterator

from ..errors import ErrorCode, ToolError
from ._files import SNIFF_BYTES, is_binary
from ._paths import Access
from ._regex import Regex, compile_regex
from ._walk import DirStack, open_walked

__all__ = [
    "GLOB_MAX_RESULTS",
    "GREP_MAX_FILE_BYTES",
    "GREP_MAX_LINE_CHARS",
    "GREP_MAX_MATCHES",
    "SCAN_MAX_ENTRIES",
    "glob_paths",
    "grep_files",
    "parse_glob",
]

GLOB_MAX_RESULTS = 1000
"""`glob` lists at most this many paths."""
GREP_MAX_MATCHES = 500
"""`grep` reports at most this many matching lines."""
GREP_MAX_LINE_CHARS = 300
"""A matching line longer than this is cut in `grep`'s output."""
GREP_MAX_FILE_BYTES = 10_000_000
"""`grep` skips larger files."""
SCAN_MAX_ENTRIES = 100_000
"""Both tools stop walking after this many directory entries."""
SKIPPED_DIRS = frozenset({".git"})


def parse_glob(pattern: str, *, what: str = "pattern") -> tuple[str, ...]:
    """Split a glob into path segments, refusing what it cannot mean under a directory."""

    def bad(reason: str) -> ToolError:
        return ToolError(
            f"invalid {what} {pattern!r}: {reason}", code=ErrorCode.INVALID_PATTERN, pattern=pattern
        )

    if not pattern.strip():
        raise bad("it is empty")
    if "\0" in pattern:
        raise bad("it contains a NUL character")
    if pattern.startswith("/"):
        raise bad("it is absolute; give the directory as `path` and a relative pattern")
    parts = [p for p in pattern.removeprefix("./").rstrip("/").split("/") if p != "."]
    if any(p == ".." for p in parts):
        raise bad("'..' is not allowed; give the directory as `path` instead")
    if any(not p for p in parts):
        raise bad("it has an empty path segment ('//')")
    if any("**" in p and p != "**" for p in parts):
        raise bad("'**' must be a whole path segment, as in 'src/**/*.py'")
    return tuple(parts)


def _segment_matches(pattern: str, name: str) -> bool:
    if name.startswith(".") and not pattern.startswith("."):
        return False  # like the shell: wildcards do not match a leading dot
    return fnmatch.fnmatchcase(name, pattern)


def matches(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether relative path `parts` matches `pattern` ('**' spans zero or more segments)."""

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(parts)
        if pattern[i] == "**":
            if match(i + 1, j):
                return True
            return j < len(parts) and not parts[j].startswith(".") and match(i, j + 1)
        return j < len(parts) and _segment_matches(pattern[i], parts[j]) and match(i + 1, j + 1)

    return match(0, 0)


_ROOT_FLAGS = os.O_RDONLY | os.O_NONBLOCK
_SUBDIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

Listing = Iterator[tuple[str, DirStack, list[str], bool]]
"""(directory, its fds from `/`, names, is_dir) for every readable directory, top down."""


def _walk(access: Access, root: str, stack: DirStack, counter: list[int]) -> Listing:
    """Each directory's subdirectories, then its other entries; `counter[0]` counts entries.

    Like `os.walk` (top down, symlinked directories listed but not entered), but through fds.
    The caller may prune the subdirectories it is given: they are entered afterwards.
    """
    try:
        with os.scandir(stack[-1][1]) as listing:
            entries = list(listing)
    except OSError:
        return  # an unreadable directory is skipped, as `find` would report and go on
    dirnames: list[str] = []
    filenames: list[str] = []
    for entry in entries:
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        (dirnames if is_dir else filenames).append(entry.name)
    dirnames = [
        name
        for name in sorted(dirnames)
        if name not in SKIPPED_DIRS and access.read_denial(os.path.join(root, name)) is None
    ]
    counter[0] += len(dirnames) + len(filenames)
    yield root, stack, dirnames, True
    yield root, stack, sorted(filenames), False
    for name in dirnames:
        if counter[0] >= SCAN_MAX_ENTRIES:
            return
        try:
            fd = os.open(name, _SUBDIR_FLAGS, dir_fd=stack[-1][1])
        except OSError:
            continue  # a symlink (never entered), gone since, or unreadable
        try:
            yield from _walk(access, os.path.join(root, name), (*stack, (name, fd)), counter)
        finally:
            os.close(fd)


def glob_paths(access: Access, pattern: str, path: str | None) -> str:
    """`glob`: the paths under `path` matching `pattern`, sorted, directories ending in '/'."""
    parts = parse_glob(pattern)
    given = path if path is not None else "."
    check = access.check("read", given)
    try:
        with open_walked(access.absolute(given), _ROOT_FLAGS, check=check) as opened:
            if not stat.S_ISDIR(os.fstat(opened.fd).st_mode):
                raise ToolError(
                    f"{access.show(opened.path)!r} is not a directory; glob searches under a "
                    "directory",
                    code=ErrorCode.NOT_A_DIRECTORY,
                    path=opened.path,
                )
            return _glob(access, pattern, parts, opened.path, opened.as_dir())
    except OSError as exc:
        raise check.error(exc) from exc


def _glob(access: Access, pattern: str, parts: tuple[str, ...], root: str, stack: DirStack) -> str:
    depth = None if "**" in parts else len(parts)
    counter = [0]
    found: list[str] = []
    for directory, _, names, is_dir in _walk(access, root, stack, counter):
        rel = os.path.relpath(directory, root)
        prefix = () if rel == "." else tuple(rel.split(os.sep))
        suffix = "/" if is_dir else ""
        found.extend(
            access.show(os.path.join(directory, name)) + suffix
            for name in names
            if matches(parts, (*prefix, name))
        )
        if is_dir and depth is not None and len(prefix) + 1 >= depth:
            names.clear()  # nothing deeper can match; the walk will not descend
    found.sort()
    lines = found[:GLOB_MAX_RESULTS]
    notes: list[str] = []
    if len(found) > GLOB_MAX_RESULTS:
        notes.append(
            f"… {len(found) - GLOB_MAX_RESULTS} more matches not shown; narrow the pattern"
        )
    if counter[0] >= SCAN_MAX_ENTRIES:
        notes.append(f"… stopped after scanning {SCAN_MAX_ENTRIES} entries; give a narrower path")
    if not lines:
        return f"no paths match {pattern!r} under {access.show(root)}" + "".join(
            "\n" + n for n in notes
        )
    return "\n".join(lines + notes)


def _file_filter(file_glob: str | None) -> tuple[str, ...] | None:
    if file_glob is None:
        return None
    return parse_glob(file_glob, what="glob")


def _wanted(filter_parts: tuple[str, ...] | None, rel_parts: tuple[str, ...]) -> bool:
    if filter_parts is None:
        return True
    if len(filter_parts) == 1 and filter_parts[0] != "**":
        return _segment_matches(filter_parts[0], rel_parts[-1])  # '*.py' matches at any depth
    return matches(filter_parts, rel_parts)


class _Grep:
    def __init__(self, access: Access, regex: Regex) -> None:
        self.access = access
        self.regex = regex
        self.lines: list[str] = []
        self.total = 0
        self.skipped = 0

    @property
    def full(self) -> bool:
        return self.total >= GREP_MAX_MATCHES

    def search(self, directory: str, stack: DirStack, name: str) -> None:
        """Search file `name` of `directory` (whose fds are `stack`); skip what may not be read."""
        full = os.path.join(directory, name)
        check = self.access.check("read", full)
        try:
            with open_walked(
                name, os.O_RDONLY | os.O_NONBLOCK, check=check, base=stack, regular=True
            ) as opened:
                self.access.check_file("read", full, opened.path, os.fstat(opened.fd))
                self.scan(opened.fd, self.access.show(full))
        except (OSError, ToolError):
            self.skipped += 1

    def scan(self, fd: int, shown: str) -> None:
        """Search the open regular file `fd`, shown to the model as `shown`."""
        with os.fdopen(fd, "rb", closefd=False) as handle:
            size = os.fstat(fd).st_size
            if size > GREP_MAX_FILE_BYTES or is_binary(handle.read(SNIFF_BYTES)):
                self.skipped += size > GREP_MAX_FILE_BYTES
                return
            handle.seek(0)
            text = io.TextIOWrapper(handle, encoding="utf-8", errors="replace")
            for number, line in enumerate(text, 1):
                # Without its newline: RE2's `$` matches only at the end of the text searched.
                if self.regex.search(line.removesuffix("\n")):
                    body = line.rstrip("\r\n")
                    if len(body) > GREP_MAX_LINE_CHARS:
                        body = body[:GREP_MAX_LINE_CHARS] + " …"
                    self.total += 1
                    self.lines.append(f"{shown}:{number}: {body}")
                    if self.full:
                        return


def _grep_tree(
    grep: _Grep,
    filter_parts: tuple[str, ...] | None,
    root: str,
    stack: DirStack,
    counter: list[int],
) -> None:
    for directory, fds, names, is_dir in _walk(grep.access, root, stack, counter):
        if is_dir:
            continue
        rel = os.path.relpath(directory, root)
        prefix = () if rel == "." else tuple(rel.split(os.sep))
        for name in names:
            if _wanted(filter_parts, (*prefix, name)):
                grep.search(directory, fds, name)
            if grep.full:
                return


def grep_files(access: Access, pattern: str, path: str | None, file_glob: str | None) -> str:
    """`grep`: the lines matching an RE2 regular expression, as `file:line: text`."""
    regex = compile_regex(pattern)
    filter_parts = _file_filter(file_glob)
    given = path if path is not None else "."
    check = access.check("read", given)
    grep = _Grep(access, regex)
    counter = [0]
    try:
        with open_walked(access.absolute(given), _ROOT_FLAGS, check=check) as opened:
            root = opened.path
            st = os.fstat(opened.fd)
            if stat.S_ISDIR(st.st_mode):
                _grep_tree(grep, filter_parts, root, opened.as_dir(), counter)
            elif stat.S_ISREG(st.st_mode):
                access.check_file("read", given, root, st)
                grep.scan(opened.fd, access.show(root))
            else:  # a FIFO or device is refused, not skipped
                raise ToolError(
                    f"{access.show(root)!r} is not a regular file",
                    code=ErrorCode.NOT_A_FILE,
                    path=root,
                )
    except OSError as exc:
        raise check.error(exc) from exc
    notes: list[str] = []
    if grep.full:
        notes.append(f"… stopped at {GREP_MAX_MATCHES} matches; narrow the pattern or the path")
    if counter[0] >= SCAN_MAX_ENTRIES:
        notes.append(f"… stopped after scanning {SCAN_MAX_ENTRIES} entries; give a narrower path")
    if grep.skipped:
        notes.append(f"({grep.skipped} files skipped: unreadable, hidden or too large)")
    if not grep.lines:
        return f"no lines match {pattern!r} under {access.show(root)}" + "".join(
            "\n" + n for n in notes
        )
    return "\n".join(grep.lines + notes)
