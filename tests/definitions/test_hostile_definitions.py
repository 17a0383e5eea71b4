"""Hostile definition files: each is one problem with its path, and the good files still load."""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

import pytest

from subagents.definitions import DefinitionProblem, load_definitions, parse_definition
from subagents.definitions._frontmatter import MAX_NESTING
from subagents.definitions._load import MAX_DEFINITION_BYTES

GOOD = "---\nname: good\ndescription: A fine agent.\n---\nDo the work.\n"


def _agents_dir(repo: Path) -> Path:
    directory = repo / ".subagents" / "agents"
    directory.mkdir(parents=True)
    (directory / "good.md").write_text(GOOD, encoding="utf-8")
    return directory


def _nested(depth: int) -> str:
    return f"---\nname: deep\ndescription: {'[' * depth}{']' * depth}\n---\nBody.\n"


def _only_problem_for(problems: list[DefinitionProblem], path: Path) -> DefinitionProblem:
    assert [p.path for p in problems] == [str(path)], problems
    assert problems[0].skipped
    return problems[0]


def _load(repo: Path, home: Path) -> tuple[list[str], list[DefinitionProblem]]:
    found, problems = load_definitions(repo, home, "default")
    return list(found), problems


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 1000, 100_000])
def test_deep_nesting_is_a_problem_and_the_good_file_loads(tmp_path: Path, depth: int) -> None:
    directory = _agents_dir(tmp_path / "repo")
    deep = directory / "deep.md"
    deep.write_text(_nested(depth), encoding="utf-8")
    names, problems = _load(tmp_path / "repo", tmp_path / "home")
    assert names == ["good"]
    problem = _only_problem_for(problems, deep)
    assert problem.line == 3
    assert f"more than {MAX_NESTING} levels deep" in problem.message


def test_nesting_at_the_limit_is_parsed_normally() -> None:
    # The frontmatter mapping is the first level, so the value may nest MAX_NESTING - 1.
    definition, problems = parse_definition(_nested(MAX_NESTING - 1), source="edge.md")
    assert definition is None
    assert len(problems) == 1
    assert problems[0].message.startswith("`description` must be non-empty text, got list")


def test_a_recursion_error_in_the_loader_is_still_a_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The event walk refuses deep nesting first; this checks the last-resort guard too.
    monkeypatch.setattr("subagents.definitions._frontmatter.MAX_NESTING", sys.maxsize)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 200)
    try:
        definition, problems = parse_definition(_nested(1000), source="deep.md")
    finally:
        sys.setrecursionlimit(limit)
    assert definition is None
    assert [p.message for p in problems] == ["the frontmatter is nested too deeply to read"]


def test_a_file_over_one_mib_is_refused_unparsed(tmp_path: Path) -> None:
    directory = _agents_dir(tmp_path / "repo")
    big = directory / "big.md"
    big.write_text(GOOD.replace("good", "big") + "x" * MAX_DEFINITION_BYTES, encoding="utf-8")
    names, problems = _load(tmp_path / "repo", tmp_path / "home")
    assert names == ["good"]
    assert "at most 1048576 bytes (1 MiB)" in _only_problem_for(problems, big).message


def test_a_file_of_exactly_one_mib_loads(tmp_path: Path) -> None:
    directory = _agents_dir(tmp_path / "repo")
    text = GOOD.replace("good", "edge")
    (directory / "edge.md").write_text(
        text + "x" * (MAX_DEFINITION_BYTES - len(text)), encoding="utf-8"
    )
    names, problems = _load(tmp_path / "repo", tmp_path / "home")
    assert names == ["edge", "good"]
    assert problems == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_not_a_regular_file_and_does_not_hang(tmp_path: Path) -> None:
    directory = _agents_dir(tmp_path / "repo")
    fifo = directory / "x.md"
    os.mkfifo(fifo)  # opening it for reading would block forever without O_NONBLOCK
    names, problems = _load(tmp_path / "repo", tmp_path / "home")
    assert names == ["good"]
    assert _only_problem_for(problems, fifo).message == "not a regular file"


def test_a_directory_named_md_is_reported(tmp_path: Path) -> None:
    directory = _agents_dir(tmp_path / "repo")
    (directory / "folder.md").mkdir()
    names, problems = _load(tmp_path / "repo", tmp_path / "home")
    assert names == ["good"]
    assert _only_problem_for(problems, directory / "folder.md").message == "not a regular file"


def test_a_dangling_symlink_is_reported(tmp_path: Path) -> None:
    directory = _agents_dir(tmp_path / "repo")
    link = directory / "gone.md"
    link.symlink_to(tmp_path / "missing.md")
    names, problems = _load(tmp_path / "repo", tmp_path / "home")
    assert names == ["good"]
    assert _only_problem_for(problems, link).message.startswith("cannot read")
