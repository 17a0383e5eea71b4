"""`AnthropicModel`: Claude through the official `anthropic` SDK and the Messages streaming API.

Imported only when an `anthropic:MODEL` spec is opened, so the SDK stays an optional extra
(`pip install 'subagents[anthropic]'`).

Retries. The SDK retries connection errors, timeouts and HTTP 408/409/429/5xx (529
`overloaded_error` included) itself, `max_retries` times with exponential backoff from 0.5 s,
honouring `retry-after` / `retry-after-ms`; this adapter retries an answer that streamed
nothing, and maps what is left to `ModelError` codes. A refused connection is final after one
quick retry of our own (a middleware), as in the OpenAI adapter: nothing listens there, and
backing off for seconds would only delay saying so.

Thinking. With extended thinking the API requires an assistant turn's `thinking` blocks (their
text and `signature`) and `redacted_thinking` blocks (their `data`) to be sent back unmodified
and in their original order, before the turn's `tool_use` blocks. Our `AssistantMessage`
holds reasoning as plain text, so the blocks of a response with thinking, in the order the API
sent them, are kept in `Finish.replay_state` (`{"content": [...]}`, JSON, stored in the session
log) and the turn is rebuilt from them. Text is kept there in full (the log holds it twice) so
that the order is exact; a `tool_use` entry keeps only its id, and its name and input come from the
message's tool call, so a call the runtime dropped (max-tokens) is not sent back either. An
assistant message without this state (another provider's, or an interrupted one) is sent as
plain text and `tool_use` blocks, without its reasoning, which has no signature.

Prompt caching. Three of the four allowed `cache_control: {"type": "ephemeral"}` breakpoints
mark the stable prefix: the last tool definition (tools are the first part of the prompt), the
system prompt block, and the last block of the history. The last one is the usual "automatic
prefix caching" pattern: the next call of the same agent repeats that history and adds to it,
so it reads the whole previous prompt from the cache and writes only the new tail.

Usage. Anthropic reports `input_tokens` without the cached part; to keep "input includes
cache reads" true across providers, our `input_tokens` is `input_tokens +
cache_read_input_tokens + cache_creation_input_tokens`, with `cache_read_tokens` and
`cache_write_tokens` the cached parts, and `reasoning_tokens` the thinking tokens when the API
reports them (part of `output_tokens`).

`max_tokens` is required by the Messages API: `ModelRequest.max_tokens` when set, else the
constructor's `max_tokens` (8192 by default).
"""

from __future__ import annotations

import asyncio
import errno
import importlib
import json
import logging
import re
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any, cast

from anthropic import (
    APIConnectionError,
    APIError,
    APIRequest,
    APIStatusError,
    APITimeoutError,
    AsyncAnthropic,
    AsyncAPIResponse,
    AsyncCallNext,
    AsyncStream,
    Middleware,
    omit,
)
from anthropic.types import (
    CacheControlEphemeralParam,
    MessageDeltaUsage,
    MessageParam,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStreamEvent,
    ToolParam,
    Usage as ApiUsage,
)

from subagents.errors import ClosedError, ErrorCode, ModelError
from subagents.messages import (
    AssistantMessage,
    JsonObject,
    JsonValue,
    Message,
    TextBlock,
    ToolCallBlock,
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

__all__ = ["AnthropicModel", "to_anthropic_messages"]

log = logging.getLogger("subagents.models")

PROVIDER = "anthropic"
DEFAULT_MAX_TOKENS = 8192
_REFUSED_RETRY_DELAY = 0.25
"""Seconds before the one retry of a refused connection."""


def _cache() -> CacheControlEphemeralParam:
    """A fresh cache breakpoint (the default five-minute lifetime)."""
    return {"type": "ephemeral"}


_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",  # a server tool paused; we run no server tools
    "tool_use": "tool-calls",
    "max_tokens": "max-tokens",
    "model_context_window_exceeded": "max-tokens",  # truncated like max-tokens
    "refusal": "refusal",
}
_CONTEXT_WORDING = re.compile(
    r"prompt is too long|context[ _-]?(length|window)|too many tokens", re.IGNORECASE
)


def _transport_error() -> type[Exception]:
    """The transport error of the SDK's HTTP library: httpx2 from SDK 2.16, httpx before."""
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return cast("type[Exception]", module.TransportError)
    raise ImportError("the anthropic SDK needs httpx2 or httpx", name="anthropic")


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


