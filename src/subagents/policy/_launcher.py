"""Launcher of a confined run: sets limits and confinement on itself, then becomes the target.

Stdlib only (the package imports it just for `landlock_abi`): the host runs it as
`python -I -S -B _launcher.py CONFIG -- ARGV...` with the emptied environment, in a new
session. In order it: asks for SIGKILL when the host dies (PR_SET_PDEATHSIG), joins the run's
cgroup (so every descendant, bubblewrap's included, is counted by `pids.max`), sets the
rlimits, builds the Landlock ruleset when asked (while it can still open every granted path),
drops to the run's dedicated uid with RLIMIT_NPROC when asked (no cgroup), empties the
capability sets when asked (root under Landlock: the target must not keep root's
capabilities), sets PR_SET_NO_NEW_PRIVS (in every mode: setuid programs such as sudo gain
nothing), enforces the ruleset, installs the seccomp filter when asked (under Landlock;
bubblewrap installs it itself, after its own netlink and namespace setup), and `execvp`s ARGV
(bubblewrap's argv for that backend).
Rlimits are set here rather than in a `preexec_fn`, which is unsafe in a threaded host.

CONFIG is a JSON object:
    ppid          the host's pid; exit if the host is already gone
    rlimits       {"RLIMIT_CPU": n, ...}: soft and hard limit n (never above the current hard)
    cgroup_procs  path of the run cgroup's `cgroup.procs`, or null
    uid_base      drop to uid and gid uid_base + own pid, or null
    nproc         RLIMIT_NPROC under the dedicated uid
    drop_caps     empty the bounding, ambient and inheritable capability sets
    landlock      {"read": [paths], "list": [paths], "write": [paths], "write_files": [paths]},
                  or null: read and execute beneath `read`, listing (not reading) beneath
                  `list`, everything beneath `write`, read and write on `write_files`; TCP
                  bind and connect denied (ABI >= 4); signals and abstract unix sockets scoped
                  to the run (ABI >= 6)
    seccomp       the hex of a classic-BPF program (`struct sock_filter` records), or null

A failure before the exec prints `subagents-launcher: ...` on stderr and exits 126 (127 when
the target is not found), so a caller can tell "the sandbox did not start" from the target's
own failures.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import stat
import sys
from typing import Any

LAUNCH_FAILED = 126
NOT_FOUND = 127

PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REFER = 1 << 13
FS_TRUNCATE = 1 << 14
FS_V1 = (1 << 13) - 1  # execute .. make_sym
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE
READ_RIGHTS = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

_libc = ctypes.CDLL(None, use_errno=True)


class LaunchError(Exception):
    pass


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [
        ("allowed_access", ctypes.c_uint64),
        ("parent_fd", ctypes.c_int32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise LaunchError(f"{what}: {os.strerror(errno)} (errno {errno})")
    return result


def _prctl(option: int, arg: int, what: str) -> None:
    prctl: Any = _libc.prctl
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    _check(int(prctl(option, arg, 0, 0, 0)), what)


def _syscall(number: int, *args: Any) -> int:
    """syscall(2); integers travel as C longs, the width the kernel reads."""
    call: Any = _libc.syscall
    call.restype = ctypes.c_long
    wide = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    return int(call(ctypes.c_long(number), *wide))


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable."""
    version = _syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(version, 0)


def _handled_fs(abi: int) -> int:
    handled = FS_V1
    if abi >= 2:
        handled |= FS_REFER
    if abi >= 3:
        handled |= FS_TRUNCATE
    return handled


