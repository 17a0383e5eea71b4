"""`ScriptedModel`: a deterministic model that answers from a script, per agent full name.

The script maps each agent's full name (`lead`, `reviewer`, `reviewer/checker`) to the responses
its model gives, in order; `"*"` is the fallback (each agent consumes its own copy). A response
is `text`, `calls`, both, `error` (the call raises) or `stop: max-tokens | refusal`, optionally
with `sleep` (seconds of the runtime clock before answering) and `usage`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import yaml

from .._clock import Clock, SystemClock
from ..errors import ConfigError, ErrorCode, ModelError
from ..messages import JsonObject, Usage
from ._base import (
    Finish,
    FinishReason,
    ModelChunk,
    ModelRequest,
    TextDelta,
    ToolCallDelta,
    UsageChunk,
)

__all__ = ["ScriptedCall", "ScriptedModel", "ScriptedResponse"]

_RESPONSE_KEYS = frozenset({"text", "calls", "error", "stop", "sleep", "usage"})
_CALL_KEYS = frozenset({"tool", "args", "id"})


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    tool: str
    args: JsonObject = field(default_factory=dict[str, Any])
    id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedResponse:
    text: str | None = None
    calls: tuple[ScriptedCall, ...] = ()
    error: str | None = None
    stop: Literal["max-tokens", "refusal"] | None = None
    sleep: float = 0.0
    usage: Usage | None = None


class ScriptedModel:
    """A `Model` that plays a script. Usable from YAML (`from_file`) or Python objects."""

    provider = "scripted"

    def __init__(
        self,
        script: Mapping[str, Sequence[ScriptedResponse]],
        *,
        clock: Clock | None = None,
        source: str = "<python script>",
    ) -> None:
        self._script = {name: tuple(responses) for name, responses in script.items()}
        self._source = source
        self.clock: Clock = clock or SystemClock()
        self._consumed: dict[str, int] = {}

    @property
    def name(self) -> str:
        return self._source

    @classmethod
    def from_file(cls, path: str | Path, *, clock: Clock | None = None) -> ScriptedModel:
        """Load a YAML script; an unreadable or malformed file raises `ConfigError`."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read the model script {str(path)!r}: {exc.strerror or exc}; "
                "pass an existing YAML file as --model scripted:PATH",
                code=ErrorCode.SCRIPT_UNREADABLE,
                path=str(path),
            ) from exc
        return cls.from_yaml(text, clock=clock, source=str(path))

    @classmethod
    def from_yaml(
        cls, text: str, *, clock: Clock | None = None, source: str = "<yaml script>"
    ) -> ScriptedModel:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise _invalid(source, f"not valid YAML: {_one_line(str(exc))}") from exc
        return cls(_parse_script(data, source), clock=clock, source=source)

    def responses_for(self, agent_name: str) -> tuple[ScriptedResponse, ...]:
        responses = self._script.get(agent_name)
        return responses if responses is not None else self._script.get("*", ())

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        responses = self.responses_for(request.agent_name)
        index = request.call_index
        self._consumed[request.agent_name] = max(
            self._consumed.get(request.agent_name, 0), index + 1
        )
        if index >= len(responses):
            raise ModelError(
                f"the scripted model has no response left for agent {request.agent_name!r}: "
                f"it used all {len(responses)} in {self._source}; add responses under "
                f"{request.agent_name!r} or '*'",
                code=ErrorCode.SCRIPT_EXHAUSTED,
                retryable=False,
                agent=request.agent_name,
                script=self._source,
            )
        response = responses[index]
        if response.sleep > 0:
            await self.clock.sleep(response.sleep)
        if response.error is not None:
            raise ModelError(response.error, code=ErrorCode.MODEL_ERROR, retryable=False)
        for chunk in _chunks(response, index):
            yield chunk

    def assert_complete(self) -> None:
        """Fail if an agent with its own script entry left responses unconsumed."""
        left = {
            name: len(responses) - self._consumed.get(name, 0)
            for name, responses in self._script.items()
            if name != "*" and self._consumed.get(name, 0) < len(responses)
        }
        if left:
            raise AssertionError(f"scripted responses not consumed: {left}")

    async def aclose(self) -> None:
        return None


