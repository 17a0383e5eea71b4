"""Conformance tests for child names (docs/design.md §7.6).

Names are model-facing references recorded only in the creator's catalog; the session id stays
the only identity. These tests drive the `subagent` tool and read the catalogs back.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from delegation_support import (
    Lifecycle,
    ToolReply,
    catalog,
    context_of,
    make_runtime,
    replies,
    session_count,
)

from subagents import AgentConfig
from subagents.core import Agent
from subagents.delegation import (
    DelegationRuntime,
    ResumeRequest,
    StartRequest,
    SubagentChild,
    resolve_name,
)
from subagents.delegation._catalog import store_readers
from subagents.delegation._providers import Capability
from subagents.delegation._tree import load_tree
from subagents.errors import ErrorCode, SubagentError
from subagents.ids import SessionId
from subagents.names import is_name, name_error
from subagents.sessions import EventRecord, SqliteEventStore, SubagentCatalog

DUPLICATE = (
    "Error: a child named 'reviewer' already exists here; choose another name or address the "
    "existing one"
)


def invalid(name: str) -> str:
    return (
        f"invalid subagent name {name!r}: use 1-32 lower-case letters, digits or '-', starting "
        "with a letter (for example `reviewer` or `test-runner`)"
    )


# -- the grammar -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["reviewer", "a", "test-runner", "agent-7", "x9", "ends-", "a" * 32]
)
def test_valid_names(name: str) -> None:
    assert name_error(name) is None
    assert is_name(name)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("a" * 33, id="too-long"),
        pytest.param("Reviewer", id="upper-case"),
        pytest.param("REVIEWER", id="all-upper"),
        pytest.param("1st", id="leading-digit"),
        pytest.param("-ab", id="leading-hyphen"),
        pytest.param("", id="empty"),
        pytest.param("a_b", id="underscore"),
        pytest.param("a b", id="space"),
        pytest.param("a/b", id="slash"),
        pytest.param("café", id="non-ascii"),
    ],
)
def test_invalid_names_are_refused_not_normalized(name: str) -> None:
    assert name_error(name) == invalid(name)
    assert not is_name(name)


def test_lead_is_reserved() -> None:
    assert name_error("lead") == "`lead` is reserved for the root agent; choose another name"
    assert not is_name("lead")
    assert name_error("leader") is None


def test_a_session_id_never_parses_as_a_name() -> None:
    for _ in range(20):
        session_id = str(uuid.uuid4())
        assert len(session_id) == 36
        assert name_error(session_id) == invalid(session_id)
        assert not is_name(session_id)


# -- defaults and duplicates -----------------------------------------------------------------


async def test_omitted_names_take_the_first_free_agent_n() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {description: One, prompt: One}}
      - {tool: subagent, args: {description: Two, prompt: Two}}
  - calls:
      - {tool: subagent, args: {name: agent-4, description: Four, prompt: Four}}
  - calls:
      - {tool: subagent, args: {description: Three, prompt: Three}}
  - calls:
      - {tool: subagent, args: {description: Five, prompt: Five}}
  - text: done
"*":
  - text: ok
"""
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        # Names are reserved in call order; parallel starts may be catalogued in either order.
        expected = {
            "One": "agent-1",
            "Two": "agent-2",
            "Four": "agent-4",
            "Three": "agent-3",
            "Five": "agent-5",
        }
        assert {e.label: e.name for e in catalog(lead)} == expected
        assert sorted(e.name for e in lifecycle.started) == sorted(expected.values())
        assert all(r == ToolReply("subagent", "ok", False, None) for r in replies(lead))
    model.assert_complete()


async def test_a_duplicate_name_is_an_error_for_the_model_and_starts_nothing() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: reviewer, description: Review, prompt: Review}}
  - calls:
      - {tool: subagent, args: {name: reviewer, description: Again, prompt: Again}}
  - calls:
      - tool: subagent
        args: {name: reviewer, description: Again, prompt: Again, run_in_background: true}
  - text: I will use the existing reviewer.
reviewer:
  - text: reviewed
"""
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [
            ToolReply("subagent", "reviewed", False, None),
            ToolReply("subagent", DUPLICATE, True, ErrorCode.DUPLICATE_NAME),
            ToolReply("subagent", DUPLICATE, True, ErrorCode.DUPLICATE_NAME),
        ]
        assert len(catalog(lead)) == 1
        assert len(lifecycle.started) == 1
        assert await session_count(rt) == 2
        assert rt.tasks.list(lead.id) == []
    model.assert_complete()


async def test_names_survive_a_restart(tmp_path: Path) -> None:
    script = """
