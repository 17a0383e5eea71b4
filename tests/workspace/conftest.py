from __future__ import annotations

from pathlib import Path

import pytest
from workspace_support import Box


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Box:
    root = tmp_path.resolve()
    made = Box(root)
    monkeypatch.setenv("HOME", str(made.home))
    monkeypatch.setenv("SUBAGENTS_HOME", str(made.store))
    monkeypatch.delenv("SUBAGENTS_STORE", raising=False)
    return made
