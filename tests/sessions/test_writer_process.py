"""The SQLite store's writer process: where writes are committed, and what its death does.

Every wait is on an event (a future, a pidfd, a line on a pipe); nothing sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from tests.support.process_support import exited

from subagents import Runtime
from subagents.errors import ConfigError, ErrorCode, StoreError
from subagents.ids import new_session_id
from subagents.messages import user_message
from subagents.models import ScriptedModel
from subagents.sessions import SqliteEventStore
from subagents.sessions._events import EventRecord, SessionHeader, TurnStart, UserMessageEvent
from subagents.sessions._sqlite_link import HandoverLink, ThreadLink

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs pidfd_open (Linux)")


def header() -> SessionHeader:
    return SessionHeader(id=new_session_id(), tenant="default", created_at=1.0, cwd="/work")


def turn(seq: int) -> EventRecord:
    return EventRecord(seq, 1_700_000_000.0 + seq, TurnStart(turn=seq))


async def handed_over(store: SqliteEventStore) -> int:
    """The pid of the store's writer process, once it writes for the store."""
    link = store._link
    assert isinstance(link, HandoverLink)
    async with asyncio.timeout(60):
        await link.handed_over.wait()
    assert link.process.pid is not None
    return link.process.pid


async def test_writes_are_committed_by_another_process_that_ends_with_the_store(
    tmp_path: Path,
) -> None:
    async with SqliteEventStore(tmp_path / "state.db") as store:
        assert store._link is None  # nothing written yet: no writer, not even its link
        session = header()
        await store.create(session)  # by the thread, while the process starts
        assert isinstance(store._link, HandoverLink)
        pid = await handed_over(store)
        assert pid != os.getpid()
        os.kill(pid, 0)  # alive while the store is open
        await store.append(session.id, [turn(0), turn(1)])  # by the process
    async with asyncio.timeout(30):
        await exited(pid)  # closing the store ended it
    async with SqliteEventStore(tmp_path / "state.db") as reopened:
        records = await reopened.read(session.id, tenant="default")
    assert [r.seq for r in records] == [0, 1]


async def test_two_stores_have_two_writers(tmp_path: Path) -> None:
    async with (
        SqliteEventStore(tmp_path / "a.db") as first,
        SqliteEventStore(tmp_path / "b.db") as second,
    ):
        await first.create(header())
        await second.create(header())
        assert await handed_over(first) != await handed_over(second)


async def test_a_killed_writer_fails_the_writes_in_flight_and_every_later_one(
    tmp_path: Path,
) -> None:
    async with SqliteEventStore(tmp_path / "state.db", write_window=1.0) as store:
        session = header()
        await store.create(session)
        await store.append(session.id, [turn(0)])
        pid = await handed_over(store)
        told: list[BaseException | None] = []
        pending = store.append(session.id, [turn(1)], done=told.append)  # held for its window
        os.kill(pid, signal.SIGKILL)
        async with asyncio.timeout(30):
            await exited(pid)
        with pytest.raises(StoreError) as caught:
            await store.flush()
        assert caught.value.code == ErrorCode.STORE
        assert "writer process" in caught.value.message
        assert len(told) == 1
        assert isinstance(told[0], StoreError)
        with pytest.raises(StoreError):
            await pending
        with pytest.raises(StoreError, match="writer process"):
            store.append(session.id, [turn(2)])
    async with SqliteEventStore(tmp_path / "state.db") as reopened:  # what was acked stands
        records = await reopened.read(session.id, tenant="default")
    assert [r.seq for r in records] == [0]


