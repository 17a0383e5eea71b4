"""A process for the crash tests: run one lead turn on a real SQLite file and die mid-turn.

    python tests/core/crash_child.py --store DB --script YAML (--kill-after-seq N |
        --kill-on-kind KIND[:OCCURRENCE] | --block-in-tool)

It prints one JSON line per stdout line and flushes each: first `{"session": ID}`, then
`{"seq": N, "kind": KIND}` for every `SessionEventPosted`, which the runtime emits only once the
append is durable, so a printed line is an acknowledged event. At the chosen event the listener
SIGKILLs its own process right after printing it: a real kill at an exact, repeatable point.
`--block-in-tool` instead prints `{"blocked": true}` inside the exclusive tool and waits there
forever, for the test to SIGKILL the process from outside.

The test process imports `SCRIPT`, `PROMPT` and `make_tools` to resume the same session.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable

from subagents.core import AgentRuntime, SessionEventPosted
from subagents.sessions import SqliteEventStore
from subagents.testing import ScriptedModel
from subagents.tools import ToolSpec, tool

__all__ = ["PROMPT", "SCRIPT", "make_tools"]

SCRIPT = """\
lead:
  - calls:
      - tool: lookup
        args: {key: alpha}
      - tool: record
        args: {note: alpha is 1}
  - text: Both tools ran.
  - text: Finished.
  - text: Finished again.
"""
"""The first response asks for a parallel-safe call and an exclusive one, then the lead answers.
The later answers let a resumed session run the turns a crash cut short or a new prompt."""

PROMPT = "Look up alpha and record it."


def emit(line: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def make_tools(block: asyncio.Event | None = None) -> list[ToolSpec]:
    """The two tools of the script; with `block`, `record` waits on it (forever) instead."""

    @tool(parallel_safe=True)
    async def lookup(key: str) -> str:
        """Read a value; read-only, so it may run beside other calls.

        Args:
            key: The name to read.
        """
        return f"{key}=1"

    @tool
    async def record(note: str) -> str:
        """Write a note; it has side effects, so it runs alone.

        Args:
            note: What to write.
        """
        if block is not None:
            emit({"blocked": True})
            await block.wait()
        return f"recorded: {note}"

    return [lookup, record]


def kill_listener(
    kill_seq: int | None, kill_kind: tuple[str, int] | None
) -> Callable[[object], None]:
    seen: Counter[str] = Counter()

    def listener(event: object) -> None:
        if not isinstance(event, SessionEventPosted):
            return
        record = event.record
        emit({"seq": record.seq, "kind": record.kind})
        seen[record.kind] += 1
        if record.seq == kill_seq or (record.kind, seen[record.kind]) == kill_kind:
            os.kill(os.getpid(), signal.SIGKILL)

    return listener


async def main(args: argparse.Namespace) -> None:
    block = asyncio.Event() if args.block_in_tool else None
    kill_kind: tuple[str, int] | None = None
    if args.kill_on_kind is not None:
        kind, _, occurrence = str(args.kill_on_kind).partition(":")
        kill_kind = (kind, int(occurrence or 1))
    async with AgentRuntime(
        model=ScriptedModel.from_file(args.script),
        store=SqliteEventStore(args.store),
        tools=make_tools(block),
        cwd=os.path.dirname(args.store),
        model_spec=f"scripted:{args.script}",
    ) as runtime:
        agent = await runtime.create_agent()
        emit({"session": agent.id})
        runtime.subscribe(kill_listener(args.kill_after_seq, kill_kind))
        await agent.followup(PROMPT)
        await agent.when_idle()
    emit({"finished": True})  # the kill point was never reached


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run one lead turn and die mid-turn.")
    parser.add_argument("--store", required=True, help="the SQLite file")
    parser.add_argument("--script", required=True, help="the YAML model script (write SCRIPT)")
    point = parser.add_mutually_exclusive_group(required=True)
    point.add_argument("--kill-after-seq", type=int, help="SIGKILL once seq N is acknowledged")
    point.add_argument(
        "--kill-on-kind", help="SIGKILL once the OCCURRENCE-th (default 1st) KIND is acknowledged"
    )
    point.add_argument(
        "--block-in-tool", action="store_true", help="block forever inside the `record` tool"
    )
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
