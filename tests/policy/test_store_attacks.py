"""Attacks on a runtime store that lies inside the workspace of a confined run.

The store is hidden wherever it lies: `store_paths(db)` names its directory and its four files
(`state.db`, `-wal`, `-shm`, `-journal`), and a policy hiding them keeps a confined process
from reading, changing, creating, moving or removing any of them. Under bubblewrap the store
directory is covered; Landlock only grants, so a store inside the workspace cannot be hidden
and the run is refused (`SandboxUnavailable`, "cannot enforce"). A store directly in the
workspace root is refused under `workspace-write` on both backends: a run could create
`state.db-journal` beside it (a hot journal SQLite would roll back into the database).

Every test checks the host: the store's bytes and paths after the run, and for a refusal a
marker file and a pipe the command would have written to.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Literal

import pytest
from attack_scripts import STORE_MARK, make_store
from sandbox_support import World, py

from subagents.errors import ErrorCode, SandboxUnavailable
from subagents.policy import (
    CommandResult,
    SandboxMode,
    SandboxPolicy,
    run_command,
    spawn,
)

CONFINED: list[SandboxMode] = ["read-only", "workspace-write"]

# Run from the workspace, the store at db/state.db. Every attack runs whatever the previous
# ones did; the host judges them all by the store's bytes and paths afterwards.
ATTACK = r"""
echo "ls: $(ls -A db 2>&1 | tr '\n' ' ')"
for f in db/state.db db/state.db-wal db/state.db-shm; do
    echo "cat $f:"; head -c 4096 "$f" 2>&1; echo
done
echo junk >> db/state.db 2>&1; echo "append: $?"
: > db/state.db-wal 2>&1; echo "truncate: $?"
touch db/state.db-journal 2>&1; echo "touch: $?"
ln db/state.db hard-link 2>&1; echo "link: $?"
mv db/state.db-shm db/moved-shm 2>&1; echo "rename: $?"
mv db db-moved 2>&1; echo "mv: $?"
rm -rf db 2>&1; echo "rm: $?"
"""


async def hidden_store(db: Path) -> tuple[str, ...]:
    """`store_paths(db)`: the store's directory and its four files (it touches the disk)."""
    from subagents.policy import store_paths  # imported here: the other tests need not wait

    return await asyncio.to_thread(store_paths, str(db))


async def hiding(world: World, mode: SandboxMode, db: Path) -> SandboxPolicy:
    """`mode` over the workspace, hiding the store at `db` as the runtime does."""
    return SandboxPolicy(
        mode=mode, workspace_root=str(world.workspace), hidden=await hidden_store(db)
    )


def assert_store_intact(db: Path, contents: dict[Path, bytes], world: World) -> None:
    """The store's files are where they were, byte for byte, and nothing was added beside."""
    missing = sorted(str(p) for p in contents if not p.is_file())
    where = sorted(str(p) for p in world.workspace.rglob("state.db*")) if missing else []
    assert missing == [], f"store files gone from their paths: {missing}; now at {where}"
    changed = sorted(str(p) for p, data in contents.items() if p.read_bytes() != data)
    assert changed == [], f"store files changed: {changed}"
    assert sorted(os.listdir(db.parent)) == sorted(p.name for p in contents)
    assert not Path(f"{db}-journal").exists(), "a state.db-journal was planted beside the store"


def assert_no_store_bytes(result: CommandResult) -> None:
    seen = result.stdout + result.stderr
    assert STORE_MARK not in seen, f"the confined run read the store: {seen[:2000]}"
    assert "SQLite format 3" not in seen, seen[:2000]


# -- bubblewrap hides the store ----------------------------------------------------------------


