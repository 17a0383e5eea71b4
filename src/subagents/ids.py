"""Identifiers: every id is a uuid4 string (36 characters), so it never parses as a name."""

from __future__ import annotations

import os
import random
import re
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

_random = random.Random()  # seeded from the OS once, then a fast PRNG

SessionId = NewType("SessionId", str)
MessageId = NewType("MessageId", str)
CallId = NewType("CallId", str)


def new_session_id() -> SessionId:
    """A new session id: a uuid4 string from the OS's random source, so it cannot be guessed."""
    return SessionId(_uuid4_text(int.from_bytes(os.urandom(16), "big")))


def new_message_id() -> MessageId:
    """A uuid4-shaped id from a fast generator.

    Message ids must be unique, not secret; session ids, which name what a caller may
    address, come from the OS's random source.
    """
    return MessageId(_uuid4_text(_random.getrandbits(128)))


_UUID4_BITS = (0x4 << 76) | (0x8 << 60)  # version 4, RFC 4122 variant
_UUID4_KEEP = ~((0xF << 76) | (0x3 << 62)) & ((1 << 128) - 1)


def _uuid4_text(bits: int) -> str:
    """`str(uuid.UUID(int=bits, version=4))`, in a third of the time (ids are made per event)."""
    h = "%032x" % ((bits & _UUID4_KEEP) | _UUID4_BITS)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


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
