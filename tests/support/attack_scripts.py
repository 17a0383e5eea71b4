"""Hostile scripts the sandbox attack tests run confined, and the host sockets they aim at.

The scripts print (or, in a workflow, return) what they managed to do; the tests judge the
attack by its effect on the host: `HostListeners` are non-blocking sockets the test owns, read
only after the confined run has ended, so "nothing queued" means "nothing arrived".
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import shutil
import socket
import tempfile
import uuid
from collections.abc import Collection, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CREATE",
    "FILL",
    "GUEST_ESCAPE",
    "HostListeners",
    "NETWORK",
    "NETWORK_WORKFLOW",
    "PROBE",
    "SENDERS",
    "STORE_MARK",
    "host_listeners",
    "host_view",
    "make_store",
    "socket_families",
    "store_files",
]

# The attack itself, written so that it runs both as a plain script (`imp = __import__`) and as
# the body of a workflow script that got the real `__import__` (`imp = real_import`). `spec`:
#   families    {name: [family, type, proto]}: socket() each
#   unix        [[sender, label, address]]: a "stream" or "seqpacket" socket connects to the
#               address, a "dgram", "raw" or "socketpair-dgram" one sends a datagram to it; an
#               address starting with "@" is in the abstract namespace; reported as
#               "SENDER to LABEL"
#   tcp, udp    a port on 127.0.0.1 to connect to / send a datagram to
#   io_uring    try io_uring_setup (syscall 425 on x86_64 and aarch64)
#   socketpair  make an AF_UNIX socketpair and pass a message through it
#   asyncio     run an asyncio loop (its self-pipe is a socketpair)
_NET_CORE = r"""
def attack(spec):
    socket = imp("socket")
    errno = imp("errno")
    out = {}

    def denied(exc):
        code = exc.errno
        return "denied " + (errno.errorcode.get(code, str(code)) if code else type(exc).__name__)

    for name, (family, kind, proto) in spec.get("families", {}).items():
        try:
            made = socket.socket(family, kind, proto)
        except OSError as exc:
            out["socket " + name] = denied(exc)
        else:
            made.close()
            out["socket " + name] = "created"
    kinds = {
        "stream": socket.SOCK_STREAM,
        "seqpacket": socket.SOCK_SEQPACKET,
        "dgram": socket.SOCK_DGRAM,
        "raw": socket.SOCK_RAW,  # an AF_UNIX "raw" socket is a datagram socket
    }
    for sender, label, address in spec.get("unix", []):
        key = sender + " to " + label
        where = "\0" + address[1:] if address.startswith("@") else address
        try:
            if sender == "socketpair-dgram":  # connected to its twin, yet sendto() any address
                sock, twin = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
                twin.close()
            else:
                sock = socket.socket(socket.AF_UNIX, kinds[sender])
        except OSError as exc:
            out[key] = "socket " + denied(exc)
            continue
        try:
            sock.settimeout(5)
            if sender in ("stream", "seqpacket"):
                sock.connect(where)
                sock.sendall(b"escaped")
                out[key] = "connected"
            else:
                sock.sendto(b"escaped", where)
                out[key] = "sent"
        except OSError as exc:
            out[key] = denied(exc)
        finally:
            sock.close()
    if "tcp" in spec:
        try:
            socket.create_connection(("127.0.0.1", spec["tcp"]), timeout=5).close()
        except OSError as exc:
            out["tcp"] = denied(exc)
        else:
            out["tcp"] = "connected"
    if "udp" in spec:
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        except OSError as exc:
            out["udp"] = "socket " + denied(exc)
        else:
            try:
                sock.sendto(b"escaped", ("127.0.0.1", spec["udp"]))
                out["udp"] = "sent"
            except OSError as exc:
                out["udp"] = denied(exc)
            finally:
                sock.close()
    if spec.get("io_uring"):
        ctypes = imp("ctypes")
        os = imp("os")
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
        fd = libc.syscall(ctypes.c_long(425), ctypes.c_long(8), params)
        if fd >= 0:
            os.close(fd)
            out["io_uring"] = "set up"
        else:
            out["io_uring"] = "denied " + errno.errorcode.get(ctypes.get_errno(), "?")
    if spec.get("socketpair"):
        try:
            left, right = socket.socketpair()
        except OSError as exc:
            out["socketpair"] = denied(exc)
        else:
            with left, right:
                left.sendall(b"ping")
                out["socketpair"] = "works" if right.recv(4) == b"ping" else "broken"
    if spec.get("asyncio"):
        asyncio = imp("asyncio")
        try:
            asyncio.run(asyncio.sleep(0))
        except OSError as exc:
            out["asyncio"] = denied(exc)
        else:
            out["asyncio"] = "works"
    return out
