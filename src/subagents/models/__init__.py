"""Models: the `Model` protocol, the scripted model and the OpenAI-compatible adapter."""

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
from ._openai import OpenAICompatModel as OpenAICompatModel
from ._spec import (
    ModelSpec as ModelSpec,
    ModelSpecKind as ModelSpecKind,
    open_model as open_model,
    parse_model_spec as parse_model_spec,
)

__all__ = [
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
    "TextDelta",
    "ToolCallDelta",
    "ToolSchema",
    "UsageChunk",
    "open_model",
    "parse_model_spec",
]
