"""The SQLite store's writer process: batches in from a socket, transactions, answers out.

A writer thread inside the store's own process would share the GIL with the event loop, and a
busy loop starves it: every call into `sqlite3` gives the GIL up, and taking it back waits
until the loop idles. In a process of its own the writer costs the loop only the encoding of
its batches, and the commits run on another core.

Each store that writes has one (`ProcessLink`, `_sqlite_link.py`), forked on one end of a
socket pair by a small fork server its process starts once (`serve_forks`): starting Python
and importing what a writer needs takes some 100 ms, forking a process that has it a few.

A writer says `Hello` once it runs, opens the store only when told to (`Open`: a store that
closed meanwhile never tells it, so it never touches the file), answers `Ready` (or
`WriterFailed`), then, for every transaction it commits, a `WrittenBatch` per batch in the
order they came. After `Stop` it
writes what it was sent and exits. When the socket closes without one (the store's process
died), it writes nothing more: the transaction it is in finishes, what it has not begun is
dropped (nobody was told of it), and when the fork server it came from exits, which it does
as soon as its own socket closes, the kernel kills it (PR_SET_PDEATHSIG). So what a dead
process leaves in the log is what it was told, give or take its last transaction, as with a
writer thread. Writers and the fork server ignore the terminal's Ctrl-C (their store decides
when to stop).
"""

from __future__ import annotations

import importlib
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from ..errors import SubagentsError
from ._sqlite_wire import (
    FrameReader,
    Hello,
    Open,
    Ready,
    Reply,
    Stop,
    WriteBatch,
    WriterFailed,
    decode_request,
    encode_frame,
    error_to_wire,
)

if TYPE_CHECKING:
    from ._sqlite_writer import TransactionWriter

__all__ = ["LEASE_RENEW_SECONDS", "ForkRequest", "main", "serve", "serve_forks"]

LEASE_RENEW_SECONDS = 10.0
"""How often the writer renews the leases its store holds (they last 30 s)."""
_READ_SIZE = 1 << 20


def serve(
    sock: socket.socket,
    path: Path,
    *,
    synchronous: Literal["NORMAL", "FULL"],
    batch_max: int,
) -> None:
    """Say hello, open the store when told to, and serve batches from `sock` until stopped."""
    from ._migrations import open_writer
    from ._sqlite_checkpoint import Checkpointer
    from ._sqlite_writer import TransactionWriter

    inbox = _Inbox(sock, batch_max)
    if not _send(sock, Hello(os.getpid())) or not inbox.opened():
        return  # its store is gone: the file is never touched
    try:
        conn = open_writer(path, synchronous=synchronous)
    except SubagentsError as exc:
        _send(sock, WriterFailed(error_to_wire(exc)))
        return
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # the checkpointer's thread does them
    checkpoints = Checkpointer(path)
    try:
        if _send(sock, Ready(os.getpid())):
            _serve(sock, inbox, TransactionWriter(conn, path, on_commit=checkpoints.committed))
    finally:
        checkpoints.close()
        conn.close()


def _send(sock: socket.socket, *messages: Reply) -> bool:
    """Send `messages`; False when nobody is left to hear them (the writes stand)."""
    try:
        sock.sendall(b"".join(encode_frame(message) for message in messages))
    except OSError:
        return False
    return True


def _serve(sock: socket.socket, inbox: _Inbox, writer: TransactionWriter) -> None:
    renewed = time.time()
    while inbox.open or inbox.pending:
        if not inbox.pending:
            wait = max(0.0, renewed + LEASE_RENEW_SECONDS - time.time())
            readable, _, _ = select.select([sock], [], [], wait)
            if not readable:
                renewed = time.time()
                writer.renew_leases(renewed)
                continue
        inbox.receive()
        taken = inbox.take()
        if taken:
            _send(sock, *writer.write(taken))
            inbox.receive_now()  # a process that died meanwhile leaves nothing more written
        if time.time() - renewed > LEASE_RENEW_SECONDS:
            renewed = time.time()
            writer.renew_leases(renewed)


