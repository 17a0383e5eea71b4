"""The bubblewrap profile of a confined run: the mounts of its file system view, in order.

The view starts empty (bubblewrap's own root, made read-only last) and gains a fresh /dev made
read-only but for a size-capped /dev/shm, a fresh /proc, a size-capped private /tmp holding the
run's private directory ($HOME and $TMPDIR), then, shallow to deep: the system directories
read-only (symlinks kept, as on merged-/usr systems), the Python roots, the caller's `readable`
paths, the cwd and the workspace (read-write under `workspace-write`). Nothing of the host's
/tmp is bound but those paths, so no file a run writes lands in host memory uncapped.

Hidden paths ($HOME, $SUBAGENTS_HOME, the store, /etc entries strangers cannot read) are
masked only where they would otherwise be visible: a directory by an empty read-only tmpfs, a
file by /dev/null. A masked path inside a writable directory is pinned: every directory between
the writable root and the mask is bound onto itself, so inside the run it is a mount point,
which cannot be renamed or removed (EBUSY). Without that, `mv db db-moved` would carry the
store out from under its mask for the next run. A file of a hidden directory that does not
exist yet inside a writable directory (`state.db-journal` beside a store in the workspace
root, the directory being hidden too) is masked as well: bubblewrap creates an empty
placeholder on the host to mount /dev/null on, which SQLite ignores (an empty journal is never
hot), so the run cannot create the real one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ._exposure import etc_view, system_dirs
from ._modes import within

__all__ = ["BwrapView", "bwrap_base", "view_argv"]

_Kind = Literal["ro", "rw", "hide-dir", "hide-file"]
_RANK: dict[_Kind, int] = {"hide-dir": 0, "hide-file": 0, "ro": 1, "rw": 2}
_MASK_BYTES = 4096  # a mask is an empty read-only tmpfs; this caps it anyway


def bwrap_base(bwrap: str, *, as_root: bool, seccomp_fd: int | None) -> list[str]:
    """The fixed part of bubblewrap's argv: namespaces, session, capabilities, seccomp."""
    argv = [
        bwrap,
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
    ]
    if as_root:
        argv += ["--cap-drop", "ALL"]  # root in the sandbox must not be able to remount
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return argv


@dataclass(frozen=True, slots=True, kw_only=True)
class BwrapView:
    """What one run sees; `view_argv` turns it into bubblewrap's mount arguments."""

    exposed: Sequence[str]
    writable: Sequence[str]
    hidden: Sequence[str]
    must_hide: Sequence[str]
    private_dir: str
    writable_tmp: bool
    tmpfs_bytes: int

    def mounts(self) -> list[tuple[str, _Kind]]:
        """The bind and mask mounts, shallow to deep."""
        entries: list[tuple[str, _Kind]] = []
        readable = [d.path for d in system_dirs() if d.link is None]
        readable += [p for p in self.exposed if p not in self.writable]
        entries.extend((p, "ro") for p in readable)
        entries.extend((p, "rw") for p in self.writable)
        masks = [(p, os.path.isdir(p)) for p in self.hidden if os.path.lexists(p)]
        masks += list(etc_view().hidden)
        shown = [*self.exposed, *self.writable]
        covered = [p for p, d in masks if d and not any(within(e, p) for e in shown)]
        # a mask inside a masked directory is moot, and its pins would re-expose that directory
        # (a hidden directory holding the workspace or another shown path is not a mask)
        masks = [(p, d) for p, d in masks if not any(within(p, c) and p != c for c in covered)]
        for path, is_dir in masks:
            entries.extend((pin, "rw") for pin in self._pins(path))
            entries.append((path, "hide-dir" if is_dir else "hide-file"))
        entries.sort(key=lambda e: (e[0].rstrip("/").count("/"), _RANK[e[1]]))
        chosen: list[tuple[str, _Kind]] = []
        for path, kind in entries:
            deciding = [k for p, k in chosen if within(path, p)]
            visible = bool(deciding) and deciding[-1] in ("ro", "rw")
            if kind == "rw" or (kind == "ro") != visible:
                chosen.append((path, kind))
        for path in self.must_hide:
            parent = os.path.dirname(path)
            # a missing file of a hidden directory (a store's -journal): a placeholder is made
            if (
                parent in self.must_hide
                and not os.path.lexists(path)
                and self._writable_at(parent, chosen)
            ):
                chosen.append((path, "hide-file"))
        return chosen

    def _pins(self, hidden: str) -> list[str]:
        """The directories between a writable root and `hidden`, strictly, to bind in place."""
        roots = [w for w in self.writable if within(hidden, w) and hidden != w]
        if not roots:
            return []
        root = max(roots, key=len)
        pins: list[str] = []
        parent = os.path.dirname(hidden)
        while parent != root and within(parent, root):
            pins.append(parent)
            parent = os.path.dirname(parent)
        return pins

    @staticmethod
    def _writable_at(directory: str, chosen: list[tuple[str, _Kind]]) -> bool:
        deciding = [k for p, k in chosen if within(directory, p)]
        return bool(deciding) and deciding[-1] == "rw" and os.path.isdir(directory)


def view_argv(view: BwrapView, *, cwd: str) -> list[str]:
    """The mount arguments of bubblewrap for `view`, up to `--chdir cwd`.

    /dev, /proc and /tmp come first, so a workspace below /tmp is bound on top of the tmpfs.
    """
    size = str(view.tmpfs_bytes)
    argv: list[str] = ["--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm"]
    argv += ["--remount-ro", "/dev", "--proc", "/proc"]
    argv += ["--size", size, "--tmpfs", "/tmp", "--dir", view.private_dir]
    for d in system_dirs():
        if d.link is not None:
            argv += ["--symlink", d.link, d.path]
    mounts = view.mounts()
    for path, kind in mounts:
        if kind == "hide-dir":
            argv += ["--size", str(_MASK_BYTES), "--tmpfs", path]
        elif kind == "hide-file":
            argv += ["--ro-bind", "/dev/null", path]
        else:
            argv += ["--bind" if kind == "rw" else "--ro-bind", path, path]
    read_only = [path for path, kind in mounts if kind == "hide-dir"]
    if not view.writable_tmp:
        read_only += ["/tmp", "/dev/shm"]
    for path in read_only:
        argv += ["--remount-ro", path]
    return [*argv, "--remount-ro", "/", "--chdir", cwd]
