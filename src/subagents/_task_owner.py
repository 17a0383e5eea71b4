"""Task ownership: the one place that creates asyncio tasks.

Every task has an owner that cancels and awaits it on close, so nothing outlives the object
that started it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["TaskOwner"]

T = TypeVar("T")
log = logging.getLogger("subagents.tasks")


class TaskOwner:
    """A set of tasks with one owner.

    `spawn` starts a task; `aclose` cancels the ones still running and waits for all of them.
    Failures of tasks nobody awaits are logged.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] | None = None
        """Made with the first task: many owners never start one (a foreground child)."""
        self._closed = False

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        if self._closed:
            coro.close()
            raise RuntimeError(f"task owner {self.name!r} is closed; cannot start {name!r}")
        task = asyncio.get_running_loop().create_task(coro, name=name)
        if self._tasks is None:
            self._tasks = set()
        self._tasks.add(task)
        task.add_done_callback(self._forget)
        return task

    def _forget(self, task: asyncio.Task[Any]) -> None:
        if self._tasks is not None:
            self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("task %s of %s failed", task.get_name(), self.name, exc_info=task.exception())

    def __len__(self) -> int:
        return 0 if self._tasks is None else len(self._tasks)

    async def aclose(self) -> None:
        """Cancel every running task and wait until all have finished; safe to call twice.

        A task that is done already is not waited for: `asyncio.wait` costs a loop iteration
        even then, and an agent's driver has usually just finished when the agent is closed.
        Its `_forget` is scheduled already (and logs its failure, if any).
        """
        self._closed = True
        while self._tasks and (pending := [task for task in self._tasks if not task.done()]):
            for task in pending:
                task.cancel()
            await asyncio.wait(pending)
        self._tasks = None  # all done; closed, so none is added
