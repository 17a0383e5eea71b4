from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_support import World, make_world

from subagents.policy._cgroup import CGROUP_ENV


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    return make_world(tmp_path, monkeypatch)


@pytest.fixture
def no_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs get no cgroup, as on a machine whose cgroups are not writable."""
    monkeypatch.setenv(CGROUP_ENV, "off")
