"""The console's live streams (server-sent events): the sessions list and one tree.

A stream looks at the store once per interval and sends what moved since its last batch: the
rows whose member changed (a 2,000-member tree in which one child works sends one row), the
pre-order when a member was added, the approval requests that wait in the tree when they
changed (in the same batch), the selected member's new records, and the jobs list when a job
changed. Nothing is sent while nothing changes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from sse_starlette import ServerSentEvent

from ..delegation import MemberRow, WatchedTree
from ..ids import SessionId
from ..sessions import SessionHeader
from ._jobs import Jobs
from ._trees import MAX_RECORDS, Trees, row_json

__all__ = ["SESSIONS_INTERVAL_FLOOR", "sessions_stream", "tree_stream"]

Sleep = Callable[[float], Awaitable[object]]
SESSIONS_INTERVAL_FLOOR = 0.25
"""The sessions list is looked at no more often than this (seconds): it spans every tree."""


def _event(name: str, data: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps(data, ensure_ascii=False), event=name)


def _row_key(row: MemberRow, counts: tuple[int, int]) -> tuple[object, ...]:
    """What makes a row worth sending again (elapsed time is counted by the page).

    An ancestor's count of requests below it moves without a record of its own.
    """
    return (row.revision, row.status, row.name, row.parent, row.label, row.mode, counts)


async def tree_stream(
    trees: Trees,
    jobs: Jobs,
    root: SessionHeader,
    *,
    member: SessionId | None,
    from_seq: int,
    interval: float,
    sleep: Sleep = asyncio.sleep,
) -> AsyncIterator[ServerSentEvent]:
    """Batches of `root`'s tree as it changes, and `member`'s records from `from_seq`."""
    sent: dict[SessionId, tuple[object, ...]] = {}
    approvals: list[dict[str, Any]] | None = None
    order: list[SessionId] | None = None
    held: bool | None = None
    seen: tuple[WatchedTree, int] | None = None
    jobs_version = -1
    next_seq = from_seq
    while True:
        watched = await trees.current(root)
        # The tree object too: one the cache dropped and read again counts from 0.
        if seen != (watched, watched.version):
            seen = (watched, watched.version)
            rows = watched.view.rows(held=watched.held, now=time.time())
            counts = trees.counts(watched, rows)
            ids = [r.session_id for r in rows]
            keys = {r.session_id: _row_key(r, counts[r.session_id]) for r in rows}
            changed = [r for r in rows if sent.get(r.session_id) != keys[r.session_id]]
            waiting = [a.to_json() for a in trees.waiting(watched, rows)]
            moved = waiting != approvals
            if order is None or changed or ids != order or watched.held != held or moved:
                yield _event(
                    "tree",
                    {
                        "held": watched.held,
                        "full": order is None,
                        "rows": [row_json(r, counts[r.session_id]) for r in changed],
                        "order": ids if ids != order else None,
                        "approvals": waiting if moved or order is None else None,
                    },
                )
                sent.update((r.session_id, keys[r.session_id]) for r in changed)
                order = ids
                held = watched.held
                approvals = waiting
        if (
            member is not None
            and member in watched.view
            and watched.view.last_seq(member) >= next_seq
        ):
            records = await trees.records(root, member, from_seq=next_seq, limit=MAX_RECORDS)
            if records["records"]:
                next_seq = records["next"]
                yield _event("records", {"session_id": member, "records": records["records"]})
                continue  # a long log: the next page at once
        if jobs.version != jobs_version:
            jobs_version = jobs.version
            yield _event("jobs", {"jobs": jobs.listing(root.id)})
        await sleep(interval)


async def sessions_stream(
    trees: Trees,
    jobs: Jobs,
    *,
    query: str | None,
    interval: float,
    sleep: Sleep = asyncio.sleep,
) -> AsyncIterator[ServerSentEvent]:
    """The sessions list whenever it changed, and the jobs list whenever a job changed."""
    last: list[dict[str, Any]] | None = None
    jobs_version = -1
    while True:
        rows = await trees.sessions(query)
        if rows != last:
            last = rows
            yield _event("sessions", {"sessions": rows})
        if jobs.version != jobs_version:
            jobs_version = jobs.version
            yield _event("jobs", {"jobs": jobs.listing()})
        await sleep(max(interval, SESSIONS_INTERVAL_FLOOR))
