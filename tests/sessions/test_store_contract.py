"""The `EventStore` contract, run against every backend (see the protocol's docstring)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from subagents.errors import (
    ClosedError,
    ConcurrencyConflict,
    DuplicateError,
    ErrorCode,
    NotFoundError,
)
from subagents.ids import SessionId, new_message_id, new_session_id
from subagents.messages import (
    AssistantMessage,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    Usage,
    user_message,
)
from subagents.sessions import EventStore, InMemoryEventStore, SqliteEventStore
from subagents.sessions._events import (
    EVENT_KINDS,
    ApprovalDecided,
    ApprovalPolicySet,
    ApprovalRequested,
    AssistantMessageEvent,
    EventRecord,
    InboxSpliced,
    McpScopeSet,
    ModelErrorEvent,
    RequestHeader,
    SandboxModeSet,
    SessionEndSeed,
    SessionEvent,
    SessionHeader,
    StepEnd,
    StepStart,
    SubagentCatalog,
    SubagentDescriptor,
    SubagentSettled,
    TeamTaskClaimed,
    TeamTaskCreated,
    TeamTaskUpdated,
    ToolCallEvent,
    ToolResultEvent,
    ToolWorkflowAgentEnd,
    ToolWorkflowAgentStart,
    ToolWorkflowRunEnd,
    ToolWorkflowRunStart,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)

StoreFactory = Callable[[], EventStore]


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """A factory of unopened stores; every SQLite store it makes shares one file."""
    if request.param == "memory":
        return InMemoryEventStore
    return lambda: SqliteEventStore(tmp_path / "state.db")


@pytest.fixture
async def store(make_store: StoreFactory) -> AsyncIterator[EventStore]:
    async with make_store() as opened:
        yield opened


def header(
    *,
    tenant: str = "default",
    parent: SessionHeader | None = None,
    created_at: float = 1_700_000_000.0,
) -> SessionHeader:
    return SessionHeader(
        id=new_session_id(),
        tenant=tenant,
        created_at=created_at,
        cwd="/work",
        parent=parent.id if parent else None,
        root=parent.root_id if parent else None,
        origin="subagent" if parent else "user",
        depth=parent.depth + 1 if parent else 0,
        model_spec="scripted:demo.yaml",
    )


def records(events: Sequence[SessionEvent], *, start: int = 0) -> list[EventRecord]:
    return [
        EventRecord(start + i, 1_700_000_000.0 + (start + i) / 8, event)
        for i, event in enumerate(events)
    ]


def one_of_each_kind() -> list[SessionEvent]:
    """One realistic turn: a prompt, a tool call and its result, a failed call, steering."""
    call = ToolCallBlock(id="call-1", name="read_file", arguments='{"path": "app.py"}')
    return [
        RequestHeader(
            reason="initial",
            provider="scripted",
            model="demo",
            system="You are lead.",
            tools=("subagent", "read_file"),
        ),
        UserMessageEvent(message=user_message("Review app.py"), turn=1),
        TurnStart(turn=1),
        StepStart(turn=1, step=1),
        AssistantMessageEvent(
            turn=1,
            step=1,
            message=AssistantMessage(
                id=new_message_id(),
                content=(ReasoningBlock("Read it first."), TextBlock("Reading."), call),
                provider="scripted",
                model="demo",
                replay_state={"response_id": "r-1", "items": [1, 2.5, None, "x"]},
            ),
            finish="tool_calls",
            usage=Usage(input_tokens=120, output_tokens=30, cache_read_tokens=64),
        ),
        ToolCallEvent(turn=1, step=1, call_id=call.id, name=call.name, arguments=call.arguments),
        ToolResultEvent(
            turn=1,
            step=1,
            message=ToolResultMessage(
                id=new_message_id(), call_id=call.id, name=call.name, content="print('hi')\n"
            ),
        ),
        StepEnd(turn=1, step=1),
        StepStart(turn=1, step=2),
        ModelErrorEvent(turn=1, step=2, code="RATE_LIMIT", message="429: slow down"),
        StepEnd(turn=1, step=2),
        InboxSpliced(target="next-step", start=0, inserted=(user_message("Also check b.py"),)),
        TurnEnd(turn=1, reason="aborted", cause="user"),
        SessionEndSeed(),
        SubagentCatalog(
            child_id="9b1f6c0e-2a7d-4c8e-9f3a-5d6b7c8e9f01",
            name="reviewer",
            mode="one-shot",
            provider="spawn",
            label="Review the code",
            created_at=1_800_000_000.5,
        ),
        SubagentDescriptor(mode="continuable", provider="fork", label="Review", agent_model="m"),
        SubagentSettled(run_id="run-3", stop_reason="completed"),
        SandboxModeSet(mode="read-only", source="delegation"),
        McpScopeSet(
            servers=("github", "own"),
            allow=("mcp__github__get_issue", "mcp__own"),
            deny=("mcp__own__rm",),
            inline={"own": {"command": "./server", "args": ["--x"]}},
            source="delegation",
        ),
        ApprovalPolicySet(tools=("bash", "mcp__*"), timeout=60.0, source="delegation"),
        ApprovalRequested(
            turn=1,
            step=1,
            call_id="call-9",
            name="bash",
            arguments='{"command": "ls"}',
            agent="lead/reviewer",
            reason="gated by 'bash'",
            deadline=1_800_000_060.0,
        ),
        ApprovalDecided(call_id="call-9", approved=False, by="cli:alice", reason="no", command=7),
        TeamTaskCreated(
            task_id="T1", subject="Write tests", blocked_by=("T0",), created_by="lead-id"
        ),
        TeamTaskClaimed(task_id="T1", owner="9b1f6c0e-2a7d-4c8e-9f3a-5d6b7c8e9f01"),
        TeamTaskUpdated(task_id="T1", status="completed", note="done", by="someone"),
        ToolWorkflowRunStart(run_id="run-7", name="audit"),
        ToolWorkflowAgentStart(
            run_id="run-7",
            seq=1,
            label="audit child 1",
            phase="review",
            child_id="9b1f6c0e-2a7d-4c8e-9f3a-5d6b7c8e9f02",
        ),
        ToolWorkflowAgentStart(
            run_id="run-7", seq=2, label="b.py", child_id="9b1f6c0e-2a7d-4c8e-9f3a-5d6b7c8e9f03"
        ),
        ToolWorkflowAgentEnd(run_id="run-7", seq=1, outcome="completed"),
        ToolWorkflowAgentEnd(run_id="run-7", seq=2, outcome="cancelled"),
        ToolWorkflowRunEnd(run_id="run-7", stop_reason="cancelled"),
    ]


async def test_create_then_get_header(store: EventStore) -> None:
    root = header()
    await store.create(root)
    assert await store.get_header(root.id, tenant="default") == root
    assert await store.read(root.id, tenant="default") == []


async def test_duplicate_create_is_refused_and_changes_nothing(store: EventStore) -> None:
    first = header()
    await store.create(first)
    await store.append(first.id, records([TurnStart(turn=1)]))
    again = SessionHeader(id=first.id, tenant="other", created_at=1.0, cwd="/elsewhere")
    with pytest.raises(DuplicateError) as caught:
        await store.create(again)
    assert caught.value.code == ErrorCode.SESSION_EXISTS
    assert first.id in caught.value.message
    assert await store.get_header(first.id, tenant="default") == first
    assert await store.list_headers(tenant="other") == []
    assert await store.read(first.id, tenant="default") == records([TurnStart(turn=1)])


async def test_every_event_kind_round_trips(store: EventStore) -> None:
    events = one_of_each_kind()
    assert {str(e.__struct_config__.tag) for e in events} == set(EVENT_KINDS)
    session = header()
    await store.create(session)
    written = records(events)
    await store.append(session.id, written[:3])
    await store.append(session.id, written[3:])
    assert await store.read(session.id, tenant="default") == written
    assert await store.read(session.id, tenant="default", from_seq=5) == written[5:]
    assert await store.read(session.id, tenant="default", from_seq=len(written)) == []
    # A page of a log: at most `limit` records from `from_seq`.
    assert await store.read(session.id, tenant="default", from_seq=2, limit=3) == written[2:5]
    assert await store.read(session.id, tenant="default", limit=0) == []
    assert await store.read(session.id, tenant="default", from_seq=4, limit=10**6) == written[4:]


async def test_seqs_must_continue_the_log(store: EventStore) -> None:
    session = header()
    await store.create(session)
    await store.append(session.id, records([TurnStart(turn=1), StepStart(turn=1, step=1)]))
    told: list[BaseException | None] = []
    for bad_start in (0, 1, 3):  # rewrites the log, overlaps it, leaves a gap
        with pytest.raises(ConcurrencyConflict) as caught:
            await store.append(session.id, records([StepEnd(turn=1, step=1)], start=bad_start))
        assert caught.value.code == ErrorCode.CONCURRENCY_CONFLICT
        # A session's `submit` (one record, told through `done`): refused as it is handed over.
        with pytest.raises(ConcurrencyConflict) as caught:
            store.append(
                session.id, records([StepEnd(turn=1, step=1)], start=bad_start), done=told.append
            )
        assert caught.value.fields == {"expected_seq": 2, "seq": bad_start}
    assert told == []
    gap = [*records([StepEnd(turn=1, step=1)], start=2), *records([TurnStart(turn=2)], start=4)]
    with pytest.raises(ConcurrencyConflict):
        await store.append(session.id, gap)
    assert [r.seq for r in await store.read(session.id, tenant="default")] == [0, 1]
    await store.append(session.id, records([StepEnd(turn=1, step=1)], start=2))
    assert [r.seq for r in await store.read(session.id, tenant="default")] == [0, 1, 2]


async def test_append_to_an_unknown_session_is_not_found(store: EventStore) -> None:
    with pytest.raises(NotFoundError):
        await store.append(new_session_id(), records([TurnStart(turn=1)]))


async def test_another_tenants_session_reads_as_not_found(store: EventStore) -> None:
    mine, theirs = header(tenant="acme"), header(tenant="globex")
    await store.create(mine)
    await store.create(theirs)
    await store.append(theirs.id, records([TurnStart(turn=1)]))
    with pytest.raises(NotFoundError) as caught:
        await store.get_header(theirs.id, tenant="acme")
    assert caught.value.code == ErrorCode.NOT_FOUND
    with pytest.raises(NotFoundError):
        await store.read(theirs.id, tenant="acme")
    with pytest.raises(NotFoundError):
        await store.read(new_session_id(), tenant="acme")
    assert await store.list_headers(tenant="acme") == [mine]
    assert await store.list_headers(tenant="globex", roots_only=False) == [theirs]
    assert await store.list_headers(tenant="initech") == []


async def test_list_headers_is_newest_first_and_filters_trees(store: EventStore) -> None:
    old_root = header(created_at=100.0)
    child = header(parent=old_root, created_at=101.0)
    grandchild = header(parent=child, created_at=102.0)
    new_root = header(created_at=200.0)
    other_child = header(parent=new_root, created_at=201.0)
    for h in (grandchild, new_root, old_root, other_child, child):  # insertion order is noise
        await store.create(h)
    assert grandchild.root_id == old_root.id
    assert await store.list_headers(tenant="default") == [new_root, old_root]
    assert await store.list_headers(tenant="default", roots_only=False) == [
        other_child,
        new_root,
        grandchild,
        child,
        old_root,
    ]
    tree = await store.list_headers(tenant="default", roots_only=False, root=old_root.id)
    assert tree == [grandchild, child, old_root]
    assert await store.list_headers(tenant="default", root=old_root.id) == [old_root]
    assert await store.list_headers(tenant="other", roots_only=False, root=old_root.id) == []


async def test_lifecycle(make_store: StoreFactory) -> None:
    unopened = make_store()
    with pytest.raises(ClosedError):
        await unopened.list_headers(tenant="default")
    session = header()
    async with make_store() as store:
        await store.create(session)
    await store.aclose()  # a second close is harmless
    with pytest.raises(ClosedError) as caught:
        await store.create(header())
    assert caught.value.code == ErrorCode.CLOSED
    with pytest.raises(ClosedError):
        store.append(session.id, records([TurnStart(turn=1)]))
    with pytest.raises(ClosedError):
        await store.read(session.id, tenant="default")
    with pytest.raises(ClosedError):
        await store.get_header(session.id, tenant="default")
    with pytest.raises(ClosedError):
        await store.list_headers(tenant="default")
    with pytest.raises(ClosedError, match="cannot reopen the event store: it is closed"):
        await store.__aenter__()


async def test_aclose_drains_pending_appends(make_store: StoreFactory) -> None:
    session = header()
    async with make_store() as store:
        await store.create(session)
        pending = [
            store.append(session.id, records([TurnStart(turn=n)], start=n)) for n in range(50)
        ]
    for done in pending:
        await done  # resolved, not failed, although nobody awaited them before the close


async def test_appends_issued_in_order_by_concurrent_tasks_commit_in_order(
    store: EventStore,
) -> None:
    session = header()
    await store.create(session)
    issued: list[int] = []

    async def writer(task: int) -> None:
        for _ in range(20):
            seq = len(issued)
            acked = store.append(session.id, records([TurnStart(turn=task)], start=seq))
            issued.append(task)  # no await between reading the next seq and appending
            await acked

    async with asyncio.TaskGroup() as group:
        for task in range(8):
            group.create_task(writer(task))
    log = await store.read(session.id, tenant="default")
    assert [r.seq for r in log] == list(range(160))
    assert [r.event for r in log] == [TurnStart(turn=task) for task in issued]


async def test_appends_issued_without_awaiting_in_between(store: EventStore) -> None:
    session = header()
    await store.create(session)
    first = store.append(session.id, records([TurnStart(turn=1)]))
    second = store.append(session.id, records([StepStart(turn=1, step=1)], start=1))
    await second
    await first
    assert len(await store.read(session.id, tenant="default")) == 2


async def test_an_append_whose_waiter_is_cancelled_still_commits(store: EventStore) -> None:
    session = header()
    await store.create(session)
    waiting = asyncio.Event()

    async def append_then_wait() -> None:
        acked = store.append(session.id, records([TurnStart(turn=1)]))
        waiting.set()
        await acked

    async with asyncio.TaskGroup() as group:
        task = group.create_task(append_then_wait())
        await waiting.wait()
        task.cancel()
    await store.append(session.id, records([TurnEnd(turn=1, reason="aborted")], start=1))
    assert [r.seq for r in await store.read(session.id, tenant="default")] == [0, 1]


async def test_sessions_are_independent(store: EventStore) -> None:
    a, b = header(), header()
    await store.create(a)
    await store.create(b)
    await store.append(a.id, records([TurnStart(turn=1), TurnEnd(turn=1, reason="completed")]))
    await store.append(b.id, records([TurnStart(turn=7)]))
    assert [r.event for r in await store.read(b.id, tenant="default")] == [TurnStart(turn=7)]
    assert len(await store.read(SessionId(a.id), tenant="default")) == 2


async def test_leases_fence_a_tree_to_one_holder(store: EventStore) -> None:
    root = SessionId("00000000-0000-4000-8000-00000000000a")
    assert await store.get_lease(root) is None
    mine = await store.acquire_lease(root, holder="a", pid=1, now=100.0, ttl=30.0)
    assert (mine.holder, mine.pid, mine.expires) == ("a", 1, 130.0)
    theirs = await store.acquire_lease(root, holder="b", pid=2, now=110.0, ttl=30.0)
    assert theirs == mine  # a current lease of another holder wins
    renewed = await store.acquire_lease(root, holder="a", pid=1, now=120.0, ttl=30.0)
    assert renewed.expires == 150.0
    await store.release_lease(root, holder="b")  # not b's to release
    assert await store.get_lease(root) == renewed
    taken = await store.acquire_lease(root, holder="b", pid=2, now=151.0, ttl=30.0)
    assert taken.holder == "b"  # an expired lease can be taken over
    await store.release_lease(root, holder="b")
    assert await store.get_lease(root) is None


async def test_a_claimed_lease_of_a_new_root_lands_with_its_header(store: EventStore) -> None:
    session = header()
    created = store.create(session)
    store.claim_lease(session.id, holder="a", pid=1, now=100.0, ttl=30.0, address=None)
    await store.flush()  # nobody waited for either: the next barrier covers both
    assert created.done()
    assert created.exception() is None
    lease = await store.get_lease(session.id)
    assert lease is not None
    assert (lease.holder, lease.pid, lease.expires) == ("a", 1, 130.0)
    assert (await store.get_header(session.id, tenant="default")).id == session.id