"""

NETWORK = (
    "import json, sys\nimp = __import__\n"
    + _NET_CORE
    + "\nprint(json.dumps(attack(json.loads(sys.argv[1]))))\n"
)
"""The network attack as a script: `python -c NETWORK SPEC-JSON` prints a JSON object."""

# Gets the real `__import__` from a workflow script, whose curated builtins lack it and `open`
# (as in tests/workflows/test_escapes.py): `os._wrap_close` is a subclass of `object`.
GUEST_ESCAPE = """
real_import = next(
    c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'
).__init__.__globals__['sys'].modules['builtins'].__import__
"""

NETWORK_WORKFLOW = GUEST_ESCAPE + "imp = real_import\n" + _NET_CORE + "\nreturn attack(args)\n"
"""The network attack as a workflow script: it returns the object, `args` being the spec."""


def socket_families() -> dict[str, list[int]]:
    """The socket() calls that must fail when confined: [family, type, protocol] by name."""
    vsock = getattr(socket, "AF_VSOCK", 40)
    calls = {
        "AF_INET": (socket.AF_INET, socket.SOCK_STREAM),
        "AF_INET/SOCK_DGRAM": (socket.AF_INET, socket.SOCK_DGRAM),
        "AF_INET6": (socket.AF_INET6, socket.SOCK_STREAM),
        "AF_NETLINK": (socket.AF_NETLINK, socket.SOCK_RAW),  # protocol 0: NETLINK_ROUTE
        "AF_PACKET": (socket.AF_PACKET, socket.SOCK_RAW),
        "AF_VSOCK": (vsock, socket.SOCK_STREAM),
        "AF_UNIX/SOCK_DGRAM": (socket.AF_UNIX, socket.SOCK_DGRAM),
    }
    return {name: [int(family), int(kind), 0] for name, (family, kind) in calls.items()}


SENDERS = ("stream", "seqpacket", "dgram", "raw", "socketpair-dgram")
"""How `NETWORK` reaches a unix listener: by connecting a stream or seqpacket socket, or by
sending a datagram from an AF_UNIX SOCK_DGRAM socket, a SOCK_RAW one (the kernel makes it a
datagram socket) or one end of a datagram socketpair (connected to its twin, it still sends
to any address given to sendto)."""


@dataclass
class HostListeners:
    """Sockets of the host (this test process) that a confined run must not reach.

    Labels: `tcp` and `udp` on 127.0.0.1, and AF_UNIX ones such as "stream listener in the
    workspace". Every socket is non-blocking: `reached()` after the run tells what arrived.
    """

    sockets: dict[str, socket.socket] = field(default_factory=dict[str, socket.socket])
    attempts: list[list[str]] = field(default_factory=list[list[str]])
    ports: dict[str, int] = field(default_factory=dict[str, int])

    @property
    def labels(self) -> set[str]:
        return set(self.sockets)

    def spec(self, *, unix: Collection[str] = SENDERS, ip: bool = True) -> dict[str, Any]:
        """The `NETWORK` spec aiming at these listeners: AF_UNIX ones from the `unix` senders
        (none: `()`), and the loopback ones when `ip`."""
        found: dict[str, Any] = {}
        if unix:
            found["unix"] = [attempt for attempt in self.attempts if attempt[0] in unix]
        if ip:
            found.update(self.ports)
        return found

    def reached(self, *, expect: Collection[str] = ()) -> dict[str, int]:
        """What arrived at each listener since the last call (labels that saw nothing are
        left out). Never waits, except (a control run) up to 10 s for each label in `expect`
        to become readable, in case the kernel has not queued what was sent yet.
        """
        seen: dict[str, int] = {}
        for label, sock in self.sockets.items():
            if label in expect:
                select.select([sock], [], [], 10.0)
            count = 0
            for _ in range(64):
                try:
                    if sock.type == socket.SOCK_DGRAM:
                        sock.recv(256)
                    else:
                        conn, _peer = sock.accept()
                        conn.close()
                except BlockingIOError:
                    break
                count += 1
            if count:
                seen[label] = count
        return seen


_UNIX_KINDS = {
    "stream": socket.SOCK_STREAM,
    "seqpacket": socket.SOCK_SEQPACKET,
    "dgram": socket.SOCK_DGRAM,
}
_SENDERS = {
    "stream": ["stream"],
    "seqpacket": ["seqpacket"],
    "dgram": ["dgram", "raw", "socketpair-dgram"],
}


@contextlib.contextmanager
def host_listeners(workspace: Path, outside: Path) -> Generator[HostListeners]:
    """Listeners on loopback TCP and UDP, and AF_UNIX stream and datagram ones in the
    workspace, in a host directory outside it, in the host's real /tmp and in the abstract
    namespace (and a seqpacket one in the workspace), with the attempts that aim at them."""
    found = HostListeners()
    with contextlib.ExitStack() as stack:
        host_tmp = tempfile.mkdtemp(dir="/tmp", prefix="subagents-attack-")
        stack.callback(shutil.rmtree, host_tmp, True)

        def listen(label: str, family: int, kind: int, address: str | tuple[str, int]) -> None:
            sock = socket.socket(family, kind)
            stack.callback(sock.close)
            sock.bind(address)
            if kind != socket.SOCK_DGRAM:
                sock.listen(16)
            sock.setblocking(False)
            found.sockets[label] = sock

        listen("tcp", socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
        listen("udp", socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
        found.ports = {k: int(found.sockets[k].getsockname()[1]) for k in ("tcp", "udp")}
        token = uuid.uuid4().hex[:12]
        places = {
            "in the workspace": str(workspace),
            "outside the workspace": str(outside),
            "in the host's /tmp": host_tmp,
            "in the abstract namespace": "@",
        }
        for kind in ("stream", "seqpacket", "dgram"):
            for place, directory in places.items():
                if kind == "seqpacket" and place != "in the workspace":
                    continue
                label = f"{kind} listener {place}"
                if directory == "@":
                    address, bound = f"@subagents-{kind}-{token}", f"\0subagents-{kind}-{token}"
                else:
                    address = bound = os.path.join(directory, f"host-{kind}.sock")
                listen(label, socket.AF_UNIX, _UNIX_KINDS[kind], bound)
                found.attempts += [[sender, label, address] for sender in _SENDERS[kind]]
        yield found


# -- the store -------------------------------------------------------------------------------

STORE_MARK = "store-secret-3f9c1d"
"""Bytes in every store file the tests create; a confined run must never print them."""


def store_files(db: Path) -> list[Path]:
    """The store's database, WAL and shared-memory files (the ones `make_store` creates)."""
    return [db, Path(f"{db}-wal"), Path(f"{db}-shm")]