lead:
  - calls:
      - {tool: subagent, args: {name: reviewer, description: Review, prompt: Review}}
      - {tool: subagent, args: {description: Help, prompt: Help}}
  - text: first turn done
  - calls:
      - {tool: subagent, args: {name: reviewer, description: Again, prompt: Again}}
      - {tool: subagent, args: {description: Help more, prompt: Help more}}
  - text: second turn done
"*":
  - text: ok
"""
    path = tmp_path / "state.db"
    rt, _ = make_runtime(script, store=SqliteEventStore(path))
    async with rt:
        result = await rt.run("go")
        lead_id = result.session_id

    rt, model = make_runtime(script, store=SqliteEventStore(path))
    async with rt:
        lead = await rt.resume_agent(lead_id)
        await rt.run("again", agent=lead)
        assert replies(lead)[2:] == [
            ToolReply("subagent", DUPLICATE, True, ErrorCode.DUPLICATE_NAME),
            ToolReply("subagent", "ok", False, None),
        ]
        assert {e.label: e.name for e in catalog(lead)} == {
            "Review": "reviewer",
            "Help": "agent-1",
            "Help more": "agent-2",
        }
    model.assert_complete()


async def test_concurrent_starts_with_one_name_have_exactly_one_winner() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: twin, description: First, prompt: First}}
      - {tool: subagent, args: {name: twin, description: Second, prompt: Second}}
  - text: done
twin:
  - text: twin done
"""
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        duplicate = DUPLICATE.replace("'reviewer'", "'twin'")
        assert replies(lead) == [
            ToolReply("subagent", "twin done", False, None),
            ToolReply("subagent", duplicate, True, ErrorCode.DUPLICATE_NAME),
        ]
        assert [(e.name, e.label) for e in catalog(lead)] == [("twin", "First")]
        assert len(lifecycle.started) == 1
        assert await session_count(rt) == 2
    model.assert_complete()


async def test_a_failed_start_releases_its_name() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: reviewer, description: Review, prompt: Review, cwd: nowhere}}
  - calls:
      - tool: subagent
        args:
          name: reviewer
          description: Review
          prompt: Review
          cwd: nowhere
          run_in_background: true
  - calls:
      - {tool: subagent, args: {name: reviewer, description: Review, prompt: Review}}
  - text: done
reviewer:
  - text: reviewed
"""
    )
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        refused = ToolReply(
            "subagent",
            f"Error: cwd {lead.session.header.cwd}/nowhere is not an accessible directory; give "
            "an existing directory or omit cwd to use yours",
            True,
            ErrorCode.INVALID_CWD,
        )
        assert replies(lead) == [refused, refused, ToolReply("subagent", "reviewed", False, None)]
        assert [e.name for e in catalog(lead)] == ["reviewer"]
        assert await session_count(rt) == 2
    model.assert_complete()


class FailingProvider:
    """A provider whose start always fails before any child exists."""

    name = "failing"
    capabilities: frozenset[Capability] = frozenset({"depth_limit"})
    inherits_parent_context = False

    async def start(self, request: StartRequest) -> SubagentChild:
        raise SubagentError(f"cannot start {request.name}")

    async def resume(self, request: ResumeRequest) -> SubagentChild:
        raise SubagentError(f"cannot resume {request.full_name}")

    def list(self) -> list[SubagentChild]:
        return []


async def test_a_provider_failure_releases_the_name() -> None:
    rt, _ = make_runtime("{}")
    async with rt:
        rt.subagents.register_provider(FailingProvider())
        lead = await rt.create_agent()
        admission = rt.subagents.admit(
            "failing", parent=lead, prompt="p", label="l", name="reviewer"
        )
        with pytest.raises(SubagentError, match="cannot start reviewer"):
            await rt.subagents.launch(admission)
        again = rt.subagents.admit("spawn", parent=lead, prompt="p", label="l", name="reviewer")
        assert again.name == "reviewer"
        rt.subagents.cancel(again)
        assert catalog(lead) == []


# -- full names and resolution ---------------------------------------------------------------

TREE_SCRIPT = """
lead:
  - calls:
      - {tool: subagent, args: {name: reviewer, description: Review, prompt: Review app.py}}
  - text: Reviewed.
