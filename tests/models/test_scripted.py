"""Conformance tests for the scripted model (docs/design.md §6.2): the YAML format, per-agent
positions, the `"*"` fallback, `sleep` on the injected clock, `error:` and `assert_complete`."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.errors import ConfigError, ErrorCode, ModelError
from subagents.messages import Usage
from subagents.models import (
    Finish,
    ModelChunk,
    ModelRequest,
    TextDelta,
    ToolCallDelta,
    UsageChunk,
)
from subagents.testing import FakeClock, ScriptedCall, ScriptedModel, ScriptedResponse


def request(agent: str, index: int) -> ModelRequest:
    return ModelRequest(
        agent_name=agent, session_id="session", call_index=index, system="", messages=()
    )


async def answer(model: ScriptedModel, agent: str, index: int) -> list[ModelChunk]:
    return [chunk async for chunk in model.stream(request(agent, index))]


async def text_of(model: ScriptedModel, agent: str, index: int) -> str:
    return "".join(c.text for c in await answer(model, agent, index) if isinstance(c, TextDelta))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# -- parsing ---------------------------------------------------------------------------------


async def test_full_format_from_a_file(tmp_path: Path, clock: FakeClock) -> None:
    path = write(
        tmp_path,
        """
lead:
  - calls:
      - tool: subagent
        args: {name: reviewer, prompt: Review app.py}
      - {tool: read_file, args: {path: a.py}, id: my-call}
      - {tool: noop}
  - text: The reviewer approved app.py.
    usage: {input_tokens: 10, output_tokens: 4}
  - {text: partial, stop: max-tokens}
  - {stop: refusal}
  - {error: upstream exploded}
reviewer:
  - {text: app.py looks correct., sleep: 2.5}
"*":
  - text: done
