"""`ScriptedModel`: a deterministic model that answers from a script, per agent full name.

The script maps each agent's full name (`lead`, `reviewer`, `reviewer/checker`) to the responses
its model gives, in order; `"*"` is the fallback (each agent consumes its own copy). A response
is `text`, `calls`, both, `error` (the call raises) or `stop: max-tokens | refusal`, optionally
with `sleep` (seconds of the runtime clock before answering) and `usage`.

A script file is untrusted input: only a regular file of at most `MAX_SCRIPT_BYTES` is read,
its YAML goes through the bounded loader, and every number is checked for range, so a bad
script is one `ConfigError` when the model is opened, never a hang or a crash mid-run.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import yaml

from .._clock import Clock, SystemClock
from .._yaml import load_bounded
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
MAX_SCRIPT_BYTES = 4 * 1024 * 1024
"""The largest script file read (4 MiB): far above any real script, far below harm."""
MAX_SLEEP_SECONDS = 86400.0
"""The longest `sleep` a response may ask for (a day, which tests play on a fake clock);
`.inf`, NaN or a longer one would hang a real run after its session was written."""
MAX_TOKENS = 10**12
"""The largest token count a scripted `usage` may report."""


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
        self._chunks: dict[tuple[int, int], list[ModelChunk]] = {}
        """Each response's stream by (response, call index): its chunks are frozen, so every
        agent that plays it at that index gets the same ones."""

    @property
    def name(self) -> str:
        return self._source

    @classmethod
    def from_file(cls, path: str | Path, *, clock: Clock | None = None) -> ScriptedModel:
        """Load a YAML script; an unreadable or malformed file raises `ConfigError`."""
        path = Path(path)
        data = _read_script(path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _invalid(
                str(path), f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
            ) from None
        return cls.from_yaml(text, clock=clock, source=str(path))

    @classmethod
    def from_yaml(
        cls, text: str, *, clock: Clock | None = None, source: str = "<yaml script>"
    ) -> ScriptedModel:
        try:
            data = load_bounded(text)
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
        key = (id(response), index)
        chunks = self._chunks.get(key)
        if chunks is None:  # the script's responses live as long as the model: ids are stable
            chunks = self._chunks[key] = _chunks(response, index)
        for chunk in chunks:
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


def _unreadable(path: Path, reason: str) -> ConfigError:
    return ConfigError(
        f"cannot read the model script {str(path)!r}: {reason}; "
        "pass an existing YAML file as --model scripted:PATH",
        code=ErrorCode.SCRIPT_UNREADABLE,
        path=str(path),
    )


def _read_script(path: Path) -> bytes:
    """The bytes of a regular file of at most `MAX_SCRIPT_BYTES`, else `SCRIPT_UNREADABLE`.

    Opened without blocking and checked on the open descriptor, so a FIFO never hangs the
    CLI and `/dev/zero` is never read; symbolic links are followed on purpose.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | os.O_CLOEXEC)
    except OSError as exc:
        raise _unreadable(path, str(exc.strerror or exc)) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _unreadable(path, "not a regular file")
        if info.st_size > MAX_SCRIPT_BYTES:
            raise _unreadable(
                path, f"the file is {info.st_size} bytes, more than {MAX_SCRIPT_BYTES} (4 MiB)"
            )
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise _unreadable(path, str(exc.strerror or exc)) from exc
    finally:
        os.close(fd)
    if len(data) > MAX_SCRIPT_BYTES:
        raise _unreadable(path, f"the file grew past {MAX_SCRIPT_BYTES} bytes while read")
    return data


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
    # The chained comparison is False for NaN and safe for ints too large for a float.
    if (
        isinstance(sleep, bool)
        or not isinstance(sleep, int | float)
        or not 0 <= sleep <= MAX_SLEEP_SECONDS
    ):
        raise _invalid(
            source,
            f"{where}.sleep: expected a number of seconds >= 0 and <= {MAX_SLEEP_SECONDS:g}, "
            f"got {sleep!r}",
        )
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
    try:
        # Checked now, since the arguments are encoded only when the call is played.
        json.dumps(args, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _invalid(source, f"{where}.args: not JSON ({exc})") from None
    return ScriptedCall(tool=tool, args=dict(cast("JsonObject", args)), id=call_id)


def _parse_usage(value: object, where: str, source: str) -> Usage | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid(source, f"{where}.usage: expected a mapping")
    counts: dict[str, int] = {}
    for key, count in cast("dict[object, object]", value).items():
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_TOKENS:
            raise _invalid(
                source, f"{where}.usage.{key}: expected a whole number from 0 to {MAX_TOKENS}"
            )
        counts[str(key)] = count
    try:
        return Usage(**counts)
    except TypeError as exc:
        raise _invalid(source, f"{where}.usage: {exc}") from exc
