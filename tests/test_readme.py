"""The README's Python examples run as written, each in a fresh directory and interpreter.

A block followed by a sentence "It prints `TEXT`." must print exactly that line. A block marked
`<!-- a workflow script ... -->` is a workflow script: the guest's own compiler must take it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from subagents.workflows._guest import compile_script

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(
    r"(<!-- a workflow script[^>]*-->\n)?```python\n(.*?)```\n(?:\nIt prints `([^`]*)`\.)?", re.S
)


def _blocks() -> list[tuple[bool, str, str | None]]:
    text = README.read_text(encoding="utf-8")
    return [(m.group(1) is not None, m.group(2), m.group(3)) for m in _BLOCK.finditer(text)]


def _examples() -> list[tuple[str, str | None]]:
    return [(code, prints) for script, code, prints in _blocks() if not script]


def _scripts() -> list[str]:
    return [code for script, code, _ in _blocks() if script]


def test_the_readme_has_python_examples() -> None:
    assert _examples(), "no ```python block found in README.md"


@pytest.mark.parametrize("index", range(len(_examples())))
def test_a_readme_example_runs(index: int, tmp_path: Path) -> None:
    code, prints = _examples()[index]
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    if prints is not None:
        assert done.stdout == prints + "\n"


@pytest.mark.parametrize("index", range(len(_scripts())))
def test_a_readme_workflow_script_compiles_as_the_guest_compiles_it(index: int) -> None:
    compile_script(_scripts()[index])  # raises ScriptParseError when it does not
