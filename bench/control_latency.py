"""Command latency into a live tree: how long a `steer` or `interrupt` from another process
takes to be handled by the process that holds the tree.

Not a test (pytest never collects it) and nothing asserts a time. Two real processes on one
real SQLite file: the holder (`--holder`, started by this program) runs a lead that waits in
a tool until told to stop; the asking process (this one) sends N commands one after another
through `Runtime.steer` / `Runtime.interrupt`, exactly as `subagents steer` does, and sends
up to the holder's acceptance (what `Runtime.send` does before it waits for the answer). Two
figures per command kind, p50 / p99 / max in milliseconds:

- `round trip`: from the call to its return in the asking process (write the command, wake
  the holder through its socket, the holder executes it and marks it done, the answer);
- `in store`: from the command's row being written to the holder marking it handled, both
  stamped with wall-clock time in the store.

    .venv/bin/python -m bench.control_latency [--commands 500] [--json]

The bound we aim for is p99 under 100 ms on a 2-core machine with a local SQLite store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from subagents import Runtime
from subagents.delegation import SubagentEnded
from subagents.delegation._commands import ask_holder
from subagents.models import ScriptedModel
from subagents.tools import tool

SCRIPT = """
lead:
  - calls:
      - {tool: subagent, args: {name: helper, description: Help, prompt: Say done,
          run_in_background: true}}
      - {tool: wait_for_stop, args: {}}
  - text: lead done
  - text: lead done
  - text: lead done
helper:
  - text: done
"""
"""The lead starts `helper` (which answers and settles) and waits; commands go to both."""


async def _hold(store: Path) -> None:
    """The holder: a lead that waits in a tool until its stdin closes (the benchmark's end).

    It says `ready` on stdout once `helper` has settled, so interrupting it stops nothing.
    """
    settled = asyncio.Event()

    @tool(name="wait_for_stop")
    async def wait_for_stop() -> str:
        """Wait until the benchmark is over."""
        await settled.wait()
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.read)
        return "stopped"

    rt = Runtime(model=ScriptedModel.from_yaml(SCRIPT), store=store, tools=[wait_for_stop])
    async with rt:
        rt.subscribe(lambda _: settled.set(), types=(SubagentEnded,))
        await rt.run("Hold the tree")


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(p99 * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


async def _in_store(rt: Runtime, kind: str) -> list[float]:
    """Seconds from each command's row being written to its being marked handled."""
    spans: list[float] = []
    command_id = 1
    while (row := await rt.store.get_command(command_id)) is not None:
        if row.kind == kind and row.handled_at is not None:
            spans.append(row.handled_at - row.created_at)
        command_id += 1
    return spans


async def _ask(store: Path, commands: int) -> dict[str, Any]:
    async with Runtime(model=ScriptedModel({}), store=store) as rt:
        roots = await rt.store.list_headers(tenant="default")
        root = roots[0].id
        results: dict[str, Any] = {}
        header = await rt.store.get_header(root, tenant="default")
        for kind in ("send", "steer", "interrupt"):
            samples: list[float] = []
            for index in range(commands):
                started = time.perf_counter()
                if kind == "send":
                    # Until the holder has accepted it (queued behind the running turn);
                    # `Runtime.send` then waits for the answer, which is the model's time.
                    await ask_holder(rt, header, header, "send", f"note {index}", take_over=_no)
                elif kind == "steer":
                    await rt.steer(root, "lead", f"note {index}")
                else:
                    await rt.interrupt(root, "helper")  # settled: a no-op, the whole way
                samples.append(time.perf_counter() - started)
            results[kind] = {
                "round trip": _percentiles(samples),
                "in store": _percentiles(await _in_store(rt, kind)),
            }
        return results


async def _no(header: object) -> None:
    raise RuntimeError("the holder died during the benchmark")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.control_latency", description=__doc__)
    parser.add_argument("--commands", type=int, default=500, help="commands per kind")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--holder", metavar="STORE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.holder is not None:
        asyncio.run(_hold(Path(args.holder)))
        return 0
    if args.commands < 1:
        parser.error("--commands must be at least 1")
    with tempfile.TemporaryDirectory(prefix="subagents-bench-") as tmp:
        store = Path(tmp) / "state.db"
        holder = subprocess.Popen(
            [sys.executable, "-m", "bench.control_latency", "--holder", str(store)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "SUBAGENTS_HOME": str(Path(tmp) / "home")},
        )
        assert holder.stdin is not None
        assert holder.stdout is not None
        try:
            if holder.stdout.readline().strip() != "ready":
                print("the holder exited before it was ready", file=sys.stderr)
                return 1
            results = asyncio.run(_ask(store, args.commands))
        finally:
            holder.stdin.close()
            holder.wait(timeout=60)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"command latency into a live tree, {args.commands} commands per kind (ms)")
    print(f"{'command':<10} {'figure':<11} {'p50':>8} {'p99':>8} {'max':>8}")
    for kind, figures in results.items():
        for figure, values in figures.items():
            print(
                f"{kind:<10} {figure:<11} {values['p50_ms']:>8} {values['p99_ms']:>8} "
                f"{values['max_ms']:>8}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
