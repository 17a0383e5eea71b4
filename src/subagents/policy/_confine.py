"""Which confinement backend this machine can use, decided by running it (spec 7.3).

bubblewrap is preferred: it is probed by running `bwrap <the run profile> -- true` through the
launcher, exactly as a run would (seccomp filter, size-capped tmpfs and read-only remounts
included, so a bubblewrap too old for any of them is not chosen). Landlock is the fallback: it
is probed by launching a process under a ruleset and the seccomp filter and checking that a
directory outside the grants cannot be listed; it needs ABI 3 (truncation governed, Linux
6.2), since below that a run could truncate any file it can read. Either way the seccomp
filter needs an architecture it is written for (`_seccomp`). Verdicts are
cached per process; `SUBAGENTS_SANDBOX_BACKEND=bwrap|landlock|none` forces a choice (tests use it
to exercise each backend; a forced backend that does not work yields no backend, never another).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ._bwrap import BwrapView, bwrap_base, view_argv
from ._exposure import SYSTEM_DIRS, world_reachable
from ._launcher import landlock_abi
from ._seccomp import filter_program, program_fd

__all__ = [
    "BACKEND_ENV",
    "Confinement",
    "LAUNCHER",
    "LANDLOCK_MIN_ABI",
    "SYSTEM_DIRS",
    "UID_BASE",
    "bwrap_usable",
    "confinement",
    "launcher_argv",
    "python_roots",
]

BACKEND_ENV = "SUBAGENTS_SANDBOX_BACKEND"
LAUNCHER = str(Path(__file__).with_name("_launcher.py"))
LANDLOCK_MIN_ABI = 3
UID_BASE = 1_500_000_000  # a run's dedicated uid is UID_BASE + the launcher's pid
_PROBE_TIMEOUT = 20.0
_HINT = (
    "install bubblewrap (Debian: apt-get install bubblewrap), run on a kernel with Landlock, "
    "or use danger-full-access"
)


@dataclass(frozen=True, slots=True)
class Confinement:
    """The backend runs are confined with (None: none works) and why it was chosen."""

    backend: Literal["bwrap", "landlock"] | None
    enforcement: Literal["full", "partial"] | None
    detail: str


def launcher_argv(config: dict[str, Any]) -> list[str]:
    """The host's part of a run's command line; the target's argv follows."""
    return [sys.executable, "-I", "-S", "-B", LAUNCHER, json.dumps(config), "--"]


@functools.cache
def python_roots() -> tuple[str, ...]:
    """What a confined Python needs to read: the installation, the venv, this package."""
    package = Path(__file__).resolve().parent.parent
    found: list[str] = []
    for path in (
        sys.base_prefix,
        sys.base_exec_prefix,
        sys.prefix,
        sys.exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        str(package),
    ):
        real = os.path.realpath(path)
        if real not in found:
            found.append(real)
    return tuple(found)


def _run_probe(argv: list[str], *, pass_fds: tuple[int, ...] = ()) -> tuple[int, str]:
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=env,
            timeout=_PROBE_TIMEOUT,
            check=False,
            pass_fds=pass_fds,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return -1, str(error)
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return done.returncode, lines[-1] if lines else f"exit status {done.returncode}"


@functools.cache
def bwrap_usable(*, dedicated_uid: bool = False) -> tuple[str | None, str]:
    """(bwrap's path, detail) when a run under bubblewrap works, else (None, why not).

    `dedicated_uid` probes it as a run's dedicated uid (then bubblewrap needs unprivileged
    user namespaces).
    """
    bwrap = shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")
    if bwrap is None:
        return None, "bubblewrap (bwrap) is not installed"
    seccomp = program_fd()
    if seccomp is None:
        return None, "no seccomp filter is written for this architecture"
    as_root = os.geteuid() == 0 and not dedicated_uid
    config: dict[str, Any] = {"ppid": os.getpid(), "uid_base": None}
    if dedicated_uid:
        config.update(uid_base=UID_BASE, nproc=8)
    roots = [r for r in python_roots() if not dedicated_uid or world_reachable(r)]
    view = BwrapView(
        exposed=roots,
        writable=(),
        hidden=(),
        must_hide=(),
        private_dir="/tmp/subagents-probe",
        writable_tmp=True,
        tmpfs_bytes=1 << 20,
    )
    argv = [
        *launcher_argv(config),
        *bwrap_base(bwrap, as_root=as_root, seccomp_fd=seccomp),
        *view_argv(view, cwd="/"),
        "--",
        "true",
    ]
    try:
        code, message = _run_probe(argv, pass_fds=(seccomp,))
    finally:
        os.close(seccomp)
    if code != 0:
        return None, f"bubblewrap does not run here ({message})"
    return bwrap, f"bubblewrap works ({bwrap})"


_LANDLOCK_CHECK = """
import os, sys
try:
    os.listdir(sys.argv[1])
except PermissionError:
    sys.exit(0)
sys.exit(3)
"""


@functools.cache
def landlock_usable() -> tuple[int, str]:
    """(Landlock ABI, detail) when a ruleset really confines a launched process, else (0, why)."""
    abi = landlock_abi()
    if abi < 1:
        return 0, "the kernel offers no Landlock (it needs Linux 5.13 with the LSM enabled)"
    if abi < LANDLOCK_MIN_ABI:
        return 0, (
            f"Landlock ABI {abi} does not govern truncation (ABI {LANDLOCK_MIN_ABI}, Linux 6.2, "
            "does)"
        )
    program = filter_program()
    if program is None:
        return 0, "no seccomp filter is written for this architecture"
    outside = tempfile.mkdtemp(prefix="subagents-probe-")
    try:
        config: dict[str, Any] = {
            "ppid": os.getpid(),
            "drop_caps": os.geteuid() == 0,
            "landlock": {
                "read": [*SYSTEM_DIRS, *python_roots()],
                "write": [],
                "write_files": ["/dev/null"],
            },
            "seccomp": program.hex(),
        }
        target = [sys.executable, "-I", "-S", "-B", "-c", _LANDLOCK_CHECK, outside]
        code, message = _run_probe([*launcher_argv(config), *target])
    finally:
        os.rmdir(outside)
    if code != 0:
        return 0, f"Landlock does not confine here ({message})"
    return abi, f"Landlock ABI {abi} confines"


def confinement() -> Confinement:
    """The backend confined runs use on this machine; probes run once per process.

    Blocking (the first call runs the probes): call it from a worker thread in async code.
    """
    forced = os.environ.get(BACKEND_ENV, "").strip().lower()
    if forced == "none":
        return Confinement(None, None, f"{BACKEND_ENV}=none turns confinement off; {_HINT}")
    if forced not in ("", "bwrap", "landlock"):
        return Confinement(
            None, None, f"{BACKEND_ENV}={forced!r} is not one of bwrap, landlock, none"
        )
    notes: list[str] = []
    if forced in ("", "bwrap"):
        bwrap, detail = bwrap_usable()
        if bwrap is not None:
            return Confinement("bwrap", "full", detail)
        notes.append(detail)
    if forced in ("", "landlock"):
        abi, detail = landlock_usable()
        if abi:
            return Confinement("landlock", "full", "; ".join([*notes, detail]))
        notes.append(detail)
    return Confinement(None, None, "; ".join([*notes, _HINT]))