@pytest.mark.parametrize("mode", CONFINED)
async def test_bwrap_hides_a_store_inside_the_workspace(
    bwrap: str, world: World, mode: SandboxMode
) -> None:
    db = world.workspace / "db" / "state.db"
    contents = make_store(db)
    result = await run_command(
        ["/bin/bash", "-c", ATTACK], policy=await hiding(world, mode, db), cwd=str(world.workspace)
    )
    assert result.stdout.startswith("ls: "), result
    listed = result.stdout.splitlines()[0]
    assert "state.db" not in listed, f"`ls db` shows the store: {listed}"
    assert_no_store_bytes(result)
    assert_store_intact(db, contents, world)
    for planted in ("db-moved", "hard-link"):
        assert not (world.workspace / planted).exists(), f"{planted} exists: {result.stdout}"


@pytest.mark.parametrize(
    ("attack", "made"),
    [
        ("mv a z", "z"),
        ("mv a/b a/c", "a/c"),
        ("rm -rf a", None),
        ("rm -rf a/b", None),
    ],
)
async def test_bwrap_a_store_deep_in_the_workspace_cannot_be_moved_or_removed(
    bwrap: str, world: World, attack: str, made: str | None
) -> None:
    """Moving or removing a directory above the store (mode-specific: only workspace-write
    can write in the workspace; the test above covers read-only)."""
    db = world.workspace / "a" / "b" / "db" / "state.db"
    contents = make_store(db)
    (world.workspace / "a" / "notes.txt").write_text("not the store")
    result = await run_command(
        ["/bin/bash", "-c", f"{attack}; echo status $?"],
        policy=await hiding(world, "workspace-write", db),
        cwd=str(world.workspace),
    )
    assert "status" in result.stdout, result
    assert_store_intact(db, contents, world)
    if made is not None:
        assert not (world.workspace / made).exists(), f"`{attack}` moved the store: {result}"


async def test_unconfined_moving_a_parent_moves_the_store(world: World) -> None:
    """The control of the test above: without confinement `mv a z` does take the store."""
    db = world.workspace / "a" / "b" / "db" / "state.db"
    contents = make_store(db)
    result = await run_command(
        ["/bin/bash", "-c", "mv a z"],
        policy=await hiding(world, "danger-full-access", db),
        cwd=str(world.workspace),
    )
    assert result.exit_code == 0, result
    assert not db.exists()
    assert (world.workspace / "z" / "b" / "db" / "state.db").read_bytes() == contents[db]


async def test_bwrap_a_store_in_the_workspace_root_under_read_only_is_hidden_or_refused(
    bwrap: str, world: World
) -> None:
    """Nothing can be created under read-only, so hiding the files is enough (their names
    may show: the workspace root cannot be covered); refusing is too."""
    db = world.workspace / "state.db"
    contents = make_store(db)
    script = ATTACK.replace("db/state.db", "state.db").replace("ls -A db", "ls -A .")
    refused: SandboxUnavailable | None = None
    try:
        result = await run_command(
            ["/bin/bash", "-c", script],
            policy=await hiding(world, "read-only", db),
            cwd=str(world.workspace),
        )
    except SandboxUnavailable as exc:
        refused = exc
    else:
        assert result.stdout.startswith("ls: "), result
        assert_no_store_bytes(result)
    assert refused is None or "cannot enforce" in refused.message
    assert_store_intact(db, contents, world)


# -- refusals ---------------------------------------------------------------------------------