def _add_rule(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= FILE_RIGHTS
        if not access:
            return
        attr = _PathBeneathAttr(allowed_access=access, parent_fd=fd)
        _check(
            _syscall(
                SYS_LANDLOCK_ADD_RULE,
                ruleset,
                LANDLOCK_RULE_PATH_BENEATH,
                ctypes.byref(attr),
                0,
            ),
            f"landlock_add_rule {path}",
        )
    finally:
        os.close(fd)


def build_landlock(rules: dict[str, list[str]]) -> int:
    """A Landlock ruleset fd granting `rules` (opened with this process's current rights)."""
    abi = landlock_abi()
    if abi < 1:
        raise LaunchError("landlock is not available in this kernel")
    handled = _handled_fs(abi)
    attr = _RulesetAttr(
        handled_access_fs=handled,
        handled_access_net=(NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
        scoped=(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _check(
        _syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0),
        "landlock_create_ruleset",
    )
    try:
        for path in rules.get("read", []):
            _add_rule(ruleset, path, READ_RIGHTS & handled)
        for path in rules.get("list", []):
            _add_rule(ruleset, path, FS_READ_DIR & handled)
        for path in rules.get("write", []):
            _add_rule(ruleset, path, handled)
        for path in rules.get("write_files", []):
            _add_rule(ruleset, path, (FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE) & handled)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def restrict_self(ruleset: int) -> None:
    """Enforce `ruleset` on this process and everything it execs or forks (needs NO_NEW_PRIVS)."""
    try:
        _check(_syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def install_seccomp(program: bytes) -> None:
    """Install a seccomp filter on this process and everything it execs (needs NO_NEW_PRIVS)."""
    if not program or len(program) % 8:
        raise LaunchError("seccomp: the filter is not a whole number of BPF instructions")
    code = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len=len(program) // 8, filter=ctypes.addressof(code))
    prctl: Any = _libc["prctl"]  # a function object of its own: `_prctl` types its arguments
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    _check(
        int(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0)),
        "PR_SET_SECCOMP",
    )


def _drop_capabilities() -> None:
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
            last = int(f.read())
    except OSError:
        last = 40
    for cap in range(last + 1):
        _prctl(PR_CAPBSET_DROP, cap, f"PR_CAPBSET_DROP {cap}")
    with contextlib.suppress(LaunchError):  # kernels before 4.3 have no ambient set
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, "PR_CAP_AMBIENT")
    header = _CapHeader(version=0x20080522, pid=0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    capget: Any = _libc.capget
    capset: Any = _libc.capset
    _check(int(capget(ctypes.byref(header), data)), "capget")
    for item in data:
        item.inheritable = 0
    _check(int(capset(ctypes.byref(header), data)), "capset")


def _set_rlimits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        which = getattr(resource, name)
        _soft, hard = resource.getrlimit(which)
        capped = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (capped, capped))


def _become_dedicated_user(uid_base: int, nproc: int) -> None:
    uid = uid_base + os.getpid()
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def prepare(config: dict[str, Any]) -> None:
    """Everything before the exec, in the order the module docstring gives."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "PR_SET_PDEATHSIG")
    if os.getppid() != config["ppid"]:
        raise LaunchError("the host exited before the run started")
    procs = config.get("cgroup_procs")
    if procs:
        with open(procs, "w", encoding="ascii") as f:
            f.write(str(os.getpid()))
    _set_rlimits(config.get("rlimits", {}))
    rules = config.get("landlock")
    ruleset = build_landlock(rules) if rules is not None else None  # before losing root's reach
    uid_base = config.get("uid_base")
    if uid_base is not None:
        _become_dedicated_user(int(uid_base), int(config["nproc"]))
    if config.get("drop_caps") and os.geteuid() == 0:
        _drop_capabilities()
    _prctl(PR_SET_NO_NEW_PRIVS, 1, "PR_SET_NO_NEW_PRIVS")
    if ruleset is not None:
        restrict_self(ruleset)
    program = config.get("seccomp")
    if program:
        install_seccomp(bytes.fromhex(program))


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: _launcher.py CONFIG -- ARGV...\n")
        return LAUNCH_FAILED
    try:
        prepare(json.loads(argv[1]))
    except (LaunchError, OSError, ValueError, KeyError) as error:
        sys.stderr.write(f"subagents-launcher: {error}\n")
        return LAUNCH_FAILED
    target = argv[3:]
    try:
        os.execvp(target[0], target)
    except FileNotFoundError:
        sys.stderr.write(f"subagents-launcher: {target[0]}: command not found\n")
        return NOT_FOUND
    except OSError as error:
        sys.stderr.write(f"subagents-launcher: {target[0]}: {error}\n")
        return LAUNCH_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv))
