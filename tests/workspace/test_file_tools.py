"""read_file, write_file and edit_file through the tool pipeline, on real files (issue 6 item 4).

Every bad input comes back as an `Error: ...` result with a stable code, and the file system is
exactly as it was before the call.
"""

from __future__ import annotations

import pytest
from workspace_support import Box

from subagents.delegation._wording import RUNTIME_GUIDANCE
from subagents.errors import ErrorCode
from subagents.messages import JsonObject

INVALID = "Error: invalid arguments: "


@pytest.fixture
def files(box: Box) -> Box:
    (box.ws / "a.txt").write_text("alpha\nbeta\nalpha\n")
    (box.ws / "dir").mkdir()
    (box.ws / "dir" / "b.txt").write_text("one\ntwo\n")
    (box.ws / "bin.dat").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0binary")
    return box


# -- read_file -------------------------------------------------------------------------------


async def test_read_file_numbers_lines_like_cat_n(files: Box) -> None:
    assert await files.ok("read_file", {"path": "a.txt"}) == (
        "     1\talpha\n     2\tbeta\n     3\talpha"
    )


async def test_read_file_offset_and_limit_count_lines_and_say_where_to_continue(box: Box) -> None:
    (box.ws / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    assert await box.ok("read_file", {"path": "n.txt", "offset": 4, "limit": 3}) == (
        "     4\tline 4\n     5\tline 5\n     6\tline 6\n"
        "… more lines follow; continue with offset=7"
    )
    assert await box.ok("read_file", {"path": "n.txt", "offset": 9}) == (
        "     9\tline 9\n    10\tline 10"
    )
    assert await box.ok("read_file", {"path": "n.txt", "offset": 0, "limit": 1}) == (
        "     1\tline 1\n… more lines follow; continue with offset=2"
    )
    assert await box.ok("read_file", {"path": "n.txt", "offset": 11}) == (
        "(n.txt has 10 lines; offset 11 is past the end)"
    )


async def test_read_file_caps_long_lines_and_total_output(box: Box) -> None:
    (box.ws / "wide.txt").write_text("x" * 5000 + "\nshort\n")
    out = await box.ok("read_file", {"path": "wide.txt"})
    assert out == f"     1\t{'x' * 2000} … [line truncated]\n     2\tshort"
    (box.ws / "big.txt").write_text(("y" * 1000 + "\n") * 500)
    out = await box.ok("read_file", {"path": "big.txt"})
    assert len(out) <= 100_000 + 100
    assert out.endswith("… more lines follow; continue with offset=100")
    assert out.count("\n") == 99


async def test_read_file_empty_crlf_and_invalid_utf8(box: Box) -> None:
    (box.ws / "empty.txt").write_bytes(b"")
    assert await box.ok("read_file", {"path": "empty.txt"}) == "(empty.txt is empty)"
    (box.ws / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    assert await box.ok("read_file", {"path": "crlf.txt"}) == "     1\tone\n     2\ttwo"
    (box.ws / "latin.txt").write_bytes(b"caf\xe9\n")
    assert await box.ok("read_file", {"path": "latin.txt"}) == "     1\tcaf\ufffd"


async def test_relative_paths_start_at_the_agents_cwd(files: Box) -> None:
    files.cwd = files.ws / "dir"
    assert await files.ok("read_file", {"path": "b.txt"}) == "     1\tone\n     2\ttwo"
    assert await files.ok("read_file", {"path": "../a.txt", "limit": 1}) == (
        "     1\talpha\n… more lines follow; continue with offset=2"
    )
    assert await files.ok("read_file", {"path": str(files.ws / "dir" / "b.txt"), "limit": 1})


# -- write_file ------------------------------------------------------------------------------


async def test_write_file_creates_parents_and_overwrites(files: Box) -> None:
    out = await files.ok("write_file", {"path": "new/deep/c.txt", "content": "x\ny\n"})
    assert out == "created new/deep/c.txt (4 bytes, 2 lines)"
    assert (files.ws / "new" / "deep" / "c.txt").read_text() == "x\ny\n"
    out = await files.ok("write_file", {"path": "a.txt", "content": "é"})
    assert out == "overwrote a.txt (2 bytes, 1 lines)"
    assert (files.ws / "a.txt").read_text(encoding="utf-8") == "é"
    assert await files.ok("write_file", {"path": "blank.txt", "content": ""}) == (
        "created blank.txt (0 bytes, 0 lines)"
    )


# -- edit_file -------------------------------------------------------------------------------


async def test_edit_file_replaces_one_unique_occurrence(files: Box) -> None:
    out = await files.ok("edit_file", {"path": "a.txt", "old_string": "beta", "new_string": "B"})
    assert out == "edited a.txt: replaced 1 occurrence"
    assert (files.ws / "a.txt").read_text() == "alpha\nB\nalpha\n"


async def test_edit_file_replace_all(files: Box) -> None:
    args: JsonObject = {
        "path": "a.txt",
        "old_string": "alpha",
        "new_string": "omega",
        "replace_all": True,
    }
    assert await files.ok("edit_file", args) == "edited a.txt: replaced 2 occurrences"
    assert (files.ws / "a.txt").read_text() == "omega\nbeta\nomega\n"


async def test_edit_file_matches_crlf_files_and_keeps_bytes_that_are_not_utf8(box: Box) -> None:
    (box.ws / "w.txt").write_bytes(b"caf\xe9\r\none\r\ntwo\r\n")
    args: JsonObject = {"path": "w.txt", "old_string": "one\ntwo", "new_string": "1\n2"}
    assert await box.ok("edit_file", args) == "edited w.txt: replaced 1 occurrence"
    assert (box.ws / "w.txt").read_bytes() == b"caf\xe9\r\n1\r\n2\r\n"


# -- bad input -------------------------------------------------------------------------------


def case(
    tool: str, args: JsonObject, text: str, code: ErrorCode, *, id: str
) -> pytest.ParameterSet:
    return pytest.param(tool, args, text, code, id=id)


BAD = [
    # schema validation by the pipeline
    case("read_file", {}, INVALID + "'path' is a required property", ErrorCode.INVALID_ARGS,
         id="read-no-path"),
    case("read_file", {"path": 5}, INVALID + "path: 5 is not of type 'string'",
         ErrorCode.INVALID_ARGS, id="read-path-int"),
    case("read_file", {"path": "a.txt", "offset": "2"}, INVALID + "offset: '2' is not of type "
         "'integer'", ErrorCode.INVALID_ARGS, id="read-offset-str"),
    case("write_file", {"path": "a.txt"}, INVALID + "'content' is a required property",
         ErrorCode.INVALID_ARGS, id="write-no-content"),
    case("write_file", {"path": "a.txt", "content": None}, INVALID + "content: None is not of "
         "type 'string'", ErrorCode.INVALID_ARGS, id="write-content-null"),
    case("edit_file", {"path": "a.txt", "old_string": "beta"}, INVALID + "'new_string' is a "
         "required property", ErrorCode.INVALID_ARGS, id="edit-no-new"),
    case("edit_file", {"path": "a.txt", "old_string": "beta", "new_string": "b",
                       "replace_all": "yes"},
         INVALID + "replace_all: 'yes' is not of type 'boolean'", ErrorCode.INVALID_ARGS,
         id="edit-replace-all-str"),
    # checked by the tools
    case("read_file", {"path": ""}, "Error: path must not be empty", ErrorCode.INVALID_ARGS,
         id="read-empty-path"),
    case("read_file", {"path": "a.txt", "offset": -1},
         INVALID + "offset: -1 is less than the minimum of 0", ErrorCode.INVALID_ARGS,
         id="read-negative-offset"),
    case("read_file", {"path": "a.txt", "limit": 0},
         INVALID + "limit: 0 is less than the minimum of 1",
         ErrorCode.INVALID_ARGS, id="read-zero-limit"),
    case("read_file", {"path": "a.txt", "limit": -3},
         INVALID + "limit: -3 is less than the minimum of 1",
         ErrorCode.INVALID_ARGS, id="read-negative-limit"),
    case("read_file", {"path": "missing.txt"}, "Error: 'missing.txt' does not exist",
         ErrorCode.FILE_NOT_FOUND, id="read-missing"),
    case("read_file", {"path": "a.txt/x"}, "Error: 'a.txt/x': a parent of it is not a directory",
         ErrorCode.NOT_A_DIRECTORY, id="read-under-a-file"),
    case("read_file", {"path": "dir"}, "Error: 'dir' is a directory", ErrorCode.NOT_A_FILE,
         id="read-directory"),
    case("read_file", {"path": "bin.dat"}, "Error: 'bin.dat' looks like a binary file (it "
         "contains NUL bytes); read_file shows text only", ErrorCode.BINARY_FILE,
         id="read-binary"),
    case("write_file", {"path": "dir", "content": "x"}, "Error: 'dir' is a directory",
         ErrorCode.NOT_A_FILE, id="write-directory"),
    case("write_file", {"path": "a.txt/x", "content": "x"}, "Error: 'a.txt/x': a parent of it is "
         "not a directory", ErrorCode.NOT_A_DIRECTORY,
         id="write-under-a-file"),
    case("write_file", {"path": "", "content": "x"}, "Error: path must not be empty",
         ErrorCode.INVALID_ARGS, id="write-empty-path"),
    case("edit_file", {"path": "missing.txt", "old_string": "a", "new_string": "b"},
         "Error: 'missing.txt' does not exist", ErrorCode.FILE_NOT_FOUND, id="edit-missing"),
    case("edit_file", {"path": "dir", "old_string": "a", "new_string": "b"},
         "Error: 'dir' is a directory", ErrorCode.NOT_A_FILE, id="edit-directory"),
    case("edit_file", {"path": "bin.dat", "old_string": "PNG", "new_string": "GIF"},
         "Error: 'bin.dat' looks like a binary file (it contains NUL bytes); edit_file edits "
         "text", ErrorCode.BINARY_FILE, id="edit-binary"),
    case("edit_file", {"path": "a.txt", "old_string": "gamma", "new_string": "g"},
         "Error: old_string was not found in 'a.txt'; it must match the file exactly, including "
         "whitespace and indentation (read the file again to copy the current text)",
         ErrorCode.NO_MATCH, id="edit-zero-matches"),
    case("edit_file", {"path": "a.txt", "old_string": "alpha", "new_string": "a"},
         "Error: old_string occurs 2 times in 'a.txt'; include more surrounding text so it "
         "matches exactly once, or set replace_all to replace every occurrence",
         ErrorCode.AMBIGUOUS_MATCH, id="edit-two-matches"),
    case("edit_file", {"path": "a.txt", "old_string": "beta", "new_string": "beta"},
         "Error: old_string and new_string are identical; the edit would change nothing",
         ErrorCode.INVALID_ARGS, id="edit-identical"),
    case("edit_file", {"path": "a.txt", "old_string": "", "new_string": "x"},
         "Error: old_string must not be empty; use write_file to create or overwrite a file",
         ErrorCode.INVALID_ARGS, id="edit-empty-old"),
]  # fmt: skip


@pytest.mark.parametrize(("tool", "args", "text", "code"), BAD)
async def test_bad_input_is_a_clear_error_and_changes_nothing(
    files: Box, tool: str, args: JsonObject, text: str, code: ErrorCode
) -> None:
    before = files.snapshot()
    outcome = await files.call(tool, args)
    assert (outcome.is_error, outcome.code, outcome.content) == (True, code, text)
    assert files.snapshot() == before


async def test_malformed_json_arguments_are_refused(files: Box) -> None:
    before = files.snapshot()
    outcome = await files.call("write_file", '{"path": "x.txt", "content": ')
    assert outcome.is_error
    assert outcome.code == ErrorCode.INVALID_ARGS
    assert outcome.content.startswith("Error: invalid arguments: not valid JSON")
    assert files.snapshot() == before


async def test_a_fifo_is_refused_without_hanging(box: Box) -> None:
    import os

    os.mkfifo(box.ws / "pipe")
    outcome = await box.call("read_file", {"path": "pipe"})
    assert (outcome.code, outcome.content) == (
        ErrorCode.NOT_A_FILE,
        "Error: 'pipe' is not a regular file",
    )
    outcome = await box.call("write_file", {"path": "pipe", "content": "x"})
    assert outcome.code == ErrorCode.NOT_A_FILE


def test_read_tools_are_parallel_safe_and_writers_are_not(box: Box) -> None:
    flags = {spec.name: spec.parallel_safe for spec in box.scope.visible()}
    assert flags == {
        "bash": False,
        "edit_file": False,
        "glob": True,
        "grep": True,
        "read_file": True,
        "write_file": False,
    }


def test_descriptions_state_the_limits(box: Box) -> None:
    specs = {spec.name: spec for spec in box.scope.visible()}
    assert "2000" in specs["read_file"].description
    assert "occur once" in specs["edit_file"].description
    assert "1000" in specs["glob"].description
    assert "500 matches" in specs["grep"].description
    assert specs["bash"].parameters["properties"]["timeout_ms"]["maximum"] == 600000
    assert specs["read_file"].parameters["properties"]["limit"]["minimum"] == 1
    # What every file tool shares is said once, before every agent's instructions.
    assert "[sandbox: file access denied under <mode> mode]" in RUNTIME_GUIDANCE
    assert "Relative paths start at your working directory" in RUNTIME_GUIDANCE
