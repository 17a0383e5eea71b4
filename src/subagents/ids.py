"""Identifiers: every id is a uuid4 string (36 characters), so it never parses as a name."""

from __future__ import annotations

import random
import uuid
from typing import NewType

__all__ = ["CallId", "MessageId", "SessionId", "new_message_id", "new_session_id"]

_random = random.Random()  # seeded from the OS once, then a fast PRNG

SessionId = NewType("SessionId", str)
MessageId = NewType("MessageId", str)
CallId = NewType("CallId", str)


def new_session_id() -> SessionId:
    return SessionId(str(uuid.uuid4()))


def new_message_id() -> MessageId:
    """A uuid4-shaped id from a fast generator.

    Message ids must be unique, not secret; session ids, which name what a caller may
    address, come from the OS's random source.
    """
    return MessageId(str(uuid.UUID(int=_random.getrandbits(128), version=4)))
