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
full name is NAME, with `--kill-settling` at the first `turn/end` of a child with nothing pending
after which the rest of the tree is idle (its settlement is next, whatever the interleaving); a
run that never gets there ends with `{"finished": true}`.

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
from subagents.sessions._sqlite import WRITE_WINDOW
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


def quiet_but(runtime: DelegationRuntime, name: str, posted: dict[str, int]) -> bool:
    """Whether every loaded agent but `name` is idle with its whole log posted (durable), and
    `name` has no pending input.

    Another agent may hold input that has not woken it yet (a notice whose acceptance is
    still being acknowledged): no turn is open, and `name`'s settlement is still next.
    """
    agents = runtime.agents.values()
    return all(
        a.status == "idle" and posted.get(a.id, -1) == a.session.next_seq - 1
        for a in agents
        if a.name != name
    ) and not any(a.inbox for a in agents if a.name == name)


def kill_listener(
    kill_at: int | None,
    kill_on: tuple[str, int] | None,
    settling: DelegationRuntime | None = None,
) -> Callable[[object], None]:
    count = 0
    posted: dict[str, int] = {}
    """The last seq posted, per session."""

    def listener(event: object) -> None:
        nonlocal count
        if not isinstance(event, SessionEventPosted):
            return
        record = event.record
        posted[event.agent_id] = record.seq
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
        if settling is not None and event.name != "lead" and record.kind == "turn/end":
            # Once the store has told the whole commit this record came in (the next
            # iteration), so that the rest of the tree is judged on what is durable.
            asyncio.get_running_loop().call_soon(kill_if_settling, settling, event.name)
        count += 1

    def kill_if_settling(runtime: DelegationRuntime, name: str) -> None:
        if quiet_but(runtime, name, posted):
            os.kill(os.getpid(), signal.SIGKILL)

    return listener


def notices_after_a_commit(runtime: DelegationRuntime) -> None:
    """Make every settlement notice wait for the store to commit what came before it.

    A settling child's last writes and its notice are otherwise often committed together,
    and a kill can land between them only when the store is slow; this makes the store that
    slow, so that `--kill-settling` finds the moment in every run.
    """
    manager = runtime.continuable
    notify = manager._notify_parent

    async def notify_after_a_commit(act: Any, result: Any) -> bool:
        await runtime.store.flush()
        return await notify(act, result)

    manager._notify_parent = notify_after_a_commit


async def main(args: argparse.Namespace) -> None:
    kill_on: tuple[str, int] | None = None
    if args.kill_on is not None:
        name, _, seq = str(args.kill_on).rpartition(":")
        kill_on = (name, int(seq))
    async with DelegationRuntime(
        model=ScriptedModel.from_file(args.script),
        # With --kill-settling the kill point is a child's turn/end posted while the rest of
        # the tree is still quiet: a write is sent at the end of its loop iteration, not held
        # for the default window (in which the settlement notice would catch up with it).
        store=SqliteEventStore(args.store, write_window=0 if args.kill_settling else WRITE_WINDOW),
        cwd=os.path.dirname(args.store),
        model_spec=f"scripted:{args.script}",
    ) as runtime:
        settling = runtime if args.kill_settling else None
        if settling is not None:
            notices_after_a_commit(settling)
        runtime.subscribe(
            kill_listener(args.kill_at, kill_on, settling), types=(SessionEventPosted,)
        )
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
        help="SIGKILL at a child's turn/end when it has nothing pending and the rest of the "
        "tree is idle: its settlement notice is about to be written",
    )
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
