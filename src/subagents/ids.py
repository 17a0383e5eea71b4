"""Identifiers: every id is a uuid4 string (36 characters), so it never parses as a name."""

from __future__ import annotations

import uuid
from typing import NewType

__all__ = ["CallId", "MessageId", "SessionId", "new_message_id", "new_session_id"]

SessionId = NewType("SessionId", str)
MessageId = NewType("MessageId", str)
CallId = NewType("CallId", str)


def new_session_id() -> SessionId:
    return SessionId(str(uuid.uuid4()))


def new_message_id() -> MessageId:
    return MessageId(str(uuid.uuid4()))
