"""The web console on a big tree: time to first paint, and the events per second it streams.

Not a test (pytest never collects it) and nothing asserts a time. A real `subagents web`
process serves a real SQLite store holding one tree of `--members` members (a lead and its
children, each with a finished turn, as a fan-out leaves them). Figures, in one run:

- `api first tree`: a cold console's `GET /api/sessions/ROOT/tree` (it reads the whole tree
  from the store), and a warm one (folded already, only what is new is read);
- `stream first batch`: from opening `GET /api/sessions/ROOT/stream` to its first (full) batch;
- `browser first paint`: headless Chromium opens the tree view until every row is drawn (the
  page marks `data-ready`), when `/usr/bin/chromium` and Playwright are there;
- `stream events/s`: a writer appends `--events` tool calls and results to random members as
  fast as the store takes them while the stream is open; the rate is the events written over
  the time from the first write to the batch that shows the last one.

    .venv/bin/python -m bench.web_console [--members 2000] [--events 20000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx

from subagents.ids import SessionId, new_message_id, new_session_id
from subagents.messages import AssistantMessage, TextBlock, ToolResultMessage, Usage
from subagents.sessions import (
    AssistantMessageEvent,
    EventRecord,
    SessionHeader,
    SqliteEventStore,
    SubagentCatalog,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
)


def _turn(start: float, text: str) -> list[Any]:
    message = AssistantMessage(id=new_message_id(), content=(TextBlock(text),))
    return [
        TurnStart(turn=1),
        AssistantMessageEvent(turn=1, step=1, message=message, usage=Usage(10, 5)),
        TurnEnd(turn=1, reason="completed"),
    ]


async def build_tree(path: Path, members: int) -> tuple[str, list[str]]:
    """A lead and `members - 1` children, each with one finished turn; (root, children)."""
    now = time.time()
    root = new_session_id()
    children = [new_session_id() for _ in range(members - 1)]
    async with SqliteEventStore(path) as store:
        store.create(SessionHeader(id=root, tenant="default", created_at=now, cwd="/"))
        lead = [
            *_turn(now, "fanned out"),
            *(
                SubagentCatalog(child_id=child, name=f"worker-{i}", created_at=now)
                for i, child in enumerate(children)
            ),
        ]
        store.append(root, [EventRecord(seq, now, e) for seq, e in enumerate(lead)])
        for child in children:
            store.create(
                SessionHeader(
                    id=child,
                    tenant="default",
                    created_at=now,
                    cwd="/",
                    parent=root,
                    root=root,
                    depth=1,
                )
            )
            store.append(
                child, [EventRecord(seq, now, e) for seq, e in enumerate(_turn(now, "done"))]
            )
        await store.flush()
    return str(root), [str(c) for c in children]


async def write_events(path: Path, children: list[str], events: int) -> tuple[float, str]:
    """Append tool calls and results to random members; (time of the first write, last id)."""
    rng = random.Random(7)
    next_seq = dict.fromkeys(children, 3)
    started = time.monotonic()
    last = children[0]
    async with SqliteEventStore(path) as store:
        for i in range(0, events, 2):
            child = rng.choice(children)
            seq = next_seq[child]
            call = f"call-{i}"
            result = ToolResultMessage(id=new_message_id(), call_id=call, name="grep", content="x")
            records = [
                EventRecord(
                    seq,
                    time.time(),
                    ToolCallEvent(turn=1, step=1, call_id=call, name="grep", arguments="{}"),
                ),
                EventRecord(seq + 1, time.time(), ToolResultEvent(turn=1, step=1, message=result)),
            ]
            next_seq[child] = seq + 2
            store.append(SessionId(child), records)
            last = child
            if i % 200 == 0:
                await store.flush()
        # The last write opens a turn of the first child: a change of status the stream shows.
        first = children[0]
        store.append(
            SessionId(first), [EventRecord(next_seq[first], time.time(), TurnStart(turn=2))]
        )
        await store.flush()
    return started, last


def start_console(store: Path, home: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "subagents", "web", "--port", "0", "--store", str(store)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={"SUBAGENTS_HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    assert process.stderr is not None
    while True:
        select.select([process.stderr], [], [], 30)
        line = process.stderr.readline()
        if "http://" in line:
            return process, line.split("subagents web: ", 1)[1].strip()
        if not line:
            raise SystemExit("subagents web printed no address")


def first_batch(client: httpx.Client, root: str) -> tuple[float, int]:
    started = time.perf_counter()
    with client.stream("GET", f"/api/sessions/{root}/stream") as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                rows = len(json.loads(line[5:])["rows"])
                return time.perf_counter() - started, rows
    raise SystemExit("the stream ended")


def stream_rate(
    client: httpx.Client, store: Path, root: str, children: list[str], events: int
) -> tuple[float, int]:
    """Events per second from the first write to the batch that shows every write."""
    expected = dict.fromkeys(children, 0)
    rng = random.Random(7)
    for _ in range(0, events, 2):
        expected[rng.choice(children)] += 1
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(store), json.dumps(children), str(events)],
        stdout=subprocess.PIPE,
        text=True,
    )
    batches = 0
    done = None
    with client.stream("GET", f"/api/sessions/{root}/stream") as response:
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            batches += 1
            rows = json.loads(line[5:]).get("rows", [])
            if any(r["session_id"] == children[0] and r["status"] == "crashed" for r in rows):
                done = time.monotonic()  # the batch that carries the last write
                break
    assert done is not None, "the stream ended before it showed the last write"
    out, _ = writer.communicate()
    started = float(out.strip())
    while not _caught_up(client, root, expected):  # every write is there, not only the last
        done = time.monotonic()
    return events / (done - started), batches


def _caught_up(client: httpx.Client, root: str, expected: dict[str, int]) -> bool:
    """Whether the console's timeline shows every call the writer made."""
    lanes = client.get(f"/api/sessions/{root}/timeline").json()["lanes"]
    got = {lane["session_id"]: len(lane["calls"]) for lane in lanes}
    return all(got.get(c, 0) == n for c, n in expected.items())


