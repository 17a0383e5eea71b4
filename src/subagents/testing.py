"""Test doubles shared by users and our own tests.

A scripted model (and one that records the requests it gets), an in-memory store, and fake
clocks.
"""

from collections.abc import AsyncIterator

import msgspec

from ._clock import FakeClock as FakeClock, GatedClock as GatedClock
from .models import (
    ModelChunk,
    ModelRequest,
    ScriptedCall as ScriptedCall,
    ScriptedModel as ScriptedModel,
    ScriptedResponse as ScriptedResponse,
)
from .sessions import InMemoryEventStore as InMemoryEventStore

__all__ = [
    "FakeClock",
    "GatedClock",
    "InMemoryEventStore",
    "RecordingModel",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedResponse",
    "ToolCallContext",
]


class RecordingModel(ScriptedModel):
    """The scripted model, also keeping a snapshot of every request it receives."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # pyright: ignore[reportArgumentType]
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Record a snapshot of `request`, then stream the scripted response."""
        self.requests.append(msgspec.structs.replace(request, messages=tuple(request.messages)))
        async for chunk in super().stream(request):
            yield chunk

    def requests_of(self, agent_name: str) -> list[ModelRequest]:
        """The requests one agent (by full name) made, in order."""
        return [r for r in self.requests if r.agent_name == agent_name]


class ToolCallContext:
    """A `ToolContext` for calling a tool's handler directly (the agent loop makes the real one).

    `concluded[0]` records whether the handler called `conclude_turn()`.
    """

    def __init__(
        self,
        tool_name: str = "t",
        *,
        call_id: str = "call-1",
        agent_id: str = "agent-id",
        agent_name: str = "lead",
    ) -> None:
        self.call_id = call_id
        self.tool_name = tool_name
        self.agent_id = agent_id
        self.agent_name = agent_name
        self.grant: str | None = None
        self.concluded = [False]

    def conclude_turn(self) -> None:
        """Record that the handler concluded the turn."""
        self.concluded[0] = True
