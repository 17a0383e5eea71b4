"""Stress the file tools with a symlink-swap attack: nothing may escape the workspace.

Not a benchmark (nothing is timed) and not a test (pytest never collects it): a longer run of
the attack that `tests/workspace/test_file_races.py` runs briefly. A background thread keeps
permuting three names in the workspace with `renameat2(RENAME_EXCHANGE)`: a real directory
`d`, a symlink to a directory standing for the hidden store ($SUBAGENTS_HOME), and a symlink
to a plain outside directory. Meanwhile `write_file`, `read_file`, `edit_file` and `grep` calls
through the real tool pipeline (workspace-write mode) go to paths under `d/`. Afterwards the
outside and hidden directories must be byte for byte as they were (no escaped write), and no
tool output may contain the hidden file's token (no leaked read).

    .venv/bin/python -m bench.race_stress --rounds 2000

Each round issues one write, one read and one edit, in parallel batches of 100 rounds (and one
grep per batch). The run prints one line, `escaped writes: 0, leaked reads: 0 (N calls, M
swaps)`, and exits with status 1 if anything escaped or leaked, 2 if the attack cannot run here
(renameat2 needs Linux on x86_64).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import platform
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from subagents.messages import JsonObject, ToolCallBlock
from subagents.policy import SandboxPolicy, canonical_root
from subagents.testing import ToolCallContext
from subagents.tools import ToolContext, ToolRegistry, ToolScope, execute_tool
from subagents.workspace import workspace_tools

TOKEN = "HIDDEN-TOKEN-5d1e"
BATCH = 100
_SYS_RENAMEAT2 = 316  # x86_64
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


Exchange = Callable[[bytes, bytes], int]
"""renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE): 0, or -1 with errno set."""


def exchanger() -> Exchange | str:
    """The exchange, checked to work here, or why the attack cannot run here."""
    where = f"{sys.platform}/{platform.machine()}"
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return f"renameat2 via syscall 316 needs Linux on x86_64, not {where}"
    syscall = ctypes.CDLL(None, use_errno=True).syscall

    def exchange(a: bytes, b: bytes) -> int:
        return int(syscall(_SYS_RENAMEAT2, _AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE))

    with tempfile.TemporaryDirectory() as probe:
        a, b = os.path.join(probe, "a"), os.path.join(probe, "b")
        os.mkdir(a)
        os.symlink("a", b)
        if exchange(os.fsencode(a), os.fsencode(b)) != 0:
            return f"renameat2(RENAME_EXCHANGE) failed: {os.strerror(ctypes.get_errno())}"
    return exchange


class Swapper(threading.Thread):
    """Permutes `d`, `h` and `o` in `ws` until stopped or `max_rounds` swaps are done."""

    def __init__(self, exchange: Exchange, ws: Path, max_rounds: int) -> None:
        super().__init__(name="swapper", daemon=True)
        self._exchange = exchange
        self._pairs = [(os.fsencode(ws / "d"), os.fsencode(ws / other)) for other in "ho"]
        self._max_rounds = max_rounds
        self.stop = threading.Event()
        self.started = threading.Event()
        self.swaps = 0

    def run(self) -> None:
        while not self.stop.is_set() and self.swaps < self._max_rounds:
            a, b = self._pairs[self.swaps % 2]
            if self._exchange(a, b) == 0:
                self.swaps += 1
                self.started.set()


def _snapshot(*roots: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for root in roots:
        for directory, dirnames, filenames in os.walk(root):
            for name in dirnames:
                found[os.path.join(directory, name)] = None
            for name in filenames:
                found[os.path.join(directory, name)] = Path(directory, name).read_bytes()
    return found


def _setup(base: Path) -> tuple[Path, Path, Path]:
    ws, hidden, outside, home = (base / n for n in ("ws", "hidden", "outside", "home"))
    for path in (ws, hidden, outside, home, ws / "d"):
        path.mkdir()
    (ws / "d" / "f.txt").write_text("marker inside\n")
    (hidden / "f.txt").write_text(f"marker {TOKEN}\n")
    (outside / "f.txt").write_text("marker outside\n")
    os.symlink(hidden, ws / "h")
    os.symlink(outside, ws / "o")
    os.environ["HOME"] = str(home)
    os.environ["SUBAGENTS_HOME"] = str(hidden)
    os.environ.pop("SUBAGENTS_STORE", None)
    return ws, hidden, outside


def _round_calls(i: int) -> list[tuple[str, JsonObject]]:
    write: JsonObject = (
        {"path": f"d/new-{i}/w.txt", "content": f"w{i}\n"}
        if i % 2
        else {"path": "d/f.txt", "content": "marker inside\n"}
    )
    return [
        ("write_file", write),
        ("read_file", {"path": "d/f.txt"}),
        ("edit_file", {"path": "d/f.txt", "old_string": "marker", "new_string": "marker!"}),
    ]


async def _attack(scope: ToolScope, rounds: int) -> tuple[int, list[str]]:
    outputs: list[str] = []

    async def call(name: str, args: JsonObject) -> None:
        ctx = ToolCallContext(name)
        block = ToolCallBlock(id="call-1", name=name, arguments=json.dumps(args))
        outcome = await execute_tool(scope, block, ctx, concluded=ctx.concluded)
        outputs.append(outcome.content)

    calls = 0
    for start in range(0, rounds, BATCH):
        batch = [c for i in range(start, min(start + BATCH, rounds)) for c in _round_calls(i)]
        batch.append(("grep", {"pattern": "marker", "path": "d"}))
        calls += len(batch)
        async with asyncio.TaskGroup() as group:
            for name, args in batch:
                group.create_task(call(name, args))
    return calls, outputs


def run(rounds: int) -> int:
    exchange = exchanger()
    if isinstance(exchange, str):
        print(f"race_stress: cannot run the attack: {exchange}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        ws, hidden, outside = _setup(Path(tmp).resolve())
        before = _snapshot(hidden, outside)
        root = canonical_root(str(ws))

        def policy_for(ctx: ToolContext) -> SandboxPolicy:
            return SandboxPolicy(mode="workspace-write", workspace_root=root)

        scope = ToolRegistry(workspace_tools(policy_for, cwd_for=lambda ctx: root)).scope()
        swapper = Swapper(exchange, ws, max_rounds=1000 * rounds + 100_000)
        swapper.start()
        swapper.started.wait()
        try:
            calls, outputs = asyncio.run(_attack(scope, rounds))
        finally:
            swapper.stop.set()
            swapper.join()
        after = _snapshot(hidden, outside)
        escaped = sum(
            1
            for path in before.keys() | after.keys()
            if before.get(path, b"") != after.get(path, b"")
        )
        leaked = sum(TOKEN in out for out in outputs)
    print(
        f"escaped writes: {escaped}, leaked reads: {leaked} ({calls} calls, {swapper.swaps} swaps)"
    )
    return 1 if escaped or leaked else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.race_stress", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument(
        "--rounds", type=int, default=2000, help="write calls (and as many reads and edits)"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")
    return run(args.rounds)


if __name__ == "__main__":
    raise SystemExit(main())
