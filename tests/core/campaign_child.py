"""A process for the crash campaign: run a scripted tree on a real SQLite file, die anywhere.

    python tests/core/campaign_child.py --store DB --script YAML
        [--kill-at N | --kill-on NAME:SEQ]

The tree (`SCRIPT`): the lead starts two background continuable children, `alpha` and `beta`;
`alpha` starts a background grandchild `alpha/sub`; the lead then sends each child a follow-up
message while they are still working (in-flight messages), and answers each settlement notice
with one more turn, so the tree is quiescent once every notice has arrived.

It prints one JSON line per stdout line and flushes each: first `{"root": ID}`, then for every
`SessionEventPosted` (emitted only once the append is durable, so a printed line is an
acknowledged event) `{"session": ID, "name": FULL_NAME, "seq": N, "kind": KIND}`, with
`"accepted": [MESSAGE_ID, ...]` added for an `agent/inbox/spliced` that inserted messages. With
`--kill-at N` it SIGKILLs itself right after printing the N-th acknowledged event (counting from
0, over all sessions), with `--kill-on NAME:SEQ` right after printing event SEQ of the agent whose
full name is NAME, with `--kill-settling` right before the first settlement notice written
while the rest of the tree is idle with its log durable; a run that never gets there ends with
`{"finished": true}`.

The test imports `SCRIPT` and `CHILDREN`. Every agent's script ends in a long tail of plain answers
(unique texts, so a settlement notice shows which answer it reports), enough for a resumed tree
to finish from any point: a resumed agent continues at its own response index, and every
settlement notice or resumed prompt costs the receiving agent one more response.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from subagents.core import SessionEventPosted
from subagents.delegation import DelegationRuntime
from subagents.sessions import InboxSpliced, SqliteEventStore
from subagents.testing import ScriptedModel

__all__ = ["CHILDREN", "PROMPT", "SCRIPT", "answer"]

PROMPT = "Gather parts A and B with background helpers, then report."

CHILDREN = ("alpha", "alpha/sub", "beta")
"""The continuable members below the lead, by full name."""

TAIL = 16
"""Plain answers after each agent's scripted actions: far more than any resume needs."""


def answer(name: str, index: int) -> str:
    """The text of `name`'s response number `index` (0-based) when it is a plain answer."""
    return f"{name} answer {index}."


def _background(name: str, prompt: str) -> dict[str, object]:
    return {
        "tool": "subagent",
        "args": {
            "name": name,
            "description": f"Work on {name}",
            "prompt": prompt,
            "run_in_background": True,
        },
    }


def _send(agent: str, message: str) -> dict[str, object]:
    return {"tool": "send_message", "args": {"agent": agent, "message": message}}


def _tail(name: str, first: int) -> list[dict[str, object]]:
    return [{"text": answer(name, index)} for index in range(first, first + TAIL)]


def _script() -> str:
    lead: list[dict[str, object]] = [
        {
            "text": "Starting the helpers.",
            "calls": [
                _background("alpha", "Gather part A; hand its details to a helper of your own."),
                _background("beta", "Gather part B."),
            ],
        },
        {
            "calls": [
                _send("alpha", "Also check the edge cases of part A."),
                _send("beta", "Also summarise part B."),
            ]
        },
    ]
    alpha: list[dict[str, object]] = [
        {"calls": [_background("sub", "Collect the details of part A.")]},
    ]
    script = {
        "lead": lead + _tail("lead", len(lead)),
        "alpha": alpha + _tail("alpha", len(alpha)),
        "alpha/sub": _tail("alpha/sub", 0),
        "beta": _tail("beta", 0),
        "*": _tail("other", 0),
    }
    return json.dumps(script, indent=1)  # JSON is YAML


SCRIPT = _script()


def emit(line: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def kill_listener(kill_at: int | None, kill_on: tuple[str, int] | None) -> Callable[[object], None]:
    count = 0

    def listener(event: object) -> None:
        nonlocal count
        if not isinstance(event, SessionEventPosted):
            return
        record = event.record
        line: dict[str, object] = {
            "session": event.agent_id,
            "name": event.name,
            "seq": record.seq,
            "kind": record.kind,
        }
        if isinstance(record.event, InboxSpliced) and record.event.inserted:
            line["accepted"] = [message.id for message in record.event.inserted]
        emit(line)
        if count == kill_at or (event.name, record.seq) == kill_on:
            os.kill(os.getpid(), signal.SIGKILL)
        count += 1

    return listener


QUIET_TRIES = 4
"""Commits a notice waits at most, with `--kill-settling`, for the rest of the tree to idle."""


def kill_before_a_quiet_notice(runtime: DelegationRuntime) -> None:
    """`--kill-settling`: SIGKILL right before a settlement notice is written, when every
    other loaded agent is idle and the store has committed all they wrote.

    The agents' states are read before and after a flush: an agent idle before it submitted
    its turn's end before the flush, and one still idle after it started no turn since, so no
    turn is open in the file. A notice waits up to `QUIET_TRIES` commits for that moment
    (a parent often ends the turn that took in an earlier notice meanwhile), then goes ahead.
    """
    manager = runtime.continuable
    notify = manager._notify_parent

    def others_idle(child_id: str) -> bool:
        return all(a.status == "idle" for a in runtime.agents.values() if a.id != child_id)

    async def notify_unless_killed(act: Any, result: Any) -> bool:
        for _ in range(QUIET_TRIES):  # a commit's time each for the rest to finish its turn
            idle = others_idle(act.id)
            await runtime.store.flush()
            if idle and others_idle(act.id):
                os.kill(os.getpid(), signal.SIGKILL)
        return await notify(act, result)

    manager._notify_parent = notify_unless_killed


async def main(args: argparse.Namespace) -> None:
    kill_on: tuple[str, int] | None = None
    if args.kill_on is not None:
        name, _, seq = str(args.kill_on).rpartition(":")
        kill_on = (name, int(seq))
    async with DelegationRuntime(
        model=ScriptedModel.from_file(args.script),
        store=SqliteEventStore(args.store),
        cwd=os.path.dirname(args.store),
        model_spec=f"scripted:{args.script}",
    ) as runtime:
        if args.kill_settling:
            kill_before_a_quiet_notice(runtime)
        runtime.subscribe(kill_listener(args.kill_at, kill_on), types=(SessionEventPosted,))
        lead = await runtime.create_agent()
        emit({"root": lead.id})
        await lead.followup(PROMPT)
        await runtime.wait_quiescent()
        await runtime.store.flush()
    emit({"finished": True})  # the kill point was never reached


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run a scripted tree and die anywhere.")
    parser.add_argument("--store", required=True, help="the SQLite file")
    parser.add_argument("--script", required=True, help="the YAML model script (write SCRIPT)")
    point = parser.add_mutually_exclusive_group()
    point.add_argument(
        "--kill-at", type=int, help="SIGKILL once the N-th acknowledged event (from 0) is printed"
    )
    point.add_argument("--kill-on", help="NAME:SEQ: SIGKILL once agent NAME's event SEQ is printed")
    point.add_argument(
        "--kill-settling",
        action="store_true",
        help="SIGKILL right before a settlement notice is written while the rest of the tree "
        "is idle with its log durable",
    )
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
