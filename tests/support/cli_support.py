"""Helpers for command-line tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

Cli = Callable[..., subprocess.CompletedProcess[str]]


def write_script(path: Path, text: str) -> str:
    """Write a scripted-model YAML file and return its model spec."""
    path.write_text(text, encoding="utf-8")
    return f"scripted:{path}"


def cli_runner(home: Path, cwd: Path) -> Cli:
    """`python -m subagents ...` in a real subprocess with SUBAGENTS_HOME=`home`, in `cwd`.

    The environment is the test's without any `SUBAGENTS_*`, `OPENAI_*`, `DEEPSEEK_*`,
    `ANTHROPIC_*` or `CLAUDE_*` variable, and Claude Code's user folder is `home/claude`, so a
    developer's own settings never reach a test.
    """

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SUBAGENTS_", "OPENAI_", "DEEPSEEK_", "ANTHROPIC_", "CLAUDE_"))
        }
        base["SUBAGENTS_HOME"] = str(home)
        base["CLAUDE_CONFIG_DIR"] = str(home / "claude")
        base.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "subagents", *args],
            capture_output=True,
            text=True,
            env=base,
            cwd=cwd,
            timeout=60,
            check=False,
        )

    return run
