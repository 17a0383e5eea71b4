"""Commands to a tree another runtime holds (in one process here, on one real SQLite file):
the asking runtime writes the command, wakes the holder through its socket, and the holder
executes it once. Also the holder's checks and its refusal to run a command twice.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import pytest
from delegation_support import Gates
from hypothesis import HealthCheck, given, settings, strategies as st

from subagents.core import ControlServer, RunResult, SessionEventPosted, wake_holder
from subagents.delegation import DelegationRuntime, find_member
from subagents.errors import ErrorCode, SubagentError, UsageError
from subagents.ids import SessionId
from subagents.sessions import (
    CommandRow,
    EventRecord,
    InboxSpliced,
    SqliteEventStore,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
    encode_body,
    parse_command,
)
from subagents.testing import RecordingModel

SCRIPT = """
lead:
  - calls:
      - {tool: subagent, args: {name: worker, description: Work, prompt: Work on it,
          run_in_background: true}}
      - {tool: hold, args: {label: lead}}
  - text: lead answer 1
  - text: lead answer 2
  - text: lead answer 3
  - text: lead answer 4
worker:
  - calls:
      - {tool: hold, args: {label: worker}}
  - text: worker answer 1
  - text: worker answer 2
"""


def runtime(path: Path, gates: Gates) -> DelegationRuntime:
    model = RecordingModel.from_yaml(SCRIPT)
    return DelegationRuntime(model=model, store=SqliteEventStore(path), tools=[gates.tool()])


live_results: list[RunResult] = []
"""The results of the holders' runs, newest last (`live_tree` appends when it ends)."""


@asynccontextmanager
async def live_tree(
    path: Path, gates: Gates
) -> AsyncGenerator[tuple[DelegationRuntime, DelegationRuntime, asyncio.TaskGroup], None]:
    """A holder running `SCRIPT` (its lead and worker waiting at their gates) and a second
    runtime on the same store; on leaving, the gates open and the run ends."""
    async with (
        runtime(path, gates) as holder,
        runtime(path, Gates()) as other,
        asyncio.TaskGroup() as tasks,
    ):
        run = tasks.create_task(holder.run("Go"))
        await gates.started("lead").wait()
        await gates.started("worker").wait()
        yield holder, other, tasks
        gates.release("lead")
        gates.release("worker")
        live_results.append(await run)


def queued_in(holder: DelegationRuntime, text: str) -> asyncio.Event:
    """Set once the holder has durably queued a message with `text` for one of its agents."""
    queued = asyncio.Event()

    def on_event(event: object) -> None:
        if (
            isinstance(event, SessionEventPosted)
            and isinstance(splice := event.record.event, InboxSpliced)
            and any(m.text == text for m in splice.inserted)
        ):
            queued.set()

    holder.subscribe(on_event)
    return queued


def entered(records: list[object], text: str) -> int:
    return sum(
        1
        for r in records
        if isinstance(event := getattr(r, "event", None), UserMessageEvent)
        and event.message.text == text
    )


async def test_another_runtime_steers_messages_and_interrupts_a_running_tree(
    tmp_path: Path,
) -> None:
    gates = Gates()
    path = tmp_path / "state.db"
    async with live_tree(path, gates) as (holder, other, tasks):
        root = next(iter(holder.commands.ready))

        assert await other.steer(root, "lead", "Steer it") == "joined"
        assert await other.interrupt(root, "worker") is True
        queued = queued_in(holder, "Then answer this")
        sending = tasks.create_task(other.send(root, "lead", "Then answer this"))
        await queued.wait()  # the holder took it while its lead still works
        gates.release("lead")
        answer = await sending
    result = live_results[-1]

    assert result.stop_reason == "completed"
    assert answer.stop_reason == "completed"
    assert answer.output.startswith("lead answer")
    async with SqliteEventStore(path) as store:
        lead = await store.read(root, tenant="default")
        assert entered(list(lead), "Steer it") == 1
        assert entered(list(lead), "Then answer this") == 1
        rows = [await store.get_command(i) for i in (1, 2, 3)]
        assert [(r.kind, r.state) for r in rows if r is not None] == [
            ("steer", "done"),
            ("interrupt", "done"),
            ("send", "done"),
        ]
        members = await store.list_headers(tenant="default", roots_only=False, root=root)
        worker = next(h for h in members if h.parent is not None)
        ends = [
            (r.event.reason, r.event.command)
            for r in await store.read(worker.id, tenant="default")
            if isinstance(r.event, TurnEnd)
        ]
        assert ends[0] == ("aborted", 2)


