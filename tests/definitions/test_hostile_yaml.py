"""Alias bombs and unstorable values in definition frontmatter: a problem file, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents._yaml import MAX_ALIAS_NODES
from subagents.definitions import load_definitions, parse_definition

LAUGHS = 'l0: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"l{i + 1}: &{chr(98 + i)} [{','.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)
"""Nine levels of nine aliases: a billion strings once expanded (keys unknown on purpose:
the bomb must be refused even though no known key would ever hold it)."""


def _definition(frontmatter: str) -> str:
    return f"---\nname: bomb\ndescription: Explodes.\n{frontmatter}---\nBody.\n"


@pytest.mark.parametrize(
    ("frontmatter", "needle"),
    [
        pytest.param(LAUGHS, f"more than {MAX_ALIAS_NODES} nodes", id="laughs-unknown-keys"),
        pytest.param(
            LAUGHS.replace("l8:", "output_schema:"), f"more than {MAX_ALIAS_NODES}", id="schema"
        ),
        pytest.param("tools: &t [read, *t]\n", "contains it", id="recursive"),
        pytest.param('model: "\\ud800"\n', "lone surrogate", id="surrogate"),
        pytest.param("max_depth: " + "9" * 5000 + "\n", "4300 digits", id="huge-int"),
    ],
)
def test_a_hostile_frontmatter_is_one_problem(frontmatter: str, needle: str) -> None:
    definition, problems = parse_definition(_definition(frontmatter), source="bomb.md")
    assert definition is None
    assert len(problems) == 1, problems
    assert problems[0].skipped
    assert problems[0].message.startswith("the frontmatter is refused: "), problems[0]
    assert needle in problems[0].message
    assert "\n" not in str(problems[0])


def test_the_bomb_is_skipped_and_the_good_file_loads(tmp_path: Path) -> None:
    agents = tmp_path / "repo" / ".subagents" / "agents"
    agents.mkdir(parents=True)
    (agents / "good.md").write_text(
        "---\nname: good\ndescription: Fine.\n---\nWork.\n", encoding="utf-8"
    )
    (agents / "bomb.md").write_text(_definition(LAUGHS), encoding="utf-8")
    found, problems = load_definitions(tmp_path / "repo", tmp_path / "home", "default")
    assert list(found) == ["good"]
    assert [p.path for p in problems] == [str(agents / "bomb.md")]
    assert problems[0].line == 8  # `l4`, the first level past 10,000 nodes (9**5 lols)


def test_a_small_alias_is_still_allowed() -> None:
    text = "---\nname: ok\ndescription: &d Reuses its text.\ntools: [read]\n---\nBody: *d\n"
    definition, problems = parse_definition(text, source="ok.md")
    assert problems == []
    assert definition is not None
    assert definition.description == "Reuses its text."


def test_a_control_character_is_one_problem() -> None:
    # Found by tests/cli/test_fuzz_cli.py: PyYAML's reader refuses it while the loader is built.
    definition, problems = parse_definition("---\n\x1b\n---\nBody.\n", source="esc.md")
    assert definition is None
    assert len(problems) == 1
    assert problems[0].message.startswith("invalid YAML: unacceptable character #x001b")
    assert "\n" not in problems[0].message