async def attempt(
    world: World, mode: SandboxMode, db: Path, via: Literal["policy", "argument"]
) -> tuple[SandboxUnavailable | None, bytes, Path]:
    """Try a run that writes "ran" to a pipe and creates a marker file in the workspace.

    Returns the refusal (None: it ran), what reached the pipe, and the marker's path.
    """
    marker = world.workspace / "the-command-ran"
    read_end, write_end = os.pipe()
    try:
        policy = await hiding(world, mode, db) if via == "policy" else world.policy(mode)
        hidden = await hidden_store(db) if via == "argument" else ()
        argv = py(
            "import os, sys\nos.write(int(sys.argv[1]), b'ran')\nopen(sys.argv[2], 'w').close()",
            str(write_end),
            str(marker),
        )
        refused: SandboxUnavailable | None = None
        try:
            proc = await spawn(
                argv,
                policy=policy,
                cwd=str(world.workspace),
                pass_fds=[write_end],
                hidden=hidden,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except SandboxUnavailable as exc:
            refused = exc
        else:
            await proc.wait()
        os.close(write_end)
        write_end = -1
        os.set_blocking(read_end, False)
        ran = os.read(read_end, 64)  # every writer is gone: b"" unless the command wrote
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    return refused, ran, marker


def assert_refused(refused: SandboxUnavailable | None, ran: bytes, marker: Path) -> None:
    assert refused is not None, (
        f"the run was not refused: the command ran (pipe got {ran!r}, "
        f"marker created: {marker.exists()})"
    )
    assert refused.code == ErrorCode.SANDBOX_UNAVAILABLE
    assert "cannot enforce" in refused.message, refused.message
    assert ran == b"", "the command ran although spawn refused"
    assert not marker.exists()


@pytest.mark.parametrize("mode", CONFINED)
@pytest.mark.parametrize("via", ["policy", "argument"])
async def test_landlock_refuses_a_store_inside_the_workspace(
    landlock: str, world: World, mode: SandboxMode, via: Literal["policy", "argument"]
) -> None:
    """Landlock grants the workspace and cannot take a path inside it back."""
    db = world.workspace / "db" / "state.db"
    contents = make_store(db)
    assert_refused(*await attempt(world, mode, db, via))
    assert_store_intact(db, contents, world)


@pytest.mark.parametrize("mode", CONFINED)
async def test_landlock_runs_with_a_store_outside_the_workspace(
    landlock: str, world: World, mode: SandboxMode
) -> None:
    """The control of the refusal: a store Landlock need not grant is simply not reachable."""
    db = world.outside / "store" / "state.db"
    contents = make_store(db)
    refused, ran, marker = await attempt(world, mode, db, "policy")
    assert (refused, ran) == (None, b"ran")
    assert marker.exists() == (mode == "workspace-write")
    result = await run_command(
        ["/bin/bash", "-c", f"cat {db} {db}-wal; ls -A {db.parent}"],
        policy=await hiding(world, mode, db),
        cwd=str(world.workspace),
    )
    assert_no_store_bytes(result)
    assert "state.db" not in result.stdout
    assert_store_intact(db, contents, world)


async def test_landlock_refuses_a_store_in_the_workspace_root(landlock: str, world: World) -> None:
    """Landlock grants the whole workspace, so it cannot hide `workspace/state.db`."""
    db = world.workspace / "state.db"
    contents = make_store(db)
    assert_refused(*await attempt(world, "workspace-write", db, "policy"))
    assert_store_intact(db, contents, world)


async def test_bwrap_masks_a_store_in_the_workspace_root_and_its_missing_journal(
    bwrap: str, world: World
) -> None:
    """Beside `workspace/state.db` a run could create `state.db-journal`; bubblewrap mounts
    /dev/null on that name too (leaving an empty placeholder on the host, which SQLite
    ignores), so the run can neither read the store nor plant a journal."""
    db = world.workspace / "state.db"
    contents = make_store(db)
    journal = Path(f"{db}-journal")
    script = ATTACK.replace("db/state.db", "state.db").replace("ls -A db", "ls -A .")
    script += 'printf forged > state.db-journal; echo "forge: $?"\nmv state.db x.db\n'
    result = await run_command(
        ["/bin/bash", "-c", script],
        policy=await hiding(world, "workspace-write", db),
        cwd=str(world.workspace),
    )
    assert_no_store_bytes(result)
    assert "forge: 1" in result.stdout, result.stdout
    assert take_placeholder(journal) == b"", "the run wrote a journal beside the store"
    assert_store_intact(db, contents, world)  # no x.db either: the listing is exact


def take_placeholder(path: Path) -> bytes | None:
    """The bytes of `path` (None: it does not exist), which is then removed."""
    if not path.exists():
        return None
    data = path.read_bytes()
    path.unlink()
    return data
