"""How the SQLite store reaches its writer: a thread, then a process of its own.

A link takes `WriteBatch`es in order and calls back, on the event loop, with the writer's
`WrittenBatch`es in the same order (`on_written`), or once with the error that ends the writer
(`on_broken`). The store keeps the waiters; a link only carries data.

- `ThreadLink`: the writer in a thread of this process. Nothing to start, but it shares the GIL
  with the event loop, and a busy loop starves it (`_sqlite_process.py` says why).
- `ProcessLink`: the writer in a process of its own, forked by this process's fork server.
  Starting that server costs a Python start (some 100 ms, once per process).
- `HandoverLink` (the default): when this process's fork server runs already, the first
  batch waits for a writer process (a few milliseconds). Otherwise the thread writes from the
  first batch on while the server starts; once the process is ready, the batches the thread
  has not begun go to it, and it takes over when the thread has answered the one it is writing
  (a GIL-starved thread would take long to drain a queue). A short command never waits for a
  Python to start, and where no process can be started the thread keeps writing.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import queue
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Literal, Protocol

import msgspec

from ..errors import ErrorCode, StoreError
from ._sqlite_process import ForkRequest
from ._sqlite_wire import (
    FrameReader,
    Hello,
    Open,
    Ready,
    Stop,
    WriteBatch,
    WriterFailed,
    WrittenBatch,
    decode_reply,
    encode_frame,
    error_from_wire,
)

__all__ = ["HandoverLink", "OnBroken", "OnWritten", "ProcessLink", "ThreadLink", "WriterLink"]

log = logging.getLogger("subagents.sessions")

OnWritten = Callable[[WrittenBatch], None]
OnBroken = Callable[[StoreError], None]

READY_TIMEOUT = 60.0
"""How long a new writer process may take to open the store (a loaded machine is slow)."""


class WriterLink(Protocol):
    def start(self) -> None:
        """Start the writer now, not with the first batch; safe to call twice."""
        ...

    def send(self, batch: WriteBatch) -> None:
        """Hand `batch` to the writer (never blocks)."""
        ...

    async def aclose(self) -> None:
        """Let the writer write what it was sent, then stop it; safe to call twice."""
        ...


class ThreadLink:
    """The writer in a thread of this process, on the connection the store opened."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        batch_max: int,
        on_written: OnWritten,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        from ._sqlite_writer import TransactionWriter

        self._writer = TransactionWriter(conn, path)
        self._batch_max = batch_max
        self._on_written = on_written
        self._loop = loop
        self._queue: queue.SimpleQueue[WriteBatch | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, name="subagents-sqlite-writer", daemon=True
        )
        self._closed = False

    def start(self) -> None:
        if self._thread.ident is None and not self._closed:
            self._thread.start()

    def send(self, batch: WriteBatch) -> None:
        self.start()  # on the first batch at the latest: a store that only reads has no thread
        self._queue.put(batch)

    def steal(self) -> list[WriteBatch]:
        """The batches sent that the thread has not taken yet, taken back (in order)."""
        stolen: list[WriteBatch] = []
        while True:
            try:
                batch = self._queue.get_nowait()
            except queue.Empty:
                return stolen
            assert batch is not None  # the stop comes with `aclose`, after every steal
            stolen.append(batch)

    async def aclose(self) -> None:
        if self._thread.ident is None:  # never started: only its connection to close
            self._closed = True
            await asyncio.to_thread(self._writer.conn.close)
            return
        if not self._closed:
            self._closed = True
            self._queue.put(None)
        await asyncio.to_thread(self._thread.join)  # runs to the end even if we are cancelled

    def _run(self) -> None:
        from ._sqlite_process import LEASE_RENEW_SECONDS

        writer = self._writer
        renewed = time.time()
        try:
            stop = False
            while not stop:
                if time.time() - renewed > LEASE_RENEW_SECONDS:
                    renewed = time.time()
                    writer.renew_leases(renewed)
                try:
                    taken = self._queue.get(timeout=LEASE_RENEW_SECONDS)
                except queue.Empty:
                    continue
                batches: list[WriteBatch] = []
                size = 0
                while True:
                    if taken is None:
                        stop = True
                        break
                    batches.append(taken)
                    size += taken.size
                    if size >= self._batch_max:
                        break
                    try:
                        taken = self._queue.get_nowait()
                    except queue.Empty:
                        break
                if batches:
                    answers = writer.write(batches)
                    # RuntimeError: the loop is gone, so nobody is waiting.
                    with contextlib.suppress(RuntimeError):
                        self._loop.call_soon_threadsafe(self._tell, answers)
        finally:
            writer.conn.close()

    def _tell(self, answers: list[WrittenBatch]) -> None:
        for answer in answers:
            self._on_written(answer)


