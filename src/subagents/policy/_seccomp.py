"""The seccomp filter of a confined run: no socket to anything outside the sandbox.

Mount and pid namespaces and Landlock decide which files a run reaches; none of them stops a
socket. A unix socket is reached by path (docker.sock, an ssh-agent or dbus socket anywhere the
run can see), UDP and netlink are not governed by Landlock, and under Landlock the run shares
the host's network namespace. This classic-BPF program, applied under both backends (bubblewrap
takes it with `--seccomp FD`, the Landlock launcher installs it itself), closes that:

- `socket()` of any family but AF_UNIX fails with EAFNOSUPPORT (inet, inet6, netlink, packet,
  vsock, ...); `socket()` and `socketpair()` of an AF_UNIX type other than stream and
  seqpacket fail with EACCES: a datagram socket (SOCK_RAW is one too, for AF_UNIX) can
  `sendto` any pathname socket, even one of a connected pair;
- `connect()` fails with EACCES: with the families above gone, it could only reach a unix
  listener by path or in the abstract namespace. A stream `socketpair()` still works, so a
  run can talk to its host over the socket pair it inherits;
- io_uring (`io_uring_setup`, `_enter`, `_register`) fails with ENOSYS: its ring can open
  and connect sockets without passing through the calls above;
- creating a user namespace (`clone` or `unshare` with CLONE_NEWUSER) fails with EPERM, and
  `clone3`, whose flags sit behind a pointer the filter cannot read, with ENOSYS (the C
  library then falls back to `clone`): inside a user namespace of its own a run could mount a
  tmpfs that no size cap bounds;
- a syscall of another ABI (x32 numbers, or a 32-bit architecture) is refused: its numbers
  would slip past the checks above.

Only x86_64 and aarch64 are covered; elsewhere `filter_program` returns None and confined
modes refuse to run.
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import socket
import struct
from dataclasses import dataclass

__all__ = ["SeccompArch", "filter_program", "native_arch", "program_fd"]

# BPF opcodes (linux/bpf_common.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_AND_K = 0x54
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
# offsets in struct seccomp_data; an argument's low 32 bits (little-endian hosts only)
_NR, _ARCH = 0, 4
_ARG0, _ARG1 = 16, 24

_X32_SYSCALL_BIT = 0x40000000
_SOCK_TYPE_MASK = 0xF  # without SOCK_NONBLOCK and SOCK_CLOEXEC
_CLONE_NEWUSER = 0x10000000


@dataclass(frozen=True, slots=True)
class SeccompArch:
    """The audit architecture value and the syscall numbers the filter decides on."""

    audit_arch: int
    x32_bit: bool
    socket: int
    socketpair: int
    connect: int
    clone: int
    clone3: int
    unshare: int
    io_uring: tuple[int, int, int]


_ARCHES = {
    "x86_64": SeccompArch(
        audit_arch=0xC000003E,
        x32_bit=True,
        socket=41,
        socketpair=53,
        connect=42,
        clone=56,
        clone3=435,
        unshare=272,
        io_uring=(425, 426, 427),
    ),
    "aarch64": SeccompArch(
        audit_arch=0xC00000B7,
        x32_bit=False,
        socket=198,
        socketpair=199,
        connect=203,
        clone=220,
        clone3=435,
        unshare=97,
        io_uring=(425, 426, 427),
    ),
}


def native_arch() -> SeccompArch | None:
    """The syscall table of this machine, or None where no filter is written for it."""
    return _ARCHES.get(platform.machine())


class _Program:
    """A tiny assembler: jumps name their target label; offsets are resolved at the end."""

    def __init__(self) -> None:
        self._code: list[tuple[int, int | str, int | str, int]] = []
        self._labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self._labels[name] = len(self._code)

    def load(self, offset: int) -> None:
        self._code.append((_LD_W_ABS, 0, 0, offset))

    def mask(self, bits: int) -> None:
        self._code.append((_AND_K, 0, 0, bits))

    def jump(self, op: int, value: int, then: str, otherwise: str | int = 0) -> None:
        self._code.append((op, then, otherwise, value))

    def ret(self, value: int) -> None:
        self._code.append((_RET_K, 0, 0, value))

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (code, then, otherwise, k) in enumerate(self._code):
            jt = self._offset(index, then)
            jf = self._offset(index, otherwise)
            out += struct.pack("=HBBI", code, jt, jf, k)
        return bytes(out)

    def _offset(self, index: int, target: int | str) -> int:
        if isinstance(target, int):
            return target
        offset = self._labels[target] - index - 1
        if not 0 <= offset <= 255:  # pragma: no cover - the program is fixed and short
            raise ValueError(f"jump to {target} out of range")
        return offset


def _errno(code: int) -> int:
    return _RET_ERRNO | code


@functools.cache
def filter_program() -> bytes | None:
    """The filter as `struct sock_filter` records, ready for bubblewrap or PR_SET_SECCOMP."""
    arch = native_arch()
    if arch is None:
        return None
    p = _Program()
    p.load(_ARCH)
    p.jump(_JEQ_K, arch.audit_arch, then="native", otherwise="kill")
    p.label("native")
    p.load(_NR)
    if arch.x32_bit:
        p.jump(_JGE_K, _X32_SYSCALL_BIT, then="enosys")
    p.jump(_JEQ_K, arch.socket, then="socket")
    p.jump(_JEQ_K, arch.socketpair, then="socket")
    p.jump(_JEQ_K, arch.connect, then="eacces")
    p.jump(_JEQ_K, arch.clone, then="namespaces")
    p.jump(_JEQ_K, arch.unshare, then="namespaces")
    p.jump(_JEQ_K, arch.clone3, then="enosys")
    for number in arch.io_uring:
        p.jump(_JEQ_K, number, then="enosys")
    p.ret(_RET_ALLOW)
    p.label("socket")
    p.load(_ARG0)
    p.jump(_JEQ_K, socket.AF_UNIX, then="unix", otherwise="eafnosupport")
    p.label("unix")
    p.load(_ARG1)
    p.mask(_SOCK_TYPE_MASK)
    p.jump(_JEQ_K, socket.SOCK_STREAM, then="allow")
    p.jump(_JEQ_K, socket.SOCK_SEQPACKET, then="allow", otherwise="eacces")
    p.label("namespaces")
    p.load(_ARG0)
    p.jump(_JSET_K, _CLONE_NEWUSER, then="eperm")
    p.ret(_RET_ALLOW)
    p.label("allow")
    p.ret(_RET_ALLOW)
    p.label("kill")
    p.ret(_RET_KILL_PROCESS)
    p.label("enosys")
    p.ret(_errno(errno.ENOSYS))
    p.label("eacces")
    p.ret(_errno(errno.EACCES))
    p.label("eafnosupport")
    p.ret(_errno(errno.EAFNOSUPPORT))
    p.label("eperm")
    p.ret(_errno(errno.EPERM))
    return p.assemble()


def program_fd() -> int | None:
    """A close-on-exec memfd holding the filter, at offset 0, for bubblewrap's `--seccomp FD`.

    The caller passes it to the run (`pass_fds`) and closes it once the run has started.
    """
    program = filter_program()
    if program is None:
        return None
    fd = os.memfd_create("subagents-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