_WRITER = """
import asyncio, json, sys
from pathlib import Path
from bench.web_console import write_events
started, _ = asyncio.run(write_events(Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])))
print(started)
"""


def browser_paint(url: str, root: str, members: int) -> float | None:
    chromium = shutil.which("chromium")
    if chromium is None:
        return None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page()
        page.goto(url)  # sets the cookie, lands on the sessions page
        started = time.perf_counter()
        page.goto(url.split("/?")[0] + f"/#/s/{root}")
        # A locator, not a page script: the console's CSP allows no evaluated strings.
        page.locator("#tree [data-member]").nth(members - 1).wait_for(
            state="attached", timeout=120_000
        )
        elapsed = time.perf_counter() - started
        browser.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "state.db"
        root, children = asyncio.run(build_tree(store, args.members))
        process, url = start_console(store, Path(tmp))
        base, token = url.split("/?token=")
        try:
            with httpx.Client(
                base_url=base, headers={"authorization": f"Bearer {token}"}, timeout=120
            ) as client:
                started = time.perf_counter()
                rows = client.get(f"/api/sessions/{root}/tree").json()["rows"]
                cold = time.perf_counter() - started
                started = time.perf_counter()
                client.get(f"/api/sessions/{root}/tree")
                warm = time.perf_counter() - started
                batch, batch_rows = first_batch(client, root)
                paint = browser_paint(url, root, args.members)
                rate, batches = stream_rate(client, store, root, children, args.events)
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
    figures = {
        "members": len(rows),
        "api_first_tree_cold_ms": round(cold * 1000, 1),
        "api_tree_warm_ms": round(warm * 1000, 1),
        "stream_first_batch_ms": round(batch * 1000, 1),
        "stream_first_batch_rows": batch_rows,
        "browser_first_paint_ms": None if paint is None else round(paint * 1000, 1),
        "stream_events_per_s": round(rate),
        "stream_batches": batches,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:28} {value}")


if __name__ == "__main__":
    main()
