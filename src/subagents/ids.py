"""Identifiers: every id is a UUID string (36 characters), so it never parses as a name.

Session ids are uuid7 (time-ordered, unguessable), message ids uuid4-shaped (unique).
"""

from __future__ import annotations

import itertools
import os
import re
import time
from typing import NewType

from .errors import ConfigError, ErrorCode, NotFoundError

__all__ = [
    "CallId",
    "MessageId",
    "SessionId",
    "TENANT_PATTERN",
    "check_session_id",
    "check_tenant_id",
    "new_message_id",
    "new_session_id",
]

SessionId = NewType("SessionId", str)
MessageId = NewType("MessageId", str)
CallId = NewType("CallId", str)


def new_session_id() -> SessionId:
    """A new session id: a uuid7 string (RFC 9562) that cannot be guessed.

    It holds the wall-clock millisecond of its making, then 74 bits from the OS's random source.

    Time first, because the store keys its tables by session id: ids made in creation order
    put a tree's new sessions at the end of each table and a burst of siblings' updates on a
    few pages, where random (uuid4) ids spread them over every page (in S3, 2,000 children,
    three times the bytes written to the WAL).
    """
    return SessionId(
        _uuid7_text(time.time_ns() // 1_000_000, int.from_bytes(os.urandom(10), "big"))
    )


def new_message_id() -> MessageId:
    """A uuid4-shaped id: this process's random prefix, then a counter.

    Message ids must be unique, not secret (session ids, which name what a caller may
    address, are the unguessable ones), and a delegation makes five: one format each.
    """
    ids = _message_ids
    return MessageId(f"{ids.prefix}{next(ids.counter) & _LOW_48:012x}")


_KEEP = ~((0xF << 76) | (0x3 << 62)) & ((1 << 128) - 1)  # all but the version and variant
_UUID4_BITS = (0x4 << 76) | (0x8 << 60)  # version 4, RFC 4122 variant
_UUID7_BITS = (0x7 << 76) | (0x8 << 60)  # version 7, the same variant
_RANDOM_80 = (1 << 80) - 1
_LOW_48 = (1 << 48) - 1  # a uuid7's millisecond, a message id's counter


class _MessageIds:
    """The first 74 random bits of this process's message ids, and the counter after them."""

    def __init__(self) -> None:
        self.prefix = ""
        self.counter = itertools.count()
        self.draw()

    def draw(self) -> None:
        """New random bits, and a counter from a random start.

        Again in a forked child, which would otherwise make its parent's ids.
        """
        bits = (int.from_bytes(os.urandom(16), "big") & _KEEP) | _UUID4_BITS
        self.prefix = _spelled(bits)[:24]  # the four groups before the last, and its dash
        self.counter = itertools.count(bits & _LOW_48)


def _uuid7_text(millis: int, random_bits: int) -> str:
    """The uuid7 of `millis` (its low 48 bits) and `random_bits` (the 74 its layout keeps)."""
    bits = ((millis & _LOW_48) << 80) | (random_bits & _RANDOM_80)
    return _spelled((bits & _KEEP) | _UUID7_BITS)


def _spelled(bits: int) -> str:
    h = "%032x" % bits  # noqa: UP031 (faster than format() here)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_message_ids = _MessageIds()
os.register_at_fork(after_in_child=_message_ids.draw)

_SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def check_session_id(value: object) -> SessionId:
    """`value` as a session id; anything that could never name a session is `NOT_FOUND`.

    Checked before any store is asked, so no text, number or object reaches SQLite, and the
    refusal quotes at most a short, one-line form of what was given.
    """
    if isinstance(value, str) and _SESSION_ID.fullmatch(value):
        return SessionId(value)
    text = repr(value[:80] if isinstance(value, str) else value)
    shown = text if len(text) <= 60 else text[:57] + "..."
    raise NotFoundError(f"session {shown} not found: a session id is a lowercase uuid")


TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""A tenant id: a letter or digit, then up to 63 letters, digits, `_`, `.` or `-`.

A tenant names the folder `$SUBAGENTS_HOME/tenants/<tenant>/`, so the rule keeps it one plain
path component: no separator, no `.` or `..` (the first character is never a dot), no
control or non-ASCII character, and short enough for any file system's name limit.
"""
_TENANT = re.compile(TENANT_PATTERN)


def check_tenant_id(tenant: object) -> str:
    """Return `tenant` if it is a valid tenant id (see `TENANT_PATTERN`).

    Args:
        tenant: The proposed tenant id.

    Returns:
        The same string, unchanged.

    Raises:
        ConfigError: code `CONFIG`; the id is not text or does not match `TENANT_PATTERN`.
    """
    if not isinstance(tenant, str) or _TENANT.fullmatch(tenant) is None:
        shown = repr(tenant) if len(repr(tenant)) <= 70 else repr(tenant)[:60] + "..."
        raise ConfigError(
            f"invalid tenant {shown}: a tenant is 1 to 64 characters, letters, digits, "
            "'_', '.' or '-', starting with a letter or digit",
            code=ErrorCode.CONFIG,
        )
    return tenant
