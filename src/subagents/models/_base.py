"""The `Model` protocol, its request and stream chunks, and the one block assembler."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Literal, Protocol, TypeAlias

import msgspec

from ..ids import new_message_id
from ..messages import (
    AssistantMessage,
    ContentBlock,
    JsonObject,
    JsonValue,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    Usage,
)

__all__ = [
    "BlockAssembler",
    "FinishReason",
    "Finish",
    "Model",
    "ModelChunk",
    "ModelRequest",
    "ReasoningDelta",
    "TextDelta",
    "ToolCallDelta",
    "ToolSchema",
    "UsageChunk",
]

FinishReason: TypeAlias = Literal["stop", "tool-calls", "max-tokens", "refusal"]


class ToolSchema(msgspec.Struct, frozen=True):
    """What the model is told about a tool."""

    name: str
    description: str
    parameters: JsonObject


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One model call.

    `call_index` counts this agent's model calls since its own start (a fork's inherited
    history does not count), so a scripted model can pick its answer from it and a resumed
    agent continues where it stopped.
    """

    agent_name: str
    session_id: str
    call_index: int
    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSchema] = ()
    max_tokens: int | None = None


class TextDelta(msgspec.Struct, frozen=True):
    """A piece of the response's visible text; consecutive pieces join into one `TextBlock`."""

    text: str


class ReasoningDelta(msgspec.Struct, frozen=True):
    """A piece of the model's reasoning; consecutive pieces join into one `ReasoningBlock`."""

    text: str


class ToolCallDelta(msgspec.Struct, frozen=True):
    """A piece of one tool call; `index` keys the call within the response."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class UsageChunk(msgspec.Struct, frozen=True):
    """The call's token usage; when a stream sends several, the last one counts (not a sum)."""

    usage: Usage


class Finish(msgspec.Struct, frozen=True):
    """The end of a response stream: why the model stopped.

    `replay_state` is opaque adapter state, copied into the `AssistantMessage` so that the
    adapter can send the message back on a later call.
    """

    reason: FinishReason
    replay_state: JsonValue = None


ModelChunk: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta | UsageChunk | Finish


class Model(Protocol):
    """A chat model.

    `stream` yields chunks and ends with one `Finish` (a stream that ends without one counts
    as `stop`). Failures raise `ModelError` with an adapter code and `retryable`; adapters
    retry transient failures themselves before raising.
    """

    @property
    def provider(self) -> str: ...

    @property
    def name(self) -> str: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]: ...

    async def aclose(self) -> None: ...


class _CallParts:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class BlockAssembler:
    """Folds stream chunks into one `AssistantMessage`.

    Text and reasoning deltas join into blocks in arrival order; tool-call deltas join by index.
    On `max-tokens` the tool calls are dropped, so a truncated call never runs.
    """

    def __init__(self, *, provider: str, model: str) -> None:
        self._provider = provider
        self._model = model
        self._blocks: list[ContentBlock | _CallParts] = []
        self._text: list[str] = []
        self._text_kind: type[TextBlock] | type[ReasoningBlock] | None = None
        self._calls: dict[int, _CallParts] = {}
        self.usage: Usage | None = None
        self.finish: FinishReason = "stop"
        self.replay_state: JsonValue = None

    def feed(self, chunk: ModelChunk) -> None:
        match chunk:
            case TextDelta(text=text):
                self._add_text(TextBlock, text)
            case ReasoningDelta(text=text):
                self._add_text(ReasoningBlock, text)
            case ToolCallDelta():
                self._flush_text()
                parts = self._calls.get(chunk.index)
                if parts is None:
                    parts = self._calls[chunk.index] = _CallParts()
                    self._blocks.append(parts)
                if chunk.id:
                    parts.id = chunk.id
                if chunk.name:
                    parts.name += chunk.name
                parts.arguments.append(chunk.arguments)
            case UsageChunk(usage=usage):
                self.usage = usage
            case Finish(reason=reason, replay_state=state):
                self.finish = reason
                self.replay_state = state

    def _add_text(self, kind: type[TextBlock] | type[ReasoningBlock], text: str) -> None:
        if self._text_kind is not kind:
            self._flush_text()
            self._text_kind = kind
        self._text.append(text)

    def _flush_text(self) -> None:
        if self._text_kind is not None and self._text:
            self._blocks.append(self._text_kind("".join(self._text)))
        self._text = []
        self._text_kind = None

    def has_visible_text(self) -> bool:
        """Whether non-whitespace text or reasoning has streamed (for an interrupted prefix)."""
        if any(t.strip() for t in self._text):
            return True
        return any(
            isinstance(b, TextBlock | ReasoningBlock) and b.text.strip() for b in self._blocks
        )

    def message(self, *, interrupted: bool = False) -> AssistantMessage:
        """The assembled message; interrupted or max-tokens messages carry no tool calls."""
        self._flush_text()
        keep_calls = not interrupted and self.finish != "max-tokens"
        content: list[ContentBlock] = []
        for index, block in enumerate(self._blocks):
            if isinstance(block, _CallParts):
                if keep_calls:
                    content.append(
                        ToolCallBlock(
                            id=block.id or f"call_{index}",
                            name=block.name,
                            arguments="".join(block.arguments),
                        )
                    )
            else:
                content.append(block)
        return AssistantMessage(
            id=new_message_id(),
            content=tuple(content),
            provider=self._provider,
            model=self._model,
            replay_state=self.replay_state,
        )
