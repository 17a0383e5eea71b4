"""Helpers of the sandbox tests (tests/policy and the tools that run confined)."""

from __future__ import annotations

import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from subagents.policy import SandboxMode, SandboxPolicy, canonical_root
from subagents.policy._cgroup import create_cgroup


@dataclass(frozen=True)
class World:
    """A workspace, a directory outside it, and a fake $HOME and $SUBAGENTS_HOME with secrets."""

    workspace: Path
    outside: Path
    home: Path
    secret: Path
    store: Path

    def policy(self, mode: SandboxMode) -> SandboxPolicy:
        return SandboxPolicy(mode=mode, workspace_root=str(self.workspace))


def make_world(base: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    base = Path(canonical_root(str(base)))
    world = World(
        workspace=base / "workspace",
        outside=base / "outside",
        home=base / "home",
        secret=base / "home" / "secret.txt",
        store=base / "subagents-home" / "state.db",
    )
    for path in (world.workspace, world.outside, world.home, world.store.parent):
        path.mkdir()
    world.secret.write_text("home-secret\n")
    world.store.write_text("store-secret\n")
    monkeypatch.setenv("HOME", str(world.home))
    monkeypatch.setenv("SUBAGENTS_HOME", str(world.store.parent))
    return world


def py(code: str, *args: str, python: str = sys.executable) -> list[str]:
    """A Python command line running `code` (dedented) with `args`."""
    return [python, "-I", "-S", "-c", textwrap.dedent(code), *args]


def live_with_token(token: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `token` as an argument."""
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if token.encode() in argv:
            found.append(int(name))
    return found


def skip_where_processes_are_unbounded(backend: str, mode: str, *, reaping: bool = False) -> None:
    """Skip the documented gap of a machine without a writable pids cgroup.

    There the process count is bounded only by a dedicated uid with RLIMIT_NPROC, which needs
    root, read-only and an interpreter any user can reach (tests/policy/
    test_sandbox_without_cgroup.py covers it); otherwise nothing bounds it, and under Landlock
    nothing catches a `setsid()` descendant (under bubblewrap the PID namespace still does:
    `reaping=True` tests run there). Where a cgroup is writable the test runs and must pass.
    """
    del mode  # every confined mode depends on the cgroup here
    if reaping and backend == "bwrap":
        return
    if not CGROUP_WRITABLE:
        pytest.skip(
            f"no writable pids cgroup here: under {backend} outside read-only the process "
            "count (and, under landlock, setsid reaping) is not enforced (documented gap)"
        )


def _cgroup_writable() -> bool:
    group = create_cgroup(4)
    if group is None:
        return False
    group.remove()
    return True


CGROUP_WRITABLE = _cgroup_writable()
"""Whether this machine lets a run have its own pids cgroup (probed once, at import)."""
