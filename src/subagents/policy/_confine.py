"""Which confinement backend this machine can use, decided by running it (spec 7.3).

bubblewrap is preferred: it is probed by running `bwrap <the run profile> -- true` through the
launcher, exactly as a run would. Landlock is the fallback: it is probed by launching a process
under a ruleset and checking that a directory outside the grants cannot be listed. Verdicts are
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

from ._launcher import landlock_abi

__all__ = [
    "BACKEND_ENV",
    "Confinement",
    "LAUNCHER",
    "SYSTEM_DIRS",
    "UID_BASE",
    "bwrap_base",
    "bwrap_usable",
    "confinement",
    "launcher_argv",
    "python_roots",
]

BACKEND_ENV = "SUBAGENTS_SANDBOX_BACKEND"
LAUNCHER = str(Path(__file__).with_name("_launcher.py"))
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc")
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


def bwrap_base(bwrap: str, *, as_root: bool) -> list[str]:
    """The fixed part of bubblewrap's argv: read-only host, new /dev, /proc and namespaces."""
    argv = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
    ]
    if as_root:
        argv += ["--cap-drop", "ALL"]  # root in the sandbox must not be able to remount
    return argv


def _run_probe(argv: list[str]) -> tuple[int, str]:
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=env,
            timeout=_PROBE_TIMEOUT,
            check=False,
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
    as_root = os.geteuid() == 0 and not dedicated_uid
    config: dict[str, Any] = {"ppid": os.getpid(), "uid_base": None}
    if dedicated_uid:
        config.update(uid_base=UID_BASE, nproc=8)
    code, message = _run_probe(
        [*launcher_argv(config), *bwrap_base(bwrap, as_root=as_root), "--", "true"]
    )
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
            enforcement: Literal["full", "partial"] = "full" if abi >= 4 else "partial"
            if abi < 4:
                detail += " (below ABI 4: truncation or TCP are not governed)"
            return Confinement("landlock", enforcement, "; ".join([*notes, detail]))
        notes.append(detail)
    return Confinement(None, None, "; ".join([*notes, _HINT]))
