"""The console's streams, driven step by step: each batch carries what moved, and only that.

`tree_stream` runs over a real SQLite store; its `sleep` is the test's hook between two looks
at the store, where the test commits what the next batch must show.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from sse_starlette import ServerSentEvent

from subagents.ids import SessionId, new_message_id, new_session_id
from subagents.messages import AssistantMessage, TextBlock
from subagents.sessions import (
    AssistantMessageEvent,
    EventRecord,
    SessionHeader,
    SqliteEventStore,
    SubagentCatalog,
    TurnEnd,
    TurnStart,
)
from subagents.web._jobs import Jobs
from subagents.web._live import sessions_stream, tree_stream
from subagents.web._trees import Trees


def answer(text: str) -> AssistantMessageEvent:
    message = AssistantMessage(id=new_message_id(), content=(TextBlock(text),))
    return AssistantMessageEvent(turn=1, step=1, message=message)


class PlanDone(Exception):
    """Raised by the test's sleep once its plan has run and the stream looked once more."""


Plan = list[Callable[[], Awaitable[None]] | None]


def planned(plan: Plan) -> Callable[[float], Awaitable[None]]:
    """A stream's sleep that runs the plan's next step (None: commit nothing this time), and
    ends the stream once the plan is spent and the stream looked once more."""

    async def sleep(seconds: float) -> None:
        if not plan:
            raise PlanDone
        step = plan.pop(0)
        if step is not None:
            await step()

    return sleep


async def drain(events: AsyncIterator[ServerSentEvent]) -> list[tuple[str, dict[str, Any]]]:
    """Every event the stream sent until the test's plan ended it."""
    seen: list[tuple[str, dict[str, Any]]] = []
    with contextlib.suppress(PlanDone):
        async for event in events:  # a loop: what came before the stop must be kept
            seen.append((str(event.event), json.loads(str(event.data))))  # noqa: PERF401
    return seen


async def test_a_tree_stream_sends_what_moved_and_nothing_while_nothing_does(
    tmp_path: Path,
) -> None:
    now = time.time()
    root = new_session_id()
    kids = [new_session_id() for _ in range(3)]
    async with SqliteEventStore(tmp_path / "state.db") as store:
        lead = SessionHeader(id=root, tenant="default", created_at=now, cwd="/")
        store.create(lead)
        catalog = [SubagentCatalog(child_id=k, name=f"kid-{i}") for i, k in enumerate(kids)]
        store.append(
            root, [EventRecord(i, now, e) for i, e in enumerate([TurnStart(turn=1), *catalog])]
        )
        for kid in kids:
            store.create(
                SessionHeader(
                    id=kid,
                    tenant="default",
                    created_at=now,
                    cwd="/",
                    parent=root,
                    root=root,
                    depth=1,
                )
            )
        await store.flush()

        trees = Trees(store, "default")
        jobs = Jobs(store=tmp_path / "state.db", tenant="default")

        async def write(session: SessionId, seq: int, *events: Any) -> None:
            store.append(
                session, [EventRecord(seq + i, time.time(), e) for i, e in enumerate(events)]
            )
            await store.flush()

        # What the test commits between two looks; None: commit nothing this time.
        plan: Plan = [
            lambda: write(kids[1], 0, TurnStart(turn=1)),
            None,
            None,
            lambda: write(kids[1], 1, answer("found it"), TurnEnd(turn=1, reason="completed")),
        ]

        sleep = planned(plan)

        sent = await drain(
            tree_stream(trees, jobs, lead, member=kids[1], from_seq=0, interval=0.1, sleep=sleep)
        )
        await jobs.aclose()

    trees_sent = [data for name, data in sent if name == "tree"]
    # First everything, with the pre-order; then only the row that moved, no order.
    assert trees_sent[0]["full"] is True
    assert trees_sent[0]["order"] == [root, *kids]
    assert [r["name"] for r in trees_sent[0]["rows"]] == ["lead", "kid-0", "kid-1", "kid-2"]
    assert [[r["name"] for r in t["rows"]] for t in trees_sent[1:]] == [["kid-1"], ["kid-1"]]
    assert [t["rows"][0]["status"] for t in trees_sent[1:]] == ["crashed", "completed"]
    assert all(t["order"] is None and t["full"] is False for t in trees_sent[1:])
    # The selected member's records, each once, in order.
    records = [r for name, data in sent if name == "records" for r in data["records"]]
    assert [r["seq"] for r in records] == [0, 1, 2]
    assert [r["kind"] for r in records] == ["turn/start", "assistant/message", "turn/end"]
    # The two looks that found nothing sent nothing: every event is one of the above, or the
    # first jobs list.
    assert [name for name, _ in sent].count("jobs") == 1
    assert len(sent) == len(trees_sent) + 2 + 1


async def test_the_sessions_stream_sends_the_list_when_it_changed(tmp_path: Path) -> None:
    now = time.time()
    async with SqliteEventStore(tmp_path / "state.db") as store:
        trees = Trees(store, "default")
        jobs = Jobs(store=tmp_path / "state.db", tenant="default")
        first = new_session_id()
        store.create(SessionHeader(id=first, tenant="default", created_at=now, cwd="/"))
        store.create(SessionHeader(id=new_session_id(), tenant="other", created_at=now, cwd="/"))
        await store.flush()
        second = new_session_id()
        plan: Plan = [None]

        async def add_second() -> None:
            store.create(SessionHeader(id=second, tenant="default", created_at=now + 1, cwd="/"))
            await store.flush()

        plan.append(add_second)

        sleep = planned(plan)

        sent = await drain(sessions_stream(trees, jobs, query=None, interval=0.1, sleep=sleep))
        await jobs.aclose()
        lists = [
            [s["session_id"] for s in data["sessions"]] for name, data in sent if name == "sessions"
        ]
    # The other tenant's session is never listed; the newest comes first.
    assert lists == [[first], [second, first]]


async def test_a_released_lease_alone_is_sent(tmp_path: Path) -> None:
    """The holder's last commit comes before it lets go: `held` must still reach the page."""
    now = time.time()
    root = new_session_id()
    holder = f"test@{socket.gethostname()}/{os.getpid()}"
    ticks = iter(range(0, 10_000, 2))  # seconds: every look is due to read the lease again
    async with SqliteEventStore(tmp_path / "state.db") as store:
        lead = SessionHeader(id=root, tenant="default", created_at=now, cwd="/")
        store.create(lead)
        done = [TurnStart(turn=1), answer("done"), TurnEnd(turn=1, reason="completed")]
        store.append(root, [EventRecord(i, now, e) for i, e in enumerate(done)])
        await store.flush()
        await store.acquire_lease(root, holder=holder, pid=os.getpid(), now=now, ttl=60)
        trees = Trees(store, "default", clock=lambda: float(next(ticks)))
        jobs = Jobs(store=tmp_path / "state.db", tenant="default")

        async def release() -> None:
            await store.release_lease(root, holder=holder)

        plan: Plan = [None, release, None]

        sleep = planned(plan)

        sent = await drain(
            tree_stream(trees, jobs, lead, member=None, from_seq=0, interval=0.1, sleep=sleep)
        )
        await jobs.aclose()
    batches = [data for name, data in sent if name == "tree"]
    assert [(b["held"], len(b["rows"])) for b in batches] == [(True, 1), (False, 0)]
    assert batches[0]["rows"][0]["status"] == "completed"
