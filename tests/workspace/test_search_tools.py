"""glob and grep through the tool pipeline, on real trees (issue 6 item 4)."""

from __future__ import annotations

import pytest
from workspace_support import Box

from subagents.errors import ErrorCode
from subagents.messages import JsonObject


@pytest.fixture
def tree(box: Box) -> Box:
    for rel, text in {
        "app.py": "import os\nprint('hello')\n",
        "README.md": "# Title\nhello world\n",
        "src/pkg/__init__.py": "",
        "src/pkg/core.py": "def hello():\n    return 'hello'\n",
        "src/pkg/data.json": '{"hello": 1}\n',
        "docs/guide.md": "nothing here\n",
        ".hidden/secret.py": "hello = 'dot'\n",
        ".env": "hello=1\n",
        ".git/config": "hello in git\n",
    }.items():
        path = box.ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (box.ws / "img.png").write_bytes(b"hello\0\0binary")
    return box


# -- glob ------------------------------------------------------------------------------------


async def test_glob_lists_sorted_matches_relative_to_the_cwd(tree: Box) -> None:
    assert await tree.ok("glob", {"pattern": "**/*.py"}) == (
        "app.py\nsrc/pkg/__init__.py\nsrc/pkg/core.py"
    )
    assert await tree.ok("glob", {"pattern": "*"}) == ("README.md\napp.py\ndocs/\nimg.png\nsrc/")
    assert await tree.ok("glob", {"pattern": "src/*/*.js*"}) == "src/pkg/data.json"
    assert await tree.ok("glob", {"pattern": "**"}) == (
        "README.md\napp.py\ndocs/\ndocs/guide.md\nimg.png\nsrc/\nsrc/pkg/\n"
        "src/pkg/__init__.py\nsrc/pkg/core.py\nsrc/pkg/data.json"
    )


async def test_glob_dot_names_only_when_the_pattern_names_them_and_never_git(tree: Box) -> None:
    assert await tree.ok("glob", {"pattern": ".*"}) == ".env\n.hidden/"
    assert await tree.ok("glob", {"pattern": ".hidden/*.py"}) == ".hidden/secret.py"
    assert await tree.ok("glob", {"pattern": ".git/*"}) == ("no paths match '.git/*' under .")


async def test_glob_under_a_path_and_from_a_sub_cwd(tree: Box) -> None:
    assert await tree.ok("glob", {"pattern": "*.py", "path": "src/pkg"}) == (
        "src/pkg/__init__.py\nsrc/pkg/core.py"
    )
    tree.cwd = tree.ws / "src"
    assert await tree.ok("glob", {"pattern": "**/core.py"}) == "pkg/core.py"
    # Outside the cwd, paths are absolute.
    assert await tree.ok("glob", {"pattern": "*.md", "path": ".."}) == str(tree.ws / "README.md")


async def test_glob_caps_its_output(box: Box) -> None:
    many = box.ws / "many"
    many.mkdir()
    for i in range(1005):
        (many / f"f{i:04}.txt").touch()
    out = (await box.ok("glob", {"pattern": "many/*.txt"})).splitlines()
    assert len(out) == 1001
    assert out[0] == "many/f0000.txt"
    assert out[999] == "many/f0999.txt"
    assert out[1000] == "… 5 more matches not shown; narrow the pattern"


async def test_glob_reports_no_match(tree: Box) -> None:
    assert await tree.ok("glob", {"pattern": "*.rs"}) == "no paths match '*.rs' under ."


# -- grep ------------------------------------------------------------------------------------


async def test_grep_prints_file_line_text_in_walk_order(tree: Box) -> None:
    # Dot files are searched (only `.git` is skipped); binary files are not.
    assert await tree.ok("grep", {"pattern": r"hel+o"}) == (
        ".env:1: hello=1\n"
        "README.md:2: hello world\n"
        "app.py:2: print('hello')\n"
        ".hidden/secret.py:1: hello = 'dot'\n"
        "src/pkg/core.py:1: def hello():\n"
        "src/pkg/core.py:2:     return 'hello'\n"
        'src/pkg/data.json:1: {"hello": 1}'
    )


async def test_grep_glob_filter_and_single_file(tree: Box) -> None:
    assert await tree.ok("grep", {"pattern": "return", "glob": "*.py"}) == (
        "src/pkg/core.py:2:     return 'hello'"
    )
    assert await tree.ok("grep", {"pattern": "hello", "glob": "src/**/*.json"}) == (
        'src/pkg/data.json:1: {"hello": 1}'
    )
    assert await tree.ok("grep", {"pattern": "^import", "path": "app.py"}) == (
        "app.py:1: import os"
    )
    assert await tree.ok("grep", {"pattern": "hello", "path": ".hidden"}) == (
        ".hidden/secret.py:1: hello = 'dot'"
    )


