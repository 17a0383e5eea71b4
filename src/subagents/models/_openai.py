"""`OpenAICompatModel`: any chat-completions endpoint through the official `openai` SDK.

OpenAI, DeepSeek, vLLM, Ollama, llama.cpp server and OpenRouter all speak this protocol. The
SDK retries connection errors, timeouts and HTTP 408/409/429/5xx itself (`max_retries`,
exponential backoff from 0.5 s, honouring `Retry-After` / `retry-after-ms`); this adapter
retries an empty answer that streamed nothing, and maps what is left to `ModelError` codes.
A refused connection is the exception: nothing listens at the base URL, and backing off for
seconds would only delay saying so, so it gets one quick retry (a server still starting) and
then fails at once.

DeepSeek's `reasoning_content` is streamed as reasoning and sent back on every later assistant
turn that has reasoning, which DeepSeek requires on tool-call turns in thinking mode.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import re
from collections.abc import AsyncGenerator, Sequence
from typing import Any, cast

from openai import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    AuthenticationError,
    OpenAIError,
    PermissionDeniedError,
    RateLimitError,
    omit,
)
from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletionChunk,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
)

from subagents.errors import ClosedError, ConfigError, ErrorCode, ModelError
from subagents.messages import (
    AssistantMessage,
    JsonObject,
    Message,
    ToolResultMessage,
    Usage,
    UserMessage,
)

from ._base import (
    Finish,
    FinishReason,
    ModelChunk,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolSchema,
    UsageChunk,
)

__all__ = ["OpenAICompatModel"]

log = logging.getLogger("subagents.models")

_REFUSED_RETRY_DELAY = 0.25
"""Seconds before the one retry of a refused connection."""

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "length": "max-tokens",
    "content_filter": "refusal",
}
_KEY_VARIABLES = {"deepseek": "DEEPSEEK_API_KEY"}
_CONTEXT_WORDING = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long",
    re.IGNORECASE,
)


class _ConnectionRefused(APIConnectionError):
    """Nothing listens at the base URL.

    The SDK does not retry an `OpenAIError` raised by the transport, which is the point: the
    refusal is final after our own quick retry.
    """


def _refused(exc: BaseException) -> bool:
    """Whether a transport error comes from a refused TCP connection (anywhere in its chain)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or (
            isinstance(current, OSError) and current.errno == errno.ECONNREFUSED
        ):
            return True
        current = current.__cause__ or current.__context__
    return False


class _FailFastClient(AsyncOpenAI):
    """The SDK client, except that a refused connection is retried once, quickly, then final."""

    async def _send_request(self, request: Any, *, stream: bool, **kwargs: Any) -> Any:
        try:
            return await super()._send_request(request, stream=stream, **kwargs)
        except Exception as exc:
            if not _refused(exc):
                raise
        log.debug("connection refused at %s; one quick retry", request.url)
        await asyncio.sleep(_REFUSED_RETRY_DELAY)
        try:
            return await super()._send_request(request, stream=stream, **kwargs)
        except Exception as exc:
            if _refused(exc):
                raise _ConnectionRefused(message="connection refused", request=request) from exc
            raise


