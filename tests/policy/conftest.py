from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_support import World, make_world

from subagents.policy import confinement
from subagents.policy._cgroup import CGROUP_ENV
from subagents.policy._confine import BACKEND_ENV


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    return make_world(tmp_path, monkeypatch)


@pytest.fixture(params=["bwrap", "landlock"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each confinement backend in turn, forced; skipped only where its probe fails."""
    name: str = request.param
    monkeypatch.setenv(BACKEND_ENV, name)
    verdict = confinement()
    if verdict.backend is None:
        pytest.skip(f"{name} is unusable on this machine: {verdict.detail}")
    return name


@pytest.fixture
def no_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs get no cgroup, as on a machine whose cgroups are not writable."""
    monkeypatch.setenv(CGROUP_ENV, "off")