""",
    )
    model = ScriptedModel.from_file(path, clock=clock)
    assert model.name == str(path)
    assert model.provider == "scripted"
    assert model.responses_for("lead") == (
        ScriptedResponse(
            calls=(
                ScriptedCall("subagent", {"name": "reviewer", "prompt": "Review app.py"}),
                ScriptedCall("read_file", {"path": "a.py"}, id="my-call"),
                ScriptedCall("noop"),
            )
        ),
        ScriptedResponse(
            text="The reviewer approved app.py.", usage=Usage(input_tokens=10, output_tokens=4)
        ),
        ScriptedResponse(text="partial", stop="max-tokens"),
        ScriptedResponse(stop="refusal"),
        ScriptedResponse(error="upstream exploded"),
    )
    assert model.responses_for("reviewer") == (
        ScriptedResponse(text="app.py looks correct.", sleep=2.5),
    )
    assert model.responses_for("someone/else") == (ScriptedResponse(text="done"),)

    first = await answer(model, "lead", 0)
    assert [c for c in first if not isinstance(c, UsageChunk)] == [
        ToolCallDelta(
            0,
            id="call_0_0",
            name="subagent",
            arguments=('{"name":"reviewer","prompt":"Review app.py"}'),
        ),
        ToolCallDelta(1, id="my-call", name="read_file", arguments='{"path":"a.py"}'),
        ToolCallDelta(2, id="call_0_2", name="noop", arguments="{}"),
        Finish("tool-calls"),
    ]
    assert await answer(model, "lead", 1) == [
        TextDelta("The reviewer approved app.py."),
        UsageChunk(Usage(input_tokens=10, output_tokens=4)),
        Finish("stop"),
    ]
    assert (await answer(model, "lead", 2))[-1] == Finish("max-tokens")
    refusal = await answer(model, "lead", 3)
    assert refusal[-1] == Finish("refusal")
    assert not any(isinstance(c, TextDelta | ToolCallDelta) for c in refusal)


MALFORMED = [
    pytest.param("- text: hi\n", "the top level must map agent names", id="top-not-mapping"),
    pytest.param("just a string\n", "the top level must map agent names", id="top-scalar"),
    pytest.param("", "the top level must map agent names", id="empty-file"),
    pytest.param("lead:\n  text: hi\n", "lead: expected a list of responses", id="not-a-list"),
    pytest.param("lead:\n  - hello\n", "lead[0]: a response must be a mapping", id="resp-scalar"),
    pytest.param(
        "lead:\n  - text: a\n  - {text: b, colour: red}\n",
        "lead[1]: unknown key 'colour'",
        id="unknown-key",
    ),
    pytest.param("lead:\n  - sleep: 1\n", "lead[0]: give at least one of", id="nothing-to-say"),
    pytest.param("lead:\n  - {text: 3}\n", "lead[0].text: expected a string", id="text-not-str"),
    pytest.param("lead:\n  - {error: ''}\n", "lead[0].error: expected a non-empty", id="error"),
    pytest.param(
        "lead:\n  - {stop: length}\n",
        "lead[0].stop: expected max-tokens or refusal, got 'length'",
        id="bad-stop",
    ),
    pytest.param(
        "lead:\n  - {text: a, sleep: -1}\n",
        "lead[0].sleep: expected a number of seconds >= 0",
        id="negative-sleep",
    ),
    pytest.param(
        "lead:\n  - {text: a, sleep: soon}\n", "lead[0].sleep: expected a number", id="sleep-str"
    ),
    pytest.param(
        "lead:\n  - {text: a, sleep: true}\n", "lead[0].sleep: expected a number", id="sleep-bool"
    ),
    pytest.param(
        "lead:\n  - {calls: {tool: x}}\n", "lead[0].calls: expected a list", id="calls-not-list"
    ),
    pytest.param(
        "lead:\n  - text: a\n  - calls:\n      - {args: {a: 1}}\n",
        "lead[1].calls[0].tool: expected a tool name",
        id="call-without-tool",
    ),
    pytest.param(
        "lead:\n  - calls:\n      - {tool: t}\n      - tool-name\n",
        "lead[0].calls[1]: a call must be a mapping",
        id="call-scalar",
    ),
    pytest.param(
        "lead:\n  - calls:\n      - {tool: t, args: [1, 2]}\n",
        "lead[0].calls[0].args: expected a mapping",
        id="args-not-mapping",
    ),
    pytest.param(
        "lead:\n  - calls:\n      - {tool: t, with: 1}\n",
        "lead[0].calls[0]: unknown key 'with'",
        id="call-unknown-key",
    ),
    pytest.param(
        "lead:\n  - calls:\n      - {tool: t, id: 3}\n",
        "lead[0].calls[0].id: expected a string",
        id="call-id-not-str",
    ),
    pytest.param(
        "lead:\n  - {text: a, usage: 5}\n", "lead[0].usage: expected a mapping", id="usage"
    ),
    pytest.param(
        "lead:\n  - {text: a, usage: {bogus_tokens: 1}}\n", "lead[0].usage:", id="usage-key"
    ),
    pytest.param("lead: [text: a\n", "not valid YAML", id="invalid-yaml"),
    pytest.param("lead:\n\t- text: a\n", "not valid YAML", id="tab-indent"),
]


@pytest.mark.parametrize(("text", "detail"), MALFORMED)
def test_malformed_script_file(tmp_path: Path, text: str, detail: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        ScriptedModel.from_file(path)
    error = caught.value
    assert error.code == ErrorCode.SCRIPT_INVALID
    assert error.message.startswith(f"malformed model script {path}: ")
    assert detail in error.message
    assert error.fields["script"] == str(path)


def test_malformed_inline_yaml_names_its_source() -> None:
    with pytest.raises(ConfigError, match=r"demo\.yaml: lead\[0\]\.stop") as caught:
        ScriptedModel.from_yaml("lead:\n  - {stop: nope}\n", source="demo.yaml")
    assert caught.value.code == ErrorCode.SCRIPT_INVALID


def test_missing_file_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError) as caught:
        ScriptedModel.from_file(path)
    assert caught.value.code == ErrorCode.SCRIPT_UNREADABLE
    assert str(path) in caught.value.message
    assert "--model scripted:PATH" in caught.value.message
    assert caught.value.fields["path"] == str(path)


def test_a_directory_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        ScriptedModel.from_file(tmp_path)
    assert caught.value.code == ErrorCode.SCRIPT_UNREADABLE


# -- playing the script ----------------------------------------------------------------------

FALLBACK = """
lead:
  - text: lead 0
"*":
  - text: any 0
  - text: any 1
