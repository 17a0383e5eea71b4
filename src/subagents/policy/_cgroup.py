"""A per-run cgroup with the pids controller: bounds, counts and kills every process of a run.

The run's cgroup is created below this process's own cgroup in the pids hierarchy (cgroup v2
when its pids controller can be enabled there, else cgroup v1's `pids` hierarchy), with
`pids.max` set to the run's process limit. The launcher writes its own pid to `cgroup.procs`
before it execs, so every descendant (bubblewrap's and `setsid()` ones included) is counted
and can be found. Everything here touches the filesystem: call it from a worker thread.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import secrets
import signal
from dataclasses import dataclass

__all__ = ["CGROUP_ENV", "PidsCgroup", "create_cgroup"]

CGROUP_ENV = "SUBAGENTS_SANDBOX_CGROUP"  # "off": never use a cgroup (tests of the fallback)
_PREFIX = "subagents-"
_STALE = re.compile(rf"^{_PREFIX}(\d+)-[0-9a-f]+$")


@dataclass(frozen=True, slots=True)
class PidsCgroup:
    """One run's cgroup directory."""

    path: str

    @property
    def procs_file(self) -> str:
        return os.path.join(self.path, "cgroup.procs")

    def members(self) -> list[int]:
        """The live processes in the cgroup (zombies are not listed)."""
        try:
            with open(self.procs_file, encoding="ascii") as f:
                return [int(line) for line in f.read().split()]
        except FileNotFoundError:
            return []

    def peak(self) -> int | None:
        """The most processes the cgroup held at once (`pids.peak`), when the kernel says."""
        try:
            with open(os.path.join(self.path, "pids.peak"), encoding="ascii") as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def remove(self) -> bool:
        """Remove the (empty) cgroup; False when it is still busy or already gone."""
        try:
            os.rmdir(self.path)
        except OSError:
            return False
        return True


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root, mount point, fs type, super options) of every cgroup mount."""
    found: list[tuple[str, str, str, set[str]]] = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                found.append((fields[3], fields[4], rest[0], set(rest[2].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """Controller (or "" for cgroup v2) -> this process's cgroup path."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            _id, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _join(mount_root: str, mount_point: str, own: str) -> str | None:
    if mount_root != "/" and not (own == mount_root or own.startswith(mount_root + "/")):
        return None
    rel = os.path.relpath(own, mount_root).lstrip(".")
    return os.path.normpath(mount_point + "/" + rel)


def _candidates() -> list[str]:
    """Directories in which a child cgroup with `pids.max` may be created, best first."""
    own = _own_paths()
    v2: list[str] = []
    v1: list[str] = []
    for root, point, fstype, options in _mounts():
        if fstype == "cgroup2" and "" in own:
            where = _join(root, point, own[""])
            if where is not None:
                v2.append(where)
        elif fstype == "cgroup" and "pids" in options and "pids" in own:
            where = _join(root, point, own["pids"])
            if where is not None:
                v1.append(where)
    usable: list[str] = []
    for where in v2:
        try:
            with open(os.path.join(where, "cgroup.controllers"), encoding="ascii") as f:
                if "pids" not in f.read().split():
                    continue
            with open(os.path.join(where, "cgroup.subtree_control"), encoding="ascii") as f:
                enabled = "pids" in f.read().split()
            if not enabled:
                with open(
                    os.path.join(where, "cgroup.subtree_control"), "w", encoding="ascii"
                ) as f:
                    f.write("+pids")
        except OSError:
            continue
        usable.append(where)
    return usable + v1


def _sweep_stale(parent: str) -> None:
    """Kill what runs of a crashed host left behind, and remove their cgroups.

    A run cgroup is named after the host's pid; when that pid is gone, nobody will end it.
    """
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            match = _STALE.match(name)
            if match is None:
                continue
            try:
                os.kill(int(match.group(1)), 0)
            except ProcessLookupError:
                stale = PidsCgroup(os.path.join(parent, name))
                for pid in stale.members():
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                stale.remove()  # fails while a killed member is still exiting: next time
            except PermissionError:
                pass


def _make(parent: str, limit: int) -> PidsCgroup:
    path = os.path.join(parent, f"{_PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
    os.mkdir(path)
    cgroup = PidsCgroup(path)
    try:
        with open(os.path.join(path, "pids.max"), "w", encoding="ascii") as f:
            f.write(str(limit))
    except OSError:
        cgroup.remove()
        raise
    return cgroup


@functools.cache
def _parent() -> str | None:
    """The first candidate where a run cgroup can really be made (probed once per process)."""
    try:
        candidates = _candidates()
    except OSError:
        return None
    for parent in candidates:
        try:
            _make(parent, 1).remove()
        except OSError:
            continue
        _sweep_stale(parent)
        return parent
    return None


def create_cgroup(limit: int) -> PidsCgroup | None:
    """A new run cgroup holding at most `limit` processes, or None where none can be made."""
    if os.environ.get(CGROUP_ENV, "").lower() == "off":
        return None
    parent = _parent()
    if parent is None:
        return None
    try:
        return _make(parent, limit)
    except OSError:
        return None
