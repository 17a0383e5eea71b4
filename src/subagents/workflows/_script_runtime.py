"""The script runtime: one confined guest process per run, serving the host bindings.

`ScriptRuntime` is the seam the engine runs a script through (spec 3.1): it gets the bindings,
the selected directory, the resolved policy and the run's abort signal, and reports the
guest's terminal value or a failure `{kind, message}`. `GuestProcessRuntime` is the real one:
it launches `python -I -S -B _guest.py FD` through `policy.spawn` (confined unless the policy
is `danger-full-access`), serves framed calls until the guest's `done`, and kills every process
of the run when the run ends, is aborted, or is cancelled. Inbound frames are validated by
`_protocol`; a call the bindings reject is answered with its message.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import Literal, Protocol, TypeAlias

from .._task_owner import TaskOwner
from ..errors import SubagentsError
from ..messages import JsonValue
from ..policy import ConfinedProcess, Confinement, Limits, SandboxPolicy, confinement, spawn
from ._host import Binding, render_exception
from ._protocol import (
    MAX_FRAME_BYTES,
    MAX_PENDING_CALLS,
    Call,
    Done,
    ProtocolError,
    decode_frame,
    read_frame,
    reply_frame,
)
from ._reports import AbortSignal

__all__ = [
    "FailureKind",
    "GUEST_PATH",
    "GuestProcessRuntime",
    "RunFailure",
    "RunOutcome",
    "RunSpec",
    "ScriptRuntime",
]

GUEST_PATH = str(Path(__file__).with_name("_guest.py"))
FailureKind: TypeAlias = Literal[
    "exception", "abort", "worker-exit", "protocol", "output-limit", "sandbox-unavailable"
]
_STDERR_TAIL = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """One script execution, as the engine requests it."""

    bindings: Mapping[str, Binding]
    cwd: str
    """The run's selected working directory (the process cwd)."""
    policy: SandboxPolicy
    """The parent session's policy, resolved once for the run."""
    limits: Limits
    abort: AbortSignal
    on_launch: Callable[[int, ConfinedProcess], None] = field(default=lambda pid, process: None)
    """Called with the guest's pid once it runs."""


@dataclass(frozen=True, slots=True)
class RunFailure:
    kind: FailureKind
    message: str


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """The guest's terminal value (validated by the engine), or why there is none."""

    value: JsonValue = None
    failure: RunFailure | None = None


class ScriptRuntime(Protocol):
    """Runs one workflow script against the host bindings."""

    @property
    def language(self) -> str: ...

    def confinement(self) -> Confinement:
        """Whether this runtime can enforce a file policy (`backend` None: it cannot)."""
        ...

    async def run(self, spec: RunSpec) -> RunOutcome: ...


class GuestProcessRuntime:
    """Runs the guest as its own confined Python process (spec 7.3)."""

    language = "python"

    def __init__(
        self,
        *,
        python: str = sys.executable,
        guest: str = GUEST_PATH,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_pending_calls: int = MAX_PENDING_CALLS,
        probe: Callable[[], Confinement] = confinement,
    ) -> None:
        self._argv = [python, "-I", "-S", "-B", guest]
        self._guest = guest
        self._max_frame = max_frame_bytes
        self._max_pending = max_pending_calls
        self._probe = probe

    def confinement(self) -> Confinement:
        return self._probe()

    async def run(self, spec: RunSpec) -> RunOutcome:
        if spec.abort.reason is not None:
            return RunOutcome(failure=RunFailure("abort", spec.abort.reason))
        host_end, guest_end = socket.socketpair()
        try:
            process = await self._launch(spec, guest_end)
        except BaseException:
            host_end.close()
            raise
        finally:
            guest_end.close()
        if isinstance(process, RunOutcome):
            host_end.close()
            return process
        try:
            spec.on_launch(process.pid, process)
            session = _Session(spec, process, self._max_frame, self._max_pending)
            return await session.serve(host_end)
        finally:
            await process.kill()
            host_end.close()

    async def _launch(
        self, spec: RunSpec, guest_end: socket.socket
    ) -> ConfinedProcess | RunOutcome:
        fd = guest_end.fileno()
        try:
            return await spawn(
                [*self._argv, str(fd)],
                policy=spec.policy,
                cwd=spec.cwd,
                limits=spec.limits,
                pass_fds=(fd,),
                stdin=DEVNULL,
                stdout=PIPE,
                stderr=PIPE,
                readable=(str(Path(self._guest).parent),),
            )
        except SubagentsError as exc:
            kind: FailureKind = (
                "sandbox-unavailable" if str(exc.code) == "SANDBOX_UNAVAILABLE" else "exception"
            )
            return RunOutcome(failure=RunFailure(kind, exc.message))
        except OSError as exc:
            return RunOutcome(
                failure=RunFailure("exception", f"could not start the workflow guest: {exc}")
            )


