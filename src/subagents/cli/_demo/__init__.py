"""The bundled scripted demo: its script (package data) and its tools.

Shipped inside the package, so that `subagents demo` works from any directory after any
install, editable or not.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from .tools import TOOLS as TOOLS

__all__ = ["TOOLS", "demo_dir"]


def demo_dir() -> Path:
    """The directory holding `demo.yaml`: the demo's script and its lead's working directory."""
    # A plain install unpacks the package, so its data is a real directory on disk.
    return Path(str(files(__name__)))
