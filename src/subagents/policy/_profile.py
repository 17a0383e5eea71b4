"""The launch plan of one run: the command line, environment, cgroup and private directory.

bubblewrap profile: the host's root read-only, a fresh /dev and /proc, new pid, net, ipc and
uts namespaces, `--die-with-parent`, `--new-session` (and `--cap-drop ALL` as root). Hidden
paths ($HOME, $SUBAGENTS_HOME and the caller's `hidden`) are covered by an empty read-only
tmpfs (a file by /dev/null); under `workspace-write` /tmp is a private tmpfs. What must stay
visible (the Python installation, the venv, this package, the workspace, the cwd, `readable`,
the run's private directory) is bound again where a hidden path or /tmp covers it, the
workspace read-write under `workspace-write`. Mounts apply shallow to deep, so a deeper path
always decides: the interpreter is never left under a tmpfs.

Landlock profile: read and execute beneath the system directories, /proc, /dev, the Python
installation, the venv, this package, the workspace, the cwd, `readable` and the private
directory; everything beneath the workspace and the private directory under
`workspace-write`; read-write on /dev/null. $HOME and the store are simply not granted.

Every run gets an emptied environment (PATH, LANG=C.UTF-8, TMPDIR and HOME set to its private
directory, plus the caller's `env`; bubblewrap adds PWD, the cwd) and a private directory
removed after the run.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._cgroup import PidsCgroup, create_cgroup
from ._confine import (
    SYSTEM_DIRS,
    UID_BASE,
    Confinement,
    bwrap_base,
    bwrap_usable,
    launcher_argv,
    python_roots,
)
from ._limits import Limits, ProcessBound, SandboxFacts
from ._modes import SandboxPolicy, canonical_root

__all__ = ["RunPlan", "default_hidden", "plan_run"]

BASE_PATH = "/usr/bin:/bin"
_Kind = Literal["hide-dir", "hide-file", "tmp", "ro", "rw"]
_RANK: dict[_Kind, int] = {"hide-dir": 0, "hide-file": 0, "tmp": 0, "ro": 1, "rw": 2}


@dataclass(slots=True, kw_only=True)
class RunPlan:
    """Everything `spawn` needs to start one run, and what to clean up after it."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    facts: SandboxFacts
    private_dir: str
    cgroup: PidsCgroup | None
    dedicated_uid: bool

    def discard(self) -> None:
        """Remove the run's cgroup (when empty) and private directory."""
        if self.cgroup is not None:
            self.cgroup.remove()
        shutil.rmtree(self.private_dir, ignore_errors=True)