async def test_the_holder_executes_a_command_once_even_when_asked_again(tmp_path: Path) -> None:
    gates = Gates()
    path = tmp_path / "state.db"
    async with live_tree(path, gates) as (holder, _, _):
        root = next(iter(holder.commands.ready))
        store = holder.store
        ids = [
            await store.submit_command(
                root=root, tenant="default", target=root, kind=kind, body=encode_body(text), now=0
            )
            for kind, text in (("send", "Once only"), ("interrupt", None))
        ]
        rows = [await store.get_command(i) for i in ids]
        commands = [parse_command(r) for r in rows if r is not None]
        # A holder that executed these and died before marking them done: the next one runs
        # them again, and finds their effect in the log.
        first = [await holder.commands.execute(c) for c in commands]
        second = [await holder.commands.execute(c) for c in commands]
        assert first[0]["placement"] == "queued"
        assert second[0]["first"] == first[0]["first"]
        assert first[1] == second[1] == {"interrupted": True}
        records = holder.agents[root].session.records if root in holder.agents else []
        lead = records or await store.read(root, tenant="default")
        assert entered(list(lead), "Once only") == 1
        aborted = [r.event for r in lead if isinstance(r.event, TurnEnd)]
        assert sum(1 for t in aborted if t.command == ids[1]) == 1


async def test_a_holder_that_never_answers_leaves_the_command_pending(tmp_path: Path) -> None:
    gates = Gates()
    path = tmp_path / "state.db"
    directory = tempfile.mkdtemp(prefix="subagents-test-")
    address = os.path.join(directory, "silent")

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # hears the wake-up, never answers
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_unix_server(silent, path=address)
    async with live_tree(path, gates) as (holder, other, _):
        root = next(iter(holder.commands.ready))
        lease = await holder.store.get_lease(root)
        assert lease is not None
        # The live holder's lease, pointing at a socket nobody serves.
        await holder.store.acquire_lease(
            root,
            holder=holder.holder,
            pid=os.getpid(),
            now=lease.heartbeat,
            ttl=30,
            address=address,
        )
        other.command_patience = 0.2
        with pytest.raises(SubagentError) as caught:
            await other.steer(root, "lead", "Anyone there?")
        assert caught.value.code == ErrorCode.HOLDER_UNREACHABLE
        assert "still queued" in caught.value.message
        assert "do not repeat it" in caught.value.message
        pending = await other.store.pending_commands(root)
        assert [c.kind for c in pending] == ["steer"]
        # Once the holder is woken for real, it takes it.
        await holder.control.serve_now()
        assert await other.store.pending_commands(root) == []
    server.close()
    await server.wait_closed()


async def test_the_socket_refuses_what_is_not_a_command_id(tmp_path: Path) -> None:
    served: list[int] = []

    async def serve() -> None:
        served.append(1)

    control = ControlServer(serve)
    address = await control.start()
    assert address is not None
    assert await control.start() == address
    mode = (await asyncio.to_thread(os.stat, os.path.dirname(address))).st_mode
    assert oct(mode & 0o777) == "0o700"
    reader, writer = await asyncio.open_unix_connection(address)
    writer.write(b"rm -rf /\n")
    assert await reader.readline() == b"?\n"
    writer.close()
    await writer.wait_closed()
    reader, writer = await asyncio.open_unix_connection(address)
    writer.write(b"9" * 4096 + b"\n")  # longer than any id: dropped unread
    assert await reader.read() == b""
    writer.close()
    await writer.wait_closed()
    assert served == []
    assert await wake_holder(address, 7, within=5) is True
    assert served == [1]
    await control.aclose()
    assert not await asyncio.to_thread(os.path.exists, address)
    assert await wake_holder(address, 7, within=5) is False


ROOT = "0b8a9a4e-4a38-4c36-9d43-6b5bbd1d64a1"