async def test_a_writer_killed_with_megabytes_waiting_for_it_fails_every_one_of_them(
    tmp_path: Path,
) -> None:
    async with SqliteEventStore(tmp_path / "state.db") as store:
        session = header()
        await store.create(session)
        await store.append(session.id, [turn(0)])
        pid = await handed_over(store)
        os.kill(pid, signal.SIGSTOP)  # it reads nothing more: what follows piles up here
        try:
            told: list[BaseException | None] = []
            text = "x" * 100_000
            for seq in range(1, 61):  # some 6 MB, far more than the socket holds
                message = UserMessageEvent(turn=1, message=user_message(text))
                store.append(session.id, [EventRecord(seq, 1.0, message)], done=told.append)
            flushed = store.flush()  # sends the rest at once
            link = store._link
            assert isinstance(link, HandoverLink)
            channel = link.process._channel
            assert channel is not None
            assert len(channel._out) > 1 << 20  # the backlog is ours, not the kernel's
        finally:
            os.kill(pid, signal.SIGKILL)
        async with asyncio.timeout(30):
            await exited(pid)
        with pytest.raises(StoreError, match="writer process"):
            await flushed
        assert len(told) == 60
        assert all(isinstance(error, StoreError) for error in told)
        assert not channel._out  # nothing kept for a writer that is gone
    async with SqliteEventStore(tmp_path / "state.db") as reopened:
        records = await reopened.read(session.id, tenant="default")
    assert [r.seq for r in records] == [0]


async def test_the_thread_writer_writes_in_this_process(tmp_path: Path) -> None:
    async with SqliteEventStore(tmp_path / "state.db", writer="thread") as store:
        session = header()
        await store.create(session)
        assert isinstance(store._link, ThreadLink)
        await store.append(session.id, [turn(0)])
        assert [r.seq for r in await store.read(session.id, tenant="default")] == [0]


@pytest.mark.parametrize("writer", ["processes", "", None, 1])
def test_an_unknown_writer_is_a_config_error(tmp_path: Path, writer: object) -> None:
    with pytest.raises(ConfigError, match="writer must be process or thread"):
        SqliteEventStore(tmp_path / "state.db", writer=writer)  # type: ignore[arg-type]
    assert not (tmp_path / "state.db").exists()


