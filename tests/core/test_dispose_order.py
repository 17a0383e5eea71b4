"""Disposal does not wait for the disk, and a follower of the bus still sees the whole log.

`Agent.dispose` returns once the agent is quiescent; its last records become durable with the
next commit (anything written later is committed after them). Until the store has told their
outcome they are not posted, and `AgentDisposed` comes only after them. The store here is a
real in-memory store whose acknowledgements the test holds back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from subagents.core import AgentDisposed, AgentRuntime, SessionEventPosted, replay_inbox
from subagents.ids import SessionId
from subagents.sessions import EventRecord, TurnStart, WriteDone
from subagents.testing import FakeClock, InMemoryEventStore, ScriptedModel


class HeldStore(InMemoryEventStore):
    """Stores at once; once `holding`, tells outcomes only when the test calls `release`."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = False
        self.held: list[WriteDone] = []
        self.barriers: list[asyncio.Future[None]] = []
        self.waited = asyncio.Event()
        """Set once someone waits for a held write."""

    def append(
        self,
        session_id: SessionId,
        records: Sequence[EventRecord],
        *,
        done: WriteDone | None = None,
    ) -> asyncio.Future[None]:
        if not self.holding or done is None:
            return super().append(session_id, records, done=done)
        super().append(session_id, records)
        self.held.append(done)
        return self.flush()

    def flush(self) -> asyncio.Future[None]:
        if not self.holding:
            return super().flush()
        barrier: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.barriers.append(barrier)
        self.waited.set()
        return barrier

    def release(self) -> None:
        self.holding = False
        for done in self.held:
            done(None)
        for barrier in self.barriers:
            if not barrier.done():
                barrier.set_result(None)


async def test_dispose_returns_before_the_disk_and_announces_the_agent_after_its_records(
    clock: FakeClock,
) -> None:
    store = HeldStore()
    model = ScriptedModel.from_yaml("lead:\n  - text: hello\n", clock=clock)
    seen: list[object] = []
    async with AgentRuntime(model=model, store=store, clock=clock) as rt:
        rt.subscribe(seen.append, types=(SessionEventPosted, AgentDisposed))
        agent = await rt.create_agent()
        first = agent.session.next_seq
        store.holding = True  # from here on nothing is told until `release`
        await agent.send("hi", durable=False)
        await agent.when_idle()
        await agent.dispose()  # returns although the store has told nothing
        written = [r.seq for r in agent.session.records[first:]]
        assert written  # the turn wrote its records, none of them told yet
        assert [e for e in seen if isinstance(e, SessionEventPosted)] == []
        assert not any(isinstance(e, AgentDisposed) for e in seen)
        store.release()
        posted = [e.record.seq for e in seen if isinstance(e, SessionEventPosted)]
        assert posted[-len(written) :] == written  # every record, in order...
        assert isinstance(seen[-1], AgentDisposed)  # ...and only then the agent's end
    model.assert_complete()


async def test_input_a_disposal_overtakes_is_left_to_it_and_starts_nothing(
    clock: FakeClock,
) -> None:
    store = HeldStore()
    model = ScriptedModel.from_yaml("lead: []\n", clock=clock)  # a turn would find no answer
    async with AgentRuntime(model=model, store=store, clock=clock) as rt:
        agent = await rt.create_agent()
        store.holding = True
        async with asyncio.TaskGroup() as tasks:
            sending = tasks.create_task(agent.send("late"))  # waits for its splice's commit
            await store.waited.wait()
            await agent.dispose(keep_inbox=True)  # meanwhile: the agent is gone, input kept
            store.release()
        message = sending.result()  # no error: the input is in the log, a resume runs it
        assert (agent.status, agent.live_tasks()) == ("idle", 0)
        assert [m.id for m in replay_inbox(agent.session.records).next_turn] == [message.id]
        assert not any(isinstance(r.event, TurnStart) for r in agent.session.records)
    model.assert_complete()
