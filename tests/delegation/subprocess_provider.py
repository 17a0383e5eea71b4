"""A second provider for the tests: each child runs in a subprocess of our own runtime.

The child's session is created here, below its parent, in the shared SQLite store; the process
(`subprocess_child.py`) loads it under this runtime's lease and runs it. Commands go over its
stdin as JSON lines and each is answered once its effect is in the store, so the lifecycle
reads the child's log from the store like any other. It declares no capabilities: a start that
needs a tool filter, a depth limit or an output schema is refused before any child exists.
Nothing in the delegation layer knows this provider: that is what it proves.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from subagents._task_owner import TaskOwner
from subagents.core import Agent, AgentConfig, AgentRuntime
from subagents.delegation import (
    Capability,
    ResumeRequest,
    StartRequest,
    SubagentChild,
)
from subagents.errors import SubagentError
from subagents.ids import SessionId
from subagents.messages import UserMessage
from subagents.sessions import EventRecord

CHILD_PROGRAM = Path(__file__).with_name("subprocess_child.py")

__all__ = ["SubprocessChild", "SubprocessProvider"]


class SubprocessChild:
    """A child running in its own process; this side speaks its command protocol."""

    def __init__(
        self, runtime: AgentRuntime, process: asyncio.subprocess.Process, child_id: SessionId
    ) -> None:
        self._runtime = runtime
        self._process = process
        self._id = child_id
        self._seed_length = 0
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._running = False
        self._pending = False
        self.ready = asyncio.Event()
        self.holding: asyncio.Queue[str] = asyncio.Queue()
        """Call ids of `hold` calls that started in the child (the test waits on them)."""
        self._tasks = TaskOwner(f"child process {child_id}")
        self._reader = self._tasks.spawn(self._read(), name="read replies")
        self._killed = False

    @property
    def id(self) -> SessionId:
        return self._id

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def local_agent(self) -> Agent | None:
        return None

    @property
    def seed_length(self) -> int:
        return self._seed_length

    @property
    def running(self) -> bool:
        return self._running

    @property
    def pending(self) -> bool:
        return self._pending

    @property
    def exited(self) -> bool:
        return self._process.returncode is not None

    async def open(self, config: AgentConfig, *, retry_cut_turn: bool) -> None:
        header = await self._runtime.read_header(self._id)
        self._seed_length = header.seed_length
        self._write(
            {
                "name": config.name,
                "instructions": config.instructions,
                "context": [list(paragraph) for paragraph in config.context],
                "retry_cut_turn": retry_cut_turn,
            }
        )
        await self.ready.wait()
        if self.exited or self._reader.done():
            raise SubagentError(f"the child process of {config.name} exited before it was ready")

    async def send(self, message: UserMessage, *, durable: bool = True) -> UserMessage:
        self._running = True
        encoded = msgspec.json.encode(message).decode()
        await self._call("send", message=encoded, durable=durable)
        return message

    async def wake(self) -> None:
        self._running = True
        await self._call("wake")

    async def interrupt(self, *, keep_inbox: bool = True) -> None:
        if not self._killed:
            await self._call("interrupt", keep_inbox=keep_inbox)

    async def wait(self) -> None:
        if not self._killed:
            await self._call("wait")

    async def kill(self, *, keep_inbox: bool = False) -> None:
        if self._killed:
            return
        self._killed = True
        await self._call("kill", keep_inbox=keep_inbox)
        await self._process.wait()
        await self._tasks.aclose()

    async def records(self) -> Sequence[EventRecord]:
        return await self._runtime.read_log(self._id)

    def _write(self, line: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write((json.dumps(line) + "\n").encode())

    async def _call(self, op: str, **fields: Any) -> None:
        call = next(self._ids)
        reply = self._replies[call] = asyncio.get_running_loop().create_future()
        self._write({"id": call, "op": op, **fields})
        answer = await reply
        if "error" in answer:
            raise SubagentError(f"the child process refused {op}: {answer['error']}")
        self._running, self._pending = bool(answer["running"]), bool(answer["pending"])

    async def _read(self) -> None:
        assert self._process.stdout is not None
        while line := await self._process.stdout.readline():
            message = json.loads(line)
            if "id" in message:
                self._replies.pop(int(message["id"])).set_result(message)
            elif "holding" in message:
                self.holding.put_nowait(str(message["holding"]))
            elif message.get("ready"):
                self.ready.set()
        self.ready.set()  # an `open` still waiting sees the exit
        for reply in self._replies.values():  # the process ended: nothing answers any more
            if not reply.done():
                reply.set_result(
                    {"error": f"the child process exited ({self._process.returncode})"}
                )


class SubprocessProvider:
    """Runs each child in its own process of our runtime, against the same SQLite store."""

    capabilities: frozenset[Capability] = frozenset()
    inherits_parent_context = False

    def __init__(
        self, runtime: AgentRuntime, *, store: Path, script: Path, name: str = "subprocess"
    ) -> None:
        self._runtime = runtime
        self._store = store
        self._script = script
        self._name = name
        self.started: list[SubprocessChild] = []
        """Every child process this provider started, in order (live or not)."""
        self.arrivals: asyncio.Queue[SubprocessChild] = asyncio.Queue()
        """Each child process once it is ready (the test waits on them)."""

    @property
    def name(self) -> str:
        return self._name

    async def start(self, request: StartRequest) -> SubagentChild:
        # The session is created here, below its parent, and run there.
        agent = await self._runtime.create_child(
            request.parent,
            config=request.config,
            cwd=request.cwd,
            first_events=(request.descriptor,),
        )
        await agent.dispose(keep_inbox=True)
        await self._runtime.store.flush()
        return await self._spawn(agent.id, request.config, retry_cut_turn=False)

    async def resume(self, request: ResumeRequest) -> SubagentChild:
        return await self._spawn(
            request.header.id, request.config, retry_cut_turn=request.retry_cut_turn
        )

    def list(self) -> list[SubagentChild]:
        return [child for child in self.started if not child.exited]

    async def _spawn(
        self, child_id: SessionId, config: AgentConfig, *, retry_cut_turn: bool
    ) -> SubprocessChild:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(CHILD_PROGRAM),
            "--store",
            str(self._store),
            "--session",
            child_id,
            "--lease-from",
            self._runtime.holder,
            "--script",
            str(self._script),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        child = SubprocessChild(self._runtime, process, child_id)
        self.started.append(child)
        await child.open(config, retry_cut_turn=retry_cut_turn)
        self.arrivals.put_nowait(child)
        return child