def make_store(db: Path) -> dict[Path, bytes]:
    """Create a store's files at `db` (and its directories); return every file's bytes."""
    db.parent.mkdir(parents=True, exist_ok=True)
    contents: dict[Path, bytes] = {}
    for index, path in enumerate(store_files(db)):
        header = b"SQLite format 3\x00" if index == 0 else b""
        data = header + f"{STORE_MARK} {path.name} ".encode() * 64
        path.write_bytes(data)
        contents[path] = data
    return contents


# -- files -----------------------------------------------------------------------------------

# argv[1]: how many bytes; argv[2]: a file name; argv[3:]: directories ("$TMPDIR" for the
# private temp dir). Prints {dir: [bytes written, "done" or the errno name]}; an "open ..."
# status says the file could not even be created. Removes what it wrote.
FILL = """
import errno, json, os, sys
total, name = int(sys.argv[1]), sys.argv[2]
chunk = b"x" * 65536
out = {}
for place in sys.argv[3:]:
    where = os.environ["TMPDIR"] if place == "$TMPDIR" else place
    path = os.path.join(where, name)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        out[place] = [0, "open " + errno.errorcode.get(exc.errno, str(exc.errno))]
        continue
    written, status = 0, "done"
    try:
        for _ in range(total // len(chunk) + 2):
            if written >= total:
                break
            step = os.write(fd, chunk[: total - written])
            if step == 0:
                status = "stuck"
                break
            written += step
    except OSError as exc:
        status = errno.errorcode.get(exc.errno, str(exc.errno))
    finally:
        os.close(fd)
        os.unlink(path)
    out[place] = [written, status]
print(json.dumps(out))
"""

# argv[1:]: paths to create (and leave). Prints {path: "created" or "denied ERRNO"}.
CREATE = """
import errno, json, os, sys
out = {}
for path in sys.argv[1:]:
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as exc:
        out[path] = "denied " + errno.errorcode.get(exc.errno, str(exc.errno))
    else:
        out[path] = "created"
print(json.dumps(out))
"""

# argv[1]: a JSON list of paths. Prints {path: view}: "missing ERRNO" when lstat fails, else
# what `host_view` computes (or "denied ERRNO" when it cannot be read or listed).
PROBE = """
import errno, hashlib, json, os, stat, sys
def view(path):
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        return "missing " + errno.errorcode.get(exc.errno, str(exc.errno))
    try:
        if stat.S_ISDIR(mode):
            names = "\\n".join(sorted(os.listdir(path))).encode()
            return "list " + hashlib.sha256(names).hexdigest()
        with open(path, "rb") as f:
            return "read " + hashlib.sha256(f.read()).hexdigest()
    except OSError as exc:
        return "denied " + errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps({path: view(path) for path in json.loads(sys.argv[1])}))
"""


def host_view(path: str) -> str:
    """What `PROBE` prints for `path` when it can read it as the host does."""
    if os.path.isdir(path) and not os.path.islink(path):
        names = "\n".join(sorted(os.listdir(path))).encode()
        return "list " + hashlib.sha256(names).hexdigest()
    return "read " + hashlib.sha256(Path(path).read_bytes()).hexdigest()