def _within(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def default_hidden() -> list[str]:
    """$HOME and $SUBAGENTS_HOME (default ~/.subagents), as the host process sees them."""
    home = os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir
    store = os.environ.get("SUBAGENTS_HOME") or os.path.join(home, ".subagents")
    return [home, store]


def _existing(paths: Sequence[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        real = canonical_root(path)
        if real != "/" and os.path.lexists(real) and real not in found:
            found.append(real)
    return found


def _mounts(
    *, private_tmp: bool, hidden: Sequence[str], exposed: Sequence[str], writable: Sequence[str]
) -> list[tuple[str, _Kind]]:
    """The bubblewrap mounts over the read-only root, in the order to apply them."""
    entries: list[tuple[str, _Kind]] = [
        (path, "hide-dir" if os.path.isdir(path) else "hide-file") for path in hidden
    ]
    if private_tmp:
        entries.append(("/tmp", "tmp"))
    entries.extend((path, "ro") for path in exposed if path not in writable)
    entries.extend((path, "rw") for path in writable)
    entries.sort(key=lambda e: (e[0].rstrip("/").count("/"), _RANK[e[1]]))
    chosen: list[tuple[str, _Kind]] = []
    for path, kind in entries:
        deciding = [k for p, k in chosen if _within(path, p)]
        visible = not deciding or deciding[-1] in ("ro", "rw")
        if kind in ("rw", "tmp") or (kind == "ro") != visible:
            chosen.append((path, kind))
    return chosen


def _bwrap_argv(
    bwrap: str, mounts: list[tuple[str, _Kind]], *, as_root: bool, cwd: str, target: Sequence[str]
) -> list[str]:
    argv = bwrap_base(bwrap, as_root=as_root)
    for path, kind in mounts:
        if kind in ("hide-dir", "tmp"):
            argv += ["--tmpfs", path]
        elif kind == "hide-file":
            argv += ["--ro-bind", "/dev/null", path]
        else:
            argv += ["--bind" if kind == "rw" else "--ro-bind", path, path]
    for path, kind in mounts:
        if kind == "hide-dir":
            argv += ["--remount-ro", path]
    return [*argv, "--chdir", cwd, "--", *target]


def _world_reachable(path: str) -> bool:
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
    needed = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return mode & needed == needed


def _executable(argv0: str, cwd: str) -> str | None:
    if "/" in argv0:
        return os.path.realpath(os.path.join(cwd, argv0))
    found = shutil.which(argv0, path=BASE_PATH)
    return os.path.realpath(found) if found else None


def _use_dedicated_uid(
    *, policy: SandboxPolicy, cgroup: PidsCgroup | None, backend: str | None, paths: list[str]
) -> bool:
    """Whether to bound processes by RLIMIT_NPROC under a per-run uid.

    Only as root without a cgroup, only under read-only (a foreign uid could not write the
    workspace, and would take away the access danger-full-access promises), and only when the
    run can still reach everything it needs.
    """
    if os.geteuid() != 0 or cgroup is not None or policy.mode != "read-only":
        return False
    if backend == "bwrap" and bwrap_usable(dedicated_uid=True)[0] is None:
        return False
    return all(_world_reachable(path) for path in paths)


def plan_run(
    argv: Sequence[str],
    *,
    policy: SandboxPolicy,
    cwd: str,
    limits: Limits,
    env: Mapping[str, str] | None,
    hidden: Sequence[str],
    readable: Sequence[str],
    confinement: Confinement,
) -> RunPlan:
    """Prepare one run (creates its private directory and cgroup). Blocking: use a thread."""
    mode = policy.mode
    backend = confinement.backend if mode != "danger-full-access" else None
    writable = mode == "workspace-write"
    workspace = canonical_root(policy.workspace_root)
    where = canonical_root(cwd)
    private = tempfile.mkdtemp(prefix="subagents-run-")
    cgroup = create_cgroup(limits.processes)
    hidden_paths = _existing([*default_hidden(), *hidden])
    readable_paths = _existing(readable)
    exposed = [*python_roots(), *readable_paths, where, workspace, private]
    enforcement = confinement.enforcement if backend is not None else None
    config: dict[str, Any] = {
        "ppid": os.getpid(),
        "rlimits": limits.rlimits(),
        "cgroup_procs": cgroup.procs_file if cgroup is not None else None,
        "uid_base": None,
        "nproc": limits.processes,
        "drop_caps": False,
        "landlock": None,
    }
    # what a dedicated uid must reach (the private directory is opened up for it below)
    reach = [p for p in (_executable(argv[0], where), where, workspace, *readable_paths) if p]
    mounts: list[tuple[str, _Kind]] = []
    if backend == "bwrap":
        mounts = _mounts(
            private_tmp=writable,
            hidden=hidden_paths,
            exposed=exposed,
            writable=[workspace, private] if writable else [],
        )
        reach += [path for path, _kind in mounts if path != private]
        reach.append(bwrap_usable()[0] or "bwrap")
    elif backend == "landlock":
        granted = [*SYSTEM_DIRS, "/proc", "/dev", *exposed]
        config["drop_caps"] = os.geteuid() == 0
        config["landlock"] = {
            "read": granted,
            "write": [workspace, private] if writable else [],
            "write_files": ["/dev/null"],
        }
        if any(_within(h, g) for h in hidden_paths for g in granted):
            enforcement = "partial"  # Landlock only grants: a hidden path inside a grant shows
    dedicated = _use_dedicated_uid(policy=policy, cgroup=cgroup, backend=backend, paths=reach)
    if dedicated:
        os.chmod(private, 0o755)  # stays empty: read-only runs cannot write it
        config["uid_base"] = UID_BASE
    target = list(argv)
    if backend == "bwrap":
        bwrap = bwrap_usable()[0] or "bwrap"
        as_root = os.geteuid() == 0 and not dedicated
        target = _bwrap_argv(bwrap, mounts, as_root=as_root, cwd=where, target=target)
    processes: ProcessBound = "cgroup" if cgroup else "uid" if dedicated else "none"
    return RunPlan(
        argv=[*launcher_argv(config), *target],
        env={
            "PATH": BASE_PATH,
            "LANG": "C.UTF-8",
            "TMPDIR": private,
            "HOME": private,
            **(env or {}),
        },
        cwd=where,
        facts=SandboxFacts(
            mode=mode, backend=backend, enforcement=enforcement, processes=processes
        ),
        private_dir=private,
        cgroup=cgroup,
        dedicated_uid=dedicated,
    )
