"""Starting a confined run, waiting for it and killing every process of it.

`spawn` starts `python -I -S -B _launcher.py CONFIG -- [bwrap ...] ARGV` in a new session
with the emptied environment; the launcher sets limits and confinement, then becomes the
target (or bubblewrap). A run ends when its main process exits or is killed; either way every
other process of the run is killed too: the members of its cgroup, else every process of its
dedicated uid, else its process tree and process group (with bubblewrap the tree holds the
pid namespace's init, whose death ends the namespace). Only without a cgroup, bubblewrap and
a dedicated uid can a descendant that calls `setsid()` and outlives its parent escape.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._resource import AsyncResource
from ..errors import ConfigError, ErrorCode, SandboxUnavailable
from . import _procs
from ._confine import UID_BASE, Confinement, confinement
from ._limits import Limits, SandboxFacts
from ._modes import SandboxPolicy
from ._profile import RunPlan, plan_run

__all__ = [
    "CommandResult",
    "ConfinedProcess",
    "DEVNULL",
    "PIPE",
    "run_command",
    "spawn",
]

DEVNULL = subprocess.DEVNULL
PIPE = subprocess.PIPE
log = logging.getLogger("subagents.policy")

_KILL_TIMEOUT = 10.0  # kill() gives up waiting on processes that do not die (D state) after this
_PIPE_GRACE = 2.0  # how long the end of a run waits for its output pipes to close
_ROUNDS = 1000


class ConfinedProcess(AsyncResource):
    """A running confined command.

    Await `wait()` or `kill()` (or use it with `async with`), so that its cgroup and private
    directory are cleaned up. `process.stdin`/`stdout`/`stderr` are the usual asyncio streams.
    """

    def __init__(
        self, process: asyncio.subprocess.Process, *, plan: RunPlan, limits: Limits
    ) -> None:
        self.process = process
        self.pid = process.pid
        self.facts: SandboxFacts = plan.facts
        self.timed_out = False
        self.peak_processes: int | None = None  # `pids.peak` of the run's cgroup, once ended
        self._plan = plan
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._deadline = None if limits.wall_seconds is None else loop.time() + limits.wall_seconds
        self._lock = asyncio.Lock()
        self._ended = False
        # asyncio's Process.wait() also waits for the output pipes to close, which a leftover
        # process holding them would delay forever; a pidfd tells when the main process exits.
        self._exit: asyncio.Future[None] = loop.create_future()
        try:
            self._pidfd: int | None = os.pidfd_open(process.pid)
        except ProcessLookupError:  # it already exited and was reaped
            self._pidfd = None
            self._exit.set_result(None)
        else:
            loop.add_reader(self._pidfd, self._exited)

    def _exited(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
        if not self._exit.done():
            self._exit.set_result(None)

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def wait(self) -> int:
        """Wait for the main process, then end the run (its leftover processes are killed).

        Past `Limits.wall_seconds` from the spawn the run is killed and `timed_out` set.
        Cancelling `wait()` leaves the run alive; `kill()` it.
        """
        try:
            async with asyncio.timeout_at(self._deadline):
                await self.main_exited()
        except TimeoutError:
            self.timed_out = True
        await self._end()
        for _ in range(100):  # set by asyncio's child watcher right after the exit
            code = self.process.returncode
            if code is not None:
                return code
            await asyncio.sleep(0.01)
        raise RuntimeError(f"run {self.pid} ended but asyncio reported no exit status")

    async def main_exited(self) -> None:
        """Return once the main process has exited (other processes of the run may remain)."""
        await asyncio.shield(self._exit)

    async def kill(self) -> None:
        """Kill every process of the run and wait until they have exited; safe to repeat."""
        await self._end()

    noun = "confined run"

    async def _close(self) -> None:
        await self._end()

    def _members(self, main_alive: bool) -> list[int]:
        plan = self._plan
        if plan.cgroup is not None:
            return plan.cgroup.members()
        if plan.dedicated_uid:
            return _procs.owned_by(UID_BASE + self.pid)
        if main_alive:  # once it is reaped, its pid may belong to another process
            return _procs.descendants(self.pid)
        return []

    async def _kill_all(self) -> None:
        for _ in range(_ROUNDS):
            pids = await asyncio.to_thread(self._members, not self._exit.done())
            _procs.kill_all(pids, group=self.pid)
            if not pids:
                return
            await _procs.wait_exited(pids)

    async def _end(self) -> None:
        async with self._lock:
            if self._ended:
                return
            try:
                async with asyncio.timeout(_KILL_TIMEOUT):
                    await self._kill_all()
                    await self.main_exited()
            except TimeoutError:
                log.warning("processes of run %d did not exit after SIGKILL", self.pid)
            try:
                async with asyncio.timeout(_PIPE_GRACE):
                    await self.process.wait()
            except TimeoutError:
                log.warning("a process that escaped run %d holds its output pipes", self.pid)
            finally:
                self._ended = True
                self._exited()
                if self._pidfd is not None:
                    os.close(self._pidfd)
                    self._pidfd = None
                cgroup = self._plan.cgroup
                if cgroup is not None:
                    self.peak_processes = await asyncio.to_thread(cgroup.peak)
                await asyncio.to_thread(self._plan.discard)


async def spawn(
    argv: Sequence[str],
    *,
    policy: SandboxPolicy,
    cwd: str,
    limits: Limits = Limits(),  # noqa: B008 (frozen)
    env: Mapping[str, str] | None = None,
    pass_fds: Sequence[int] = (),
    stdin: int | None = DEVNULL,
    stdout: int | None = PIPE,
    stderr: int | None = PIPE,
    readable: Sequence[str] = (),
    hidden: Sequence[str] = (),
) -> ConfinedProcess:
    """Start `argv` under `policy` (see the package docstring for what a run sees).

    `env` is added to the emptied environment; `readable` paths stay readable and `hidden`
    ones invisible (besides $HOME and $SUBAGENTS_HOME). Raises `SandboxUnavailable` when the
    mode is confined and no backend works here: never a silent unconfined run.
    """
    if not argv:
        raise ConfigError("spawn needs a command to run", code=ErrorCode.USAGE)
    mode = policy.mode
    if mode == "danger-full-access":
        verdict = Confinement(None, None, "danger-full-access asks for no file confinement")
    else:
        verdict = await asyncio.to_thread(confinement)
    if mode != "danger-full-access" and verdict.backend is None:
        raise SandboxUnavailable(
            f"cannot enforce the {mode} file policy: {verdict.detail}", mode=mode
        )
    plan = await asyncio.to_thread(
        functools.partial(
            plan_run,
            argv,
            policy=policy,
            cwd=cwd,
            limits=limits,
            env=env,
            hidden=(*hidden, *policy.hidden),
            readable=readable,
            confinement=verdict,
        )
    )
    try:
        process = await asyncio.create_subprocess_exec(
            plan.argv[0],
            *plan.argv[1:],
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=plan.cwd,
            env=plan.env,
            start_new_session=True,
            pass_fds=(*pass_fds, *plan.pass_fds),
        )
    except BaseException:
        await asyncio.to_thread(plan.discard)
        raise
    plan.started()
    return ConfinedProcess(process, plan=plan, limits=limits)


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a command printed and how it ended (`exit_code` None when it timed out)."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    facts: SandboxFacts | None = None


class _Capture:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.truncated = False

    async def drain(self, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while chunk := await stream.read(65536):
            room = self.limit - len(self.data)
            if len(chunk) > room:
                self.truncated = True
                chunk = chunk[: max(room, 0)]
            self.data += chunk

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


async def run_command(
    argv: Sequence[str],
    *,
    policy: SandboxPolicy,
    cwd: str,
    limits: Limits = Limits(),  # noqa: B008 (frozen)
    timeout: float | None = None,  # noqa: ASYNC109 (a per-command limit, like bash's timeout_ms)
    max_output: int = 1_000_000,
    env: Mapping[str, str] | None = None,
    readable: Sequence[str] = (),
    hidden: Sequence[str] = (),
    pass_fds: Sequence[int] = (),
) -> CommandResult:
    """Run `argv` to completion under `policy` and capture its output.

    At most `max_output` bytes of each stream are kept (`truncated` says so); past `timeout`
    (or `limits.wall_seconds`, the smaller) every process of the run is killed. `pass_fds` are
    inherited by the run (the caller keeps and closes its own copies).
    """
    bounds = [t for t in (timeout, limits.wall_seconds) if t is not None]
    proc = await spawn(
        argv,
        policy=policy,
        cwd=cwd,
        limits=limits,
        env=env,
        readable=readable,
        hidden=hidden,
        pass_fds=pass_fds,
    )
    out, err = _Capture(max_output), _Capture(max_output)
    timed_out = False
    try:
        async with asyncio.TaskGroup() as group:
            readers = [
                group.create_task(out.drain(proc.process.stdout)),
                group.create_task(err.drain(proc.process.stderr)),
            ]
            try:
                async with asyncio.timeout(min(bounds) if bounds else None):
                    await proc.main_exited()
            except TimeoutError:
                timed_out = True
            await proc.kill()
            try:
                async with asyncio.timeout(_PIPE_GRACE):
                    for reader in readers:
                        await reader
            except TimeoutError:
                for reader in readers:  # an escaped process still holds a pipe
                    reader.cancel()
    finally:
        await proc.kill()
    return CommandResult(
        exit_code=None if timed_out else proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        truncated=out.truncated or err.truncated,
        facts=proc.facts,
    )
