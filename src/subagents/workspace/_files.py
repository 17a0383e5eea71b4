"""The file tools' work: read, write and exact-string edit, as blocking functions.

The tools run these in a worker thread (`asyncio.to_thread`), so the event loop never blocks on
the disk. Every function checks the call's `Access` before it touches anything, so a refused call
leaves the file system as it was.

Each call resolves, checks and opens its file in one walk (`_walk.open_walked`), then does all
its work through that one fd. A concurrent rename can therefore not swap the file between the
check and the use. Writes open without `O_TRUNC`: the open file is first checked for other hard
links (`Access.check_file`), and only then truncated and written.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from typing import BinaryIO, TextIO

from ..errors import ErrorCode, ToolError
from ._paths import Access
from ._walk import open_walked

__all__ = [
    "EDIT_MAX_BYTES",
    "READ_DEFAULT_LIMIT",
    "READ_MAX_CHARS",
    "READ_MAX_LINE_CHARS",
    "edit_text",
    "read_text",
    "write_text",
]

READ_DEFAULT_LIMIT = 2000
"""Lines `read_file` returns when the call gives no `limit`."""
READ_MAX_LINE_CHARS = 2000
"""Longer lines are cut, and marked as cut."""
READ_MAX_CHARS = 100_000
"""`read_file` stops before its output would pass this many characters."""
EDIT_MAX_BYTES = 10_000_000
"""`edit_file` refuses larger files (it rewrites the whole file)."""
SNIFF_BYTES = 8192
"""A NUL byte in this many leading bytes marks a file as binary."""
_BARE_LF = re.compile(r"(?<!\r)\n")


def is_binary(head: bytes) -> bool:
    return b"\0" in head


def _lines(text: TextIO) -> Iterator[tuple[str, bool]]:
    """Each line without its ending, and whether it was cut at `READ_MAX_LINE_CHARS`."""
    while True:
        line = text.readline(READ_MAX_LINE_CHARS + 1)
        if not line:
            return
        if line.endswith("\n"):
            yield line[:-1], False
        elif len(line) <= READ_MAX_LINE_CHARS:
            yield line, False  # the last line, without a newline
        else:
            rest = line[READ_MAX_LINE_CHARS:]
            while rest and not rest.endswith("\n"):
                rest = text.readline(65536)
            yield line[:READ_MAX_LINE_CHARS], True


def read_text(access: Access, path: str, *, offset: int, limit: int) -> str:
    """`read_file`: the lines from `offset` (1-based), at most `limit`, numbered like `cat -n`."""
    offset, limit = int(offset), int(limit)  # JSON Schema's integer admits 2.0
    if offset < 0:
        raise ToolError(
            f"offset must be 0 or more (the first line is 1), got {offset}",
            code=ErrorCode.INVALID_ARGS,
        )
    if limit < 1:
        raise ToolError(f"limit must be 1 or more, got {limit}", code=ErrorCode.INVALID_ARGS)
    check = access.check("read", path)
    flags = os.O_RDONLY | os.O_NONBLOCK  # a FIFO swapped in after the check cannot hang it
    try:
        with open_walked(access.absolute(path), flags, check=check, regular=True) as opened:
            access.check_file("read", path, opened.path, os.fstat(opened.fd))
            with os.fdopen(opened.fd, "rb", closefd=False) as raw:
                return _numbered(raw, access.show(opened.path), opened.path, offset, limit)
    except OSError as exc:
        raise check.error(exc) from exc


def _numbered(raw: BinaryIO, shown: str, real: str, offset: int, limit: int) -> str:
    start = max(offset, 1)
    if is_binary(raw.read(SNIFF_BYTES)):
        raise ToolError(
            f"{shown!r} looks like a binary file (it contains NUL bytes); read_file shows "
            "text only",
            code=ErrorCode.BINARY_FILE,
            path=real,
        )
    raw.seek(0)
    text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
    out: list[str] = []
    size = 0
    number = 0
    more = False
    for number, (line, cut) in enumerate(_lines(text), 1):
        if number < start:
            continue
        entry = f"{number:6}\t{line}" + (" … [line truncated]" if cut else "")
        if len(out) >= limit or size + len(entry) + 1 > READ_MAX_CHARS:
            more = True
            break
        out.append(entry)
        size += len(entry) + 1
    if not out:
        if number == 0:
            return f"({shown} is empty)"
        return f"({shown} has {number} lines; offset {offset} is past the end)"
    if more:
        next_offset = start + len(out)
        out.append(f"… more lines follow; continue with offset={next_offset}")
    return "\n".join(out)


def write_text(access: Access, path: str, content: str) -> str:
    """`write_file`: create or overwrite a file (and its missing parent directories)."""
    target = access.absolute(path)
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"content is not valid Unicode text ({exc.reason} at index {exc.start})",
            code=ErrorCode.INVALID_ARGS,
        ) from exc
    check = access.check("write", path)
    flags = os.O_WRONLY | os.O_NONBLOCK  # no O_TRUNC: the file is checked before it changes
    try:
        with open_walked(
            target, flags, check=check, create=True, make_parents=True, regular=True
        ) as opened:
            access.check_file("write", path, opened.path, os.fstat(opened.fd))
            _replace_content(opened.fd, data)
            created, real = opened.created, opened.path
    except OSError as exc:
        raise check.error(exc) from exc
    verb = "created" if created else "overwrote"
    return f"{verb} {access.show(real)} ({len(data)} bytes, {_count_lines(content)} lines)"


def _count_lines(content: str) -> int:
    return content.count("\n") + (0 if not content or content.endswith("\n") else 1)


def _replace_content(fd: int, data: bytes) -> None:
    """Make `data` the whole content of the open file `fd`."""
    os.ftruncate(fd, 0)
    view = memoryview(data)
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], done)


def edit_text(
    access: Access, path: str, old_string: str, new_string: str, *, replace_all: bool
) -> str:
    """`edit_file`: replace `old_string`, which must occur exactly once unless `replace_all`."""
    if not old_string:
        raise ToolError(
            "old_string must not be empty; use write_file to create or overwrite a file",
            code=ErrorCode.INVALID_ARGS,
        )
    if old_string == new_string:
        raise ToolError(
            "old_string and new_string are identical; the edit would change nothing",
            code=ErrorCode.INVALID_ARGS,
        )
    check = access.check("write", path)
    flags = os.O_RDWR | os.O_NONBLOCK  # read and rewrite through one fd
    try:
        with open_walked(access.absolute(path), flags, check=check, regular=True) as opened:
            access.check_file("write", path, opened.path, os.fstat(opened.fd))
            with os.fdopen(opened.fd, "rb", closefd=False) as handle:
                data = handle.read(EDIT_MAX_BYTES + 1)
            shown = access.show(opened.path)
            encoded, count = _edited(data, shown, opened.path, old_string, new_string, replace_all)
            _replace_content(opened.fd, encoded)
    except OSError as exc:
        raise check.error(exc) from exc
    noun = "occurrence" if count == 1 else "occurrences"
    return f"edited {shown}: replaced {count} {noun}"


def _edited(
    data: bytes, shown: str, real: str, old_string: str, new_string: str, replace_all: bool
) -> tuple[bytes, int]:
    """The file's new bytes and how many occurrences were replaced, or the reason why not."""
    if len(data) > EDIT_MAX_BYTES:
        raise ToolError(
            f"{shown!r} is larger than {EDIT_MAX_BYTES} bytes; edit_file rewrites whole files "
            "and refuses ones this large (use bash with a stream editor)",
            code=ErrorCode.FILE_TOO_LARGE,
            path=real,
        )
    if is_binary(data[:SNIFF_BYTES]):
        raise ToolError(
            f"{shown!r} looks like a binary file (it contains NUL bytes); edit_file edits text",
            code=ErrorCode.BINARY_FILE,
            path=real,
        )
    # surrogateescape round-trips bytes that are not UTF-8, so they survive the edit unchanged.
    text = data.decode("utf-8", errors="surrogateescape")
    old, new = old_string, new_string
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # read_file shows CRLF lines with plain newlines; match them as the file spells them.
        old, new = _BARE_LF.sub("\r\n", old), _BARE_LF.sub("\r\n", new)
        count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_string was not found in {shown!r}; it must match the file exactly, including "
            "whitespace and indentation (read the file again to copy the current text)",
            code=ErrorCode.NO_MATCH,
            path=real,
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {shown!r}; include more surrounding text so "
            "it matches exactly once, or set replace_all to replace every occurrence",
            code=ErrorCode.AMBIGUOUS_MATCH,
            path=real,
            count=count,
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    try:
        encoded = updated.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"new_string is not valid Unicode text ({exc.reason})", code=ErrorCode.INVALID_ARGS
        ) from exc
    return encoded, count
