"""Filling the memory of the host through the sandbox's own tmpfs mounts (bubblewrap only).

tmpfs pages are host memory that RLIMIT_AS does not count, and RLIMIT_FSIZE bounds one file,
not how many: every writable tmpfs bubblewrap mounts (`/tmp`, the private `$TMPDIR`, `/dev/shm`)
is capped by `Limits.tmpfs_mb`, and nothing else outside the workspace is writable (`/`, `/dev`).
Under `read-only` none of them is writable at all. Sizes are measured from inside (the mounts
vanish with the run); files the run could leave on the host are checked there.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid

import pytest
from attack_scripts import CREATE, FILL
from sandbox_support import World, py

from subagents.policy import Limits, SandboxMode, run_command

MIB = 1024 * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")
CAP_MB = 8
CONFINED: list[SandboxMode] = ["read-only", "workspace-write"]
TEMP_PLACES = ["/tmp", "$TMPDIR", "/dev/shm"]


def test_tmpfs_mb_defaults_to_256() -> None:
    assert Limits().tmpfs_mb == 256


async def fill(
    world: World, mode: SandboxMode, total: int, places: list[str]
) -> dict[str, list[int | str]]:
    name = f"subagents-fill-{uuid.uuid4().hex}"
    result = await run_command(
        py(FILL, str(total), name, *places),
        policy=world.policy(mode),
        cwd=str(world.workspace),
        limits=Limits(tmpfs_mb=CAP_MB),
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert not await asyncio.to_thread(os.path.lexists, os.path.join("/tmp", name))
    found: dict[str, list[int | str]] = json.loads(result.stdout)
    return found


async def test_each_tmpfs_is_capped_under_workspace_write(bwrap: str, world: World) -> None:
    total = 32 * MIB
    done = await fill(world, "workspace-write", total, [*TEMP_PLACES, str(world.workspace)])
    for place in TEMP_PLACES:
        written, status = done[place]
        assert isinstance(written, int)
        assert status == "ENOSPC", f"{place}: wrote {written} bytes of {total} ({status}): {done}"
        assert 4 * MIB <= written <= CAP_MB * MIB + PAGE, f"{place} took {written} bytes: {done}"
    # the control: the same script writes it all where no tmpfs caps it (the workspace)
    assert done[str(world.workspace)] == [total, "done"], done


@pytest.mark.parametrize("mode", CONFINED)
async def test_no_new_file_in_the_root_or_dev(bwrap: str, world: World, mode: SandboxMode) -> None:
    name = f"subagents-attack-{uuid.uuid4().hex}"
    targets = [f"/{name}", f"/dev/{name}"]
    result = await run_command(
        py(CREATE, *targets),
        policy=world.policy(mode),
        cwd=str(world.workspace),
        limits=Limits(tmpfs_mb=CAP_MB),
    )
    done: dict[str, str] = json.loads(result.stdout)
    assert not await asyncio.to_thread(os.path.lexists, f"/{name}")
    created = [path for path in targets if done[path] == "created"]
    assert created == [], f"the run created {created}: {done}"


async def test_read_only_has_no_writable_temp_dir(bwrap: str, world: World) -> None:
    done = await fill(world, "read-only", 4096, TEMP_PLACES)
    written = {place: done[place] for place in TEMP_PLACES if done[place][0] != 0}
    assert written == {}, f"read-only wrote into {written}: {done}"
    for place in TEMP_PLACES:
        status = done[place][1]
        assert isinstance(status, str)
        assert status.startswith("open "), f"{place} could be created under read-only: {done}"
