"""The search tools' work: `glob` (names) and `grep` (contents), as blocking functions.

Both walk the tree without following symlinked directories, skip `.git` directories and every
place the call may not read, and stop at fixed caps, saying so in their output. `grep` checks
each file's canonical path before opening it, so a symlink inside the workspace cannot expose
a hidden file.
"""

from __future__ import annotations

import fnmatch
import functools
import io
import os
import re
from collections.abc import Iterator

from ..errors import ErrorCode, ToolError
from ._files import SNIFF_BYTES, is_binary, open_regular
from ._paths import Access

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


def _search_root(access: Access, path: str | None) -> str:
    given = path if path is not None else "."
    real = access.resolve(given)
    access.check_read(given, real)
    if not os.path.exists(real):
        raise ToolError(f"{given!r} does not exist", code=ErrorCode.FILE_NOT_FOUND, path=real)
    return real


def _walk(access: Access, root: str, counter: list[int]) -> Iterator[tuple[str, list[str], bool]]:
    """(directory, names, is_dir) for every readable entry; `counter[0]` counts entries seen."""

    def on_error(exc: OSError) -> None:
        return None  # an unreadable directory is skipped, as `find` would report and go on

    for directory, dirnames, filenames in os.walk(root, onerror=on_error):
        dirnames[:] = [
            name
            for name in sorted(dirnames)
            if name not in SKIPPED_DIRS
            and access.read_denial(os.path.join(directory, name)) is None
        ]
        counter[0] += len(dirnames) + len(filenames)
        yield directory, dirnames, True  # the caller may prune it: os.walk reads it back
        yield directory, sorted(filenames), False
        if counter[0] >= SCAN_MAX_ENTRIES:
            return


def glob_paths(access: Access, pattern: str, path: str | None) -> str:
    """`glob`: the paths under `path` matching `pattern`, sorted, directories ending in '/'."""
    parts = parse_glob(pattern)
    root = _search_root(access, path)
    if not os.path.isdir(root):
        raise ToolError(
            f"{access.show(root)!r} is not a directory; glob searches under a directory",
            code=ErrorCode.NOT_A_DIRECTORY,
            path=root,
        )
    depth = None if "**" in parts else len(parts)
    counter = [0]
    found: list[str] = []
    for directory, names, is_dir in _walk(access, root, counter):
        rel = os.path.relpath(directory, root)
        prefix = () if rel == "." else tuple(rel.split(os.sep))
        suffix = "/" if is_dir else ""
        found.extend(
            access.show(os.path.join(directory, name)) + suffix
            for name in names
            if matches(parts, (*prefix, name))
        )
        if is_dir and depth is not None and len(prefix) + 1 >= depth:
            names.clear()  # nothing deeper can match; os.walk will not descend
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


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        raise ToolError(
            f"invalid regular expression {pattern!r}: {exc.msg}{where} (Python `re` syntax)",
            code=ErrorCode.INVALID_PATTERN,
            pattern=pattern,
        ) from exc


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
    def __init__(self, access: Access, regex: re.Pattern[str]) -> None:
        self.access = access
        self.regex = regex
        self.lines: list[str] = []
        self.total = 0
        self.skipped = 0

    @property
    def full(self) -> bool:
        return self.total >= GREP_MAX_MATCHES

    def search(self, full: str) -> None:
        real = os.path.realpath(full)
        if self.access.read_denial(real) is not None:
            self.skipped += 1
            return
        shown = self.access.show(full)
        try:
            handle = open_regular(real, shown)
        except ToolError:
            self.skipped += 1
            return
        with handle:
            size = os.fstat(handle.fileno()).st_size
            if size > GREP_MAX_FILE_BYTES or is_binary(handle.read(SNIFF_BYTES)):
                self.skipped += size > GREP_MAX_FILE_BYTES
                return
            handle.seek(0)
            text = io.TextIOWrapper(handle, encoding="utf-8", errors="replace")
            for number, line in enumerate(text, 1):
                if self.regex.search(line):
                    body = line.rstrip("\r\n")
                    if len(body) > GREP_MAX_LINE_CHARS:
                        body = body[:GREP_MAX_LINE_CHARS] + " …"
                    self.total += 1
                    self.lines.append(f"{shown}:{number}: {body}")
                    if self.full:
                        return


def grep_files(access: Access, pattern: str, path: str | None, file_glob: str | None) -> str:
    """`grep`: the lines matching a Python regex, as `file:line: text`."""
    regex = _compile(pattern)
    filter_parts = _file_filter(file_glob)
    root = _search_root(access, path)
    grep = _Grep(access, regex)
    counter = [0]
    if os.path.isdir(root):
        for directory, names, is_dir in _walk(access, root, counter):
            if is_dir:
                continue
            rel = os.path.relpath(directory, root)
            prefix = () if rel == "." else tuple(rel.split(os.sep))
            for name in names:
                if _wanted(filter_parts, (*prefix, name)):
                    grep.search(os.path.join(directory, name))
                if grep.full:
                    break
            if grep.full:
                break
    else:
        open_regular(root, access.show(root)).close()  # a FIFO or device is refused, not skipped
        grep.search(root)
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
