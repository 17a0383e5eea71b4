"""Models: the `Model` protocol, the scripted model, the OpenAI-compatible and Anthropic adapters.

Each name is imported from its module on first use (PEP 562), so that a CLI command pays only
for the modules it touches (startup time; see tests/cli/test_startup.py). That matters most for
`OpenAICompatModel` and `AnthropicModel`: the SDKs take half a second to import and most
commands (listing, logs, scripted runs) never need them, and the `anthropic` SDK is an optional
extra.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._anthropic import AnthropicModel as AnthropicModel
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
    from ._openai import OpenAICompatModel as OpenAICompatModel
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

# The module of each name (the imports above say the same for pyright).
_SOURCES = {
    "._anthropic": ("AnthropicModel",),
    "._base": (
        "BlockAssembler",
        "Finish",
        "FinishReason",
        "Model",
        "ModelChunk",
        "ModelRequest",
        "ReasoningDelta",
        "TextDelta",
        "ToolCallDelta",
        "ToolSchema",
        "UsageChunk",
    ),
    "._model_spec": ("ModelSpec", "ModelSpecKind", "open_model", "parse_model_spec"),
    "._openai": ("OpenAICompatModel",),
    "._scripted": ("ScriptedCall", "ScriptedModel", "ScriptedResponse"),
}
__getattr__, __dir__ = lazy_names(__name__, globals(), _SOURCES)