class _FailFast(Middleware):
    """In the SDK's retry loop: a refused connection is retried once, quickly, then final.

    Final means raising our `ModelError` without a `__cause__`: the SDK retries any error that
    is an `APIConnectionError` or is caused by one.
    """

    def __init__(self, base_url: str, refused: Callable[[], ModelError]) -> None:
        self._base_url = base_url.rstrip("/")
        self._refused = refused

    async def handle_async(
        self, request: APIRequest, call_next: AsyncCallNext
    ) -> AsyncAPIResponse[Any]:
        try:
            return await call_next(request)
        except APIConnectionError as exc:
            if not _refused(exc):
                raise
        log.debug("connection refused at %s%s; one quick retry", self._base_url, request.url)
        await asyncio.sleep(_REFUSED_RETRY_DELAY)
        try:
            return await call_next(request)
        except APIConnectionError as exc:
            if _refused(exc):
                raise self._refused() from None
            raise


class AnthropicModel:
    """A `Model` for Claude through the Anthropic Messages API.

    `thinking_budget` turns extended thinking on with that many budget tokens (it must be
    below the call's `max_tokens`); thinking blocks are streamed as reasoning and sent back on
    later calls as the API requires.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str,
        max_retries: int = 5,
        timeout: float = 600.0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        thinking_budget: int | None = None,
    ) -> None:
        self._model = model
        self._max_retries = max_retries
        self._timeout = timeout
        self._max_tokens = max_tokens
        self._thinking_budget = thinking_budget
        self._closed = False
        self._client = AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=timeout,
            middleware=[_FailFast(base_url, self._refused_error)],
        )

    @property
    def provider(self) -> str:
        return PROVIDER

    @property
    def name(self) -> str:
        return self._model

    @property
    def base_url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    async def __aenter__(self) -> AnthropicModel:
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
                f"model {PROVIDER}:{self._model} is closed; open a new one with open_model()"
            )

    async def _open(
        self, request: ModelRequest, messages: list[MessageParam]
    ) -> AsyncStream[RawMessageStreamEvent]:
        """Send the request; the SDK retries until the response has started."""
        budget = self._thinking_budget
        return await self._client.messages.create(
            model=self._model,
            max_tokens=request.max_tokens or self._max_tokens,
            messages=messages,
            system=(
                [{"type": "text", "text": request.system, "cache_control": _cache()}]
                if request.system
                else omit
            ),
            tools=_tool_params(request.tools) or omit,
            thinking={"type": "enabled", "budget_tokens": budget} if budget is not None else omit,
            stream=True,
        )

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """Stream one model call; usage precedes the one `Finish`."""
        self._check_open()
        messages = to_anthropic_messages(request.messages)  # once: retries resend the same
        empty_retries = 0
        while True:
            reader = _StreamReader()
            streaming = False  # the SDK retries only until the response has started
            try:
                stream = await self._open(request, messages)
                streaming = True
                async with stream:
                    async for event in stream:
                        for out in reader.feed(event):
                            yield out
            except Exception as exc:
                error = self._failure(exc, streaming=streaming)
                if error is None:
                    raise
                raise error from exc
            if reader.retryable_empty() and empty_retries < self._max_retries:
                empty_retries += 1
                continue
            break
        if reader.stop is None:
            raise self._malformed("the stream ended without a stop reason")
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
        yield Finish(reader.final_reason(), replay_state=reader.replay_state())

    def _failure(self, exc: Exception, *, streaming: bool) -> ModelError | None:
        """The `ModelError` for what a call raised; None to let it out as it is (ours, a bug)."""
        match exc:
            case ModelError():
                return None  # already final: the refused connection's
            case APIError():
                return self._model_error(exc, streaming=streaming)
            case _ if isinstance(exc, _TRANSPORT_ERROR):
                # The SDK wraps transport errors until the response starts; after that its
                # stream lets the HTTP library's own through.
                return self._cut(f"{type(exc).__name__}: {exc}")
            case ValueError() | TypeError() | AttributeError() | KeyError():
                return self._malformed(f"an event could not be read ({exc})")
            case _:
                return None

    def _where(self) -> str:
        return f"model {self._model!r} at {self.base_url}"

    def _fields(self) -> JsonObject:
        return {"provider": PROVIDER, "model": self._model, "base_url": self.base_url}

    def _malformed(self, what: str) -> ModelError:
        return ModelError(
            f"{self._where()} sent a malformed stream: {what};"
            " check that the server speaks the Anthropic Messages protocol",
            code=ErrorCode.MALFORMED_RESPONSE,
            retryable=True,
            **self._fields(),
        )

    def _cut(self, detail: str) -> ModelError:
        # The server answered and then the connection broke: it was reached.
        return ModelError(
            f"the stream from Anthropic API at {self.base_url} was cut after it started: "
            f"{detail}; retry later",
            code=ErrorCode.SERVER,
            retryable=True,
            reason="stream-cut",
            **self._fields(),
        )

    def _refused_error(self) -> ModelError:
        return ModelError(
            f"could not reach {self.base_url}: connection refused; start the model server or "
            "fix the base URL (ANTHROPIC_BASE_URL)",
            code=ErrorCode.TRANSPORT,
            retryable=True,
            reason="connection-refused",
            **self._fields(),
        )

    def _model_error(self, exc: APIError, *, streaming: bool) -> ModelError:
        code, retryable, hint = _classify(exc)
        fields = self._fields()
        detail = _detail(exc)
        where = f"Anthropic API at {self.base_url}"
        status = ""
        # An error event inside a 200 stream has no status of its own worth showing.
        if isinstance(exc, APIStatusError) and exc.status_code != 200:
            fields["status"] = exc.status_code
            status = f" ({exc.status_code})"
        if isinstance(exc, APIStatusError) and exc.type:
            fields["error_type"] = exc.type
        if streaming:
            gave_up = " while streaming"
        elif retryable and self._max_retries:
            gave_up = f" after {self._max_retries} retries"
        else:
            gave_up = ""
        match code:
            case ErrorCode.TRANSPORT if streaming:
                return self._cut(detail)
            case ErrorCode.AUTH if status == " (401)":
                text = f"{where} rejected the API key{status}; set ANTHROPIC_API_KEY"
            case ErrorCode.AUTH:
                text = f"{where} denied access to model {self._model!r}{status}: {detail}; {hint}"
            case ErrorCode.TIMEOUT if isinstance(exc, APITimeoutError):
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


_TRANSPORT_ERROR = _transport_error()

# Anthropic's `error.type` values (https://docs.anthropic.com/en/api/errors), for HTTP errors
# and for `error` events inside a stream, which arrive with the stream's status 200.
_BY_TYPE: dict[str, tuple[ErrorCode, bool, str]] = {
    "authentication_error": (ErrorCode.AUTH, False, "check ANTHROPIC_API_KEY"),
    "permission_error": (ErrorCode.AUTH, False, "check that the API key may use this model"),
    "rate_limit_error": (
        ErrorCode.RATE_LIMIT,
        True,
        "wait, lower the concurrency or raise the rate limit",
    ),
    "overloaded_error": (ErrorCode.SERVER, True, "the API is overloaded; retry later"),
    "api_error": (ErrorCode.SERVER, True, "retry later"),
    "timeout_error": (ErrorCode.TIMEOUT, True, "retry later"),
    "not_found_error": (ErrorCode.INVALID_REQUEST, False, "check the model name"),
    "request_too_large": (ErrorCode.INVALID_REQUEST, False, "the request is over the size limit"),
}
_BY_STATUS = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _classify(exc: APIError) -> tuple[ErrorCode, bool, str]:
    """The code, retryability and advice for an SDK error (after the SDK's own retries)."""
    if isinstance(exc, APITimeoutError):
        return ErrorCode.TIMEOUT, True, "retry later"
    if isinstance(exc, APIConnectionError):
        return ErrorCode.TRANSPORT, True, "check the network and ANTHROPIC_BASE_URL"
    if _CONTEXT_WORDING.search(_detail(exc)):
        return (
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            False,
            "shorten the conversation or lower max_tokens",
        )
    status = exc.status_code if isinstance(exc, APIStatusError) else 200
    kind = (exc.type if isinstance(exc, APIStatusError) else None) or _BY_STATUS.get(status)
    if kind in _BY_TYPE:
        return _BY_TYPE[kind]
    if 400 <= status < 500 and status != 409:
        return ErrorCode.INVALID_REQUEST, False, "check the model name and the request"
    # 409, 5xx and unknown errors reported inside an open stream
    return ErrorCode.SERVER, True, "retry later"


def _detail(exc: APIError) -> str:
    if isinstance(exc, APIStatusError) and exc.api_message:
        return exc.api_message
    cause = exc.__cause__
    if isinstance(exc, APIConnectionError) and cause is not None:
        return f"{exc.message} ({type(cause).__name__}: {cause})"
    return exc.message


class _StreamReader:
    """Turns SDK stream events into our chunks; keeps the blocks to replay, usage, stop reason.

    `blocks` maps the API's content-block index to the block as it will be sent back.
    """

    __slots__ = (
        "arguments",
        "blocks",
        "refused",
        "saw_calls",
        "saw_text",
        "stop",
        "usage",
        "yielded",
    )

    def __init__(self) -> None:
        self.blocks: dict[int, JsonObject] = {}
        self.arguments: dict[int, bool] = {}  # tool_use index -> whether input JSON streamed
        self.usage: Usage | None = None
        self.stop: FinishReason | None = None
        self.saw_text = False
        self.saw_calls = False
        self.refused = False
        self.yielded = False

    def feed(self, event: RawMessageStreamEvent) -> list[ModelChunk]:
        out = self._read(event)
        self.yielded = self.yielded or bool(out)
        return out

    def _read(self, event: RawMessageStreamEvent) -> list[ModelChunk]:
        match event:
            case RawMessageStartEvent():
                self.usage = _usage(event.message.usage)
            case RawContentBlockStartEvent():
                return self._start(event)
            case RawContentBlockDeltaEvent():
                return self._delta(event)
            case RawContentBlockStopEvent():
                if self.arguments.get(event.index) is False:
                    # A tool without parameters may stream no input at all.
                    return [ToolCallDelta(index=event.index, arguments="{}")]
            case RawMessageDeltaEvent():
                if event.delta.stop_reason is not None:
                    self.refused = event.delta.stop_reason == "refusal"
                    self.stop = _STOP_REASONS.get(event.delta.stop_reason, "stop")
                self.usage = _delta_usage(self.usage, event.usage)
            case _:  # message_stop, and event types added after this adapter
                pass
        return []

    def _start(self, event: RawContentBlockStartEvent) -> list[ModelChunk]:
        block = event.content_block
        index = event.index
        match block.type:
            case "text":
                self.blocks[index] = {"type": "text", "text": block.text}
                if block.text:
                    self.saw_text = self.saw_text or bool(block.text.strip())
                    return [TextDelta(block.text)]
            case "thinking":
                self.blocks[index] = {
                    "type": "thinking",
                    "thinking": block.thinking,
                    "signature": block.signature,
                }
                if block.thinking:
                    return [ReasoningDelta(block.thinking)]
            case "redacted_thinking":
                self.blocks[index] = {"type": "redacted_thinking", "data": block.data}
            case "tool_use":
                self.saw_calls = True
                self.blocks[index] = {"type": "tool_use", "id": block.id}
                self.arguments[index] = False
                return [ToolCallDelta(index=index, id=block.id, name=block.name)]
            case _:  # server tools' blocks: not requested, so not replayed
                pass
        return []

    def _delta(self, event: RawContentBlockDeltaEvent) -> list[ModelChunk]:
        block = self.blocks.get(event.index)
        delta = event.delta
        if block is None:
            # A ValueError, like the SDK's for undecodable data: a malformed stream.
            raise ValueError(f"a {delta.type} for content block {event.index}, never started")
        match delta.type:
            case "text_delta" if delta.text:
                block["text"] += delta.text
                self.saw_text = self.saw_text or bool(delta.text.strip())
                return [TextDelta(delta.text)]
            case "thinking_delta" if delta.thinking:
                block["thinking"] += delta.thinking
                return [ReasoningDelta(delta.thinking)]
            case "signature_delta":
                block["signature"] = block.get("signature", "") + delta.signature
            case "input_json_delta":
                if delta.partial_json:
                    self.arguments[event.index] = True
                    return [ToolCallDelta(index=event.index, arguments=delta.partial_json)]
            case _:  # empty pieces, citations
                pass
        return []

    def is_empty(self) -> bool:
        return self.stop == "stop" and not self.saw_text and not self.saw_calls

    def retryable_empty(self) -> bool:
        """Empty, and nothing was streamed to the caller, so the call can be made again."""
        return self.is_empty() and not self.yielded

    def final_reason(self) -> FinishReason:
        if self.refused:
            return "refusal"
        if self.stop == "stop" and self.saw_calls:
            return "tool-calls"
        return self.stop or "stop"

    def replay_state(self) -> JsonValue:
        """The response's blocks in API order, when they hold thinking that must go back."""
        content = [self.blocks[index] for index in sorted(self.blocks)]
        if not any(b["type"] in {"thinking", "redacted_thinking"} for b in content):
            return None  # the message's own blocks say it all
        return {"content": content}


def _usage(usage: ApiUsage) -> Usage:
    read = usage.cache_read_input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    details = usage.output_tokens_details
    return Usage(
        input_tokens=usage.input_tokens + read + written,
        output_tokens=usage.output_tokens,
        cache_read_tokens=read,
        reasoning_tokens=details.thinking_tokens if details is not None else 0,
        cache_write_tokens=written,
    )


def _delta_usage(start: Usage | None, delta: MessageDeltaUsage) -> Usage:
    """`message_delta`'s counts are cumulative; the input ones are there only sometimes."""
    base = start or Usage()
    read = delta.cache_read_input_tokens
    written = delta.cache_creation_input_tokens
    read = base.cache_read_tokens if read is None else read
    written = base.cache_write_tokens if written is None else written
    if delta.input_tokens is not None:
        input_tokens = delta.input_tokens + read + written
    else:
        input_tokens = base.input_tokens - base.cache_read_tokens - base.cache_write_tokens
        input_tokens += read + written
    details = delta.output_tokens_details
    return Usage(
        input_tokens=input_tokens,
        output_tokens=delta.output_tokens,
        cache_read_tokens=read,
        reasoning_tokens=details.thinking_tokens if details is not None else base.reasoning_tokens,
        cache_write_tokens=written,
    )


def _tool_params(tools: Sequence[ToolSchema]) -> list[ToolParam]:
    out: list[JsonObject] = [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]
    if out:
        out[-1]["cache_control"] = _cache()
    return cast("list[ToolParam]", out)


def to_anthropic_messages(messages: Sequence[Message]) -> list[MessageParam]:
    """Our history as Messages API turns, the last block marked as a cache breakpoint.

    Tool results and user messages in a row become one user turn (the API alternates roles),
    with the `tool_result` blocks first, as the API requires.
    """
    out: list[JsonObject] = []
    results: list[JsonObject] = []
    texts: list[JsonObject] = []

    def close_user_turn() -> None:
        if results or texts:
            out.append({"role": "user", "content": [*results, *texts]})
            results.clear()
            texts.clear()

    for message in messages:
        match message:
            case UserMessage():
                if message.text:
                    texts.append({"type": "text", "text": message.text})
            case ToolResultMessage():
                results.append(_tool_result(message))
            case AssistantMessage():
                content = _assistant_content(message)
                if content:
                    close_user_turn()
                    out.append({"role": "assistant", "content": content})
    close_user_turn()
    _mark_cache_breakpoint(out)
    return cast("list[MessageParam]", out)


def _tool_result(message: ToolResultMessage) -> JsonObject:
    block: JsonObject = {"type": "tool_result", "tool_use_id": message.call_id}
    if message.content:
        block["content"] = message.content
    if message.is_error:
        block["is_error"] = True
    return block


def _assistant_content(message: AssistantMessage) -> list[JsonObject]:
    calls = {call.id: call for call in message.tool_calls}
    replayed = _replayed_blocks(message)
    if replayed is None:
        blocks: list[JsonObject] = []
        for block in message.content:
            match block:
                case TextBlock(text=text) if text:
                    blocks.append({"type": "text", "text": text})
                case ToolCallBlock():
                    blocks.append(_tool_use(block))
                case _:  # reasoning without a signature cannot be sent back as thinking
                    pass
        return blocks
    blocks = []
    for block in replayed:
        if block.get("type") == "tool_use":
            call = calls.pop(str(block.get("id")), None)
            if call is not None:  # a call the runtime dropped is not sent back
                blocks.append(_tool_use(call))
        elif block.get("type") != "text" or block.get("text"):
            blocks.append(dict(block))  # a copy: the cache breakpoint must not mark the log
    blocks.extend(_tool_use(call) for call in calls.values())
    return blocks


def _replayed_blocks(message: AssistantMessage) -> list[JsonObject] | None:
    """The API blocks kept in an Anthropic message's replay state, or None."""
    state = cast("object", message.replay_state)
    if message.provider != PROVIDER or not isinstance(state, dict):
        return None
    content = cast("dict[str, object]", state).get("content")
    if not isinstance(content, list):
        return None
    items = cast("list[object]", content)
    return [cast("JsonObject", item) for item in items if isinstance(item, dict)]


def _tool_use(call: ToolCallBlock) -> JsonObject:
    try:
        parsed: object = json.loads(call.arguments or "{}")
    except ValueError:
        parsed = None
    # The API wants an object; arguments that were not one (and failed as INVALID_ARGS) are
    # kept verbatim so the model sees what it wrote.
    arguments: JsonObject = (
        cast("JsonObject", parsed) if isinstance(parsed, dict) else {"arguments": call.arguments}
    )
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}


def _mark_cache_breakpoint(turns: list[JsonObject]) -> None:
    """Mark the last block that may carry `cache_control` (thinking blocks may not)."""
    if not turns:
        return
    for block in reversed(cast("list[JsonObject]", turns[-1]["content"])):
        if block["type"] not in {"thinking", "redacted_thinking"}:
            block["cache_control"] = _cache()
            return
