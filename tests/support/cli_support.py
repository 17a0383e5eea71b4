"""Helpers for command-line tests."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

Cli = Callable[..., subprocess.CompletedProcess[str]]


def write_script(path: Path, text: str) -> str:
    """Write a scripted-model YAML file and return its model spec."""
    path.write_text(text, encoding="utf-8")
    return f"scripted:{path}"
