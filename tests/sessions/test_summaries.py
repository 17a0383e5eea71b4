"""The store's summaries and catalog agree with a fold of the logs, whatever was written.

`tree_members` is what `list_agents` reads instead of every member's log, and `tree_listing`
(the SQLite store's listing rows) what `subagents tree` reads; these tests hold both to the
truth (`summaries_from_logs` over the logs as read back) after random writes in random batches,
across a reopen, with a second process's store writing the same session, after a migration from
a store that had no summaries, and with a summary or listing row missing or damaged.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from subagents.ids import MessageId, SessionId, new_session_id
from subagents.messages import AssistantMessage, TextBlock, ToolResultMessage, Usage
from subagents.sessions import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageEvent,
    EventRecord,
    EventStore,
    InMemoryEventStore,
    ListingRow,
    MemberSummary,
    ModelErrorEvent,
    SessionEvent,
    SessionHeader,
    SqliteEventStore,
    StepStart,
    SubagentCatalog,
    SubagentDescriptor,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    listing_row,
)
from subagents.sessions._migrations import fill_members, refresh_listing
from subagents.sessions._sqlite import _SUMMARIES_OF
from subagents.sessions._summaries import summaries_from_logs

CALLS = ("c1", "c2", "c3")
small = st.integers(min_value=0, max_value=50)
maybe = st.none() | small


def _result(call_id: str) -> ToolResultEvent:
    message = ToolResultMessage(
        id=MessageId(f"r-{call_id}"), call_id=call_id, name="t", content="ok"
    )
    return ToolResultEvent(turn=1, step=1, message=message)


def _answer(usage: Usage | None) -> AssistantMessageEvent:
    message = AssistantMessage(
        id=MessageId("a"), content=(TextBlock("hi"),), provider="p", model="m"
    )
    return AssistantMessageEvent(turn=1, step=1, message=message, usage=usage)


def _request(call_id: str) -> ApprovalRequested:
    return ApprovalRequested(
        turn=1, step=1, call_id=call_id, name="t", arguments="{}", agent="lead", reason="gated"
    )


def _descriptor(budget: tuple[int | None, int | None, int | None]) -> SubagentDescriptor:
    tokens, calls, children = budget
    return SubagentDescriptor(
        budget_tokens=tokens, budget_model_calls=calls, budget_children=children
    )


own_events: st.SearchStrategy[SessionEvent] = st.one_of(
    small.map(lambda n: TurnStart(turn=n)),
    st.builds(
        TurnEnd,
        turn=small,
        reason=st.sampled_from(["completed", "aborted", "error", "budget"]),
        error_message=st.none() | st.text(max_size=5),
    ),
    st.sampled_from(CALLS).map(_request),
    st.builds(
        ApprovalDecided, call_id=st.sampled_from(CALLS), approved=st.booleans(), by=st.just("x")
    ),
    st.sampled_from(CALLS).map(_result),
    (st.none() | st.builds(Usage, small, small, small, small, small)).map(_answer),
    st.just(ModelErrorEvent(turn=1, step=1, code="E", message="boom")),
    st.tuples(maybe, maybe, maybe).map(_descriptor),
    st.just(StepStart(turn=1, step=1)),
)
# A write: (member index, events; a catalog entry is added by the plan for a child index).
writes = st.lists(
    st.tuples(st.integers(0, 3), st.lists(own_events | st.just("catalog"), max_size=4)),
    max_size=14,
)


class Tree:
    """A root, two children of it, one grandchild (seeded with 2 copied records)."""

    def __init__(self) -> None:
        root = SessionHeader(id=new_session_id(), tenant="default", created_at=1.0, cwd="/w")
        kid = self._child(root, 2.0)
        other = self._child(root, 2.0)  # the same time: the catalog orders them
        grandchild = self._child(kid, 3.0, seed_length=2)
        self.headers = [root, kid, other, grandchild]
        self.next = {h.id: 0 for h in self.headers}
        self.catalogued: dict[SessionId, int] = {}

    @staticmethod
    def _child(parent: SessionHeader, at: float, *, seed_length: int = 0) -> SessionHeader:
        return SessionHeader(
            id=new_session_id(),
            tenant="default",
            created_at=at,
            cwd="/w",
            parent=parent.id,
            root=parent.root_id,
            seed_length=seed_length,
        )

    def records(self, index: int, events: Sequence[SessionEvent | str]) -> list[EventRecord]:
        header = self.headers[index]
        out: list[EventRecord] = []
        for event in events:
            if isinstance(event, str):  # a catalog entry for one of this member's children
                children = [h for h in self.headers if h.parent == header.id]
                if not children:
                    continue
                child = children[self.catalogued.get(header.id, 0) % len(children)]
                self.catalogued[header.id] = self.catalogued.get(header.id, 0) + 1
                event = SubagentCatalog(
                    child_id=child.id,
                    name=f"n{self.next[header.id]}",
                    mode="continuable" if self.next[header.id] % 2 else "one-shot",
                    label=f"l{self.next[header.id]}",
                )
            out.append(EventRecord(self.next[header.id], 5.0, event))
            self.next[header.id] += 1
        return out


Plan = list[tuple[int, list[SessionEvent | str]]]


async def _write(store: EventStore, tree: Tree, plan: Plan) -> None:
    """Append the plan's writes without waiting between them (so they share commits)."""
    failures: list[BaseException] = []

    def told(error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    pending: list[asyncio.Future[None]] = []
    for index, events in plan:
        records = tree.records(index, events)
        if records:
            pending.append(store.append(tree.headers[index].id, records, done=told))
    for write in pending:
        await write
    await store.flush()
    assert failures == []


async def _truth(store: EventStore, tree: Tree) -> list[MemberSummary]:
    root = tree.headers[0]
    logs = {h.id: await store.read(h.id, tenant="default") for h in tree.headers}
    listed = await store.tree_members(root.id, tenant="default")
    headers = [m.header for m in listed]
    assert sorted(h.id for h in headers) == sorted(h.id for h in tree.headers)
    return summaries_from_logs(headers, logs)


async def _members(store: EventStore, tree: Tree) -> dict[SessionId, MemberSummary]:
    """The tree's members as the store lists them, by id (a listing has no set order)."""
    listed = await store.tree_members(tree.headers[0].id, tenant="default")
    members = {m.header.id: m for m in listed}
    assert len(members) == len(listed)
    return members


def _stored_listing(path: Path, root: SessionId) -> dict[SessionId, ListingRow]:
    """The listing rows the SQLite store keeps for `root`'s tree, as written (no fallback)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT session_id, row FROM listing WHERE root = ?", (root,))
        return {key: msgspec.json.decode(row, type=ListingRow) for key, row in rows}


async def _kept(path: Path, store: EventStore, tree: Tree) -> None:
    """The listing rows as written agree with the truth: `subagents tree` reads them as they are."""
    truth = await _truth(store, tree)
    kept = await asyncio.to_thread(_stored_listing, path, tree.headers[0].id)
    assert kept == {m.header.id: listing_row(m) for m in truth}


async def _agree(store: EventStore, tree: Tree) -> None:
    truth = await _truth(store, tree)
    assert await _members(store, tree) == {m.header.id: m for m in truth}
    rows = {m.header.id: listing_row(m) for m in truth}
    listing = await store.tree_listing(tree.headers[0].id, tenant="default")
    assert {row.id: row for row in listing} == rows
    assert len(listing) == len(rows)
    assert await store.tree_listing(tree.headers[0].id, tenant="another") == []
    ids = [h.id for h in tree.headers]
    # Chosen sessions: in any order, repeated, with an unknown id that is left out.
    chosen = [*reversed(ids), SessionId("no-such-session"), ids[0]]
    assert await store.summaries(chosen, tenant="default") == {
        m.header.id: m.summary for m in truth
    }
    assert await store.summaries(ids, tenant="another") == {}


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(writes, writes)
def test_summaries_equal_a_fold_of_the_logs(first: Plan, second: Plan) -> None:
    async def scenario(path: Path) -> None:
        tree = Tree()
        async with SqliteEventStore(path, write_window=0) as store, InMemoryEventStore() as mem:
            for h in tree.headers:
                store.create(h)
                mem.create(h)
            await _write(store, tree, first)
            memory_tree = Tree()
            memory_tree.headers, memory_tree.next = tree.headers, dict.fromkeys(tree.next, 0)
            await _write(mem, memory_tree, first)
            await _agree(store, tree)
            await _kept(path, store, tree)
            await _agree(mem, memory_tree)
            assert await _members(store, tree) == await _members(mem, memory_tree)
        async with SqliteEventStore(path) as reopened:  # a new process: nothing cached
            await _write(reopened, tree, second)
            await _agree(reopened, tree)
            await _kept(path, reopened, tree)

    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(scenario(Path(scratch) / "s.db"))


async def test_another_process_writing_the_same_session_keeps_them_true(tmp_path: Path) -> None:
    tree = Tree()
    path = tmp_path / "s.db"
    async with SqliteEventStore(path) as mine, SqliteEventStore(path) as theirs:
        for h in tree.headers:
            mine.create(h)
        await mine.flush()
        kid = 1
        await _write(mine, tree, [(kid, [TurnStart(turn=1), _answer(Usage(3, 4))])])
        await _write(theirs, tree, [(kid, [_answer(Usage(10, 1)), _request("c1")])])
        await mine.read(tree.headers[kid].id, tenant="default")  # as a resume reads it first
        await _write(mine, tree, [(kid, [TurnEnd(turn=1, reason="completed")])])
        await _agree(mine, tree)
        await _agree(theirs, tree)
        await _kept(path, mine, tree)
        summary = (await _members(mine, tree))[tree.headers[kid].id].summary
        assert summary.usage.usage == Usage(13, 5)
        assert summary.usage.model_calls == 2
        assert (summary.status.status, summary.status.waiting) == ("idle", ())


def _execute(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)  # damage the file as another program would
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


# What a store written by an older build looks like: before summaries (schema version 3), and
# with summaries that do not carry headers and entries yet (4).
OLDER_STORES = [
    pytest.param(
        (
            "DROP TABLE summaries",
            "DROP TABLE catalog",
            "DROP TABLE listing",
            "DELETE FROM schema_migrations WHERE version >= 4",
        ),
        id="v3",
    ),
    pytest.param(
        (
            "ALTER TABLE summaries DROP COLUMN header",
            "ALTER TABLE summaries DROP COLUMN entry",
            "DROP TABLE listing",
            "DELETE FROM schema_migrations WHERE version >= 5",
        ),
        id="v4",
    ),
    pytest.param(
        ("DROP TABLE listing", "DELETE FROM schema_migrations WHERE version >= 6"), id="v5"
    ),
]


@pytest.mark.parametrize("downgrade", OLDER_STORES)
async def test_an_older_store_gets_its_summaries_from_its_logs(
    tmp_path: Path, downgrade: tuple[str, ...]
) -> None:
    tree = Tree()
    path = tmp_path / "s.db"
    plan: Plan = [
        (0, [TurnStart(turn=1), "catalog", "catalog", _answer(Usage(1, 2))]),
        (1, [_descriptor((100, None, 2)), TurnStart(turn=1), "catalog", _request("c2")]),
        (3, [StepStart(turn=1, step=1), _descriptor((5, 5, 5)), _descriptor((9, 9, 9))]),
    ]
    async with SqliteEventStore(path) as store:
        for h in tree.headers:
            store.create(h)
        await _write(store, tree, plan)
        expected = await _members(store, tree)
    await asyncio.to_thread(_execute, path, *downgrade)
    async with SqliteEventStore(path) as migrated:
        assert await _members(migrated, tree) == expected
        await _agree(migrated, tree)
        await _kept(path, migrated, tree)
    by_id = expected
    assert by_id[tree.headers[1].id].summary.limits == (100, None, 2)
    assert by_id[tree.headers[1].id].summary.status.waiting == ("c2",)
    # The grandchild's first descriptor is inside its seed: its own is the second one.
    assert by_id[tree.headers[3].id].summary.limits == (9, 9, 9)
    assert [by_id[h.id].entry is not None for h in tree.headers] == [False, True, True, True]


async def _with_a_lost_summary(path: Path, *damage: str) -> tuple[Tree, SessionId]:
    """A stored tree whose first child's summary row is gone (and `damage` done after)."""
    tree = Tree()
    async with SqliteEventStore(path) as store:
        for h in tree.headers:
            store.create(h)
        await _write(store, tree, [(2, [TurnStart(turn=1), _answer(Usage(7, 7))])])
    lost = tree.headers[2].id
    statements = [f"DELETE FROM summaries WHERE session_id = '{lost}'", *damage]
    await asyncio.to_thread(_execute, path, *(s.format(lost=lost) for s in statements))
    return tree, lost


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param("UPDATE summaries SET header = NULL WHERE session_id = '{kid}'", id="header"),
        pytest.param(
            "UPDATE summaries SET entry = '[1, 2]' WHERE session_id = '{kid}'", id="entry"
        ),
        pytest.param(
            "UPDATE summaries SET summary = x'00ff' WHERE session_id = '{kid}'", id="blob"
        ),
        pytest.param("DELETE FROM summaries WHERE session_id = '{kid}'", id="row"),
        pytest.param(
            "UPDATE summaries SET header = (SELECT header FROM summaries WHERE session_id = "
            "'{root}') WHERE session_id = '{kid}'",
            id="a-sibling's-header",
        ),
        pytest.param(
            "UPDATE summaries SET header = replace(header, '{root}', 'elsewhere') "
            "WHERE session_id = '{kid}'",
            id="another-tree's-header",
        ),
    ],
)
async def test_a_damaged_member_row_is_listed_from_the_other_tables(
    tmp_path: Path, damage: str
) -> None:
    """A row the one-read listing cannot use (incomplete, undecodable, not its session's) does
    not list a wrong tree: the members are read from the sessions, summaries and catalog."""
    tree = Tree()
    path = tmp_path / "s.db"
    async with SqliteEventStore(path) as store:
        for h in tree.headers:
            store.create(h)
        await _write(store, tree, [(0, ["catalog", "catalog"]), (1, [TurnStart(turn=1)])])
        expected = await _members(store, tree)
    assert [expected[h.id].entry is not None for h in tree.headers[1:3]] == [True, True]
    kid, root = tree.headers[1].id, tree.headers[0].id
    await asyncio.to_thread(_execute, path, damage.format(kid=kid, root=root))
    async with SqliteEventStore(path) as store:
        assert await _members(store, tree) == expected
        await _agree(store, tree)


