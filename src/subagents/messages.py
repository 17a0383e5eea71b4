"""Content blocks, messages, tool calls and token usage: frozen msgspec Structs.

Messages are identified and immutable. The model sees three roles: user messages (prompts,
steering, notices), assistant messages (text, reasoning and tool calls) and tool results.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from .ids import MessageId, new_message_id

__all__ = [
    "AssistantMessage",
    "ContentBlock",
    "JsonObject",
    "JsonValue",
    "Message",
    "MessageSource",
    "ReasoningBlock",
    "TextBlock",
    "ToolCallBlock",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "user_message",
]

JsonValue: TypeAlias = Any
"""A lossless JSON value (the one place `Any` is allowed: JSON boundaries)."""
JsonObject: TypeAlias = dict[str, Any]


# gc=False on every Struct here: messages are immutable data that never refer back to what
# holds them, so the cycle collector need not track (and rescan) the many a tree keeps.
class TextBlock(msgspec.Struct, frozen=True, tag="text", tag_field="kind", gc=False):
    """Plain text in a message: the visible answer of an assistant, or a user's words."""

    text: str


class ReasoningBlock(msgspec.Struct, frozen=True, tag="reasoning", tag_field="kind", gc=False):
    """Reasoning text the model streamed beside its answer (not part of `AssistantMessage.text`)."""

    text: str


class ToolCallBlock(msgspec.Struct, frozen=True, tag="tool-call", tag_field="kind", gc=False):
    """A tool call as the model wrote it; `arguments` is the raw JSON string."""

    id: str
    name: str
    arguments: str


ContentBlock: TypeAlias = TextBlock | ReasoningBlock | ToolCallBlock


class MessageSource(msgspec.Struct, frozen=True, gc=False):
    """Who put a message into an agent's inbox: `user`, `parent`, `notice`, `runtime`, ..."""

    kind: str = "user"
    name: str | None = None


class UserMessage(msgspec.Struct, frozen=True, tag="user", tag_field="role", gc=False):
    """Input to an agent in the user role: a prompt, steering, injected context or a notice.

    `source` says who sent it; build one with `user_message`.
    """

    id: MessageId
    content: tuple[TextBlock, ...]
    source: MessageSource = MessageSource()

    @property
    def text(self) -> str:
        """The message's text blocks joined."""
        return "".join(block.text for block in self.content)


class AssistantMessage(msgspec.Struct, frozen=True, tag="assistant", tag_field="role", gc=False):
    """One model response: its text, reasoning and tool-call blocks in the order they streamed.

    Attributes:
        provider: The adapter's provider name (for example `openai`) that produced it.
        model: The model's name at that provider.
        replay_state: Opaque state from the response's `Finish`, kept with the message for an
            adapter that needs it to send the message back; None when there is none.
    """

    id: MessageId
    content: tuple[ContentBlock, ...]
    provider: str = ""
    model: str = ""
    replay_state: JsonValue = None

    @property
    def text(self) -> str:
        """The answer's text blocks joined (reasoning and tool calls left out)."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def reasoning(self) -> str:
        """The reasoning blocks joined, for a model that streams its reasoning."""
        return "".join(b.text for b in self.content if isinstance(b, ReasoningBlock))

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        """The tool calls the model asked for, in the order it made them."""
        return tuple(b for b in self.content if isinstance(b, ToolCallBlock))


class ToolResultMessage(msgspec.Struct, frozen=True, tag="tool", tag_field="role", gc=False):
    """The outcome of one tool call, as the model sees it.

    Attributes:
        call_id: The `ToolCallBlock.id` it answers.
        name: The tool that was called.
        content: The result text; for an error, the message the model should act on.
        is_error: Whether the call failed (unknown tool, bad arguments, denied, raised, ...).
    """

    id: MessageId
    call_id: str
    name: str
    content: str
    is_error: bool = False


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


class Usage(msgspec.Struct, frozen=True, gc=False):
    """Token counts of model calls; `+` adds two of them.

    As the adapters report them, `cache_read_tokens` (the prompt tokens served from the
    provider's cache) and `cache_write_tokens` (the prompt tokens written to it, which
    Anthropic reports and bills apart) are part of `input_tokens`, and `reasoning_tokens` part
    of `output_tokens`. `cache_write_tokens` came last, with a default, so usage recorded
    before it still decodes.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


def user_message(text: str, *, source: MessageSource | None = None) -> UserMessage:
    """A new, freshly identified user message holding `text`."""
    return UserMessage(
        id=new_message_id(), content=(TextBlock(text),), source=source or MessageSource()
    )