def _body(text: str | None, message_id: str | None) -> bytes:
    return msgspec.json.encode({"text": text, "message_id": message_id})


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    kind=st.sampled_from(["send", "steer", "interrupt", "", "SEND", "rm"]) | st.text(max_size=8),
    target=st.sampled_from([ROOT, "", "../x", ROOT.upper()]) | st.text(max_size=40),
    body=st.binary(max_size=64)
    | st.builds(
        _body,
        st.none() | st.text(max_size=8),
        st.none() | st.sampled_from([ROOT]) | st.text(max_size=8),
    ),
)
def test_any_stored_row_parses_or_is_refused_with_bad_command(
    kind: str, target: str, body: bytes
) -> None:
    row = CommandRow(1, ROOT, "default", target, kind, body, 0.0, "pending", None)
    refusal: UsageError | None = None
    try:
        command = parse_command(row)
    except UsageError as exc:
        refusal = exc
    else:
        assert command.kind in ("send", "steer", "interrupt")
        assert command.target == SessionId(target)
        assert (command.text is None) == (command.kind == "interrupt")
    if refusal is not None:
        assert refusal.code == ErrorCode.BAD_COMMAND
        assert "\n" not in refusal.message


async def test_steering_a_running_child_joins_its_turn_and_a_stored_tree_runs_it_next(
    tmp_path: Path,
) -> None:
    gates = Gates()
    path = tmp_path / "state.db"
    async with live_tree(path, gates) as (holder, other, _):
        root = next(iter(holder.commands.ready))
        assert await other.steer(root, "worker", "Worker, look here") == "joined"
    worker = await _member_log(path, root, "worker")
    steered = [i for i, r in enumerate(worker) if _text_of(r) == "Worker, look here"]
    assert len(steered) == 1
    # Entered in the worker's first turn, after the result of the call it was waiting on.
    turns = [r.event.turn for r in worker[: steered[0]] if isinstance(r.event, TurnStart)]
    assert turns == [1]

    # Nobody holds the tree now: steering resumes it, and the message is its next turn.
    async with runtime(path, Gates()) as later:
        assert await later.steer(root, "lead", "One more thing") == "next-turn"
    lead = await _member_log(path, root, "lead")
    assert [_text_of(r) for r in lead].count("One more thing") == 1
    assert lead[-1].kind == "turn/end"


def _text_of(record: object) -> str | None:
    event = getattr(record, "event", None)
    return event.message.text if isinstance(event, UserMessageEvent) else None


async def _member_log(path: Path, root: SessionId, name: str) -> list[EventRecord]:
    async with SqliteEventStore(path) as store:
        header = await store.get_header(root, tenant="default")
        member = await find_member(store, header, name)
        return await store.read(member.id, tenant="default")


async def test_a_holder_still_loading_the_tree_is_asked_again_not_flooded(
    tmp_path: Path,
) -> None:
    gates = Gates()
    path = tmp_path / "state.db"
    async with live_tree(path, gates) as (holder, other, _):
        root = next(iter(holder.commands.ready))
        holder.commands.ready.discard(root)  # as while `resume_tree` loads it
        passes: list[int] = []
        serve = holder.commands.serve

        async def counted(roots: object = None, *, kinds: object = None) -> None:
            passes.append(1)
            await serve()

        holder.control._serve = counted
        other.command_patience = 0.5
        with pytest.raises(SubagentError):
            await other.steer(root, "lead", "Wait for me")
        # Asked again every retry interval, not in a tight loop (thousands of passes).
        assert 1 <= len(passes) <= 40
        holder.commands.ready.add(root)
        await holder.control.serve_now()
        assert await holder.store.pending_commands(root) == []


async def test_closing_the_control_server_waits_for_the_pass_in_progress() -> None:
    inside = asyncio.Event()
    finish = asyncio.Event()
    done: list[str] = []

    async def serve() -> None:
        inside.set()
        await finish.wait()
        done.append("served")

    control = ControlServer(serve)
    address = await control.start()
    assert address is not None
    async with asyncio.TaskGroup() as tasks:
        waking = tasks.create_task(wake_holder(address, 3, within=30))
        await inside.wait()
        closing = tasks.create_task(control.aclose())
        await asyncio.sleep(0)
        assert not closing.done()  # the command being executed is finished first
        finish.set()
        await closing
        assert done == ["served"]
        assert await waking is True
    await control.serve_now()  # closed: no more passes
    assert done == ["served"]


async def test_a_send_whose_message_is_cancelled_returns(tmp_path: Path) -> None:
    gates = Gates()
    path = tmp_path / "state.db"
    async with live_tree(path, gates) as (holder, other, tasks):
        root = next(iter(holder.commands.ready))
        queued = queued_in(holder, "Never mind")
        sending = tasks.create_task(other.send(root, "lead", "Never mind"))
        await queued.wait()
        lead = holder.agents[root]
        pending = [m.id for m in lead.inbox.next_turn if m.text == "Never mind"]
        assert await lead.inbox.remove(pending[0])
        answer = await sending
        assert answer.stop_reason is None  # no turn ran for it
