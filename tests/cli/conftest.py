from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import Cli


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def cli(home: Path, tmp_path: Path) -> Cli:
    """Run `python -m subagents ...` in a real subprocess with an isolated SUBAGENTS_HOME."""

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SUBAGENTS_", "OPENAI_", "DEEPSEEK_"))
        }
        base["SUBAGENTS_HOME"] = str(home)
        base.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "subagents", *args],
            capture_output=True,
            text=True,
            env=base,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )

    return run
