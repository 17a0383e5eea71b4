"""What a running child costs the garbage collector, counted, not timed.

A fan-out keeps thousands of children alive at once, and every object the collector tracks
is walked by each collection that reaches it: at 2,000 children the collections were a fifth
of the run. So the objects a waiting foreground child holds are a budget, and this test
fails when a change adds to it. Raise `TRACKED_PER_CHILD` only for a reason worth it.

The count is exact: the store acknowledges at once (in memory), and every child waits in its
model call until all of them do, so no write, task or frame is half way.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import AsyncIterator

from subagents import Runtime
from subagents.models import (
    ModelChunk,
    ModelRequest,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
)
from subagents.sessions import InMemoryEventStore

TRACKED_PER_CHILD = 40
"""What a waiting foreground child holds (37.6 objects: 39.6 when this test was written, 48
the day before; its start event and model request are untracked Structs now), plus a little
room: its chain of eight coroutines, the task of its parent's tool call, its agent, session,
config, inbox and tool scope, and the service's run of it."""

CHILDREN = 40


class GatedModel(ScriptedModel):
    """The scripted model, except that every child's call waits until all have started."""

    def __init__(self, children: int) -> None:
        call = ScriptedCall("subagent", {"description": "wait", "prompt": "wait for the gate"})
        super().__init__(
            {
                "lead": [ScriptedResponse(calls=(call,) * children), ScriptedResponse(text="ok")],
                "*": [ScriptedResponse(text="done")],
            }
        )
        self.children = children
        self.waiting = 0
        self.all_waiting = asyncio.Event()
        self.gate = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        if request.agent_name != "lead":
            self.waiting += 1
            if self.waiting == self.children:
                self.all_waiting.set()
            await self.gate.wait()
        async for chunk in super().stream(request):
            yield chunk


def _tracked() -> Counter[str]:
    return Counter(type(o).__name__ for o in gc.get_objects())


async def _fan_out(children: int) -> Counter[str]:
    """The tracked objects a fan-out of `children` added, counted while all of them wait."""
    model = GatedModel(children)
    async with Runtime(model=model, store=InMemoryEventStore()) as runtime:
        gc.collect()
        before = _tracked()
        async with asyncio.TaskGroup() as tg:
            run = tg.create_task(runtime.run("fan out"))
            await model.all_waiting.wait()
            gc.collect()
            during = _tracked()
            model.gate.set()
        assert run.result().output == "ok"
    return during - before


async def test_a_waiting_foreground_child_holds_few_tracked_objects() -> None:
    loop = asyncio.get_running_loop()
    debug = loop.get_debug()
    # Debug mode keeps a creation traceback on every task and future: not what a child
    # costs in a real run, so it is counted without it.
    loop.set_debug(False)
    try:
        await _fan_out(4)  # the first run of each path makes its caches: not counted
        # Two sizes, so the lead's own objects (its agent, session, step) cancel out.
        small, large = await _fan_out(CHILDREN // 2), await _fan_out(CHILDREN)
    finally:
        loop.set_debug(debug)
    added = large - small
    assert added["Agent"] == CHILDREN // 2  # counted while every child was running
    per_child = added.total() / (CHILDREN // 2)
    assert per_child <= TRACKED_PER_CHILD, (
        f"a waiting child holds {per_child:.1f} tracked objects "
        f"(budget {TRACKED_PER_CHILD}); most common: {added.most_common(12)}"
    )