_READ_SIZE = 64 * 1024
"""Replies are small. A `recv` of more than glibc's mmap threshold (128 KiB) maps and unmaps
its buffer on every call: some 8 us a reply, where 64 KiB takes about one."""


class _Channel:
    """The store's end of the socket to its writer process: frames out, replies in.

    Not an asyncio transport: once a transport holds bytes the kernel did not take, it sends
    more only when the loop next polls, and a busy loop polls rarely (in S3, the 2,000
    children's first steps are one iteration of some 250 ms). The writer then sat idle while
    megabytes waited here, and committed them all after the run's work was done. A channel
    offers its backlog to the kernel again with every write, so the writer, on another core,
    drains the socket while the loop works.
    """

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        *,
        on_reply: Callable[[object], None],
        on_lost: Callable[[], None],
    ) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._loop = loop
        self._on_reply = on_reply
        self._on_lost = on_lost
        self._frames = FrameReader()
        self._out = bytearray()
        """Bytes the kernel has not taken yet (deleting from the front of a bytearray is
        cheap)."""
        self._watching = False
        self._open = True
        loop.add_reader(sock.fileno(), self._readable)

    def write(self, data: bytes) -> None:
        if not self._open:
            return  # lost: the link fails what was in flight
        self._out += data
        self._push()

    def _push(self) -> None:
        out = self._out
        try:
            while out:
                sent = self._sock.send(out)
                del out[:sent]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:  # the writer is gone: its end closed
            self.close()
            return
        if out and not self._watching:
            self._loop.add_writer(self._sock.fileno(), self._push)
            self._watching = True
        elif not out and self._watching:
            self._loop.remove_writer(self._sock.fileno())
            self._watching = False

    def _readable(self) -> None:
        try:
            data = self._sock.recv(_READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        for body in self._frames.feed(data):
            self._on_reply(decode_reply(body))
            if not self._open:
                return

    def close(self) -> None:
        """Stop reading and writing and close the socket; `on_lost` follows, once."""
        if not self._open:
            return
        self._open = False
        fd = self._sock.fileno()
        self._loop.remove_reader(fd)
        if self._watching:
            self._loop.remove_writer(fd)
        self._sock.close()
        self._out.clear()
        self._loop.call_soon(self._on_lost)


class ProcessLink:
    """The writer in a process of its own, over a socket pair.

    `start` has it forked; `on_ready` is called once it has opened the store, or
    `on_unavailable` once if it never does. Batches sent before it is ready, or while it is
    held (`hold`), wait here, in order, until it is ready and `release`d. If it exits before
    it is told to stop, every write in flight fails (`on_broken`) and so does every later one.
    """

    def __init__(
        self,
        path: Path,
        *,
        synchronous: Literal["NORMAL", "FULL"],
        batch_max: int,
        on_written: OnWritten,
        on_broken: OnBroken,
        loop: asyncio.AbstractEventLoop,
        on_ready: Callable[[], None] | None = None,
        on_unavailable: Callable[[StoreError], None] | None = None,
        hold: bool = False,
    ) -> None:
        self._path = path
        self._synchronous: Literal["NORMAL", "FULL"] = synchronous
        self._batch_max = batch_max
        self._on_written = on_written
        self._on_broken = on_broken
        self._on_ready = on_ready
        self._on_unavailable = on_unavailable
        self._loop = loop
        self._held = hold
        self._waiting: list[tuple[WriteBatch, bytes]] = []
        """Batches and their frames not written to the socket yet (before it is ready, or
        while held)."""
        self._channel: _Channel | None = None
        self._start: asyncio.Task[None] | None = None
        self._ready = False
        self._opening = False
        """`Open` was sent: the writer is about to open the store, if it has not yet."""
        self._stopping = False
        self._gone = asyncio.Event()
        """Set once the socket closed (the writer exited)."""
        self._settled = asyncio.Event()
        """Set once it is ready, or will never be."""
        self._broken: StoreError | None = None
        self.pid: int | None = None
        """The writer process's id, once it is ready."""

    def start(self) -> None:
        """Have the writer forked (in the background); safe to call twice."""
        if self._start is None:
            self._start = self._loop.create_task(self._started(), name="sqlite writer start")

    def send(self, batch: WriteBatch) -> None:
        if self._broken is not None:
            raise self._broken
        frame = encode_frame(batch)
        if self._ready and not self._held and self._channel is not None:
            self._channel.write(frame)
            return
        self._waiting.append((batch, frame))
        self.start()

    def take_back(self) -> list[WriteBatch]:
        """The batches that never reached the writer (it will not be ready), in order."""
        batches = [batch for batch, _ in self._waiting]
        self._waiting.clear()
        return batches

    def release(self) -> None:
        """Let the frames held so far (and every later one) go to the writer."""
        self._held = False
        self._flush()

    def _flush(self) -> None:
        if not self._ready or self._held or self._channel is None:
            return
        if self._waiting:
            self._channel.write(b"".join(frame for _, frame in self._waiting))
            self._waiting.clear()
        if self._stopping:
            self._channel.write(encode_frame(Stop()))

    async def _started(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            request = ForkRequest(str(self._path), self._synchronous, self._batch_max)
            if _FORKS.running:
                # A running server takes the request at once: no thread, and no loop turn
                # (a busy loop's turns are long) before the fork.
                try:
                    _FORKS.fork_writer(theirs.fileno(), request)
                finally:
                    theirs.close()
            else:
                sending = self._loop.run_in_executor(
                    None, _FORKS.fork_writer, theirs.fileno(), request
                )
                try:
                    await asyncio.shield(sending)
                finally:
                    if not sending.done():  # cancelled: never close it under the sending thread
                        await asyncio.wait([sending])
                    theirs.close()
            self._channel = _Channel(ours, self._loop, on_reply=self._reply, on_lost=self._lost)
            if not self._stopping:
                # Told now, not after its `Hello`: one loop turn less before it is ready.
                self._channel.write(encode_frame(Open()))
                self._opening = True
            async with asyncio.timeout(READY_TIMEOUT):
                await self._settled.wait()
        except (OSError, TimeoutError) as exc:
            if not self._ready:
                self._unavailable(
                    StoreError(
                        f"cannot start the store's writer process for {self._path}: "
                        f"{type(exc).__name__}: {exc}",
                        code=ErrorCode.STORE,
                    )
                )
        finally:
            if self._channel is None:
                ours.close()  # never handed to a channel (which closes it otherwise)

    def _reply(self, reply: object) -> None:
        if isinstance(reply, WrittenBatch):
            self._on_written(reply)
        elif isinstance(reply, Hello):
            pass  # told to open already (`_started`)
        elif isinstance(reply, Ready):
            if self._broken is not None:  # given up on (it was too slow): let it go
                if self._channel is not None:
                    self._channel.close()
                return
            self._ready = True
            self.pid = reply.pid
            self._flush()
            self._settled.set()
            if self._on_ready is not None:
                self._on_ready()
        elif isinstance(reply, WriterFailed):
            error = error_from_wire(reply.error)
            self._unavailable(error if isinstance(error, StoreError) else StoreError(error.message))

    def _lost(self) -> None:
        self._gone.set()
        self._settled.set()
        if self._stopping and not self._ready:
            return  # closed before it was ready: nothing went through it
        if not self._ready:
            self._unavailable(
                StoreError(
                    f"the store's writer process for {self._path} exited before it was ready",
                    code=ErrorCode.STORE,
                )
            )
        elif not self._stopping:
            self._break(
                StoreError(
                    f"the store's writer process for {self._path} (pid {self.pid}) exited "
                    "before it was told to stop; its writes in flight are unknown",
                    code=ErrorCode.STORE,
                    retryable=True,
                )
            )

    def _unavailable(self, error: StoreError) -> None:
        """It never became ready: its caller decides (a handover keeps its thread)."""
        self._settled.set()
        if self._on_unavailable is not None and self._broken is None:
            self._broken = error
            self._on_unavailable(error)
        else:
            self._break(error)

    def _break(self, error: StoreError) -> None:
        if self._broken is None:
            self._broken = error
            self._waiting.clear()
            self._on_broken(error)

    @property
    def waiting(self) -> bool:
        """Whether batches wait here to be written to the socket."""
        return bool(self._waiting)

    async def settled(self) -> None:
        """Wait until it is ready, or never will be (its start gives up by itself)."""
        if self._start is not None:
            await self._settled.wait()

    async def aclose(self) -> None:
        if self._start is None:
            return  # never started
        if not self._stopping:
            self._stopping = True
            self._flush()
        if self._opening and not self._settled.is_set():
            # Told to open the store: it is running and opens it in a moment. Closing now
            # would leave it touching the file after the store is closed.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(READY_TIMEOUT):
                    await self._settled.wait()
        if not self._ready:
            # Not told to open the store, or it failed: closing our end ends it (whenever
            # it is forked) before it touches the file, and nobody waits for it to start.
            self._start.cancel()
            await asyncio.wait([self._start])
        elif self._broken is None:
            await self._gone.wait()
        if self._channel is not None:
            self._channel.close()
        if self._broken is not None and self.pid is not None:
            with contextlib.suppress(OSError):  # it may have exited already
                os.kill(self.pid, signal.SIGKILL)


class HandoverLink:
    """A thread writes until the writer process is ready, then the process does (see module)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        synchronous: Literal["NORMAL", "FULL"],
        batch_max: int,
        on_written: OnWritten,
        on_broken: OnBroken,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._on_written = on_written
        self._thread = ThreadLink(
            conn, path, batch_max=batch_max, on_written=self._thread_wrote, loop=loop
        )
        self._with_thread = 0
        """Batches the thread was given and has not answered."""
        self.process = ProcessLink(
            path,
            synchronous=synchronous,
            batch_max=batch_max,
            on_written=on_written,
            on_broken=on_broken,
            loop=loop,
            on_ready=self._process_ready,
            on_unavailable=self._process_unavailable,
            hold=True,
        )
        self._to_process = False
        self._started = False
        self._closing = False
        self.handed_over = asyncio.Event()
        """Set once the process writes every batch sent from then on (and the thread none)."""

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.process.start()
        if _FORKS.running:
            # Its fork server runs already: a writer is ready in a few milliseconds, so the
            # first batches wait for it rather than for a GIL-starved thread.
            self._to_process = True
            self.process.release()

    def send(self, batch: WriteBatch) -> None:
        self.start()
        if self._to_process:
            self.process.send(batch)
            return
        self._with_thread += 1
        self._thread.send(batch)

    def _thread_wrote(self, answer: WrittenBatch) -> None:
        self._with_thread -= 1
        self._on_written(answer)
        if self._to_process and not self._with_thread and not self.handed_over.is_set():
            self._release()  # the thread has answered all it had: the process goes on

    def _process_ready(self) -> None:
        if self._closing and not self._to_process:
            # Ready while the thread drains what it has (its stop is queued): the thread
            # writes it all, and the process, sent nothing, only needs to be let go to stop.
            self.process.release()
            return
        self._to_process = True
        # What the thread has not taken yet goes to the process (it is behind them); what it
        # is writing, the process waits for.
        stolen = self._thread.steal()
        self._with_thread -= len(stolen)
        for batch in stolen:
            self.process.send(batch)
        if not self._with_thread:
            self._release()

    def _release(self) -> None:
        self.process.release()
        self.handed_over.set()

    def _process_unavailable(self, error: StoreError) -> None:
        log.warning("the event store writes from a thread: %s", error.message)
        self._to_process = False
        for batch in self.process.take_back():  # sent to it while it started: the thread's
            self._with_thread += 1
            self._thread.send(batch)

    async def aclose(self) -> None:
        if self.process.waiting:
            # Sent to a writer still starting (its fork server was warm): it writes them once
            # ready, or the thread takes them back (`_process_unavailable`) before it stops.
            await self.process.settled()
        self._closing = True
        await self._thread.aclose()
        await self.process.aclose()


class _ForkServer:
    """This process's fork server (`_sqlite_process.serve_forks`), started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._owner = 0
        """The process that started it (a forked copy of this one starts its own)."""

    @property
    def running(self) -> bool:
        """Whether this process started its fork server already (and it has not died)."""
        return self._control is not None and self._owner == os.getpid()

    def fork_writer(self, fd: int, request: ForkRequest) -> None:
        """Have a writer forked on a copy of `fd`. Blocking (a first start): call it off the loop.

        The request is written and not waited for: the writer says when it is ready.
        """
        message = msgspec.msgpack.encode(request)
        with self._lock:
            for attempt in (1, 2):
                control = self._started()
                try:
                    socket.send_fds(control, [message], [fd])
                    return
                except OSError:
                    self._stop()  # it died: start another, once
                    if attempt == 2:
                        raise

    def _started(self) -> socket.socket:
        if self._control is not None and self._owner == os.getpid():
            return self._control
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = (
            f"import sys; sys.path.insert(0, {_package_parent()!r}); "
            "from subagents.sessions._sqlite_process import main; main()"
        )
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", code, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # the terminal's signals are for its store's process
            )
        finally:
            theirs.close()
        if self._owner == 0:
            atexit.register(self._stop)
        self._control, self._owner = ours, os.getpid()
        return ours

    def _stop(self) -> None:
        """Close the control socket (the server exits when it sees that) and forget it.

        Not waited for: a server still starting would hold this process's exit up. It is
        reaped if it has exited already, else by whoever inherits it.
        """
        control, process = self._control, self._process
        self._control = self._process = None
        if control is not None:
            control.close()
        if process is not None and process.poll() is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                del process


def _package_parent() -> str:
    """The directory holding this copy of the `subagents` package.

    It touches the disk, so it is called as the fork server starts (off the loop), not when
    the module is imported (which may be on the loop: the first write imports it).
    """
    return str(Path(__file__).resolve().parents[2])


_FORKS = _ForkServer()