class _Session:
    """One guest's channel: answer its calls until it is done, gone, or aborted."""

    def __init__(
        self, spec: RunSpec, process: ConfinedProcess, max_frame: int, max_pending: int
    ) -> None:
        self._max_frame = max_frame
        self._max_pending = max_pending
        self._spec = spec
        self._process = process
        self._owner = TaskOwner("workflow guest channel")
        self._in_flight: set[int] = set()
        self._stderr = bytearray()
        self._replies: socket.socket | None = None
        self._reply_lock = asyncio.Lock()

    async def serve(self, host_end: socket.socket) -> RunOutcome:
        reader, writer = await asyncio.open_unix_connection(sock=host_end)
        # Replies go out on a descriptor of their own: a write to a guest that already exited
        # would make the stream transport drop its unread input, the guest's `done` included.
        self._replies = replies = host_end.dup()
        replies.setblocking(False)
        abort = self._spec.abort.future()
        try:
            for stream, keep in (
                (self._process.process.stdout, False),
                (self._process.process.stderr, True),
            ):
                if stream is not None:
                    self._owner.spawn(self._drain(stream, keep))
            frames = self._owner.spawn(self._frames(reader, writer))
            await asyncio.wait({frames, abort}, return_when=asyncio.FIRST_COMPLETED)
            if abort.done():
                return RunOutcome(failure=RunFailure("abort", abort.result()))
            done = frames.result()
            if isinstance(done, ProtocolError):
                return RunOutcome(failure=RunFailure("protocol", str(done)))
            if done is not None:
                return RunOutcome(value=done.result)
            return RunOutcome(failure=RunFailure("worker-exit", await self._exit_text()))
        finally:
            abort.cancel()
            writer.close()
            await self._process.kill()
            await self._owner.aclose()
            replies.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _exit_text(self) -> str:
        code = await self._process.wait()
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        text = f"the workflow guest {how} before returning a result"
        tail = self._stderr.decode("utf-8", "replace").strip()
        return f"{text}; its stderr ends with:\n{tail}" if tail else text

    async def _drain(self, stream: asyncio.StreamReader, keep: bool) -> None:
        while chunk := await stream.read(1 << 16):
            if keep:
                self._stderr += chunk
                del self._stderr[:-_STDERR_TAIL]

    async def _frames(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Done | ProtocolError | None:
        """The guest's `done`, None when it closed the channel, or how it broke the protocol.

        A broken protocol is returned, not raised: it is an expected outcome of an untrusted
        guest that the run reports, and a task that raised would be logged with a traceback.
        """
        try:
            return await self._serve_frames(reader, writer)
        except ProtocolError as exc:
            return exc

    async def _serve_frames(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Done | None:
        while True:
            body = await read_frame(reader, max_bytes=self._max_frame)
            if body is None:
                return None
            frame = decode_frame(body)
            if isinstance(frame, Done):
                return frame
            if frame.id in self._in_flight:
                raise ProtocolError(
                    f"workflow guest reused call id {frame.id} while it was in flight"
                )
            if len(self._in_flight) >= self._max_pending:
                raise ProtocolError(
                    f"workflow guest has more than {len(self._in_flight)} calls in flight"
                )
            self._in_flight.add(frame.id)
            self._owner.spawn(self._answer(frame, writer), name=f"guest call {frame.fn}")

    async def _answer(self, call: Call, writer: asyncio.StreamWriter) -> None:
        try:
            value = await self._spec.bindings[call.fn](call.arg)
            data = reply_frame(call.id, value=value)
        except Exception as exc:
            data = reply_frame(call.id, error=render_exception(exc))
        finally:
            self._in_flight.discard(call.id)
        await self._reply(data)

    async def _reply(self, data: bytes) -> None:
        """Send one whole reply frame; a guest that is gone no longer needs it.

        A guest may exit right after its `done` without reading a reply: the write then fails
        (EPIPE, ECONNRESET) and is dropped, and the frames it sent are still read.
        """
        if self._replies is None or self._replies.fileno() < 0:
            return
        async with self._reply_lock:  # one frame at a time, never interleaved
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await asyncio.get_running_loop().sock_sendall(self._replies, data)