async def test_a_missing_summary_is_folded_from_the_log(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    tree, lost = await _with_a_lost_summary(path)
    async with SqliteEventStore(path) as store:
        await _agree(store, tree)  # read: folded from the log
        await _write(store, tree, [(2, [TurnEnd(turn=1, reason="completed")])])
        await _agree(store, tree)  # written: rebuilt from the log, the new records included
        await _kept(path, store, tree)
        members = await _members(store, tree)
        assert members[lost].summary.usage.usage == Usage(7, 7)
        assert members[lost].summary.status.status == "idle"


async def test_summaries_of_more_sessions_than_one_query_binds(tmp_path: Path) -> None:
    root = SessionHeader(id=new_session_id(), tenant="default", created_at=1.0, cwd="/w")
    kids = [Tree._child(root, 2.0) for _ in range(1_201)]  # three reads of at most 500 ids
    async with SqliteEventStore(tmp_path / "s.db") as store:
        for header in (root, *kids):
            store.create(header)
        kid = kids[-1].id
        await store.append(kid, [EventRecord(0, 5.0, TurnStart(turn=1))])
        found = await store.summaries([h.id for h in kids], tenant="default")
    assert sorted(found) == sorted(h.id for h in kids)
    assert found[kid].status.status == "running"
    assert {found[h.id].status.status for h in kids[:-1]} == {"idle"}


async def test_a_session_whose_summary_and_log_are_both_unreadable_is_left_out(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    tree, lost = await _with_a_lost_summary(
        path, "UPDATE events SET payload = x'00ff' WHERE session_id = '{lost}'"
    )
    async with SqliteEventStore(path) as store:
        found = await store.summaries([h.id for h in tree.headers], tenant="default")
    assert sorted(found) == sorted(h.id for h in tree.headers if h.id != lost)


async def test_summaries_of_a_few_sessions_are_looked_up_by_id(tmp_path: Path) -> None:
    # Not timed: the plan SQLite chooses. Walking the tenant's index instead of looking the ids
    # up reads every session of the tenant (7 ms for 50 ids among 10,000 sessions).
    root = SessionHeader(id=new_session_id(), tenant="default", created_at=1.0, cwd="/w")
    kids = [Tree._child(root, 2.0) for _ in range(200)]
    async with SqliteEventStore(tmp_path / "s.db") as store:
        for header in (root, *kids):
            store.create(header)
        await store.flush()
    asked = [h.id for h in kids[:50]]
    sql = _SUMMARIES_OF.format(marks=", ".join("?" * len(asked)))
    with sqlite3.connect(tmp_path / "s.db") as conn:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", (*asked, "default"))]
    assert plan[0] == "SEARCH s USING INDEX sqlite_autoindex_sessions_1 (id=?)", plan


@pytest.mark.parametrize("rows", [1, 2, 100])
async def test_filling_members_looks_each_one_up_by_its_key(tmp_path: Path, rows: int) -> None:
    # Not timed: the plan SQLite chooses. With `(root, session_id) IN (VALUES ...)` of two
    # rows or more it scanned the whole table, so every commit of a big store read every member.
    async with SqliteEventStore(tmp_path / "s.db") as store:
        store.create(SessionHeader(id=new_session_id(), tenant="default", created_at=1.0, cwd="/"))
        await store.flush()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        sql = f"EXPLAIN QUERY PLAN {fill_members(rows)}"
        plan = [row[3] for row in conn.execute(sql, ("root", "id") * rows)]
    assert "SEARCH summaries USING PRIMARY KEY (root=? AND session_id=?)" in plan, plan
    assert not [step for step in plan if step.startswith("SCAN summaries")], plan


@pytest.mark.parametrize("rows", [1, 2, 100])
async def test_refreshing_listing_rows_looks_each_member_up_by_its_key(
    tmp_path: Path, rows: int
) -> None:
    # Not timed: the plan SQLite chooses. It runs on every commit; a scan would read every
    # member of the store each time.
    async with SqliteEventStore(tmp_path / "s.db") as store:
        store.create(SessionHeader(id=new_session_id(), tenant="default", created_at=1.0, cwd="/"))
        await store.flush()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        sql = f"EXPLAIN QUERY PLAN {refresh_listing(rows)}"
        plan = [row[3] for row in conn.execute(sql, ("root", "id") * rows)]
    assert "SEARCH summaries USING PRIMARY KEY (root=? AND session_id=?)" in plan, plan
    assert not [step for step in plan if step.startswith("SCAN summaries")], plan


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param("DELETE FROM listing WHERE session_id = '{kid}'", id="row"),
        pytest.param("UPDATE listing SET row = '[1, 2]' WHERE session_id = '{kid}'", id="shape"),
        pytest.param("UPDATE listing SET row = x'00ff' WHERE session_id = '{kid}'", id="blob"),
        pytest.param(
            "UPDATE listing SET row = (SELECT row FROM listing WHERE session_id = '{root}') "
            "WHERE session_id = '{kid}'",
            id="a-sibling's-row",
        ),
        pytest.param(
            "UPDATE listing SET tenant = 'another' WHERE session_id = '{kid}'",
            id="another-tenant",
        ),
    ],
)
async def test_a_damaged_listing_row_is_listed_from_the_members(
    tmp_path: Path, damage: str
) -> None:
    """A listing the store cannot trust whole (a row missing, undecodable, another member's)
    is not printed: the tree is listed from its members instead."""
    tree = Tree()
    path = tmp_path / "s.db"
    async with SqliteEventStore(path) as store:
        for h in tree.headers:
            store.create(h)
        await _write(store, tree, [(0, ["catalog", "catalog"]), (1, [TurnStart(turn=1)])])
        expected = await store.tree_listing(tree.headers[0].id, tenant="default")
    kid, root = tree.headers[1].id, tree.headers[0].id
    assert len(expected) == len(tree.headers)
    await asyncio.to_thread(_execute, path, damage.format(kid=kid, root=root))
    async with SqliteEventStore(path) as store:
        listed = await store.tree_listing(root, tenant="default")
        assert sorted(listed, key=lambda r: r.id) == sorted(expected, key=lambda r: r.id)
        await _agree(store, tree)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(
            "UPDATE summaries SET header = 'not json' WHERE session_id = '{kid}'", id="header"
        ),
        pytest.param("UPDATE summaries SET entry = '[1,' WHERE session_id = '{kid}'", id="entry"),
        pytest.param(
            "UPDATE summaries SET summary = x'00ff' WHERE session_id = '{kid}'", id="summary"
        ),
    ],
)
@pytest.mark.parametrize("then", ["write", "migrate"])
async def test_malformed_json_in_a_summaries_row_neither_fails_a_write_nor_a_migration(
    tmp_path: Path, damage: str, then: str
) -> None:
    """The listing row made from a damaged summaries row is one no listing accepts (the tree is
    listed from its members), and the write or the migration that made it goes through."""
    tree = Tree()
    path = tmp_path / "s.db"
    async with SqliteEventStore(path) as store:
        for h in tree.headers:
            store.create(h)
        await _write(store, tree, [(0, ["catalog", "catalog"]), (1, [TurnStart(turn=1)])])
    kid = tree.headers[1].id
    statements = [damage.format(kid=kid)]
    if then == "migrate":  # a store of version 5, damaged, opened by this build
        statements += ["DROP TABLE listing", "DELETE FROM schema_migrations WHERE version >= 6"]
    await asyncio.to_thread(_execute, path, *statements)
    async with SqliteEventStore(path) as store:
        if then == "write":
            await _write(store, tree, [(1, [_answer(Usage(2, 3))])])
        await _agree(store, tree)
