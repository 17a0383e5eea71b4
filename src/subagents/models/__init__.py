"""Models: the `Model` protocol, the scripted model, the OpenAI-compatible and Anthropic adapters.

`OpenAICompatModel` and `AnthropicModel` are imported on first use: the SDKs take half a second
to import and most commands (listing, logs, scripted runs) never need them, and the `anthropic`
SDK is an optional extra.
"""

from typing import TYPE_CHECKING, Any

from ._base import (
    BlockAssembler as BlockAssembler,
    Finish as Finish,
    FinishReason as FinishReason,
    Model as Model,
    ModelChunk as ModelChunk,
    ModelRequest as ModelRequest,
    ReasoningDelta as ReasoningDelta,
    TextDelta as TextDelta,
    ToolCallDelta as ToolCallDelta,
    ToolSchema as ToolSchema,
    UsageChunk as UsageChunk,
)
from ._model_spec import (
    ModelSpec as ModelSpec,
    ModelSpecKind as ModelSpecKind,
    open_model as open_model,
    parse_model_spec as parse_model_spec,
)
from ._scripted import (
    ScriptedCall as ScriptedCall,
    ScriptedModel as ScriptedModel,
    ScriptedResponse as ScriptedResponse,
)

__all__ = [
    "AnthropicModel",
    "BlockAssembler",
    "Finish",
    "FinishReason",
    "Model",
    "ModelChunk",
    "ModelRequest",
    "ModelSpec",
    "ModelSpecKind",
    "OpenAICompatModel",
    "ReasoningDelta",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedResponse",
    "TextDelta",
    "ToolCallDelta",
    "ToolSchema",
    "UsageChunk",
    "open_model",
    "parse_model_spec",
]

if TYPE_CHECKING:
    from ._anthropic import AnthropicModel as AnthropicModel
    from ._openai import OpenAICompatModel as OpenAICompatModel


def __getattr__(name: str) -> Any:
    if name == "OpenAICompatModel":
        from ._openai import OpenAICompatModel

        return OpenAICompatModel
    if name == "AnthropicModel":
        from ._anthropic import AnthropicModel

        return AnthropicModel
    raise AttributeError(f"module 'subagents.models' has no attribute {name!r}")
