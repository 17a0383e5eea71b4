from __future__ import annotations

from pathlib import Path

import pytest
from chat_server import ChatServer, finish_chunk, stream_reply, text_chunk

from subagents.errors import ConfigError, ErrorCode
from subagents.messages import user_message
from subagents.models import (
    BlockAssembler,
    ModelRequest,
    ModelSpec,
    OpenAICompatModel,
    open_model,
    parse_model_spec,
)
from subagents.models._scripted import ScriptedModel


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("scripted:demo/script.yaml", ModelSpec(kind="scripted", model="demo/script.yaml")),
        ("openai:gpt-4o-mini", ModelSpec(kind="openai", model="gpt-4o-mini")),
        ("deepseek:deepseek-chat", ModelSpec(kind="deepseek", model="deepseek-chat")),
        (
            "openai-compatible:llama3.1:8b@http://localhost:11434/v1",
            ModelSpec(
                kind="openai-compatible",
                model="llama3.1:8b",
                base_url="http://localhost:11434/v1",
            ),
        ),
        (
            "openai-compatible:org/model@v2@https://router.example/api/v1",
            ModelSpec(
                kind="openai-compatible",
                model="org/model@v2",
                base_url="https://router.example/api/v1",
            ),
        ),
        ("  openai:gpt-4o  ", ModelSpec(kind="openai", model="gpt-4o")),
    ],
)
def test_accepted_forms(text: str, expected: ModelSpec) -> None:
    spec = parse_model_spec(text)
    assert spec == expected
    assert parse_model_spec(str(spec)) == spec


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no 'KIND:' prefix"),
        ("gpt-4o", "no 'KIND:' prefix"),
        ("openai:", "model name is empty"),
        ("deepseek:   ", "model name is empty"),
        ("scripted:", "script path is empty"),
        ("openai-compatible:llama3", "needs MODEL@BASE_URL"),
        ("openai-compatible:llama3@ftp://host/v1", "needs MODEL@BASE_URL"),
        ("openai-compatible:@http://localhost:8000/v1", "model name is empty"),
        ("openai-compatible:llama3@http://", "not an http(s) URL"),
    ],
)
def test_rejected_forms(text: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_model_spec(text)
    error = info.value
    assert error.code is ErrorCode.MODEL_SPEC_INVALID
    assert reason in error.message
    assert "\n" not in error.message
    assert error.message.endswith(
        "use one of scripted:PATH, openai:MODEL, deepseek:MODEL, openai-compatible:MODEL@BASE_URL, "
        "anthropic:MODEL"
    )
    assert error.fields["spec"] == text


async def opened(spec: str | ModelSpec, env: dict[str, str]) -> OpenAICompatModel:
    model = open_model(spec, env=env)
    assert isinstance(model, OpenAICompatModel)
    await model.aclose()
    return model


async def test_openai_uses_its_key_and_default_url() -> None:
    model = await opened("openai:gpt-4o", {"OPENAI_API_KEY": "sk-test"})
    assert (model.provider, model.name) == ("openai", "gpt-4o")
    assert model.base_url == "https://api.openai.com/v1"


async def test_openai_base_url_from_env() -> None:
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    model = await opened(parse_model_spec("openai:gpt-4o"), env)
    assert model.base_url == "http://127.0.0.1:9/v1"


async def test_deepseek_default_and_env_base_url() -> None:
    model = await opened("deepseek:deepseek-chat", {"DEEPSEEK_API_KEY": "sk-ds"})
    assert (model.provider, model.base_url) == ("deepseek", "https://api.deepseek.com")
    env = {"DEEPSEEK_API_KEY": "sk-ds", "DEEPSEEK_BASE_URL": "https://proxy.example/ds"}
    model = await opened("deepseek:deepseek-chat", env)
    assert model.base_url == "https://proxy.example/ds"


@pytest.mark.parametrize(
    ("spec", "variable"),
    [("openai:gpt-4o", "OPENAI_API_KEY"), ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY")],
)
@pytest.mark.parametrize("value", [None, "", "  "])
def test_missing_key_names_the_variable(spec: str, variable: str, value: str | None) -> None:
    env = {} if value is None else {variable: value}
    with pytest.raises(ConfigError) as info:
        open_model(spec, env=env)
    assert info.value.code is ErrorCode.MISSING_CREDENTIAL
    assert info.value.message == f"model {spec!r} needs an API key; set {variable}"


def test_bad_base_url_in_env_is_config_error() -> None:
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "localhost:8000"}
    with pytest.raises(ConfigError) as info:
        open_model("openai:gpt-4o", env=env)
    assert info.value.code is ErrorCode.CONFIG
    assert "OPENAI_BASE_URL" in info.value.message


@pytest.mark.parametrize(
    ("env", "expected_key"),
    [({}, "not-needed"), ({"OPENAI_API_KEY": "local-key"}, "local-key")],
)
async def test_openai_compatible_talks_to_the_server(
    chat_server: ChatServer, env: dict[str, str], expected_key: str
) -> None:
    chat_server.enqueue(stream_reply(text_chunk("hello"), finish_chunk("stop")))
    model = open_model(f"openai-compatible:local-llm@{chat_server.base_url}", env=env)
    assembler = BlockAssembler(provider=model.provider, model=model.name)
    request = ModelRequest(
        agent_name="lead",
        session_id="s",
        call_index=0,
        system="",
        messages=(user_message("hi"),),
    )
    try:
        async for chunk in model.stream(request):
            assembler.feed(chunk)
    finally:
        await model.aclose()
    assert assembler.message().text == "hello"
    [sent] = chat_server.requests
    assert sent.headers["authorization"] == f"Bearer {expected_key}"
    assert sent.body["model"] == "local-llm"
    assert sent.body["messages"] == [{"role": "user", "content": "hi"}]


async def test_scripted_opens_the_script(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("lead:\n  - text: hello\n", encoding="utf-8")
    model = open_model(f"scripted:{script}", env={})
    assert isinstance(model, ScriptedModel)
    await model.aclose()


def test_scripted_missing_file_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        open_model(f"scripted:{tmp_path / 'absent.yaml'}", env={})