class _Inbox:
    """The batches read from the socket and not written yet."""

    def __init__(self, sock: socket.socket, batch_max: int) -> None:
        self._sock = sock
        self._batch_max = batch_max
        self._frames = FrameReader()
        self._buffer = bytearray(_READ_SIZE)
        """Read into, never allocated again: `recv` of a megabyte allocates (and maps) a
        megabyte per call, some 8 us even for a few bytes."""
        self.pending: list[WriteBatch] = []
        self.open = True
        """False after `Stop` or the end of the stream."""
        self._told_to_open = False

    def opened(self) -> bool:
        """Wait for `Open` (True), or for the end of the stream (False)."""
        while self.open and not self._told_to_open:
            self._read(wait=True)
        return self._told_to_open and self.open

    def receive(self) -> None:
        """Read everything that has arrived (waiting only for a frame begun), up to a batch."""
        while self.open and self._read(wait=not self.pending):
            if sum(b.size for b in self.pending) >= self._batch_max:
                return

    def _read(self, *, wait: bool) -> bool:
        """Read once; False when nothing (more) has arrived or the stream ended."""
        try:
            read = self._sock.recv_into(self._buffer, 0, 0 if wait else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            read = 0
        if not read:
            # The store's process is gone without a `Stop`: nobody can be told of what is
            # left, so it is not written (as if its writer thread had died with it), and a
            # process that takes the tree over finds the log as it was acknowledged.
            self.open = False
            self.pending.clear()
            return False
        for body in self._frames.feed(memoryview(self._buffer)[:read]):
            request = decode_request(body)
            if isinstance(request, Stop):
                self.open = False
            elif isinstance(request, Open):
                self._told_to_open = True
            else:
                self.pending.append(request)
        return True

    def receive_now(self) -> None:
        """Read what has arrived without waiting (to learn of a `Stop` or the end early)."""
        if self.open and not self.pending:
            readable, _, _ = select.select([self._sock], [], [], 0)
            if not readable:
                return
        self.receive()

    def take(self) -> list[WriteBatch]:
        """The batches of the next transaction: at least one, about `batch_max` records."""
        taken: list[WriteBatch] = []
        size = 0
        while self.pending and (not taken or size + self.pending[0].size <= self._batch_max):
            batch = self.pending.pop(0)
            taken.append(batch)
            size += batch.size
        return taken


class ForkRequest(msgspec.Struct, array_like=True, frozen=True):
    """Fork a writer for the store at `path` on the descriptor sent with this request."""

    path: str
    synchronous: Literal["NORMAL", "FULL"]
    batch_max: int


def serve_forks(control: socket.socket) -> None:
    """Fork a writer for every request on `control` (a SOCK_SEQPACKET socket).

    Single-threaded and holding no database, so a fork is safe. Its children reap themselves
    (SIGCHLD ignored); it exits when `control` closes, that is when the process it serves is
    gone.
    """
    for module in ("_migrations", "_sqlite_writer", "_sqlite_checkpoint"):  # once, for all
        importlib.import_module(f"{__package__}.{module}")

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    decoder = msgspec.msgpack.Decoder(ForkRequest)
    die_with_server = _deathsig() if sys.platform.startswith("linux") else (lambda: None)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 4096, 1)
        except OSError:
            return
        if not message:
            return
        request = decoder.decode(message)
        pid = os.fork()
        if pid == 0:  # the writer
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            die_with_server()
            os._exit(_run_writer(fds[0], request))
        for fd in fds:
            os.close(fd)


def _deathsig() -> Callable[[], None]:
    """What a forked writer calls to be killed when the fork server exits.

    Linux's PR_SET_PDEATHSIG; elsewhere nothing (the socket's end still ends the writer). A
    server that died before the call leaves the writer reparented: it exits at once.
    """
    server = os.getpid()
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != server:
            os._exit(0)

    return arm


_PR_SET_PDEATHSIG = 1


def _run_writer(fd: int, request: ForkRequest) -> int:
    sock = socket.socket(fileno=fd)
    try:
        serve(
            sock, Path(request.path), synchronous=request.synchronous, batch_max=request.batch_max
        )
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sock.close()
    return 0


def main() -> None:
    """Run the fork server on the control socket whose descriptor is the first argument."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    control = socket.socket(fileno=int(sys.argv[1]))
    try:
        serve_forks(control)
    finally:
        control.close()
