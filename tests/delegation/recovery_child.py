"""A process for the recovery tests: run (or resume) a scripted tree and die at a chosen event.

    python tests/delegation/recovery_child.py --store DB --script YAML [--resume ROOT]
        [--kill NAME:KIND] [--background-mode one-shot|continuable] [PROMPT]

It prints one JSON line per stdout line: first `{"root": ID}`, then, for a run the kill point
never reached, `{"stop_reason": ..., "output": ...}` (the lead's last turn). With
`--kill NAME:KIND` it SIGKILLs itself right after the agent whose full name is NAME has
durably recorded an event of KIND (the listener sees only acknowledged appends), in the first
run and in every resume alike, so a turn that dies every time can be driven into its bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from typing import Literal, cast

from subagents.core import SessionEventPosted, run_result
from subagents.delegation import DelegationOptions, DelegationRuntime
from subagents.ids import SessionId
from subagents.sessions import SqliteEventStore
from subagents.testing import ScriptedModel


def emit(line: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def main(args: argparse.Namespace) -> None:
    kill: tuple[str, str] | None = None
    if args.kill:
        name, _, kind = str(args.kill).partition(":")
        kill = (name, kind)

    def listener(event: object) -> None:
        if isinstance(event, SessionEventPosted) and (event.name, event.record.kind) == kill:
            os.kill(os.getpid(), signal.SIGKILL)

    mode = cast("Literal['one-shot', 'continuable']", args.background_mode)
    async with DelegationRuntime(
        model=ScriptedModel.from_file(args.script),
        store=SqliteEventStore(args.store),
        cwd=os.path.dirname(args.store),
        model_spec=f"scripted:{args.script}",
        delegation=DelegationOptions(definitions={}, background_mode=mode),
    ) as runtime:
        runtime.subscribe(listener, types=(SessionEventPosted,))
        if args.resume:
            lead = await runtime.resume_tree(SessionId(args.resume))
            emit({"root": lead.id})
            first = lead.session.next_seq
            lead.wake()
        else:
            lead = await runtime.create_agent()
            emit({"root": lead.id})
            first = lead.session.next_seq
            await lead.followup(args.prompt)
        await runtime.wait_quiescent()
        await runtime.store.flush()
        result = run_result(lead.id, lead.session.records[first:])
    emit({"stop_reason": result.stop_reason, "output": result.output})


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run or resume a scripted tree; die on cue.")
    parser.add_argument("--store", required=True)
    parser.add_argument("--script", required=True)
    parser.add_argument("--resume", help="the root session to resume instead of a new run")
    parser.add_argument("--kill", help="NAME:KIND: SIGKILL once NAME durably records KIND")
    parser.add_argument("--background-mode", default="continuable")
    parser.add_argument("prompt", nargs="?", default="Do the task.")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