_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from subagents.ids import new_session_id
    from subagents.sessions import SqliteEventStore
    from subagents.sessions._events import EventRecord, SessionHeader, TurnStart

    async def main() -> None:
        async with SqliteEventStore(sys.argv[1]) as store:
            header = SessionHeader(id=new_session_id(), tenant="default", created_at=1.0, cwd="/")
            await store.create(header)
            await store._link.handed_over.wait()
            await store.append(header.id, [EventRecord(0, 1.0, TurnStart(turn=1))])
            print(header.id, store._link.process.pid, flush=True)
            await asyncio.Event().wait()  # held until killed

    asyncio.run(main())
    """
)


async def test_the_writer_does_not_outlive_a_killed_store_process(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _HOLDER, str(db), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        async with asyncio.timeout(60):
            line = await holder.stdout.readline()
        session_id, pid = line.decode().split()
        holder.kill()
        await holder.wait()
        async with asyncio.timeout(30):
            await exited(int(pid))  # the socket closed with its process: the writer ended
    finally:
        with contextlib.suppress(ProcessLookupError):
            holder.kill()
        await holder.wait()
    async with SqliteEventStore(db) as store:  # the acknowledged write stands
        records = await store.read(session_id, tenant="default")  # type: ignore[arg-type]
    assert [r.event for r in records] == [TurnStart(turn=1)]


async def test_with_the_fork_server_running_a_new_store_writes_from_its_process_only(
    tmp_path: Path,
) -> None:
    async with SqliteEventStore(tmp_path / "first.db") as first:
        await first.create(header())  # starts this process's fork server, if nothing did
        await handed_over(first)
    async with SqliteEventStore(tmp_path / "second.db") as second:
        session = header()
        await second.create(session)  # waits for the writer process, not for the thread
        link = second._link
        assert isinstance(link, HandoverLink)
        assert link.handed_over.is_set()
        assert link._thread._writer.commits == 0
        await second.append(session.id, [turn(0)])


async def test_a_handover_takes_back_the_batches_the_thread_has_not_started(
    tmp_path: Path,
) -> None:
    import threading

    from subagents.sessions._migrations import open_database
    from subagents.sessions._sqlite_link import ThreadLink
    from subagents.sessions._sqlite_wire import Barrier, WriteBatch, WrittenBatch

    wconn, rconn = await asyncio.to_thread(open_database, tmp_path / "s.db", synchronous="NORMAL")
    rconn.close()
    answered: list[WrittenBatch] = []
    link = ThreadLink(
        wconn,
        tmp_path / "s.db",
        batch_max=1,
        on_written=answered.append,
        loop=asyncio.get_running_loop(),
    )
    writing, go = threading.Event(), threading.Event()
    real_write = link._writer.write

    def held_write(batches: list[WriteBatch]) -> list[WrittenBatch]:
        writing.set()
        go.wait()
        return real_write(batches)

    link._writer.write = held_write
    batches = [WriteBatch(n, [Barrier()], 1) for n in (1, 2, 3)]
    link.send(batches[0])
    await asyncio.to_thread(writing.wait)  # the thread took the first and is writing it
    link.send(batches[1])
    link.send(batches[2])
    assert link.steal() == batches[1:]  # not started: taken back, in order
    go.set()
    await link.aclose()
    assert [a.id for a in answered] == [1]


async def test_start_writer_readies_the_process_before_any_write(tmp_path: Path) -> None:
    async with SqliteEventStore(tmp_path / "state.db") as store:
        store.start_writer()
        store.start_writer()  # twice is once
        pid = await handed_over(store)  # no write was submitted
        link = store._link
        assert isinstance(link, HandoverLink)
        session = header()
        await store.create(session)
        await store.append(session.id, [turn(0)])
        assert link._thread._writer.commits == 0  # the process wrote everything
    async with asyncio.timeout(30):
        await exited(pid)
    async with SqliteEventStore(tmp_path / "state.db") as reopened:
        assert [r.seq for r in await reopened.read(session.id, tenant="default")] == [0]


async def test_a_store_closed_as_its_writer_starts_leaves_no_writer(tmp_path: Path) -> None:
    # The writer is told to open the store as soon as it is connected, before it says hello:
    # closing then waits for it to be ready and stops it, so nothing touches the file later.
    for _ in range(5):
        async with SqliteEventStore(tmp_path / "state.db") as store:
            store.start_writer()  # its start runs while the store closes
            link = store._link
            assert isinstance(link, HandoverLink)
        pid = link.process.pid
        if pid is not None:  # it was ready by the time the store closed
            async with asyncio.timeout(30):
                await exited(pid)


async def test_a_runtime_starts_its_stores_writer_as_it_opens(tmp_path: Path) -> None:
    async with Runtime(model=ScriptedModel({}), store=tmp_path / "state.db") as rt:
        store = rt.store
        assert isinstance(store, SqliteEventStore)
        pid = await handed_over(store)  # nothing ran: the runtime's open started it
    async with asyncio.timeout(30):
        await exited(pid)


async def test_a_writer_ready_while_the_thread_drains_to_close_lets_both_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cold fork server (a fresh one, not yet started): the thread writes while the process
    # starts, and the store closes before the process is ready. Its `Ready` then comes while
    # the thread drains with its stop queued; the process must not take that stop from the
    # thread's queue (the thread would never end, nor the close).
    import threading

    from subagents.sessions import _sqlite_link
    from subagents.sessions._sqlite_wire import WriteBatch, WrittenBatch

    monkeypatch.setattr(_sqlite_link, "_FORKS", _sqlite_link._ForkServer())
    db = tmp_path / "state.db"
    store = SqliteEventStore(db)
    await store.__aenter__()
    store.start_writer()
    link = store._link
    assert isinstance(link, HandoverLink)
    writing, go = threading.Event(), threading.Event()
    real_write = link._thread._writer.write

    def held_write(batches: list[WriteBatch]) -> list[WrittenBatch]:
        writing.set()
        go.wait()
        return real_write(batches)

    link._thread._writer.write = held_write
    ready_while_closing: list[bool] = []
    on_ready = link.process._on_ready
    assert on_ready is not None

    def ready() -> None:
        ready_while_closing.append(link._closing)
        on_ready()

    link.process._on_ready = ready
    session = header()
    created = store.create(session)  # to the thread: the process is not ready
    await asyncio.to_thread(writing.wait)
    async with asyncio.timeout(60), asyncio.TaskGroup() as tasks:
        tasks.create_task(store.aclose())
        await link.process._settled.wait()  # ready (or it never will be: the case fails)
        go.set()  # the thread writes its batch, then takes its stop
    await created
    assert ready_while_closing == [True]
    assert link.process.pid is not None
    async with asyncio.timeout(30):
        await exited(link.process.pid)
    async with SqliteEventStore(db) as reopened:
        assert (await reopened.get_header(session.id, tenant="default")).id == session.id
