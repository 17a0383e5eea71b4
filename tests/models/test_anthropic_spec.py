"""`anthropic:MODEL`: parsing, the environment it reads when opened, the optional SDK, and a
call through `open_model` to the Messages API server on loopback."""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Iterator

import pytest
from messages_server import MessagesServer, reply, text_block

from subagents.errors import ConfigError, ErrorCode
from subagents.messages import user_message
from subagents.models import (
    AnthropicModel,
    BlockAssembler,
    ModelRequest,
    ModelSpec,
    open_model,
    parse_model_spec,
)
from subagents.models._model_spec import ACCEPTED_FORMS

KEY = {"ANTHROPIC_API_KEY": "sk-ant-test"}


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer() as running:
        yield running


@pytest.mark.parametrize(
    "text", ["anthropic:claude-x", "  anthropic:claude-x ", "Anthropic: claude-x"]
)
def test_the_anthropic_form_parses(text: str) -> None:
    spec = parse_model_spec(text)
    assert spec == ModelSpec(kind="anthropic", model="claude-x")
    assert str(spec) == "anthropic:claude-x"
    assert parse_model_spec(str(spec)) == spec


def test_an_empty_model_name_is_refused_naming_the_form() -> None:
    with pytest.raises(ConfigError) as info:
        parse_model_spec("anthropic:  ")
    assert info.value.code is ErrorCode.MODEL_SPEC_INVALID
    assert "model name is empty" in info.value.message
    assert "anthropic:MODEL" in info.value.message
    assert "anthropic:MODEL" in ACCEPTED_FORMS


def opened(env: dict[str, str]) -> AnthropicModel:
    """Opened outside the event loop: the SDK's client reads files when it is made."""
    model = open_model("anthropic:claude-x", env=env)
    assert isinstance(model, AnthropicModel)
    asyncio.run(model.aclose())
    return model


def test_the_default_base_url_and_the_key() -> None:
    model = opened(KEY)
    assert (model.provider, model.name) == ("anthropic", "claude-x")
    assert model.base_url == "https://api.anthropic.com"


def test_the_base_url_from_the_environment() -> None:
    model = opened({**KEY, "ANTHROPIC_BASE_URL": "https://proxy.example/anthropic/"})
    assert model.base_url == "https://proxy.example/anthropic"


@pytest.mark.parametrize("value", [None, "", "  "])
def test_a_missing_key_is_missing_credential_in_one_line(value: str | None) -> None:
    env = {} if value is None else {"ANTHROPIC_API_KEY": value}
    with pytest.raises(ConfigError) as info:
        open_model("anthropic:claude-x", env=env)
    assert info.value.code is ErrorCode.MISSING_CREDENTIAL
    assert info.value.fields["variable"] == "ANTHROPIC_API_KEY"
    assert (
        info.value.message == "model 'anthropic:claude-x' needs an API key; set ANTHROPIC_API_KEY"
    )


@pytest.mark.parametrize("url", ["localhost:8000", "ftp://host/v1", "https://"])
def test_a_bad_base_url_is_config_error_in_one_line(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_model("anthropic:claude-x", env={**KEY, "ANTHROPIC_BASE_URL": url})
    assert info.value.code is ErrorCode.CONFIG
    assert (
        info.value.message == f"ANTHROPIC_BASE_URL={url!r} is not an http(s) URL; fix or unset it"
    )


def without_the_adapter_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next `open_model` import the adapter afresh (monkeypatch restores it)."""
    monkeypatch.delitem(sys.modules, "subagents.models._anthropic", raising=False)


def test_a_missing_sdk_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    without_the_adapter_module(monkeypatch)
    monkeypatch.setitem(sys.modules, "anthropic", None)  # `import anthropic` fails
    with pytest.raises(ConfigError) as info:
        open_model("anthropic:claude-x", env=KEY)
    assert info.value.code is ErrorCode.CONFIG
    assert info.value.message == (
        "model 'anthropic:claude-x' needs the anthropic SDK, which is not installed; "
        "pip install -U 'subagents[anthropic]'"
    )


def test_an_sdk_without_what_the_adapter_imports_is_too_old(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    without_the_adapter_module(monkeypatch)
    monkeypatch.setitem(sys.modules, "anthropic", types.ModuleType("anthropic"))
    with pytest.raises(ConfigError) as info:
        open_model("anthropic:claude-x", env=KEY)
    assert info.value.code is ErrorCode.CONFIG
    assert "needs the anthropic SDK, which is too old;" in info.value.message
    assert "pip install -U 'subagents[anthropic]'" in info.value.message


def test_the_key_is_checked_before_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    without_the_adapter_module(monkeypatch)
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ConfigError) as info:
        open_model("anthropic:claude-x", env={})
    assert info.value.code is ErrorCode.MISSING_CREDENTIAL


async def test_open_model_talks_to_the_server(server: MessagesServer) -> None:
    server.enqueue(reply(text_block(0, "hello")))
    env = {"ANTHROPIC_API_KEY": "sk-from-env", "ANTHROPIC_BASE_URL": server.base_url}
    model = await asyncio.to_thread(open_model, "anthropic:claude-x", env=env)
    assembler = BlockAssembler(provider=model.provider, model=model.name)
    request = ModelRequest(
        agent_name="lead", session_id="s", call_index=0, system="", messages=(user_message("hi"),)
    )
    try:
        async for chunk in model.stream(request):
            assembler.feed(chunk)
    finally:
        await model.aclose()
    assert assembler.message().text == "hello"
    [sent] = server.requests
    assert (
        sent.headers.get("x-api-key") == "sk-from-env"
        or sent.headers.get("authorization") == "Bearer sk-from-env"
    )
    assert sent.body["model"] == "claude-x"
