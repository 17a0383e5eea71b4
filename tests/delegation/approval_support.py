"""What the approval tests share: the waits a runtime reports, a stored tree's logs, and a copy
of a tree as a killed process leaves it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from subagents import Runtime
from subagents._task_owner import TaskOwner
from subagents.core import ApprovalWaiting
from subagents.ids import SessionId
from subagents.sessions import EventRecord, SqliteEventStore

__all__ = ["Waits", "copy_tree", "first_of", "logs"]


class Waits:
    """The runtime's `ApprovalWaiting` events, in order; `next()` waits for the next one."""

    def __init__(self, runtime: Runtime) -> None:
        self.queue: asyncio.Queue[ApprovalWaiting] = asyncio.Queue()
        self.seen: list[ApprovalWaiting] = []
        runtime.subscribe(self._on_event, types=(ApprovalWaiting,))

    def _on_event(self, event: object) -> None:
        assert isinstance(event, ApprovalWaiting)
        self.seen.append(event)
        self.queue.put_nowait(event)

    async def next(self) -> ApprovalWaiting:
        return await self.queue.get()


async def first_of(
    tasks: asyncio.TaskGroup | TaskOwner,
    wanted: Coroutine[Any, Any, ApprovalWaiting],
    run: asyncio.Task[Any],
) -> ApprovalWaiting:
    """`wanted`, failing fast (with the run's own result) if the run ends first."""
    wait = (
        tasks.create_task(wanted) if isinstance(tasks, asyncio.TaskGroup) else tasks.spawn(wanted)
    )
    done, _ = await asyncio.wait({wait, run}, return_when=asyncio.FIRST_COMPLETED)
    if wait not in done:
        wait.cancel()
        raise AssertionError(f"the run ended before any call waited: {run.result()!r}")
    return wait.result()


async def logs(runtime: Runtime, root: str) -> dict[str, list[EventRecord]]:
    """Every member's durable log by full name (`lead` for the root)."""
    return {m.row.name: m.records for m in await runtime.tree(root)}


async def copy_tree(source: Runtime, root: str, path: Path) -> None:
    """Write every member of `root`'s tree, as stored now, into a fresh store at `path`."""
    await source.store.flush()
    headers = await source.store.list_headers(
        tenant="default", roots_only=False, root=SessionId(root)
    )
    async with SqliteEventStore(path) as copy:
        for header in sorted(headers, key=lambda h: h.depth):
            await copy.create(header)
            await copy.append(header.id, await source.store.read(header.id, tenant="default"))
        await copy.flush()
