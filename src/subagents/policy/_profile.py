"""The launch plan of one run: the command line, environment, cgroup and private directory.

Both confined backends show a run the same slice of the host (`_exposure`): the system
directories (less the /etc entries strangers cannot read), the Python installation, the venv,
this package, the workspace (writable under `workspace-write`), the cwd, the caller's
`readable` paths and the run's private directory; never $HOME, $SUBAGENTS_HOME, the store or
the caller's `hidden` paths. Both install the seccomp filter (`_seccomp`): no socket reaches
anything outside the run.

bubblewrap builds that view from an empty root (`_bwrap`), with a size-capped private /tmp
and /dev/shm. Landlock grants read and execute beneath the readable paths, everything
beneath the workspace and the private directory under `workspace-write`, read-write on
/dev/null; it can only grant, so a hidden path inside a grant makes the plan refuse
(`SandboxUnavailable`).

Every run gets an emptied environment (PATH, LANG=C.UTF-8, TMPDIR and HOME set to its private
directory, plus the caller's `env`; bubblewrap adds PWD, the cwd) and a private directory
removed after the run.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import SandboxUnavailable
from ._bwrap import BwrapView, bwrap_base, view_argv
from ._cgroup import PidsCgroup, create_cgroup
from ._confine import UID_BASE, Confinement, bwrap_usable, launcher_argv, python_roots
from ._exposure import ETC, SYSTEM_DIRS, etc_view, world_reachable
from ._limits import Limits, ProcessBound, SandboxFacts
from ._modes import SandboxPolicy, canonical_root, within
from ._seccomp import filter_program, program_fd

__all__ = ["RunPlan", "default_hidden", "plan_run"]

BASE_PATH = "/usr/bin:/bin"


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
    pass_fds: tuple[int, ...] = ()
    """Descriptors the run inherits from the plan (bubblewrap's seccomp program)."""

    def started(self) -> None:
        """Close the plan's descriptors in the host once the run holds its copies."""
        for fd in self.pass_fds:
            os.close(fd)
        self.pass_fds = ()

    def discard(self) -> None:
        """Remove the run's cgroup (when empty) and private directory."""
        self.started()
        if self.cgroup is not None:
            self.cgroup.remove()
        shutil.rmtree(self.private_dir, ignore_errors=True)


def default_hidden() -> list[str]:
    """$HOME and $SUBAGENTS_HOME (default ~/.subagents), as the host process sees them."""
    home = os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir
    store = os.environ.get("SUBAGENTS_HOME") or os.path.join(home, ".subagents")
    return [home, store]


def _canonical(paths: Sequence[str], *, existing: bool) -> list[str]:
    found: list[str] = []
    for path in paths:
        real = canonical_root(path)
        if real != "/" and (os.path.lexists(real) or not existing) and real not in found:
            found.append(real)
    return found


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
    return all(world_reachable(path) for path in paths)


def _program() -> bytes:
    program = filter_program()
    if program is None:  # pragma: no cover - the Landlock probe requires a filter
        raise SandboxUnavailable("cannot enforce the file policy: no seccomp filter here")
    return program


def _landlock_grants(
    *, exposed: list[str], writable: list[str], hidden: list[str], mode: str
) -> dict[str, list[str]]:
    """The Landlock rules of a run; refuses a hidden path that a grant would expose."""
    etc = etc_view()
    read = [*(d for d in SYSTEM_DIRS if d != ETC), *etc.granted, "/proc", "/dev", *exposed]
    for path in hidden:
        for grant in (*read, *etc.listed, *writable):
            if within(path, grant) and not within(grant, path):
                raise SandboxUnavailable(
                    f"cannot enforce the {mode} file policy: {path} must stay hidden but lies "
                    f"inside {grant}, which the run needs, and Landlock cannot hide a path "
                    "inside what it grants; install bubblewrap, or keep the store outside the "
                    "workspace",
                    mode=mode,
                )
    return {"read": read, "list": list(etc.listed), "write": writable, "write_files": ["/dev/null"]}


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
    """Prepare one run (creates its private directory and cgroup). Blocking: use a thread.

    Raises `SandboxUnavailable` when Landlock cannot keep a hidden path hidden.
    """
    mode = policy.mode
    backend = confinement.backend if mode != "danger-full-access" else None
    writable = mode == "workspace-write"
    workspace = canonical_root(policy.workspace_root)
    where = canonical_root(cwd)
    must_hide = _canonical(hidden, existing=False)
    hidden_paths = [*_canonical(default_hidden(), existing=True), *must_hide]
    readable_paths = _canonical(readable, existing=True)
    private = tempfile.mkdtemp(prefix="subagents-run-")
    cgroup = create_cgroup(limits.processes)
    config: dict[str, Any] = {
        "ppid": os.getpid(),
        "rlimits": limits.rlimits(),
        "cgroup_procs": cgroup.procs_file if cgroup is not None else None,
        "uid_base": None,
        "nproc": limits.processes,
        "drop_caps": False,
        "landlock": None,
        "seccomp": None,
    }
    inside_private = private  # where the run finds it; bubblewrap puts it in its own /tmp
    target = list(argv)
    pass_fds: tuple[int, ...] = ()
    try:
        # what a dedicated uid must reach (the private directory is opened up for it below)
        reach = [p for p in (_executable(argv[0], where), where, workspace, *readable_paths) if p]
        if backend == "bwrap":
            reach.append(bwrap_usable()[0] or "bwrap")
        dedicated = _use_dedicated_uid(policy=policy, cgroup=cgroup, backend=backend, paths=reach)
        roots = [r for r in python_roots() if not dedicated or world_reachable(r)]
        exposed = [*roots, *readable_paths, where, workspace]
        if dedicated:
            os.chmod(private, 0o755)  # stays empty: read-only runs cannot write it
            config["uid_base"] = UID_BASE
        if backend == "bwrap":
            inside_private = os.path.join("/tmp", os.path.basename(private))
            view = BwrapView(
                exposed=exposed,
                writable=[workspace] if writable else [],
                hidden=hidden_paths,
                must_hide=must_hide,
                private_dir=inside_private,
                writable_tmp=writable,
                tmpfs_bytes=limits.tmpfs_mb * 1024 * 1024,
            )
            bwrap_args = view_argv(view, cwd=where)
            seccomp = program_fd()
            if seccomp is None:  # pragma: no cover - the bubblewrap probe requires a filter
                raise SandboxUnavailable(f"cannot enforce the {mode} file policy: no seccomp")
            pass_fds = (seccomp,)
            as_root = os.geteuid() == 0 and not dedicated
            base = bwrap_base(bwrap_usable()[0] or "bwrap", as_root=as_root, seccomp_fd=seccomp)
            target = [*base, *bwrap_args, "--", *target]
        elif backend == "landlock":
            config["drop_caps"] = os.geteuid() == 0
            config["seccomp"] = _program().hex()
            config["landlock"] = _landlock_grants(
                exposed=[*exposed, private],
                writable=[workspace, private] if writable else [],
                hidden=hidden_paths,
                mode=mode,
            )
    except BaseException:
        for fd in pass_fds:
            os.close(fd)
        if cgroup is not None:
            cgroup.remove()
        shutil.rmtree(private, ignore_errors=True)
        raise
    processes: ProcessBound = "cgroup" if cgroup else "uid" if dedicated else "none"
    enforcement = confinement.enforcement if backend is not None else None
    return RunPlan(
        argv=[*launcher_argv(config), *target],
        env={
            "PATH": BASE_PATH,
            "LANG": "C.UTF-8",
            "TMPDIR": inside_private,
            "HOME": inside_private,
            **(env or {}),
        },
        cwd=where,
        facts=SandboxFacts(
            mode=mode, backend=backend, enforcement=enforcement, processes=processes
        ),
        private_dir=private,
        cgroup=cgroup,
        dedicated_uid=dedicated,
        pass_fds=pass_fds,
    )
