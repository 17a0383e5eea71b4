from __future__ import annotations

from collections.abc import Iterator

import pytest
from chat_server import ChatServer


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    """A loopback chat-completions server with an empty reply queue."""
    with ChatServer() as server:
        yield server