"""


async def test_fallback_is_consumed_per_agent() -> None:
    model = ScriptedModel.from_yaml(FALLBACK)
    assert await text_of(model, "lead", 0) == "lead 0"
    assert await text_of(model, "reviewer", 0) == "any 0"
    assert await text_of(model, "reviewer/checker", 0) == "any 0"
    assert await text_of(model, "reviewer", 1) == "any 1"
    assert await text_of(model, "reviewer/checker", 1) == "any 1"
    with pytest.raises(ModelError) as caught:
        await answer(model, "reviewer", 2)
    assert caught.value.code == ErrorCode.SCRIPT_EXHAUSTED


async def test_position_is_the_call_index_not_a_shared_cursor() -> None:
    model = ScriptedModel.from_yaml("lead:\n  - text: a\n  - text: b\n")
    # A resumed agent asks for its own position; the model keeps no cursor of its own.
    assert await text_of(model, "lead", 1) == "b"
    assert await text_of(model, "lead", 0) == "a"
    assert await text_of(model, "lead", 1) == "b"


async def test_exhaustion_names_the_agent_and_the_script(tmp_path: Path) -> None:
    path = write(tmp_path, "lead:\n  - text: only one\n")
    model = ScriptedModel.from_file(path)
    await answer(model, "lead", 0)
    with pytest.raises(ModelError) as caught:
        await answer(model, "lead", 1)
    error = caught.value
    assert error.code == ErrorCode.SCRIPT_EXHAUSTED
    assert error.retryable is False
    assert "'lead'" in error.message
    assert str(path) in error.message
    assert error.fields == {"agent": "lead", "script": str(path)}
    with pytest.raises(ModelError, match="'helper'"):
        await answer(model, "helper", 0)  # no entry and no "*"


async def test_sleep_advances_the_injected_clock_without_waiting(clock: FakeClock) -> None:
    # A day of script time: with a real sleep the 60 s test timeout would fail this test.
    model = ScriptedModel.from_yaml(
        "lead:\n  - {text: slow, sleep: 86400}\n  - {text: fast}\n", clock=clock
    )
    start = clock.now()
    assert await text_of(model, "lead", 0) == "slow"
    assert clock.now() == start + 86400
    assert await text_of(model, "lead", 1) == "fast"
    assert clock.now() == start + 86400


async def test_error_raises_a_model_error_after_its_sleep(clock: FakeClock) -> None:
    model = ScriptedModel.from_yaml(
        "lead:\n  - {error: the provider is down, sleep: 5}\n  - text: back\n", clock=clock
    )
    start = clock.now()
    with pytest.raises(ModelError) as caught:
        await answer(model, "lead", 0)
    assert caught.value.message == "the provider is down"
    assert caught.value.code == ErrorCode.MODEL_ERROR
    assert caught.value.retryable is False
    assert clock.now() == start + 5
    assert await text_of(model, "lead", 1) == "back"
    model.assert_complete()  # an error counts as a consumed response


async def test_default_usage_is_derived_from_the_output() -> None:
    model = ScriptedModel({"lead": [ScriptedResponse(text="x" * 40), ScriptedResponse(text="")]})
    chunks = await answer(model, "lead", 0)
    assert UsageChunk(Usage(output_tokens=10)) in chunks
    empty = await answer(model, "lead", 1)
    assert empty == [UsageChunk(Usage(output_tokens=1)), Finish("stop")]


async def test_assert_complete() -> None:
    model = ScriptedModel.from_yaml(
        "lead:\n  - text: a\n  - text: b\nhelper:\n  - text: c\n'*':\n  - text: d\n"
    )
    with pytest.raises(AssertionError, match=r"'lead': 2.*'helper': 1"):
        model.assert_complete()
    await answer(model, "lead", 0)
    await answer(model, "helper", 0)
    with pytest.raises(AssertionError, match=r"\{'lead': 1\}"):
        model.assert_complete()
    await answer(model, "lead", 1)
    model.assert_complete()  # "*" is a fallback: unconsumed copies are fine
    await answer(model, "other", 0)
    model.assert_complete()


async def test_an_exhausted_call_still_counts_as_consumed() -> None:
    model = ScriptedModel.from_yaml("lead:\n  - text: a\n")
    with pytest.raises(ModelError):
        await answer(model, "lead", 1)
    model.assert_complete()
