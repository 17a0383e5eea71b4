"""Where no cgroup is writable: a read-only run as root becomes a dedicated uid with RLIMIT_NPROC.

The run must be able to reach everything it needs as that uid, so these tests use a
world-readable workspace and the system Python.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_scripts import ESCAPEE, FORK_BOMB, WRITE
from sandbox_support import World, live_with_token, make_world, py

from subagents.policy import Limits, run_command, spawn

SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture
def open_world(monkeypatch: pytest.MonkeyPatch, no_cgroup: None) -> Iterator[World]:
    if os.geteuid() != 0:
        pytest.skip("only root can run a confined command as a dedicated uid")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"{SYSTEM_PYTHON} is not installed")
    base = Path(tempfile.mkdtemp(prefix="subagents-open-"))
    base.chmod(0o755)
    try:
        world = make_world(base, monkeypatch)
        for path in (world.workspace, world.outside, world.home, world.store.parent):
            path.chmod(0o755)
        yield world
    finally:
        shutil.rmtree(base)


async def test_a_read_only_run_gets_a_dedicated_uid_that_bounds_forks(
    backend: str, open_world: World
) -> None:
    limit = 8
    async with await spawn(
        py(FORK_BOMB, python=SYSTEM_PYTHON),
        policy=open_world.policy("read-only"),
        cwd=str(open_world.workspace),
        limits=Limits(processes=limit),
    ) as proc:
        await proc.wait()
        assert proc.facts.processes == "uid"
        assert proc.process.stdout is not None
        forked, code = map(int, (await proc.process.stdout.read()).split())
        assert code == errno.EAGAIN
        assert 0 < forked < limit


async def test_the_dedicated_uid_run_is_still_confined_and_fully_killed(
    backend: str, open_world: World
) -> None:
    target = open_world.workspace / "new.txt"
    result = await run_command(
        py(WRITE, str(target), python=SYSTEM_PYTHON),
        policy=open_world.policy("read-only"),
        cwd=str(open_world.workspace),
    )
    assert "denied" in result.stdout
    assert not target.exists()
    token = f"escapee-{uuid.uuid4().hex}"
    async with await spawn(
        py(ESCAPEE, token, python=SYSTEM_PYTHON),
        policy=open_world.policy("read-only"),
        cwd=str(open_world.workspace),
    ) as proc:
        assert proc.facts.processes == "uid"
        assert proc.process.stdout is not None
        assert await proc.process.stdout.readline() == b"ready\n"
        assert len(live_with_token(token)) >= 2
        await proc.kill()
        assert live_with_token(token) == []


async def test_a_run_that_cannot_reach_its_files_as_another_uid_keeps_its_uid(
    backend: str, open_world: World
) -> None:
    open_world.workspace.chmod(0o700)
    result = await run_command(
        py("print('ran')", python=SYSTEM_PYTHON),
        policy=open_world.policy("read-only"),
        cwd=str(open_world.workspace),
    )
    assert result.stdout == "ran\n"
    assert result.facts is not None
    assert result.facts.processes == "none"
    assert stat.S_IMODE(open_world.workspace.stat().st_mode) == 0o700
