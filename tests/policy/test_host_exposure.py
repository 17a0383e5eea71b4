"""What a confined run can see of the host, when the runtime runs as root.

The confined modes expose only the system directories (`/usr`, `/lib*`, `/bin`, `/sbin`,
`/etc`), the Python installation and venv, the package, the workspace, the run's private
directory and the caller's readable paths. Root reads root's files whatever their mode, and a
run keeps uid 0, so within `/etc` whatever a stranger could not read must be kept from the run
as well (`/etc/shadow`, `/etc/gshadow`, ...), while `/etc/passwd` stays readable. Under
bubblewrap `/root`, `/var`, `/home`, `/srv`, `/run`, `/mnt` and the host's `/tmp` are not
there at all; under Landlock they cannot be read. The confined process reports sha256 digests
of what it read (`PROBE`); the test compares them with the host's own.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterator

import pytest
from attack_scripts import PROBE, host_view
from sandbox_support import World, py

from subagents.policy import SandboxMode, confinement, run_command
from subagents.policy._confine import BACKEND_ENV, python_roots

CONFINED: list[SandboxMode] = ["read-only", "workspace-write"]
HOST_DIRS = ["/root", "/var", "/home", "/srv", "/run", "/mnt", "/tmp"]
SHADOW_SPELLINGS = [
    "/proc/self/root/etc/shadow",
    "/proc/1/root/etc/shadow",
    "/etc/../etc/shadow",
    "//etc//shadow",
]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="needs root: as another user the host's own file modes already keep /etc/shadow, "
    "/root and the like from the run, so the sandbox would not be what these tests test",
)


def force(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(BACKEND_ENV, name)
    verdict = confinement()
    if verdict.backend is None:
        pytest.skip(f"{name} is unusable on this machine: {verdict.detail}")


def _strangers_read(path: str) -> bool:
    """Could a user with no relation to the owner reach and read `path`?"""
    parts = path.split("/")
    for depth in range(2, len(parts)):
        if not os.stat("/".join(parts[:depth])).st_mode & stat.S_IXOTH:
            return False
    mode = os.lstat(path).st_mode
    needed = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return mode & needed == needed


def etc_secrets() -> list[str]:
    """Every directory and regular file under /etc a stranger could not read."""
    found: list[str] = []
    for directory, dirnames, filenames in os.walk("/etc"):
        for name in [*dirnames, *filenames]:
            path = os.path.join(directory, name)
            try:
                mode = os.lstat(path).st_mode
                if (stat.S_ISDIR(mode) or stat.S_ISREG(mode)) and not _strangers_read(path):
                    found.append(path)
            except OSError:
                continue
    for path in ("/etc/shadow", "/etc/gshadow"):
        if os.path.exists(path) and path not in found:
            found.append(path)
    return found


async def probe(world: World, mode: SandboxMode, paths: list[str]) -> dict[str, str]:
    result = await run_command(
        py(PROBE, json.dumps(paths)), policy=world.policy(mode), cwd=str(world.workspace)
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    found: dict[str, str] = json.loads(result.stdout)
    return found


def _substantial(path: str) -> bool:
    """Whether reading `path` would give something (an empty file or directory tells nothing)."""
    return bool(os.listdir(path)) if os.path.isdir(path) else os.path.getsize(path) > 0


@pytest.mark.parametrize("mode", CONFINED)
async def test_what_strangers_cannot_read_in_etc_stays_unread(
    backend: str, world: World, mode: SandboxMode
) -> None:
    secrets = await asyncio.to_thread(etc_secrets)
    assert "/etc/shadow" in secrets or not await asyncio.to_thread(os.path.exists, "/etc/shadow")
    paths = [*secrets, *SHADOW_SPELLINGS, "/etc/passwd"]
    seen = await probe(world, mode, paths)
    host = {p: host_view(p) for p in secrets if _substantial(p)}
    leaked = sorted(p for p, view in host.items() if seen[p] == view)
    assert leaked == [], f"the confined run read, as the host does: {leaked}"
    if "/etc/shadow" in host:
        through = [p for p in SHADOW_SPELLINGS if seen[p] == host["/etc/shadow"]]
        assert through == [], f"/etc/shadow was read as {through}"
    assert seen["/etc/passwd"] == host_view("/etc/passwd")  # the control: it is readable


def _exposed() -> list[str]:
    """What a run is given besides the system directories (their ancestors must show)."""
    return [*python_roots(), os.path.realpath(sys.prefix)]


def _holds_exposed(path: str, exposed: list[str], world: World) -> bool:
    ours = [*exposed, str(world.workspace.parent)]
    return any(p == path or p.startswith(path.rstrip("/") + "/") for p in ours)


def host_entries(world: World) -> list[str]:
    """The entries of HOST_DIRS that no run needs: none may be visible (bubblewrap)."""
    exposed = _exposed()
    found: list[str] = []
    for directory in HOST_DIRS:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if name.startswith("subagents-run-"):  # a run's private directory (this one's too)
                continue
            if not _holds_exposed(path, exposed, world):
                found.append(path)
    return found


def _views(paths: list[str]) -> dict[str, str]:
    """`host_view` of each path still there (other tests come and go in /tmp meanwhile)."""
    found: dict[str, str] = {}
    for path in paths:
        try:
            found[path] = host_view(path)
        except OSError:
            continue
    return found


def _directories(paths: list[str]) -> list[str]:
    return [p for p in paths if os.path.isdir(p) and not os.path.islink(p)]


@pytest.fixture
def host_tmp_file() -> Iterator[str]:
    """A file in the host's real /tmp, holding a secret."""
    fd, path = tempfile.mkstemp(dir="/tmp", prefix="subagents-attack-")
    try:
        os.write(fd, b"host-tmp-secret\n")
        os.close(fd)
        yield path
    finally:
        os.unlink(path)


@pytest.mark.parametrize("mode", CONFINED)
async def test_bwrap_shows_nothing_of_the_hosts_other_directories(
    world: World, mode: SandboxMode, host_tmp_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    force(monkeypatch, "bwrap")
    entries = await asyncio.to_thread(host_entries, world)
    assert host_tmp_file in entries
    seen = await probe(world, mode, entries)
    visible = sorted(p for p in entries if not seen[p].startswith("missing "))
    assert visible == [], f"the confined run sees these host paths: {visible}"
    assert seen[host_tmp_file].startswith("missing "), seen[host_tmp_file]


@pytest.mark.parametrize("mode", CONFINED)
async def test_landlock_reads_nothing_of_the_hosts_other_directories(
    world: World, mode: SandboxMode, host_tmp_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    force(monkeypatch, "landlock")
    entries = await asyncio.to_thread(host_entries, world)
    directories = await asyncio.to_thread(_directories, [*HOST_DIRS, *entries])
    seen = await probe(world, mode, [*directories, host_tmp_file])
    host = await asyncio.to_thread(_views, directories)
    listed = sorted(d for d, view in host.items() if seen[d] == view)
    assert listed == [], f"the confined run listed {listed}"
    assert seen[host_tmp_file].startswith("denied "), seen[host_tmp_file]