class OpenAICompatModel:
    """A `Model` for an OpenAI-compatible chat-completions endpoint.

    `api_key=None` lets the SDK read `OPENAI_API_KEY`; `base_url=None` uses the SDK's default
    (`OPENAI_BASE_URL` or api.openai.com). `reasoning_effort` is sent as is, except `off`,
    which becomes DeepSeek's `thinking: {type: disabled}`.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        provider: str = "openai",
        max_retries: int = 5,
        timeout: float = 300.0,
        reasoning_effort: str | None = None,
    ) -> None:
        self._model = model
        self._provider = provider
        self._max_retries = max_retries
        self._timeout = timeout
        self._reasoning_effort = reasoning_effort
        self._closed = False
        try:
            self._client = _FailFastClient(
                api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
            )
        except OpenAIError as exc:
            variable = _KEY_VARIABLES.get(provider, "OPENAI_API_KEY")
            raise ConfigError(
                f"no API key for {provider} model {model!r}; set {variable}",
                code=ErrorCode.MISSING_CREDENTIAL,
                variable=variable,
            ) from exc

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def name(self) -> str:
        return self._model

    @property
    def base_url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    async def __aenter__(self) -> OpenAICompatModel:
        self._check_open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client; safe to call more than once."""
        if not self._closed:
            self._closed = True
            await self._client.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(
                f"model {self._provider}:{self._model} is closed; open a new one with open_model()"
            )

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """Stream one model call; usage precedes the one `Finish`."""
        self._check_open()
        messages = to_openai_messages(request.system, request.messages)
        tools = [_tool_param(tool) for tool in request.tools]
        extra_body: JsonObject = {}
        if self._reasoning_effort == "off":
            extra_body["thinking"] = {"type": "disabled"}
        elif self._reasoning_effort is not None:
            extra_body["reasoning_effort"] = self._reasoning_effort
        empty_retries = 0
        while True:
            reader = _StreamReader()
            streaming = False  # the SDK retries only until the response has started
            try:
                stream = await self._client.chat.completions.create(
                    model=self._model,
                    messages=messages,
                    tools=tools or omit,
                    max_tokens=request.max_tokens if request.max_tokens is not None else omit,
                    stream=True,
                    stream_options={"include_usage": True},
                    extra_body=extra_body or None,
                )
                streaming = True
                async with stream:
                    async for chunk in stream:
                        for out in reader.feed(chunk):
                            yield out
            except APIError as exc:
                raise self._model_error(exc, streaming=streaming) from exc
            except (ValueError, TypeError, AttributeError) as exc:
                raise self._malformed(f"a chunk could not be read ({exc})") from exc
            if reader.retryable_empty() and empty_retries < self._max_retries:
                empty_retries += 1
                continue
            break
        if reader.finish is None:
            raise self._malformed("the stream ended without a finish reason")
        if reader.is_empty():
            tries = f" {empty_retries + 1} times" if empty_retries else ""
            raise ModelError(
                f"{self._where()} returned an empty answer (no text, no tool calls){tries};"
                " retry later or try another model",
                code=ErrorCode.EMPTY_RESPONSE,
                retryable=True,
                **self._fields(),
            )
        if reader.usage is not None:
            yield UsageChunk(reader.usage)
        yield Finish(reader.final_reason())

    def _where(self) -> str:
        return f"model {self._model!r} at {self.base_url}"

    def _fields(self) -> JsonObject:
        return {"provider": self._provider, "model": self._model, "base_url": self.base_url}

    def _not_found_hint(self, detail: str) -> str:
        """A 404 means a wrong base URL or path, unless the server says the model is unknown."""
        if _MODEL_UNKNOWN.search(detail):
            return (
                f"the server does not know model {self._model!r}: check the model name "
                f"(and that {self.base_url} is the server you meant)"
            )
        return (
            f"check the base URL {self.base_url}: it must be the API root the chat-completions "
            "path is appended to (often ending in /v1)"
        )

    def _malformed(self, what: str) -> ModelError:
        return ModelError(
            f"{self._where()} sent a malformed stream: {what};"
            " check that the server speaks the chat-completions protocol",
            code=ErrorCode.MALFORMED_RESPONSE,
            retryable=True,
            **self._fields(),
        )

    def _model_error(self, exc: APIError, *, streaming: bool) -> ModelError:
        code, retryable, hint = _classify(exc)
        fields = self._fields()
        detail = _detail(exc)
        where = f"model server at {self.base_url}"
        if isinstance(exc, APIStatusError):
            fields["status"] = exc.status_code
            status = f" ({exc.status_code})"
        else:
            status = ""
        if streaming:
            gave_up = " while streaming"
        elif retryable and self._max_retries:
            gave_up = f" after {self._max_retries} retries"
        else:
            gave_up = ""
        match code:
            case ErrorCode.TRANSPORT if isinstance(exc, _ConnectionRefused):
                fields["reason"] = "connection-refused"
                text = (
                    f"could not reach {self.base_url}: connection refused; start the model "
                    "server or fix the base URL"
                )
            case ErrorCode.TRANSPORT if streaming:
                # The server answered and then the connection broke: it was reached.
                code = ErrorCode.SERVER
                fields["reason"] = "stream-cut"
                text = f"the stream from {where} was cut after it started: {detail}; retry later"
            case ErrorCode.INVALID_REQUEST if status == " (404)":
                hint = self._not_found_hint(detail)
                text = f"{where} rejected the request (404): {detail}; {hint}"
            case ErrorCode.AUTH if isinstance(exc, AuthenticationError):
                variable = _KEY_VARIABLES.get(self._provider, "OPENAI_API_KEY")
                text = f"{where} rejected the API key{status}; set {variable}"
            case ErrorCode.AUTH:
                text = f"{where} denied access to model {self._model!r}{status}: {detail}; {hint}"
            case ErrorCode.TIMEOUT:
                text = (
                    f"{where} did not answer within {self._timeout:g}s{gave_up}; "
                    "retry later or raise the timeout"
                )
            case ErrorCode.TRANSPORT:
                text = f"could not reach {where}{gave_up}: {detail}; {hint}"
            case ErrorCode.INVALID_REQUEST | ErrorCode.CONTEXT_WINDOW_EXCEEDED:
                text = f"{where} rejected the request{status}: {detail}; {hint}"
            case _:
                text = f"{where} failed{status}{gave_up}: {detail}; {hint}"
        return ModelError(text, code=code, retryable=retryable, **fields)


_MODEL_UNKNOWN = re.compile(
    r"model.*(not found|does not exist|not exist|unknown|no such|not available)"
    r"|(unknown|no such|invalid) model",
    re.IGNORECASE,
)


