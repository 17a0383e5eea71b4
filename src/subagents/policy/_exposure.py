"""What a confined run sees of the host: the system directories, less what strangers cannot read.

A confined run is given the system directories (`SYSTEM_DIRS`), the Python installation, the
venv, this package, its workspace, its private directory and the caller's `readable` paths,
never the whole host: `/root`, `/home`, `/var`, `/srv`, `/opt`, `/run`, `/mnt` and the host's
`/tmp` are simply absent (bubblewrap) or not granted (Landlock).

Within `/etc`, every entry that a user with no relation to its owner could not read is left
out as well (`/etc/shadow`, `/etc/gshadow`, `/etc/ssl/private`, ...): a runtime that runs as
root would otherwise hand those to the code its agents write, since root reads files owned by
root whatever their mode and the run keeps uid 0 (it must, to write the workspace root owns).
`/etc` is scanned once per process; the other system directories are package-managed code
and data, exposed as they are (scanning `/usr` would cost seconds).
"""

from __future__ import annotations

import functools
import os
import stat
from dataclasses import dataclass

__all__ = [
    "ETC",
    "SYSTEM_DIRS",
    "EtcView",
    "SystemDir",
    "etc_view",
    "system_dirs",
    "world_reachable",
]

SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc")
ETC = "/etc"


@dataclass(frozen=True, slots=True)
class SystemDir:
    """One system directory as the host has it: a directory, or a symlink (merged /usr)."""

    path: str
    link: str | None = None


@functools.cache
def system_dirs() -> tuple[SystemDir, ...]:
    """The system directories that exist here, symlinks kept as symlinks."""
    found: list[SystemDir] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            found.append(SystemDir(path, os.readlink(path)))
        elif os.path.isdir(path):
            found.append(SystemDir(path))
    return tuple(found)


def world_reachable(path: str) -> bool:
    """Can a user with no relation to the file's owner reach and read `path`?"""
    try:
        parts = path.rstrip("/").split("/")
        for depth in range(1, len(parts)):
            ancestor = "/".join(parts[:depth]) or "/"
            if not os.stat(ancestor).st_mode & stat.S_IXOTH:
                return False
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return _strangers_read(mode)


def _strangers_read(mode: int) -> bool:
    needed = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return mode & needed == needed


@dataclass(frozen=True, slots=True)
class EtcView:
    """`/etc` as a confined run gets it.

    `hidden` lists the entries strangers cannot read (path, is a directory), which bubblewrap
    masks. Landlock can only grant, so `listed` are directories it may list but not read
    through (they hold a hidden entry somewhere below), and `granted` the entries it may read
    beneath; symlinks are granted by their targets' own grants, never by their name.
    """

    hidden: tuple[tuple[str, bool], ...]
    listed: tuple[str, ...]
    granted: tuple[str, ...]


_Scan = tuple[bool, list[tuple[str, bool]], list[str], list[str]]


def _scan(directory: str) -> _Scan:
    """(every entry below is readable, hidden, listed, granted) for `directory`'s subtree."""
    hidden: list[tuple[str, bool]] = []
    listed: list[str] = []
    granted: list[str] = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return False, hidden, listed, granted
    clean = True
    for name in names:
        path = os.path.join(directory, name)
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if stat.S_ISLNK(mode):
            continue
        if not _strangers_read(mode):
            hidden.append((path, stat.S_ISDIR(mode)))
            clean = False
        elif stat.S_ISDIR(mode):
            below_clean, below_hidden, below_listed, below_granted = _scan(path)
            if below_clean:
                granted.append(path)  # one grant covers the whole readable subtree
            else:
                clean = False
                hidden += below_hidden
                listed += below_listed
                granted += below_granted
        else:
            granted.append(path)
    if not clean:
        listed.append(directory)
    return clean, hidden, listed, granted


@functools.cache
def etc_view() -> EtcView:
    """The scan of `/etc` (cached for the process: `/etc` rarely changes under a runtime)."""
    if not os.path.isdir(ETC) or os.path.islink(ETC):
        return EtcView((), (), ())
    clean, hidden, listed, granted = _scan(ETC)
    if clean:
        return EtcView((), (), (ETC,))
    return EtcView(tuple(hidden), tuple(listed), tuple(granted))
