from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import Cli, cli_runner


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def cli(home: Path, tmp_path: Path) -> Cli:
    """Run `python -m subagents ...` in a real subprocess with an isolated SUBAGENTS_HOME."""
    return cli_runner(home, tmp_path)
