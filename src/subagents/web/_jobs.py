"""The console's controls run as CLI processes: `subagents send|steer|interrupt|run|...`.

So the console never holds a tree and never runs an agent: a tree another process holds takes
the command through its control channel, and a tree nobody holds is taken and run by the new
process, exactly as when a person types the command. A job is one such process; the console
keeps what it reported (exit status, last error line, result) for the jobs list. The kinds
are `send`, `steer`, `interrupt`, `resume`, `run`, `approve` and `deny`.

Each process starts in a session of its own: a run started from the console goes on when the
console stops (or is stopped with Ctrl-C), as a run started from a terminal would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from .._task_owner import TaskOwner
from ..errors import ErrorCode, UsageError

__all__ = ["MAX_RUNNING", "Job", "JobKind", "Jobs"]

JobKind = Literal["send", "steer", "interrupt", "resume", "run", "approve", "deny"]
MAX_RUNNING = 32
"""Jobs running at once; one more is refused (`BAD_REQUEST`) until one ends."""
_HISTORY = 100
_OUTPUT_BYTES = 1 << 20
"""What is kept of a job's stdout (its `--json` result); a stream's lines are read and dropped."""
_LINE_BYTES = 16 << 20
"""The longest line of a `--stream` read (one event: a long tool result fits)."""
_ERROR_CHARS = 500


@dataclass(slots=True)
class Job:
    """One control process and what it reported."""

    id: int
    kind: JobKind
    root: str | None
    name: str | None
    started_at: float
    state: Literal["running", "done", "failed"] = "running"
    exit_code: int | None = None
    error: str | None = None
    result: Any = None
    session_id: str | None = None
    ended_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "root": self.root,
            "name": self.name,
            "state": self.state,
            "exit_code": self.exit_code,
            "error": self.error,
            "result": self.result,
            "session_id": self.session_id,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }


async def _head(stream: asyncio.StreamReader, limit: int) -> bytes:
    """The first `limit` bytes of everything `stream` carries; the rest is read and dropped."""
    kept = bytearray()
    while chunk := await stream.read(65536):
        kept += chunk[: max(limit - len(kept), 0)]
    return bytes(kept)


async def _tail(stream: asyncio.StreamReader, limit: int) -> bytes:
    """The last `limit` bytes of everything `stream` carries (the error line comes last)."""
    kept = bytearray()
    while chunk := await stream.read(65536):
        kept += chunk
        del kept[: max(len(kept) - limit, 0)]
    return bytes(kept)


def _json_object(line: bytes) -> dict[str, Any] | None:
    try:
        item: object = json.loads(line)
    except ValueError:
        return None
    return cast("dict[str, Any]", item) if isinstance(item, dict) else None


class Jobs:
    """Starts the control processes of one console and follows them to their end."""

    def __init__(self, *, store: Path, tenant: str, cwd: Path | None = None) -> None:
        self._store = store
        self._tenant = tenant
        self._cwd = cwd
        self._jobs: deque[Job] = deque(maxlen=_HISTORY)
        self._next_id = 1
        self._tasks = TaskOwner("web console jobs")
        self.version = 0
        """Counts changes to any job: a stream sends the list again when it moved."""

    def listing(self, root: str | None = None) -> list[dict[str, Any]]:
        """The jobs, newest first (only `root`'s when given)."""
        jobs = [j for j in reversed(self._jobs) if root is None or j.root == root]
        return [j.to_json() for j in jobs]

    @property
    def running(self) -> list[Job]:
        return [j for j in self._jobs if j.state == "running"]

    async def start(
        self,
        kind: JobKind,
        arguments: Sequence[str],
        *,
        options: tuple[str, ...] = (),
        root: str | None,
        name: str | None,
    ) -> Job:
        """Start `subagents KIND OPTIONS -- ARGUMENTS` with the console's store and tenant.

        `arguments` are positional: they follow `--`, so a message starting with `-` is text,
        never an option.
        """
        if len(self.running) >= MAX_RUNNING:
            raise UsageError(
                f"{MAX_RUNNING} commands are running already; wait for one to end",
                code=ErrorCode.BAD_REQUEST,
            )
        output = ["--stream"] if kind == "run" else ["--json"]
        argv = [
            sys.executable,
            "-m",
            "subagents",
            kind,
            "--store",
            str(self._store),
            "--tenant",
            self._tenant,
            *output,
            *options,
            "--",
            *arguments,
        ]
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self._cwd,
            env=dict(os.environ),
            start_new_session=True,
            limit=_LINE_BYTES,
        )
        job = Job(
            id=self._next_id,
            kind=kind,
            root=root,
            name=name,
            started_at=time.time(),
            session_id=root,
        )
        self._next_id += 1
        self._jobs.append(job)
        self.version += 1
        self._tasks.spawn(self._follow(job, process), name=f"job {job.id}")
        return job

    async def _follow(self, job: Job, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        assert process.stderr is not None
        code: int | None = None
        result: Any = None
        errors: asyncio.Task[bytes] | None = None
        try:
            async with asyncio.TaskGroup() as group:
                errors = group.create_task(_tail(process.stderr, _OUTPUT_BYTES))
                result = await self._read_output(job, process.stdout)
                code = await process.wait()
        except Exception as exc:  # a broken pipe or an overlong line: the job is over for us
            job.error = f"the console lost this command's output: {exc}"[:_ERROR_CHARS]
        finally:
            # Always settled: a job left `running` would hold one of the slots for good.
            job.exit_code = code
            job.result = result
            if code is not None and code != 0 and errors is not None and errors.done():
                lines = errors.result().decode(errors="replace").strip().splitlines()
                job.error = lines[-1][:_ERROR_CHARS] if lines else None
            job.state = "done" if code == 0 else "failed"
            job.ended_at = time.time()
            self.version += 1

    async def _read_output(self, job: Job, stdout: asyncio.StreamReader) -> Any:
        """The job's result: a `--json` object, or the last line of a `--stream`."""
        if job.kind != "run":
            raw = await _head(stdout, _OUTPUT_BYTES)
            with contextlib.suppress(ValueError):
                return json.loads(raw)
            return None
        result = None
        async for line in stdout:
            item = _json_object(line)
            if item is not None and job.session_id is None:
                job.session_id = str(item.get("session_id") or "") or None
                job.root = job.session_id  # the run's own tree lists it from now on
                self.version += 1
            if item is not None and item.get("type") == "result":
                result = item
        return result

    async def aclose(self) -> None:
        """Stop following the jobs (the processes go on: they are runs of their own)."""
        await self._tasks.aclose()