async def test_grep_caps_matches_and_line_length(box: Box) -> None:
    (box.ws / "log.txt").write_text("".join(f"hit {i}\n" for i in range(600)))
    out = (await box.ok("grep", {"pattern": "hit"})).splitlines()
    assert len(out) == 501
    assert out[499] == "log.txt:500: hit 499"
    assert out[500] == "… stopped at 500 matches; narrow the pattern or the path"
    (box.ws / "log.txt").write_text("z" * 1000 + "\n")
    assert await box.ok("grep", {"pattern": "z"}) == f"log.txt:1: {'z' * 300} …"


async def test_grep_reports_no_match(tree: Box) -> None:
    assert await tree.ok("grep", {"pattern": "absent"}) == "no lines match 'absent' under ."


# -- bad input -------------------------------------------------------------------------------


def case(
    tool: str, args: JsonObject, text: str, code: ErrorCode, *, id: str
) -> pytest.ParameterSet:
    return pytest.param(tool, args, text, code, id=id)


BAD = [
    case("glob", {}, "Error: invalid arguments: 'pattern' is a required property",
         ErrorCode.INVALID_ARGS, id="glob-no-pattern"),
    case("glob", {"pattern": ["*"]}, "Error: invalid arguments: pattern: ['*'] is not of type "
         "'string'", ErrorCode.INVALID_ARGS, id="glob-pattern-list"),
    case("glob", {"pattern": ""}, "Error: invalid pattern '': it is empty",
         ErrorCode.INVALID_PATTERN, id="glob-empty"),
    case("glob", {"pattern": "/etc/*"}, "Error: invalid pattern '/etc/*': it is absolute; give "
         "the directory as `path` and a relative pattern", ErrorCode.INVALID_PATTERN,
         id="glob-absolute"),
    case("glob", {"pattern": "../*"}, "Error: invalid pattern '../*': '..' is not allowed; give "
         "the directory as `path` instead", ErrorCode.INVALID_PATTERN, id="glob-dotdot"),
    case("glob", {"pattern": "src/**.py"}, "Error: invalid pattern 'src/**.py': '**' must be a "
         "whole path segment, as in 'src/**/*.py'", ErrorCode.INVALID_PATTERN,
         id="glob-double-star"),
    case("glob", {"pattern": "src//*.py"}, "Error: invalid pattern 'src//*.py': it has an empty "
         "path segment ('//')", ErrorCode.INVALID_PATTERN, id="glob-empty-segment"),
    case("glob", {"pattern": "*", "path": "nope"}, "Error: 'nope' does not exist",
         ErrorCode.FILE_NOT_FOUND, id="glob-missing-path"),
    case("glob", {"pattern": "*", "path": "app.py"}, "Error: 'app.py' is not a directory; glob "
         "searches under a directory", ErrorCode.NOT_A_DIRECTORY, id="glob-path-is-file"),
    case("grep", {}, "Error: invalid arguments: 'pattern' is a required property",
         ErrorCode.INVALID_ARGS, id="grep-no-pattern"),
    case("grep", {"pattern": "x", "glob": 3}, "Error: invalid arguments: glob: 3 is not valid "
         "under any of the given schemas", ErrorCode.INVALID_ARGS, id="grep-glob-int"),
    case("grep", {"pattern": "(unclosed"}, "Error: invalid regular expression '(unclosed': "
         "missing ): (unclosed (grep uses RE2 syntax)",
         ErrorCode.INVALID_PATTERN, id="grep-bad-regex"),
    case("grep", {"pattern": "*x"}, "Error: invalid regular expression '*x': no argument for "
         "repetition operator: * (grep uses RE2 syntax)", ErrorCode.INVALID_PATTERN,
         id="grep-bad-repeat"),
    case("grep", {"pattern": "x", "glob": "/abs/*.py"}, "Error: invalid glob '/abs/*.py': it is "
         "absolute; give the directory as `path` and a relative pattern",
         ErrorCode.INVALID_PATTERN, id="grep-bad-glob"),
    case("grep", {"pattern": "x", "path": "nope"}, "Error: 'nope' does not exist",
         ErrorCode.FILE_NOT_FOUND, id="grep-missing-path"),
]  # fmt: skip


@pytest.mark.parametrize(("tool", "args", "text", "code"), BAD)
async def test_bad_input_is_a_clear_error_and_changes_nothing(
    tree: Box, tool: str, args: JsonObject, text: str, code: ErrorCode
) -> None:
    before = tree.snapshot()
    outcome = await tree.call(tool, args)
    assert (outcome.is_error, outcome.code, outcome.content) == (True, code, text)
    assert tree.snapshot() == before