reviewer:
  - calls:
      - {tool: subagent, args: {name: checker, description: Check style, prompt: Check style}}
  - text: Review done.
reviewer/checker:
  - text: Style is clean.
"""


async def test_full_names_join_the_creation_chain() -> None:
    rt, model = make_runtime(TREE_SCRIPT)
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        assert result.output == "Reviewed."
        assert [(e.name, e.stop_reason) for e in lifecycle.ended] == [
            ("reviewer/checker", "completed"),
            ("reviewer", "completed"),
        ]
        (checker_request,) = model.requests_of("reviewer/checker")
        told = context_of(checker_request)
        assert 'You are the delegated subagent "reviewer/checker", started by "reviewer".' in told
        reviewer_id = lifecycle.started[0].child_id
        records = await rt.store.read(SessionId(reviewer_id), tenant=rt.tenant)
        # The reviewer's catalog holds only the next segment.
        assert [r.event.name for r in records if isinstance(r.event, SubagentCatalog)] == [
            "checker"
        ]
    model.assert_complete()


async def test_resolve_name_reads_only_catalogs() -> None:
    rt, _ = make_runtime(TREE_SCRIPT)
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        reviewer, checker = (SessionId(e.child_id) for e in lifecycle.started)

        async def resolve(path: str, start: SessionId = lead.id) -> SessionId | None:
            read, _ = store_readers(rt.store, rt.tenant)  # the store alone: no live registry
            return await resolve_name(read, start=start, path=path)

        assert await resolve("reviewer") == reviewer
        assert await resolve("reviewer/checker") == checker
        assert await resolve("/reviewer/checker") == checker
        assert await resolve("checker", start=reviewer) == checker
        for unknown in ("checker", "reviewer/nobody", "nobody", "", "/", "Reviewer", checker):
            assert await resolve(unknown) is None, unknown

        # A catalog entry alone resolves (no session, no live agent is consulted) ...
        ghost = SessionId(str(uuid.uuid4()))
        await lead.session.append(SubagentCatalog(child_id=ghost, name="ghost"))
        assert await resolve("ghost") == ghost
        # ... and a child without an entry resolves under no name.
        orphan = await rt.create_child(lead, config=AgentConfig(name="orphan"))
        await rt.store.flush()
        assert await resolve("orphan") is None
        assert orphan.session.header.parent == lead.id


# -- historical, name-less catalogs ------------------------------------------------------------


async def append_by_hand(runtime: DelegationRuntime, agent: Agent, event: SubagentCatalog) -> None:
    """Write `event` into `agent`'s log through the store, as an older build would have."""
    seq = len(await runtime.store.read(agent.id, tenant=runtime.tenant))
    await runtime.store.append(agent.id, [EventRecord(seq, runtime.clock.now(), event)])


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_a_member_below_an_unnamed_creator_is_named_by_its_session_id(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "state.db"
    rt, _ = make_runtime("{}", store=SqliteEventStore(path))
    async with rt:
        lead = await rt.create_agent()
        older = await rt.create_child(lead, config=AgentConfig(name="older"))
        inner = await rt.create_child(older, config=AgentConfig(name="inner"))
        named = await rt.create_child(lead, config=AgentConfig(name="named"))
        await rt.store.flush()
        await append_by_hand(rt, lead, SubagentCatalog(v=version, child_id=older.id))
        await append_by_hand(rt, older, SubagentCatalog(child_id=inner.id, name="inner"))
        await append_by_hand(rt, lead, SubagentCatalog(child_id=named.id, name="named"))
        header = lead.session.header
        ids = (lead.id, older.id, inner.id, named.id)

    store = SqliteEventStore(path)
    async with store:
        lead_id, older_id, inner_id, named_id = ids
        records = await store.read(lead_id, tenant="default")
        [entry, *_] = [r.event for r in records if isinstance(r.event, SubagentCatalog)]
        assert (entry.v, entry.name) == (version, None)
        rows = [m.row for m in await load_tree(store, header)]
        assert [(r.header.id, r.name, r.parent) for r in rows] == [
            (lead_id, "lead", None),
            (older_id, older_id, "lead"),
            (inner_id, inner_id, older_id),
            (named_id, "named", "lead"),
        ]
        read, _ = store_readers(store, "default")
        assert await resolve_name(read, start=lead_id, path="named") == (named_id)
        assert await resolve_name(read, start=older_id, path="inner") == (inner_id)
