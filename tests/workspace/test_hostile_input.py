"""Hostile arguments to the workspace tools: each ends as a tool result, never a hang or a crash.

Found by fuzzing: a backtracking regex hung `grep`'s worker thread, lone surrogates surfaced as
raw `UnicodeEncodeError`s, and a long `bash` command overflowed argv. No test here measures
time: a regression simply does not finish, and pytest's per-test timeout fails it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from workspace_support import Box, Snapshot

from subagents.errors import ErrorCode
from subagents.messages import JsonObject
from subagents.tools import ToolOutcome
from subagents.workspace._bash import BASH_MAX_COMMAND_BYTES

# -- grep: a linear-time engine --------------------------------------------------------------


async def test_a_catastrophic_backtracking_pattern_completes_and_finds_the_right_lines(
    box: Box,
) -> None:
    # Python's `re` takes about 2**40 steps to fail `(a+)+$` on line 1; RE2 is linear.
    (box.ws / "t.txt").write_text("a" * 40 + "!\n" + "aaaa\n" + "b\n" + "a" * 40 + "\n")
    out = await box.ok("grep", {"pattern": "(a+)+$", "path": "t.txt"})
    assert out == f"t.txt:2: aaaa\nt.txt:4: {'a' * 40}"


async def test_dollar_still_matches_at_the_end_of_lf_and_crlf_lines(box: Box) -> None:
    (box.ws / "lf.txt").write_bytes(b"foo\nfoo bar\n")
    (box.ws / "crlf.txt").write_bytes(b"foo\r\nbar\r\n")
    out = await box.ok("grep", {"pattern": "^fo+$"})
    assert out == "crlf.txt:1: foo\nlf.txt:1: foo"


@pytest.mark.parametrize(
    ("pattern", "feature"),
    [
        pytest.param(r"(a)\1", r"backreferences (\1)", id="backreference"),
        pytest.param("(?P<x>a)(?P=x)", "named backreferences ((?P=name))", id="named-backref"),
        pytest.param("a(?=b)", "lookaround ((?=, (?!, (?<=, (?<!)", id="lookahead"),
        pytest.param("(?<!a)b", "lookaround ((?=, (?!, (?<=, (?<!)", id="lookbehind"),
        pytest.param("(?>a+)", "atomic groups ((?>...))", id="atomic"),
        pytest.param("a++", "possessive repetition (a++)", id="possessive"),
        pytest.param(r"a\Z", r"\Z (RE2 spells the end of text \z)", id="big-Z"),
    ],
)
async def test_a_pattern_re2_does_not_support_is_a_clear_one_line_error(
    box: Box, pattern: str, feature: str
) -> None:
    (box.ws / "t.txt").write_text("aab\n")
    before = box.snapshot()
    outcome = await box.call("grep", {"pattern": pattern})
    assert (outcome.is_error, outcome.code, outcome.content) == (
        True,
        ErrorCode.INVALID_PATTERN,
        f"Error: unsupported regular expression {pattern!r}: it uses {feature}, which grep's "
        "RE2 syntax does not support (RE2 leaves out what needs backtracking)",
    )
    assert box.snapshot() == before


# -- lone surrogates -------------------------------------------------------------------------

# Every string argument of every tool, with valid companions: the surrogate goes in `arg`.
CALLS: list[tuple[str, JsonObject]] = [
    ("read_file", {"path": "a.txt"}),
    ("write_file", {"path": "new.txt", "content": "x"}),
    ("edit_file", {"path": "a.txt", "old_string": "alpha", "new_string": "omega"}),
    ("glob", {"pattern": "*.txt", "path": "."}),
    ("grep", {"pattern": "alpha", "path": ".", "glob": "*.txt"}),
    ("bash", {"command": "echo hi > made.txt"}),
]
SURROGATE_CASES = [
    pytest.param(tool, args, arg, char, id=f"{tool}-{arg}-{ord(char):X}")
    for tool, args in CALLS
    for arg in args
    # U+D800 has no encoding at all; U+DCFF is what `surrogateescape` makes of byte 0xFF, which
    # a file name could otherwise smuggle through `os.fsencode`.
    for char in ("\ud800", "\udcff")
]


@pytest.mark.parametrize(("tool", "args", "arg", "char"), SURROGATE_CASES)
async def test_a_lone_surrogate_in_any_argument_is_refused_and_changes_nothing(
    box: Box, tool: str, args: JsonObject, arg: str, char: str
) -> None:
    (box.ws / "a.txt").write_text("alpha\n")
    value = args[arg]
    assert isinstance(value, str)
    hostile = {**args, arg: value[:1] + char + value[1:]}  # index 1: the message says so
    assert (await box.call(tool, args)).code != ErrorCode.INVALID_ARGS  # control: valid as given
    before = box.snapshot()
    outcome = await box.call(tool, hostile)
    assert (outcome.is_error, outcome.code, outcome.content) == (
        True,
        ErrorCode.INVALID_ARGS,
        f"Error: {arg} contains a lone surrogate (U+{ord(char):04X} at index 1), which is not "
        "valid Unicode text; remove it or write the character it stands for",
    )
    assert box.snapshot() == before


# -- bash: long commands ---------------------------------------------------------------------


def assignment_of_size(total: int, *, fill: str = "a") -> str:
    """`x='...'; echo ${#x}` padded to exactly `total` UTF-8 bytes."""
    head, tail = "x='", "'; echo ${#x}"
    room = total - len(head.encode()) - len(tail.encode())
    return head + fill * (room // len(fill.encode())) + tail


async def test_a_one_megabyte_command_runs(box: Box) -> None:
    command = assignment_of_size(1_000_000)
    assert len(command.encode()) == 1_000_000  # far past Linux's 128 KiB cap on one argument
    assert await box.ok("bash", {"command": command}) == f"{1_000_000 - 16}\n[exit code 0]"


async def test_a_command_of_exactly_the_limit_runs(box: Box) -> None:
    command = assignment_of_size(BASH_MAX_COMMAND_BYTES)
    assert len(command.encode()) == BASH_MAX_COMMAND_BYTES
    out = await box.ok("bash", {"command": command})
    assert out == f"{BASH_MAX_COMMAND_BYTES - 16}\n[exit code 0]"


@pytest.mark.parametrize("fill", ["a", "é"], ids=["ascii", "two-byte"])
async def test_a_command_over_the_limit_is_refused_before_anything_runs(
    box: Box, fill: str
) -> None:
    # With "é" the command has fewer characters than the limit but more bytes.
    command = "echo ran > made.txt; " + assignment_of_size(BASH_MAX_COMMAND_BYTES + 2, fill=fill)
    size = len(command.encode())
    assert size > BASH_MAX_COMMAND_BYTES
    before = box.snapshot()
    outcome = await box.call("bash", {"command": command})
    assert (outcome.is_error, outcome.code, outcome.content) == (
        True,
        ErrorCode.INVALID_ARGS,
        f"Error: command is {size} bytes, more than the {BASH_MAX_COMMAND_BYTES} allowed; write a "
        "long script to a file with write_file and run that file instead",
    )
    assert box.snapshot() == before


async def test_the_command_sees_bash_c_conventions_and_not_its_own_text(box: Box) -> None:
    # $0 is bash's, stdin is empty (the text came on another fd, closed before the command),
    # no helper variable is left, line numbers are the command's own, the exit status is kept.
    command = (
        'echo "$0"; wc -c; echo "[${__subagents_command-unset}]"\n'
        "ls -l /proc/$$/fd | grep -c memfd\n"
        "echo line $LINENO; exit 7"
    )
    out = await box.ok("bash", {"command": command})
    assert out == "/bin/bash\n0\n[unset]\n0\nline 3\n[exit code 7]"


# -- fuzzing: every argument, arbitrary text -------------------------------------------------

SPECIALS = ["\ud800", "\udfff", "\udcff", "\0", "/", "..", "*", "**", "(a+)+$", "\\1", "\n", "é"]
TEXT = st.lists(
    st.one_of(st.characters(exclude_categories=()), st.sampled_from(SPECIALS)), max_size=12
).map("".join)
PATH = st.one_of(TEXT, st.sampled_from(["a.txt", ".", "sub/new.txt", "../outside/x"]))


def tool_call(
    name: str, **args: st.SearchStrategy[str]
) -> st.SearchStrategy[tuple[str, JsonObject]]:
    def named(drawn: dict[str, str]) -> tuple[str, JsonObject]:
        return name, dict(drawn)

    return st.fixed_dictionaries(args).map(named)


FILE_CALLS = st.one_of(
    tool_call("read_file", path=PATH),
    tool_call("write_file", path=PATH, content=TEXT),
    tool_call("edit_file", path=PATH, old_string=TEXT, new_string=TEXT),
    tool_call("glob", pattern=TEXT, path=PATH),
    tool_call("grep", pattern=TEXT, path=PATH, glob=TEXT),
    tool_call("grep", pattern=TEXT),
)


def outside_the_workspace(box: Box) -> Snapshot:
    """Everything in the box except the workspace, plus what sits next to the box."""
    inside = box.snapshot()
    rest = {k: v for k, v in inside.items() if k != "ws" and not k.startswith("ws/")}
    rest.update({f"../{name}": ("entry", None) for name in os.listdir(box.root.parent)})
    return rest


async def assert_a_tool_result(box: Box, name: str, args: JsonObject) -> ToolOutcome:
    cwd = sorted(os.listdir(Path.cwd()))
    before = outside_the_workspace(box)
    outcome = await box.call(name, args)  # an exception escaping execute_tool fails the test
    assert isinstance(outcome, ToolOutcome)
    # TOOL_FAILED is execute_tool's wrapper for an exception the tool did not expect.
    assert outcome.code != ErrorCode.TOOL_FAILED, outcome.content
    assert outside_the_workspace(box) == before
    assert sorted(os.listdir(Path.cwd())) == cwd
    return outcome


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(call=FILE_CALLS)
async def test_file_and_search_tools_always_answer_with_a_tool_result(
    box: Box, call: tuple[str, JsonObject]
) -> None:
    (box.ws / "a.txt").write_text("alpha\nbeta\n")
    await assert_a_tool_result(box, *call)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(command=TEXT)
async def test_bash_always_answers_with_a_tool_result(box: Box, command: str) -> None:
    await assert_a_tool_result(box, "bash", {"command": command, "timeout_ms": 10_000})
