"""Reading one TOML settings file: size and type checks, parsing, the line of every key.

`tomllib` says where a syntax error is but not where a key is, so `key_lines` scans the text
for table headers and `key =` lines: a value that is well-formed TOML but wrong for us (an
unknown sandbox mode, say) is reported at its line as well.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ErrorCode

__all__ = ["MAX_CONFIG_BYTES", "KeyPath", "invalid", "key_lines", "read_toml"]

MAX_CONFIG_BYTES = 256 * 1024
"""A settings file larger than this (256 KiB) is refused unread."""

KeyPath = tuple[str, ...]

_HEADER = re.compile(r"^\s*\[(?P<path>[^\[\]]+)\]\s*(#.*)?$")
_KEY = re.compile(r"""^\s*(?P<key>"[^"]*"|'[^']*'|[A-Za-z0-9_.\-" ]+?)\s*=""")
_AT_LINE = re.compile(r"\(at line (?P<line>\d+), column \d+\)")


def invalid(path: str, line: int | None, message: str) -> ConfigError:
    """The one-line error for a bad settings file: `PATH:LINE: message`."""
    where = path if line is None else f"{path}:{line}"
    return ConfigError(f"{where}: {message}", code=ErrorCode.CONFIG_INVALID, path=path, line=line)


def _split_key(text: str) -> KeyPath:
    """`a."b.c".d` as ("a", "b.c", "d")."""
    return tuple(
        next(group for group in match.groups() if group is not None)
        for match in re.finditer(r'"([^"]*)"|\'([^\']*)\'|([^.\s]+)', text)
    )


def key_lines(text: str) -> dict[KeyPath, int]:
    """The line (1-based) of each table header and key: `("budget", "tokens") -> 7`."""
    lines: dict[KeyPath, int] = {}
    table: KeyPath = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line.replace("[[", "[").replace("]]", "]"))
        if header is not None:
            table = _split_key(header["path"])
            lines.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key is not None:
            lines.setdefault((*table, *_split_key(key["key"])), number)
    return lines


def read_toml(path: Path) -> tuple[dict[str, Any], str] | None:
    """A settings file's table and text; None when there is no such file.

    Only a regular UTF-8 file of at most `MAX_CONFIG_BYTES` is read, opened without blocking
    (a FIFO never hangs a command). Any other problem is a `ConfigError` (`CONFIG_INVALID`)
    naming the file, and the line for a syntax error.
    """
    shown = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None  # a parent is a file: there is no such settings file
    except OSError as exc:
        raise invalid(shown, None, f"cannot read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise invalid(shown, None, "not a regular file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise invalid(
                shown, None, f"the file is {info.st_size} bytes; at most {MAX_CONFIG_BYTES}"
            )
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise invalid(shown, None, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise invalid(shown, None, f"the file grew past {MAX_CONFIG_BYTES} bytes while read")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise invalid(shown, line, "not UTF-8 text") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _AT_LINE.search(message)
        reason = _AT_LINE.sub("", message).strip().rstrip(".")
        line = int(found["line"]) if found is not None else None
        raise invalid(shown, line, f"invalid TOML: {reason}") from None
