"""The file tools' work: read, write and exact-string edit, as blocking functions.

The tools run these in a worker thread (`asyncio.to_thread`), so the event loop never blocks on
the disk. Every function checks the call's `Access` before it touches anything, so a refused call
leaves the file system as it was.
"""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Iterator
from typing import BinaryIO, TextIO

from ..errors import ErrorCode, ToolError
from ._paths import Access, os_error

__all__ = [
    "EDIT_MAX_BYTES",
    "READ_DEFAULT_LIMIT",
    "READ_MAX_CHARS",
    "READ_MAX_LINE_CHARS",
    "edit_text",
    "open_regular",
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


def open_regular(real: str, shown: str) -> BinaryIO:
    """Open an existing regular file for reading.

    Non-blocking, so a FIFO cannot hang the call, and without following a final symlink, so
    the canonical path cannot be swapped for a link after the check.
    """
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise os_error(exc, shown) from exc
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:  # pragma: no cover - fstat of a just-opened fd does not fail
        os.close(fd)
        raise os_error(exc, shown) from exc
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise ToolError(f"{shown!r} is {kind}", code=ErrorCode.NOT_A_FILE, path=real)
    return os.fdopen(fd, "rb")


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
    real = access.resolve(path)
    access.check_read(path, real)
    shown = access.show(real)
    start = max(offset, 1)
    with open_regular(real, shown) as raw:
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
    real = access.resolve(path)
    access.check_write(path, real)
    shown = access.show(real)
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"content is not valid Unicode text ({exc.reason} at index {exc.start})",
            code=ErrorCode.INVALID_ARGS,
        ) from exc
    try:
        existing = os.lstat(real)
    except FileNotFoundError:
        existed = False
    except OSError as exc:
        raise os_error(exc, shown) from exc
    else:
        existed = True
        if not stat.S_ISREG(existing.st_mode):
            kind = "a directory" if stat.S_ISDIR(existing.st_mode) else "not a regular file"
            raise ToolError(f"{shown!r} is {kind}", code=ErrorCode.NOT_A_FILE, path=real)
    parent = os.path.dirname(real)
    try:
        os.makedirs(parent, exist_ok=True)
    except FileExistsError as exc:
        raise ToolError(
            f"cannot create {shown!r}: a parent path exists and is not a directory",
            code=ErrorCode.NOT_A_DIRECTORY,
            path=real,
        ) from exc
    except OSError as exc:
        raise os_error(exc, shown) from exc
    _write_all(real, shown, data)
    verb = "overwrote" if existed else "created"
    return f"{verb} {shown} ({len(data)} bytes, {_count_lines(content)} lines)"


def _count_lines(content: str) -> int:
    return content.count("\n") + (0 if not content or content.endswith("\n") else 1)


def _write_all(real: str, shown: str, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(real, flags, 0o666)
    except OSError as exc:
        raise os_error(exc, shown) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise os_error(exc, shown) from exc


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
    real = access.resolve(path)
    access.check_write(path, real)
    shown = access.show(real)
    with open_regular(real, shown) as handle:
        data = handle.read(EDIT_MAX_BYTES + 1)
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
    _write_all(real, shown, encoded)
    noun = "occurrence" if count == 1 else "occurrences"
    return f"edited {shown}: replaced {count} {noun}"
