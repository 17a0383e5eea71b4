"""The far side of the tests' subprocess provider: one child of a tree, run in this process.

    python tests/delegation/subprocess_child.py --store DB --session ID --lease-from HOLDER
        --script YAML

The parent created the child's session (or it is a stored child being resumed); this process
loads it from the shared SQLite store under the parent's lease and runs it with a scripted
model. stdin's first line is its config and `retry_cut_turn`; every later line is
a command `{"id", "op", ...}` (`send`, `wake`, `interrupt`, `wait`, `kill`), each answered by
one stdout line `{"id", "running", "pending"}` (or `{"id", "error"}`) once its effect is
durable in the store. Unprompted lines: `{"ready": true}` once the child is loaded and
`{"holding": CALL_ID}` when its `hold` tool starts (it then waits until it is interrupted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import msgspec

from subagents._task_owner import TaskOwner
from subagents.core import Agent, AgentConfig, AgentRuntime
from subagents.ids import SessionId
from subagents.messages import UserMessage
from subagents.sessions import SqliteEventStore
from subagents.testing import ScriptedModel
from subagents.tools import ToolContext, tool


def emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


@tool
async def hold(ctx: ToolContext) -> str:
    """Wait until the turn is interrupted."""
    emit({"holding": ctx.call_id})
    await asyncio.Event().wait()
    return "released"


async def answer(runtime: AgentRuntime, agent: Agent, command: dict[str, Any]) -> None:
    """Carry out one command and say so once its effect is in the store."""
    try:
        match command["op"]:
            case "send":
                message = msgspec.json.decode(command["message"], type=UserMessage)
                await agent.send(message, durable=bool(command["durable"]))
            case "wake":
                agent.wake()
            case "interrupt":
                await agent.cancel("parent", keep_inbox=bool(command["keep_inbox"]))
            case "wait":
                await agent.when_idle()
            case "kill":
                await agent.dispose(keep_inbox=bool(command["keep_inbox"]))
            case other:
                raise ValueError(f"unknown command {other!r}")
        await runtime.store.flush()
    except Exception as exc:
        emit({"id": command["id"], "error": f"{type(exc).__name__}: {exc}"})
        return
    emit({"id": command["id"], "running": agent.status == "running", "pending": bool(agent.inbox)})


async def main(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    first = json.loads(await stdin.readline())
    async with AgentRuntime(
        model=ScriptedModel.from_file(args.script),
        store=SqliteEventStore(args.store),
        tools=[hold],
        lease_from=args.lease_from,
    ) as runtime:
        agent = await runtime.resume_agent(
            SessionId(args.session),
            config=AgentConfig(
                name=first["name"],
                instructions=first["instructions"],
                context=tuple((topic, text) for topic, text in first["context"]),
            ),
            retry_cut_turn=bool(first["retry_cut_turn"]),
        )
        await runtime.store.flush()
        emit({"ready": True})
        handlers = TaskOwner("commands")
        while line := await stdin.readline():
            command = json.loads(line)
            task = handlers.spawn(answer(runtime, agent, command), name=str(command["op"]))
            if command["op"] == "kill":
                await task
                break
        await handlers.aclose()
        await agent.dispose(keep_inbox=True)  # stdin closed: the parent is gone


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument("--lease-from", required=True)
    parser.add_argument("--script", required=True)
    asyncio.run(main(parser.parse_args()))
