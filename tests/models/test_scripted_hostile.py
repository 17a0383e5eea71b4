"""Hostile model scripts: each is one `ConfigError` with a stable code, raised when opened."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from subagents._yaml import MAX_ALIAS_NODES, MAX_NESTING
from subagents.errors import ConfigError, ErrorCode
from subagents.models._scripted import MAX_SCRIPT_BYTES, MAX_SLEEP_SECONDS, ScriptedModel

LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)
"""Nine levels of nine aliases: a billion strings once expanded, 400 bytes as written."""


def _refused(path: Path, code: ErrorCode, *needles: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        ScriptedModel.from_file(path)
    error = caught.value
    assert error.code == code
    assert "\n" not in error.message
    assert str(path) in error.message
    for needle in needles:
        assert needle in error.message, error.message
    return error


def _script(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "script.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        pytest.param(
            b"lead: [{text: \xff\xfe}]\n", "not UTF-8 text (byte 0xff at offset 14)", id="latin"
        ),
        pytest.param(bytes(range(256)), "not UTF-8 text", id="binary"),
        pytest.param(b"lead: [{text: a\x00b}]\n", "not valid YAML", id="nul"),
    ],
)
def test_content_that_is_not_text_is_invalid(tmp_path: Path, data: bytes, needle: str) -> None:
    _refused(_script(tmp_path, data), ErrorCode.SCRIPT_INVALID, needle)


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 1000, 100_000])
def test_deep_nesting_is_refused_without_recursion(tmp_path: Path, depth: int) -> None:
    text = "lead: [{text: a, calls: [{tool: t, args: {x: " + "[" * depth + "]" * depth + "}}]}]\n"
    _refused(_script(tmp_path, text), ErrorCode.SCRIPT_INVALID, f"more than {MAX_NESTING} levels")


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    text = LAUGHS + "lead: [{text: a, calls: [{tool: t, args: {x: *i}}]}]\n"
    _refused(
        _script(tmp_path, text), ErrorCode.SCRIPT_INVALID, f"more than {MAX_ALIAS_NODES} nodes"
    )


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    text = "lead: [{text: a, calls: [{tool: t, args: &x {self: *x}}]}]\n"
    _refused(_script(tmp_path, text), ErrorCode.SCRIPT_INVALID, "contains it")


def test_small_aliases_still_work(tmp_path: Path) -> None:
    text = "helper: [&r {text: same}]\nlead: [*r, *r]\n"
    model = ScriptedModel.from_file(_script(tmp_path, text))
    assert [r.text for r in model.responses_for("lead")] == ["same", "same"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param('lead: [{text: "\\ud800"}]\n', "lone surrogate", id="surrogate-text"),
        pytest.param(
            'lead: [{calls: [{tool: t, args: {"\\udfff": 1}}]}]\n', "lone surrogate", id="key"
        ),
        pytest.param("lead: [{text: " + "9" * 5000 + "}]\n", "4300 digits", id="huge-int"),
        pytest.param("lead: [{text: a, sleep: .inf}]\n", "lead[0].sleep", id="sleep-inf"),
        pytest.param("lead: [{text: a, sleep: .nan}]\n", "lead[0].sleep", id="sleep-nan"),
        pytest.param("lead: [{text: a, sleep: -0.5}]\n", "lead[0].sleep", id="sleep-negative"),
        pytest.param(
            f"lead: [{{text: a, sleep: {MAX_SLEEP_SECONDS + 1}}}]\n",
            "lead[0].sleep",
            id="sleep-long",
        ),
        pytest.param(
            "lead: [{text: a, sleep: " + "9" * 400 + "}]\n", "lead[0].sleep", id="sleep-huge-int"
        ),
        pytest.param(
            "lead: [{calls: [{tool: t, args: {x: .inf}}]}]\n", "calls[0].args: not JSON", id="inf"
        ),
        pytest.param(
            "lead: [{calls: [{tool: t, args: {x: 1.0e+999}}]}]\n", "args: not JSON", id="overflow"
        ),
        pytest.param("lead: [{calls: [{tool: t, args: {x: .nan}}]}]\n", "args: not JSON", id="nan"),
        pytest.param(
            "lead: [{calls: [{tool: t, args: {x: 2024-01-01}}]}]\n", "args: not JSON", id="date"
        ),
        pytest.param(
            "lead: [{text: a, usage: {input_tokens: .inf}}]\n", "usage.input_tokens", id="usage-inf"
        ),
        pytest.param(
            "lead: [{text: a, usage: {output_tokens: -3}}]\n", "usage.output_tokens", id="usage-neg"
        ),
    ],
)
def test_values_out_of_range_are_invalid(tmp_path: Path, text: str, needle: str) -> None:
    _refused(_script(tmp_path, text), ErrorCode.SCRIPT_INVALID, needle)


def test_the_longest_sleep_is_accepted(tmp_path: Path) -> None:
    model = ScriptedModel.from_file(
        _script(tmp_path, f"lead: [{{text: a, sleep: {MAX_SLEEP_SECONDS}}}]\n")
    )
    assert model.responses_for("lead")[0].sleep == MAX_SLEEP_SECONDS


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "script.yaml"
    os.mkfifo(fifo)
    # A blocking open would wait for a writer forever; run it on a thread we can give up on.
    outcome: list[BaseException] = []
    done = threading.Event()

    def attempt() -> None:
        try:
            ScriptedModel.from_file(fifo)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)
        done.set()

    threading.Thread(target=attempt, daemon=True).start()
    if not done.wait(30):
        os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # release the reader before failing
        pytest.fail("opening a FIFO as a script blocked")
    assert len(outcome) == 1
    assert isinstance(outcome[0], ConfigError)
    assert outcome[0].code == ErrorCode.SCRIPT_UNREADABLE
    assert "not a regular file" in outcome[0].message


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_not_a_regular_file(device: str) -> None:
    if not Path(device).exists():
        pytest.skip(f"no {device}")
    _refused(Path(device), ErrorCode.SCRIPT_UNREADABLE, "not a regular file")


def test_a_symlink_to_a_script_is_followed(tmp_path: Path) -> None:
    target = _script(tmp_path, "lead: [{text: linked}]\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    assert ScriptedModel.from_file(link).responses_for("lead")[0].text == "linked"


def test_a_file_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    path = _script(tmp_path, "lead: [{text: a}]\n#" + "x" * MAX_SCRIPT_BYTES)
    _refused(path, ErrorCode.SCRIPT_UNREADABLE, f"more than {MAX_SCRIPT_BYTES} (4 MiB)")


def test_a_file_at_the_cap_loads(tmp_path: Path) -> None:
    head = "lead: [{text: a}]\n#"
    path = _script(tmp_path, head + "x" * (MAX_SCRIPT_BYTES - len(head)))
    assert path.stat().st_size == MAX_SCRIPT_BYTES
    assert ScriptedModel.from_file(path).responses_for("lead")[0].text == "a"