def _chunks(response: ScriptedResponse, index: int) -> list[ModelChunk]:
    chunks: list[ModelChunk] = []
    out = 0
    if response.text:
        chunks.append(TextDelta(response.text))
        out += len(response.text)
    for n, call in enumerate(response.calls):
        arguments = json.dumps(call.args, separators=(",", ":"))
        out += len(arguments)
        chunks.append(
            ToolCallDelta(n, id=call.id or f"call_{index}_{n}", name=call.tool, arguments=arguments)
        )
    chunks.append(UsageChunk(response.usage or Usage(output_tokens=max(1, out // 4))))
    reason: FinishReason = response.stop or ("tool-calls" if response.calls else "stop")
    chunks.append(Finish(reason))
    return chunks


def _invalid(source: str, detail: str) -> ConfigError:
    return ConfigError(
        f"malformed model script {source}: {detail}", code=ErrorCode.SCRIPT_INVALID, script=source
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _parse_script(data: object, source: str) -> dict[str, tuple[ScriptedResponse, ...]]:
    if not isinstance(data, dict):
        raise _invalid(source, "the top level must map agent names to lists of responses")
    script: dict[str, tuple[ScriptedResponse, ...]] = {}
    for name, items in cast("dict[object, object]", data).items():
        if not isinstance(name, str) or not name:
            raise _invalid(source, f"agent key {name!r} must be a non-empty string")
        if not isinstance(items, list):
            raise _invalid(source, f"{name}: expected a list of responses")
        script[name] = tuple(
            _parse_response(item, f"{name}[{i}]", source)
            for i, item in enumerate(cast("list[object]", items))
        )
    return script


def _parse_response(item: object, where: str, source: str) -> ScriptedResponse:
    if not isinstance(item, dict):
        raise _invalid(source, f"{where}: a response must be a mapping")
    raw = {str(k): v for k, v in cast("dict[object, Any]", item).items()}
    unknown = sorted(set(raw) - _RESPONSE_KEYS)
    if unknown:
        raise _invalid(
            source, f"{where}: unknown key {unknown[0]!r} (allowed: {sorted(_RESPONSE_KEYS)})"
        )
    if not ({"text", "calls", "error", "stop"} & raw.keys()):
        raise _invalid(source, f"{where}: give at least one of text, calls, error, stop")
    text = raw.get("text")
    if text is not None and not isinstance(text, str):
        raise _invalid(source, f"{where}.text: expected a string")
    error = raw.get("error")
    if error is not None and (not isinstance(error, str) or not error):
        raise _invalid(source, f"{where}.error: expected a non-empty string")
    stop = raw.get("stop")
    if stop not in (None, "max-tokens", "refusal"):
        raise _invalid(source, f"{where}.stop: expected max-tokens or refusal, got {stop!r}")
    sleep = raw.get("sleep", 0)
    if isinstance(sleep, bool) or not isinstance(sleep, int | float) or sleep < 0:
        raise _invalid(source, f"{where}.sleep: expected a number of seconds >= 0")
    calls_raw = raw.get("calls", [])
    if not isinstance(calls_raw, list):
        raise _invalid(source, f"{where}.calls: expected a list")
    calls = tuple(
        _parse_call(c, f"{where}.calls[{i}]", source)
        for i, c in enumerate(cast("list[object]", calls_raw))
    )
    usage = _parse_usage(raw.get("usage"), where, source)
    return ScriptedResponse(
        text=text,
        calls=calls,
        error=error,
        stop=stop,
        sleep=float(sleep),
        usage=usage,
    )


def _parse_call(item: object, where: str, source: str) -> ScriptedCall:
    if not isinstance(item, dict):
        raise _invalid(source, f"{where}: a call must be a mapping with tool and args")
    raw = {str(k): v for k, v in cast("dict[object, Any]", item).items()}
    unknown = sorted(set(raw) - _CALL_KEYS)
    if unknown:
        raise _invalid(source, f"{where}: unknown key {unknown[0]!r} (allowed: args, id, tool)")
    tool = raw.get("tool")
    if not isinstance(tool, str) or not tool:
        raise _invalid(source, f"{where}.tool: expected a tool name")
    args = raw.get("args", {})
    if not isinstance(args, dict):
        raise _invalid(source, f"{where}.args: expected a mapping")
    call_id = raw.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise _invalid(source, f"{where}.id: expected a string")
    return ScriptedCall(tool=tool, args=dict(cast("JsonObject", args)), id=call_id)


def _parse_usage(value: object, where: str, source: str) -> Usage | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid(source, f"{where}.usage: expected a mapping")
    try:
        return Usage(**{str(k): int(v) for k, v in cast("dict[object, Any]", value).items()})
    except (TypeError, ValueError) as exc:
        raise _invalid(source, f"{where}.usage: {exc}") from exc