def _classify(exc: APIError) -> tuple[ErrorCode, bool, str]:
    """The code, retryability and advice for an SDK error (after the SDK's own retries)."""
    if isinstance(exc, AuthenticationError | PermissionDeniedError):
        return ErrorCode.AUTH, False, "check that the API key may use this model"
    if isinstance(exc, RateLimitError):
        return ErrorCode.RATE_LIMIT, True, "wait, lower the concurrency or raise the quota"
    if isinstance(exc, APITimeoutError):
        return ErrorCode.TIMEOUT, True, "retry later"
    if isinstance(exc, APIConnectionError):
        return (
            ErrorCode.TRANSPORT,
            True,
            "check that the server is running and the base URL is right",
        )
    if _CONTEXT_WORDING.search(_detail(exc)) or exc.code == "context_length_exceeded":
        return (
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            False,
            "shorten the conversation or lower max_tokens",
        )
    if isinstance(exc, APIStatusError):
        if exc.status_code == 408:
            return ErrorCode.TIMEOUT, True, "retry later"
        if exc.status_code < 500 and exc.status_code != 409:
            return ErrorCode.INVALID_REQUEST, False, "check the model name and the request"
    # 409, 5xx and errors reported inside an open stream
    return ErrorCode.SERVER, True, "retry later"


def _detail(exc: APIError) -> str:
    body = cast("object", exc.body)
    if isinstance(body, dict):
        message = cast("dict[str, Any]", body).get("message")
        if isinstance(message, str) and message:
            return message
    cause = exc.__cause__
    if isinstance(exc, APIConnectionError) and cause is not None:
        return f"{exc.message} ({type(cause).__name__}: {cause})"
    return exc.message


class _StreamReader:
    """Turns SDK chunks into our chunks; holds usage and the finish reason for the end."""

    __slots__ = ("finish", "refused", "saw_calls", "saw_text", "usage", "yielded")

    def __init__(self) -> None:
        self.finish: FinishReason | None = None
        self.usage: Usage | None = None
        self.saw_text = False
        self.saw_calls = False
        self.refused = False
        self.yielded = False

    def feed(self, chunk: ChatCompletionChunk) -> list[ModelChunk]:
        out: list[ModelChunk] = []
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            reasoning = _reasoning(delta.model_extra)
            if reasoning:
                out.append(ReasoningDelta(reasoning))
            if delta.content:
                self.saw_text = self.saw_text or bool(delta.content.strip())
                out.append(TextDelta(delta.content))
            if delta.refusal:
                self.refused = True
                out.append(TextDelta(delta.refusal))
            for call in delta.tool_calls or ():
                self.saw_calls = True
                function = call.function
                out.append(
                    ToolCallDelta(
                        index=call.index,
                        id=call.id,
                        name=function.name if function else None,
                        arguments=(function.arguments or "") if function else "",
                    )
                )
            if choice.finish_reason is not None:
                self.finish = _FINISH_REASONS.get(choice.finish_reason, "stop")
        self.yielded = self.yielded or bool(out)
        return out

    def is_empty(self) -> bool:
        return self.finish == "stop" and not self.saw_text and not self.saw_calls

    def retryable_empty(self) -> bool:
        """Empty, and nothing was streamed to the caller, so the call can be made again."""
        return self.is_empty() and not self.yielded

    def final_reason(self) -> FinishReason:
        if self.refused:
            return "refusal"
        if self.finish == "stop" and self.saw_calls:
            return "tool-calls"  # some servers end tool-call answers with `stop`
        return self.finish or "stop"


def _reasoning(extra: dict[str, Any] | None) -> str | None:
    """DeepSeek's `reasoning_content`, or the `reasoning` string some servers send."""
    if not extra:
        return None
    value = extra.get("reasoning_content") or extra.get("reasoning")
    return value if isinstance(value, str) and value else None


def _usage(usage: CompletionUsage) -> Usage:
    """Usage; cache hits from `prompt_cache_hit_tokens` (DeepSeek) or `cached_tokens`."""
    extra = usage.model_extra or {}
    cached = extra.get("prompt_cache_hit_tokens")
    if not isinstance(cached, int) and usage.prompt_tokens_details is not None:
        cached = usage.prompt_tokens_details.cached_tokens
    details = usage.completion_tokens_details
    return Usage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached if isinstance(cached, int) else 0,
        reasoning_tokens=(details.reasoning_tokens or 0) if details is not None else 0,
    )


def _tool_param(tool: ToolSchema) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def to_openai_messages(
    system: str, messages: Sequence[Message]
) -> list[ChatCompletionMessageParam]:
    """Our history as chat-completions messages.

    An assistant turn with reasoning carries it back as `reasoning_content` (a DeepSeek field
    that other servers ignore).
    """
    out: list[JsonObject] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        match message:
            case UserMessage():
                out.append({"role": "user", "content": message.text})
            case AssistantMessage():
                out.append(_assistant(message))
            case ToolResultMessage():
                out.append(
                    {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
                )
    return cast("list[ChatCompletionMessageParam]", out)


def _assistant(message: AssistantMessage) -> JsonObject:
    calls = message.tool_calls
    text = message.text
    item: JsonObject = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        item["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ]
    reasoning = message.reasoning
    if reasoning:
        item["reasoning_content"] = reasoning
    return item
