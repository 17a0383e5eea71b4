"""Hostile callers of the approval decision entry points (docs/approvals.md, "Deciding").

Every refusal must be a `SubagentsError` with a stable code and a one-line message, and must
change nothing: the store's records of every member of every tree involved (headers, logs,
pending command rows) and the live agents' in-memory logs are compared before and after.

The attacks go through `rt.approvals/approve/deny` (hypothesis over hostile values), races
(two deciders, a decider against the timeout), raw decision command rows (`parse_command`,
and rows written straight into the store and served by the holder), other tenants, call ids of
other members, and oversized inputs. Every tree runs a scripted model on a real SQLite file;
a test learns that a call waits from `ApprovalWaiting`, never from a sleep, and drives the
timeout with a `GatedClock`.

The one test marked `xfail(strict=True)` pins a known limitation (a shared runtime's `run`
waits for every tree): it says what is wrong, and starts failing once it is fixed.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

import pytest
from approval_support import Waits, copy_tree, first_of
from delegation_support import events
from hypothesis import HealthCheck, example, given, settings, strategies as st

from subagents import RunResult, Runtime
from subagents._clock import FakeClock, GatedClock
from subagents._task_owner import TaskOwner
from subagents.core import ApprovalWaiting, is_text
from subagents.errors import ErrorCode, SubagentsError, UsageError
from subagents.ids import SessionId
from subagents.sessions import (
    MAX_CALL_ID,
    MAX_DECIDER,
    ApprovalDecided,
    Command,
    CommandRow,
    ToolCallEvent,
    ToolResultEvent,
    decode_outcome,
    encode_decision,
    parse_command,
)
from subagents.testing import RecordingModel

MAX_REASON: Final = 2_000
OWN_CALL: Final = "own-call"
FOREIGN_CALL: Final = "foreign-call"

# A lead whose one gated call (`glob`: cheap, no side effect) waits; every new lead of a
# runtime replays it, so one runtime serves many fresh trees.
GLOB_SCRIPT = f"""
lead:
  - calls: [{{tool: glob, args: {{pattern: "*.none"}}, id: {OWN_CALL}}}]
  - text: lead done
"""
FOREIGN_SCRIPT = f"""
lead:
  - calls: [{{tool: glob, args: {{pattern: "*.none"}}, id: {FOREIGN_CALL}}}]
  - text: lead done
"""
LEAD_BASH = """
lead:
  - calls: [{tool: bash, args: {command: "echo ran >> log.txt"}, id: lead-bash}]
  - text: lead done
"""
# Two members wait at once: the lead on its own bash, its background child `a` on another.
TWO_WAITING = """
lead:
  - calls:
      - tool: subagent
        id: lead-spawn
        args: {name: a, description: helper, prompt: go, run_in_background: true}
  - calls: [{tool: bash, args: {command: "echo lead >> log.txt"}, id: lead-bash}]
  - text: lead done
  - text: lead noted
a:
  - calls: [{tool: bash, args: {command: "echo a >> log.txt"}, id: a-bash}]
  - text: a done
"""

REFUSAL_CODES: Final = frozenset(
    {
        ErrorCode.NOT_FOUND,
        ErrorCode.USAGE,
        ErrorCode.INVALID_NAME,
        ErrorCode.ALREADY_DECIDED,
        ErrorCode.NO_PENDING_REQUEST,
        ErrorCode.AMBIGUOUS_REQUEST,
    }
)

FUZZ = settings(
    database=None,
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# -- helpers ---------------------------------------------------------------------------------


def make(
    tmp_path: Path,
    script: str,
    *,
    approval: str | list[str] | None = "bash",
    approval_timeout: float | None = None,
    clock: FakeClock | None = None,
    tenant: str = "default",
    store: Path | None = None,
) -> Runtime:
    model = RecordingModel.from_yaml(script)
    assert isinstance(model, RecordingModel)
    return Runtime(
        model=model,
        store=store or tmp_path / "s.db",
        cwd=tmp_path,
        clock=clock,
        tenant=tenant,
        approval=approval,
        approval_timeout=approval_timeout,
    )


@dataclass
class Tree:
    runtime: Runtime
    root: str
    waiting: list[ApprovalWaiting]
    run: asyncio.Task[RunResult]

    @property
    def call_id(self) -> str:
        return self.waiting[0].request.call_id


async def start_tree(runtime: Runtime, waits: Waits, owner: TaskOwner, *, count: int = 1) -> Tree:
    """A new lead of `runtime`, run in the background until `count` gated calls wait."""
    lead = await runtime.create_agent()
    run = owner.spawn(runtime.run("go", agent=lead))
    waiting = [await first_of(owner, waits.next(), run) for _ in range(count)]
    if count == 1:
        assert waiting[0].agent_id == lead.id
    return Tree(runtime, str(lead.id), waiting, run)


async def end_tree(tree: Tree) -> None:
    """Let the tree finish: deny what still waits, or interrupt a lead that cannot go on."""
    rt = tree.runtime
    try:
        for item in await rt.approvals(tree.root) if not tree.run.done() else []:
            if item.request.pending:
                await rt.deny(tree.root, item.name, item.request.call_id, by="cleanup")
    except SubagentsError:  # the wait could not be decided: stop the turn instead
        for member in await rt.tree(tree.root):
            await rt.interrupt(tree.root, member.row.name)
    await tree.run


@asynccontextmanager
async def waiting_tree(runtime: Runtime, *, count: int = 1) -> AsyncGenerator[Tree]:
    """Enter `runtime` and yield once `count` calls of a new tree wait; end it on exit."""
    owner = TaskOwner("attack runs")
    async with runtime:
        try:
            tree = await start_tree(runtime, Waits(runtime), owner, count=count)
            try:
                yield tree
            finally:
                async with asyncio.timeout(10):  # a wedged wait must not hang the suite
                    await end_tree(tree)
        finally:
            await owner.aclose()


Snapshot = dict[str, object]


async def snapshot(runtime: Runtime, root: str) -> Snapshot:
    """Everything a decision could change in `root`'s tree: stored and live."""
    store = runtime.store
    await store.flush()
    headers = await store.list_headers(
        tenant=runtime.tenant, roots_only=False, root=SessionId(root)
    )
    stored = {str(h.id): await store.read(h.id, tenant=runtime.tenant) for h in headers}
    live = {
        str(h.id): list(agent.session.records)
        for h in headers
        if (agent := runtime.get_agent(h.id)) is not None
    }
    commands = await store.pending_commands(SessionId(root))
    return {
        "headers": sorted(headers, key=lambda h: str(h.id)),
        "stored": stored,
        "live": live,
        "commands": commands,
    }


async def decisions(runtime: Runtime, session: str) -> list[ApprovalDecided]:
    await runtime.store.flush()
    return events(
        await runtime.store.read(SessionId(session), tenant=runtime.tenant), ApprovalDecided
    )


def check_refusal(error: BaseException, allowed: frozenset[ErrorCode] = REFUSAL_CODES) -> None:
    assert isinstance(error, SubagentsError), f"{type(error).__name__}: {error}"
    assert error.code in allowed, error
    text = str(error)
    assert text.strip(), "a refusal says what is wrong"
    assert "\n" not in text, f"not one line: {text[:200]!r}"
    assert "\r" not in text, f"not one line: {text[:200]!r}"


async def refused(attempt: Callable[[], Awaitable[object]], *codes: ErrorCode) -> SubagentsError:
    with pytest.raises(SubagentsError) as caught:
        await attempt()
    check_refusal(caught.value, frozenset(codes) if codes else REFUSAL_CODES)
    return caught.value


async def settle(attempt: Awaitable[dict[str, Any]]) -> dict[str, Any] | SubagentsError:
    """The outcome of a decision, or its refusal (so racing deciders can all be compared)."""
    try:
        return await attempt
    except SubagentsError as exc:
        return exc


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def unheld_waiting_tree(tmp_path: Path) -> tuple[str, str, Path]:
    """(root, call id, store) of a tree cut off while its call waited: nobody holds it."""
    crashed = tmp_path / "crashed.db"
    async with waiting_tree(make(tmp_path, LEAD_BASH)) as tree:
        await copy_tree(tree.runtime, tree.root, crashed)
    return tree.root, tree.call_id, crashed


# -- a runtime that serves many fresh trees to hypothesis examples ---------------------------


class Desk:
    """Tenant `default` (a fresh waiting tree per example) and tenant `other` (one waiting
    tree of its own) on one SQLite file, driven from synchronous hypothesis examples."""

    def __init__(self, runner: asyncio.Runner, tmp_path: Path) -> None:
        self.runner = runner
        self.rt = make(tmp_path, GLOB_SCRIPT, approval="glob")
        self.other = make(tmp_path, FOREIGN_SCRIPT, approval="glob", tenant="other")
        self._stack = AsyncExitStack()
        self._owner = TaskOwner("desk runs")
        self._waits: Waits | None = None
        self._foreign: Tree | None = None

    @property
    def foreign(self) -> Tree:
        assert self._foreign is not None
        return self._foreign

    async def open(self) -> None:
        await self._stack.enter_async_context(self.rt)
        await self._stack.enter_async_context(self.other)
        self._waits = Waits(self.rt)
        self._foreign = await start_tree(self.other, Waits(self.other), self._owner)

    async def _example(self, scenario: Callable[[Tree], Awaitable[None]]) -> None:
        assert self._waits is not None
        tree = await start_tree(self.rt, self._waits, self._owner)
        try:
            await scenario(tree)
        finally:
            # A tree left waiting would hold up every later `run` of this runtime (see the
            # xfail on `run` below), so each example ends its own, even when it failed.
            async with asyncio.timeout(10):
                await end_tree(tree)

    async def close(self) -> None:
        try:
            if self._foreign is not None:
                await end_tree(self._foreign)
        finally:
            await self._owner.aclose()
            await self._stack.aclose()

    def run(self, scenario: Callable[[Tree], Awaitable[None]]) -> None:
        """Run one example on a fresh tree of tenant `default` whose call waits."""
        self.runner.run(self._example(scenario))


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Desk]:
    with asyncio.Runner() as runner:
        desk = Desk(runner, tmp_path)
        runner.run(desk.open())
        try:
            yield desk
        finally:
            runner.run(desk.close())


# -- 1. the Python API with hostile values ---------------------------------------------------

# Placeholders a scenario resolves to the ids of its own trees.
OWN, FOREIGN, DEFAULT = "$own", "$foreign", "$default"

# Some hostile values have tests of their own below rather than in these strategies: a root
# with a lone surrogate, an int beyond 64 bits, a list or a newline; a name that is not a
# string; a `by` or reason with a lone surrogate. (`st.text()` draws no surrogates.)
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.binary(max_size=16),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
TEXT = st.one_of(
    st.text(max_size=24),
    st.sampled_from(["", " ", "\t\n", "\x00", "a\x00b", "x" * 10_000, "é" * 300]),
    st.integers(min_value=MAX_CALL_ID - 3, max_value=MAX_CALL_ID + 3).map(lambda n: "c" * n),
)
SURROGATES = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=4)
ROOTS = st.one_of(
    st.sampled_from([OWN, FOREIGN, OWN + "-upper", OWN + "-ghost"]),
    st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=40),
    st.uuids().map(str),
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.binary(max_size=16),
)
NAMES = st.one_of(
    st.sampled_from(["lead", "/lead", "lead/", "//lead", "LEAD", "a", "/", "lead\x00"]),
    st.text(max_size=24),
    SURROGATES,
)
CALL_IDS = st.one_of(
    st.sampled_from([OWN, FOREIGN, OWN + " ", " " + OWN]), st.none(), TEXT, JUNK, SURROGATES
)
DECIDERS = st.one_of(
    st.sampled_from([DEFAULT, "cli:alice", " cli:bob ", "x" * MAX_DECIDER]), TEXT, JUNK
)
REASONS = st.one_of(
    st.none(),
    TEXT,
    JUNK,
    st.integers(min_value=MAX_REASON - 2, max_value=MAX_REASON + 2).map(lambda n: "r" * n),
)


def expected_refusal(
    verb: str, root: object, name: str, call_id: object, by: object, reason: object, tree: Tree
) -> set[ErrorCode] | None:
    """The codes the documented checks give, in their order; None for a decision that holds."""
    # Text a decision carries must be a str within its limit that UTF-8 encodes (`is_text`).
    if call_id is not None and (not is_text(call_id, MAX_CALL_ID) or not call_id.strip()):
        return {ErrorCode.USAGE}
    if not is_text(by, MAX_DECIDER) or not by.strip():
        return {ErrorCode.USAGE}
    if verb == "deny" and reason is not None and not is_text(reason, MAX_REASON):
        return {ErrorCode.USAGE}
    if root != tree.root:
        return {ErrorCode.NOT_FOUND}
    if name not in ("lead", "/lead"):
        return {ErrorCode.NOT_FOUND, ErrorCode.INVALID_NAME}
    if call_id is not None and call_id != tree.call_id:
        return {ErrorCode.NOT_FOUND}
    return None


@FUZZ
@given(
    verb=st.sampled_from(["approve", "deny"]),
    root=st.one_of(st.just(OWN), ROOTS),
    name=st.one_of(st.sampled_from(["lead", "/lead"]), NAMES),
    call_id=st.one_of(st.sampled_from([OWN, None]), CALL_IDS),
    by=st.one_of(st.just(DEFAULT), DECIDERS),
    reason=st.one_of(st.none(), REASONS),
)
@example(verb="approve", root=OWN, name="lead", call_id=OWN, by=" cli:bob ", reason=None)
@example(verb="deny", root=OWN, name="/lead", call_id=None, by="\x00", reason="r" * MAX_REASON)
@example(verb="deny", root=OWN, name="lead", call_id=OWN, by=DEFAULT, reason=" \t ")
def test_hostile_decisions_are_refused_and_change_nothing(
    desk: Desk, verb: str, root: object, name: str, call_id: object, by: object, reason: object
) -> None:
    async def scenario(tree: Tree) -> None:
        foreign = desk.foreign
        ghost = str(uuid.uuid4())  # a well-formed id of no session
        given_root = (
            {
                OWN: tree.root,
                FOREIGN: foreign.root,
                OWN + "-upper": tree.root.upper(),
                OWN + "-ghost": ghost,
            }.get(root, root)
            if isinstance(root, str)
            else root
        )
        given_call = (
            {OWN: tree.call_id, FOREIGN: foreign.call_id}.get(call_id, call_id)
            if isinstance(call_id, str)
            else call_id
        )
        given_by = "api" if by == DEFAULT else by
        loose = cast("Any", desk.rt)  # what callers pass is not type-checked
        before = await snapshot(desk.rt, tree.root), await snapshot(desk.other, foreign.root)
        expected = expected_refusal(verb, given_root, name, given_call, given_by, reason, tree)
        if verb == "approve":
            attempt = loose.approve(given_root, name, given_call, by=given_by)
        else:
            attempt = loose.deny(given_root, name, given_call, reason=reason, by=given_by)
        outcome = await settle(attempt)
        if isinstance(outcome, SubagentsError):
            check_refusal(outcome)
            assert expected is not None, outcome
            assert outcome.code in expected, (outcome.code, expected, outcome)
            after = await snapshot(desk.rt, tree.root), await snapshot(desk.other, foreign.root)
            assert after == before
            return
        assert expected is None, f"decided though {expected} was due: {outcome}"
        assert isinstance(given_by, str)
        assert outcome == {
            "name": "lead",
            "call_id": tree.call_id,
            "tool": "glob",
            "approved": verb == "approve",
            "by": given_by.strip(),
            "applied": True,
        }
        result = await tree.run
        assert result.output == "lead done"
        (decision,) = await decisions(desk.rt, tree.root)
        assert (decision.call_id, decision.approved, decision.by) == (
            tree.call_id,
            verb == "approve",
            given_by.strip(),
        )
        if verb == "deny":
            assert isinstance(reason, str | None)
            assert decision.reason == ((reason or "").strip() or None)
        assert await snapshot(desk.other, foreign.root) == before[1]

    desk.run(scenario)


@FUZZ
@given(root=ROOTS)
def test_hostile_roots_list_nothing_or_are_refused(desk: Desk, root: object) -> None:
    async def scenario(tree: Tree) -> None:
        foreign = desk.foreign
        given_root = (
            {OWN: tree.root, FOREIGN: foreign.root}.get(root, root)
            if isinstance(root, str)
            else root
        )
        before = await snapshot(desk.rt, tree.root), await snapshot(desk.other, foreign.root)
        try:
            listed = await cast("Any", desk.rt).approvals(given_root)
        except SubagentsError as exc:
            check_refusal(exc, frozenset({ErrorCode.NOT_FOUND, ErrorCode.USAGE}))
            assert given_root != tree.root
        else:
            assert given_root in (tree.root, None)  # None: every tree of this tenant
            shown = [(p.root, p.name, p.request.call_id, p.request.state) for p in listed]
            assert shown == [(tree.root, "lead", tree.call_id, "pending")]
        assert (
            await snapshot(desk.rt, tree.root),
            await snapshot(desk.other, foreign.root),
        ) == before

    desk.run(scenario)


# -- bugs in the Python API's checks ---------------------------------------------------------


@pytest.mark.parametrize("name", [7, None, b"lead"], ids=["int", "none", "bytes"])
async def test_a_name_that_is_not_text_is_refused(tmp_path: Path, name: object) -> None:
    async with waiting_tree(make(tmp_path, LEAD_BASH)) as tree:
        before = await snapshot(tree.runtime, tree.root)
        loose = cast("Any", tree.runtime)
        await refused(lambda: loose.approve(tree.root, name, tree.call_id))
        assert await snapshot(tree.runtime, tree.root) == before


@pytest.mark.parametrize(
    "root",
    ["\ud800", 2**70, ["x"], "a\nb"],
    ids=["surrogate", "huge-int", "list", "newline"],
)
@pytest.mark.parametrize("verb", ["approve", "deny", "approvals"])
async def test_a_root_that_is_no_session_id_is_not_found(
    tmp_path: Path, root: object, verb: str
) -> None:
    async with waiting_tree(make(tmp_path, LEAD_BASH)) as tree:
        rt = cast("Any", tree.runtime)
        before = await snapshot(tree.runtime, tree.root)
        attempts: dict[str, Callable[[], Awaitable[object]]] = {
            "approve": lambda: rt.approve(root, "lead", tree.call_id),
            "deny": lambda: rt.deny(root, "lead", tree.call_id),
            "approvals": lambda: rt.approvals(root),
        }
        await refused(attempts[verb], ErrorCode.NOT_FOUND, ErrorCode.USAGE)
        assert await snapshot(tree.runtime, tree.root) == before


@pytest.mark.parametrize(
    ("by", "reason"), [("x\ud800", None), ("api", "why\udfff")], ids=["by", "reason"]
)
async def test_a_decision_with_a_lone_surrogate_is_refused_and_the_call_stays_decidable(
    tmp_path: Path, by: str, reason: str | None
) -> None:
    async with waiting_tree(make(tmp_path, LEAD_BASH)) as tree:
        rt, root = tree.runtime, tree.root
        before = await snapshot(rt, root)
        await refused(lambda: rt.deny(root, "lead", tree.call_id, reason=reason, by=by))
        assert await snapshot(rt, root) == before
        await rt.approve(root, "lead", tree.call_id)  # still pending: a clean decision holds
        await tree.run
    assert lines_of(tmp_path / "log.txt") == ["ran"]


# -- 2. races --------------------------------------------------------------------------------


async def race(*attempts: Awaitable[dict[str, Any]]) -> list[dict[str, Any] | SubagentsError]:
    """Start every attempt in the same tick; each one's outcome or refusal, in order."""
    async with asyncio.TaskGroup() as tasks:
        started = [tasks.create_task(settle(a)) for a in attempts]
    return [t.result() for t in started]


def split(
    outcomes: list[dict[str, Any] | SubagentsError],
) -> tuple[list[dict[str, Any]], list[SubagentsError]]:
    won = [o for o in outcomes if isinstance(o, dict)]
    lost = [o for o in outcomes if isinstance(o, SubagentsError)]
    return won, lost


@pytest.mark.parametrize(
    "verbs",
    [("approve", "approve"), ("approve", "deny"), ("deny", "approve"), ("deny", "deny")],
    ids=lambda v: "-".join(v),
)
@pytest.mark.parametrize("named", [True, False], ids=["by-call-id", "only-pending"])
async def test_racing_decisions_on_a_held_tree_decide_once(
    tmp_path: Path, verbs: tuple[str, str], named: bool
) -> None:
    async with waiting_tree(make(tmp_path, LEAD_BASH)) as tree:
        rt, root = tree.runtime, tree.root
        call_id = tree.call_id if named else None

        def attempt(verb: str, who: str) -> Awaitable[dict[str, Any]]:
            if verb == "approve":
                return rt.approve(root, "lead", call_id, by=who)
            return rt.deny(root, "lead", call_id, reason="no", by=who)

        won, lost = split(await race(attempt(verbs[0], "first"), attempt(verbs[1], "second")))
        assert (len(won), len(lost)) == (1, 1), (won, lost)
        late = ErrorCode.ALREADY_DECIDED if named else ErrorCode.NO_PENDING_REQUEST
        check_refusal(lost[0], frozenset({ErrorCode.ALREADY_DECIDED, late}))
        result = await tree.run
        assert result.output == "lead done"
        (decision,) = await decisions(rt, root)
        records = await rt.store.read(SessionId(root), tenant=rt.tenant)
    (winner,) = won
    assert (decision.by, decision.approved) == (winner["by"], winner["approved"])
    approved = winner["approved"]
    assert lines_of(tmp_path / "log.txt") == (["ran"] if approved else [])
    assert len(events(records, ToolCallEvent)) == 1  # a denied call gets its pair too
    (answer,) = events(records, ToolResultEvent)
    assert answer.code == (None if approved else ErrorCode.APPROVAL_DENIED)


async def test_many_racing_deciders_on_a_held_tree_decide_once(tmp_path: Path) -> None:
    async with waiting_tree(make(tmp_path, LEAD_BASH)) as tree:
        rt, root = tree.runtime, tree.root
        attempts = [
            rt.approve(root, "lead", tree.call_id, by=f"a{n}")
            if n % 2
            else rt.deny(root, "lead", tree.call_id, by=f"d{n}")
            for n in range(12)
        ]
        won, lost = split(await race(*attempts))
        assert len(won) == 1
        for refusal in lost:
            check_refusal(refusal, frozenset({ErrorCode.ALREADY_DECIDED}))
        await tree.run
        (decision,) = await decisions(rt, root)
    assert decision.by == won[0]["by"]
    assert len(lines_of(tmp_path / "log.txt")) == (1 if decision.approved else 0)


@pytest.mark.parametrize("timer_first", [True, False], ids=["timer-first", "decider-first"])
@pytest.mark.parametrize("verb", ["approve", "deny"])
async def test_a_decision_racing_the_timeout_is_recorded_once(
    tmp_path: Path, timer_first: bool, verb: str
) -> None:
    clock = GatedClock()
    runtime = make(tmp_path, LEAD_BASH, approval_timeout=30, clock=clock)
    async with waiting_tree(runtime) as tree:
        rt, root = tree.runtime, tree.root
        timer = await clock.next_sleeper()  # the request's timer, held at its deadline

        async def decide() -> dict[str, Any] | SubagentsError:
            if verb == "approve":
                return await settle(rt.approve(root, "lead", tree.call_id, by="person"))
            return await settle(rt.deny(root, "lead", tree.call_id, reason="no", by="person"))

        async with asyncio.TaskGroup() as tasks:
            if timer_first:
                timer.set()
            decided = tasks.create_task(decide())
            if not timer_first:
                timer.set()
        outcome = decided.result()
        await tree.run
        (decision,) = await decisions(rt, root)
    if isinstance(outcome, SubagentsError):
        check_refusal(outcome, frozenset({ErrorCode.ALREADY_DECIDED}))
        assert (decision.by, decision.approved) == ("timeout", False)
    else:
        assert (decision.by, decision.approved) == ("person", verb == "approve")
    assert lines_of(tmp_path / "log.txt") == (["ran"] if decision.approved else [])


@pytest.mark.parametrize(
    "verbs", [("approve", "deny"), ("approve", "approve")], ids=lambda v: "-".join(v)
)
async def test_racing_decisions_on_a_tree_nobody_holds_decide_once(
    tmp_path: Path, verbs: tuple[str, str]
) -> None:
    root, call_id, crashed = await unheld_waiting_tree(tmp_path)
    async with make(tmp_path, LEAD_BASH, store=crashed) as rt:
        # Listen first: two first `hold`s racing would also race `ControlChannel.start` (a
        # separate bug, see the report), leaking a socket into later tests.
        await rt.control.start()

        def attempt(verb: str, who: str) -> Awaitable[dict[str, Any]]:
            if verb == "approve":
                return rt.approve(root, "lead", call_id, by=who)
            return rt.deny(root, "lead", call_id, reason="no", by=who)

        won, lost = split(await race(attempt(verbs[0], "first"), attempt(verbs[1], "second")))
        recorded = await decisions(rt, root)
    assert len(recorded) == 1, recorded
    assert (len(won), len(lost)) == (1, 1), (won, lost)
    check_refusal(lost[0], frozenset({ErrorCode.ALREADY_DECIDED}))


async def test_a_second_decision_on_a_tree_nobody_holds_is_refused(tmp_path: Path) -> None:
    root, call_id, crashed = await unheld_waiting_tree(tmp_path)
    async with make(tmp_path, LEAD_BASH, store=crashed) as rt:
        decided = await rt.deny(root, "lead", call_id, reason="offline", by="cli:x")
        assert (decided["applied"], decided["approved"]) == (False, False)
        before = await snapshot(rt, root)
        for attempt in (
            lambda: rt.approve(root, "lead", call_id),
            lambda: rt.deny(root, "lead", call_id),
        ):
            await refused(attempt, ErrorCode.ALREADY_DECIDED)
        await refused(lambda: rt.approve(root, "lead"), ErrorCode.NO_PENDING_REQUEST)
        assert await snapshot(rt, root) == before
        (decision,) = await decisions(rt, root)
    assert (decision.by, decision.reason) == ("cli:x", "offline")


# -- 3. decision command rows ----------------------------------------------------------------

ROOT_ID = str(uuid.uuid4())
TARGET_ID = str(uuid.uuid4())


def _nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # A named function: hypothesis checks from its source that it uses `inner`, which it
    # cannot always read for a lambda spread over lines (a deprecation warning, so an error).
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)


JSONISH = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
    ),
    _nested,
    max_leaves=8,
)
FIELD_VALUES = st.one_of(
    JSONISH,
    TEXT,
    st.sampled_from([OWN, FOREIGN, str(uuid.uuid4())]),
    st.integers(min_value=MAX_REASON - 2, max_value=MAX_REASON + 2).map(lambda n: "r" * n),
)
BODY_DICTS = st.dictionaries(
    st.sampled_from(["text", "message_id", "call_id", "by", "extra", "kind"]),
    FIELD_VALUES,
    max_size=5,
)
RAW_BODIES = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"", b"{", b"null", b"[]", b'"x"', b"\xff\xfe", b'{"call_id": "\\ud800"}']),
)


def row(kind: str, body: bytes, *, root: str = ROOT_ID, target: str = TARGET_ID) -> CommandRow:
    return CommandRow(
        id=1,
        root=root,
        tenant="default",
        target=target,
        kind=kind,
        body=body,
        created_at=0.0,
        state="pending",
        outcome=None,
    )


def resolve(value: object, own: str, foreign: str) -> object:
    """`value` with the placeholders `$own`/`$foreign` replaced by real call ids, deeply."""
    if value == OWN:
        return own
    if value == FOREIGN:
        return foreign
    if isinstance(value, list):
        return [resolve(v, own, foreign) for v in cast("list[object]", value)]
    if isinstance(value, dict):
        items = cast("dict[str, object]", value).items()
        return {k: resolve(v, own, foreign) for k, v in items}
    return value


def parsed(given: CommandRow) -> Command | UsageError:
    try:
        return parse_command(given)
    except UsageError as exc:
        return exc


def check_parsed_decision(kind: str, body: bytes) -> None:
    """`parse_command` refuses the row (`BAD_COMMAND`, one line) or returns a sound decision."""
    command = parsed(row(kind, body))
    if isinstance(command, UsageError):
        check_refusal(command, frozenset({ErrorCode.BAD_COMMAND}))
        return
    assert command.kind == kind
    assert isinstance(command.call_id, str)
    assert 0 < len(command.call_id) <= MAX_CALL_ID
    assert isinstance(command.by, str)
    assert 0 < len(command.by) <= MAX_DECIDER
    assert command.message_id is None
    assert command.text is None or (kind == "deny" and isinstance(command.text, str))
    decoded = json.loads(body)
    assert isinstance(decoded, dict)
    fields = cast("dict[str, object]", decoded)
    assert set(fields) <= {"text", "call_id", "by", "message_id"}
    assert fields.get("message_id") is None


@settings(max_examples=50, deadline=None, database=None)
@given(kind=st.sampled_from(["approve", "deny"]), body=BODY_DICTS)
def test_decision_rows_with_malformed_bodies_are_refused(
    kind: str, body: dict[str, object]
) -> None:
    check_parsed_decision(kind, json.dumps(resolve(body, OWN_CALL, FOREIGN_CALL)).encode())


@settings(max_examples=50, deadline=None, database=None)
@given(
    kind=st.sampled_from(["approve", "deny"]),
    body=st.one_of(RAW_BODIES, JSONISH.map(lambda v: json.dumps(v).encode())),
)
def test_decision_rows_with_garbage_bodies_are_refused(kind: str, body: bytes) -> None:
    check_parsed_decision(kind, body)


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("approve", {}),
        ("approve", {"by": "x"}),
        ("approve", {"call_id": "", "by": "x"}),
        ("approve", {"call_id": "c" * (MAX_CALL_ID + 1), "by": "x"}),
        ("approve", {"call_id": 7, "by": "x"}),
        ("approve", {"call_id": ["c"], "by": "x"}),
        ("approve", {"call_id": "c"}),
        ("approve", {"call_id": "c", "by": ""}),
        ("approve", {"call_id": "c", "by": "b" * (MAX_DECIDER + 1)}),
        ("approve", {"call_id": "c", "by": None}),
        ("approve", {"call_id": "c", "by": "x", "text": "a reason"}),
        ("deny", {"call_id": "c", "by": "x", "message_id": str(uuid.uuid4())}),
        ("deny", {"call_id": "c", "by": "x", "text": 5}),
        ("deny", {"call_id": "c", "by": "x", "extra": 1}),
        ("deny", {"call_id": "c", "by": "x", "text": "r" * 1_000_001}),
        ("deny", ["c", "x"]),
        ("deny", "c"),
        ("deny", None),
    ],
)
def test_each_malformed_decision_body_is_a_bad_command(kind: str, body: object) -> None:
    with pytest.raises(UsageError) as caught:
        parse_command(row(kind, json.dumps(body).encode()))
    check_refusal(caught.value, frozenset({ErrorCode.BAD_COMMAND}))
    assert caught.value.message.startswith("command 1 cannot be executed: ")


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("approve", b""),
        ("approve", b"\xff"),
        ("approve", b'{"call_id": "\\ud800", "by": "x"}'),
        ("approve", b'{"call_id": "c", "by": "x"'),
    ],
    ids=["empty", "not-utf8", "lone-surrogate-escape", "truncated"],
)
def test_undecodable_decision_bodies_are_bad_commands(kind: str, body: bytes) -> None:
    with pytest.raises(UsageError) as caught:
        parse_command(row(kind, body))
    check_refusal(caught.value, frozenset({ErrorCode.BAD_COMMAND}))


@pytest.mark.parametrize(
    ("field", "value"), [("root", "not-a-session"), ("target", ROOT_ID.upper()), ("kind", "decide")]
)
def test_a_decision_row_with_a_bad_address_or_kind_is_a_bad_command(field: str, value: str) -> None:
    good = {"kind": "approve", "root": ROOT_ID, "target": TARGET_ID}
    given_row = {**good, field: value}
    with pytest.raises(UsageError) as caught:
        parse_command(
            row(
                given_row["kind"],
                encode_decision("c", by="x"),
                root=given_row["root"],
                target=given_row["target"],
            )
        )
    check_refusal(caught.value, frozenset({ErrorCode.BAD_COMMAND}))


def test_an_unknown_field_with_a_newline_gives_a_one_line_refusal() -> None:
    with pytest.raises(UsageError) as caught:
        parse_command(row("approve", b'{"call_id": "c", "by": "x", "a\\nb": 1}'))
    check_refusal(caught.value, frozenset({ErrorCode.BAD_COMMAND}))


def test_the_encoded_decision_round_trips() -> None:
    command = parse_command(row("deny", encode_decision("c-1", by="cli:eve", reason="no")))
    assert (command.kind, command.call_id, command.by, command.text) == (
        "deny",
        "c-1",
        "cli:eve",
        "no",
    )
    approve = parse_command(row("approve", encode_decision("c-1", by="api")))
    assert (approve.call_id, approve.by, approve.text) == ("c-1", "api", None)


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("deny", {"call_id": "c", "by": "x", "text": "r" * (MAX_REASON + 1)}),
        ("approve", {"call_id": "c", "by": "   "}),
        ("approve", {"call_id": "   ", "by": "x"}),
    ],
    ids=["long-reason", "blank-by", "blank-call-id"],
)
def test_a_decision_row_the_api_would_refuse_is_a_bad_command(kind: str, body: object) -> None:
    with pytest.raises(UsageError) as caught:
        parse_command(row(kind, json.dumps(body).encode()))
    check_refusal(caught.value, frozenset({ErrorCode.BAD_COMMAND}))


@FUZZ
@given(
    kind=st.sampled_from(["approve", "deny", "decide", "APPROVE"]),
    body=st.one_of(BODY_DICTS.map(lambda d: cast("object", d)), RAW_BODIES),
    tenant=st.sampled_from(["default", "other", ""]),
    target=st.sampled_from([OWN, FOREIGN, "garbage"]),
)
@example(kind="deny", body={"call_id": OWN, "by": "x", "text": "no"}, tenant="default", target=OWN)
@example(kind="approve", body={"call_id": OWN, "by": "x"}, tenant="default", target=OWN)
@example(kind="approve", body={"call_id": OWN, "by": "x"}, tenant="other", target=OWN)
@example(kind="approve", body={"call_id": FOREIGN, "by": "x"}, tenant="default", target=FOREIGN)
def test_hostile_decision_rows_served_by_the_holder_decide_nothing_unless_sound(
    desk: Desk, kind: str, body: object, tenant: str, target: str
) -> None:
    """Rows written straight into the store (as a hostile process would), then served."""

    async def scenario(tree: Tree) -> None:
        foreign = desk.foreign
        raw = (
            body
            if isinstance(body, bytes)
            else json.dumps(resolve(body, tree.call_id, foreign.call_id)).encode()
        )
        given_target = {OWN: tree.root, FOREIGN: foreign.root}.get(target, target)
        store = desk.rt.store
        before = await snapshot(desk.rt, tree.root), await snapshot(desk.other, foreign.root)
        number = await store.submit_command(
            root=SessionId(tree.root),
            tenant=tenant,
            target=SessionId(given_target),
            kind=kind,
            body=raw,
            now=time.time(),
        )
        await desk.rt.commands.serve([SessionId(tree.root)])
        served = await store.get_command(number)
        assert served is not None
        assert served.state in ("done", "failed"), served
        outcome = decode_outcome(served.outcome)
        assert await snapshot(desk.other, foreign.root) == before[1]
        if served.state == "failed":
            assert outcome["code"] in {
                ErrorCode.BAD_COMMAND,
                ErrorCode.NOT_FOUND,
                ErrorCode.ALREADY_DECIDED,
                ErrorCode.NO_PENDING_REQUEST,
            }, outcome
            assert "\n" not in outcome["message"], outcome
            assert await snapshot(desk.rt, tree.root) == before[0]
            return
        command = parse_command(served)
        assert command.kind in ("approve", "deny"), outcome  # a send was never in the brief
        assert (tenant, given_target, command.call_id) == ("default", tree.root, tree.call_id)
        assert (outcome["call_id"], outcome["approved"], outcome["by"]) == (
            tree.call_id,
            command.kind == "approve",
            command.by,
        )
        await tree.run
        (decision,) = await decisions(desk.rt, tree.root)
        assert (decision.approved, decision.by, decision.reason, decision.command) == (
            command.kind == "approve",
            command.by,
            command.text,
            number,
        )

    desk.run(scenario)


# -- 4. tenancy ------------------------------------------------------------------------------


async def test_another_tenant_can_neither_list_nor_decide(tmp_path: Path) -> None:
    async with waiting_tree(make(tmp_path, TWO_WAITING), count=2) as tree:
        rt, root = tree.runtime, tree.root
        members = {str(m.row.name): str(m.row.header.id) for m in await rt.tree(root)}
        before = await snapshot(rt, root)
        other = make(tmp_path, TWO_WAITING, tenant="other")
        async with other:
            assert await other.approvals() == []
            for session in (root, members["a"]):
                await refused(lambda s=session: other.approvals(s), ErrorCode.NOT_FOUND)
            attempts: list[Callable[[], Awaitable[object]]] = []
            for name, call_id in [("lead", "lead-bash"), ("a", "a-bash"), ("a", None)]:
                for session in (root, members["a"]):
                    attempts += [
                        lambda s=session, n=name, c=call_id: other.approve(s, n, c),
                        lambda s=session, n=name, c=call_id: other.deny(s, n, c, reason="x"),
                    ]
            for attempt in attempts:
                await refused(attempt, ErrorCode.NOT_FOUND)
                assert await snapshot(rt, root) == before
        assert {(p.name, p.request.state) for p in await rt.approvals(root)} == {
            ("lead", "pending"),
            ("a", "pending"),
        }


async def test_a_tenant_cannot_decide_through_its_own_tree_with_another_tenants_call_id(
    tmp_path: Path,
) -> None:
    async with (
        waiting_tree(make(tmp_path, LEAD_BASH)) as mine,
        waiting_tree(make(tmp_path, FOREIGN_SCRIPT, approval="glob", tenant="other")) as theirs,
    ):
        before = (
            await snapshot(mine.runtime, mine.root),
            await snapshot(theirs.runtime, theirs.root),
        )
        await refused(
            lambda: theirs.runtime.approve(theirs.root, "lead", mine.call_id), ErrorCode.NOT_FOUND
        )
        await refused(
            lambda: mine.runtime.deny(mine.root, "lead", theirs.call_id), ErrorCode.NOT_FOUND
        )
        await refused(
            lambda: mine.runtime.approve(theirs.root, "lead", theirs.call_id), ErrorCode.NOT_FOUND
        )
        after = await snapshot(mine.runtime, mine.root), await snapshot(theirs.runtime, theirs.root)
        assert after == before


# -- 5. a call id of another member ----------------------------------------------------------


async def test_a_call_id_of_another_member_decides_nothing(tmp_path: Path) -> None:
    async with waiting_tree(make(tmp_path, TWO_WAITING), count=2) as tree:
        rt, root = tree.runtime, tree.root
        assert {(p.name, p.request.call_id) for p in await rt.approvals(root)} == {
            ("lead", "lead-bash"),
            ("a", "a-bash"),
        }
        before = await snapshot(rt, root)
        for name, call_id in [
            ("lead", "a-bash"),  # pending, in the tree, but the child's
            ("/lead", "a-bash"),
            ("a", "lead-bash"),  # pending, the lead's
            ("a", "lead-spawn"),  # a call of the lead that was never gated
            ("lead", "lead-spawn"),  # the lead's own call, but no request
        ]:
            for attempt in (
                lambda n=name, c=call_id: rt.approve(root, n, c),
                lambda n=name, c=call_id: rt.deny(root, n, c, reason="wrong member"),
            ):
                await refused(attempt, ErrorCode.NOT_FOUND)
                assert await snapshot(rt, root) == before
        # The child's session id is no tree's root: refused, whoever's call it names.
        child = next(str(m.row.header.id) for m in await rt.tree(root) if m.row.name == "a")
        await refused(lambda: rt.approve(child, "lead", "a-bash"), ErrorCode.USAGE)
        await refused(lambda: rt.approve(child, "a", "a-bash"), ErrorCode.USAGE)
        assert await snapshot(rt, root) == before

        # Each member's own call is still decided by its own name.
        await rt.approve(root, "a", "a-bash")
        await rt.deny(root, "lead", "lead-bash", reason="not the lead")
        await tree.run
        await rt.wait_quiescent()
        by_member = {
            m.row.name: [(d.call_id, d.approved) for d in events(m.records, ApprovalDecided)]
            for m in await rt.tree(root)
        }
    assert by_member == {"lead": [("lead-bash", False)], "a": [("a-bash", True)]}
    assert lines_of(tmp_path / "log.txt") == ["a"]


# -- 6. resource bombs -----------------------------------------------------------------------


@pytest.mark.parametrize("char", ["r", "é", "🙂"], ids=["ascii", "two-byte", "four-byte"])
async def test_a_reason_of_exactly_the_longest_length_is_taken(tmp_path: Path, char: str) -> None:
    async with waiting_tree(make(tmp_path, LEAD_BASH)) as tree:
        rt, root = tree.runtime, tree.root
        before = await snapshot(rt, root)
        await refused(
            lambda: rt.deny(root, "lead", tree.call_id, reason=char * (MAX_REASON + 1)),
            ErrorCode.USAGE,
        )
        assert await snapshot(rt, root) == before
        await rt.deny(root, "lead", tree.call_id, reason=char * MAX_REASON)
        await tree.run
        (decision,) = await decisions(rt, root)
    assert decision.reason == char * MAX_REASON


async def test_a_reason_one_over_is_refused_on_a_tree_nobody_holds(tmp_path: Path) -> None:
    root, call_id, crashed = await unheld_waiting_tree(tmp_path)
    async with make(tmp_path, LEAD_BASH, store=crashed) as rt:
        before = await snapshot(rt, root)
        await refused(
            lambda: rt.deny(root, "lead", call_id, reason="r" * (MAX_REASON + 1)), ErrorCode.USAGE
        )
        assert await snapshot(rt, root) == before
        await rt.deny(root, "lead", call_id, reason="r" * MAX_REASON)
        (decision,) = await decisions(rt, root)
    assert decision.reason == "r" * MAX_REASON


async def test_a_decider_of_exactly_the_longest_length_is_taken(tmp_path: Path) -> None:
    async with waiting_tree(make(tmp_path, LEAD_BASH)) as tree:
        rt, root = tree.runtime, tree.root
        await refused(
            lambda: rt.approve(root, "lead", tree.call_id, by="b" * (MAX_DECIDER + 1)),
            ErrorCode.USAGE,
        )
        decided = await rt.approve(root, "lead", tree.call_id, by="b" * MAX_DECIDER)
        assert decided["by"] == "b" * MAX_DECIDER
        await tree.run
    assert lines_of(tmp_path / "log.txt") == ["ran"]


@pytest.mark.parametrize("size", [MAX_CALL_ID + 1, 10_000_000])
async def test_huge_inputs_are_refused_before_anything_is_read(tmp_path: Path, size: int) -> None:
    """The size checks come first: with a root that names no session the code is still USAGE
    (a read would have said NOT_FOUND), and a call id of exactly the limit gets that far."""
    ghost = str(uuid.uuid4())
    huge = "c" * size
    async with waiting_tree(make(tmp_path, LEAD_BASH)) as tree:
        rt, root = tree.runtime, tree.root
        before = await snapshot(rt, root)
        for attempt in (
            lambda: rt.approve(ghost, "lead", huge),
            lambda: rt.deny(ghost, "lead", huge),
            lambda: rt.approve(ghost, "lead", tree.call_id, by=huge),
            lambda: rt.deny(ghost, "lead", tree.call_id, reason="r" * max(size, MAX_REASON + 1)),
            lambda: rt.approve(root, "lead", huge),
        ):
            error = await refused(attempt, ErrorCode.USAGE)
            assert len(str(error)) < 200, "a refusal does not echo the input"
        assert await snapshot(rt, root) == before
        await refused(lambda: rt.approve(ghost, "lead", "c" * MAX_CALL_ID), ErrorCode.NOT_FOUND)
        error = await refused(
            lambda: rt.approve(root, "lead", "c" * MAX_CALL_ID), ErrorCode.NOT_FOUND
        )
        assert len(str(error)) < 300
        assert await snapshot(rt, root) == before


@pytest.mark.parametrize("which", ["root", "name"])
async def test_a_refusal_does_not_echo_a_huge_root_or_name(tmp_path: Path, which: str) -> None:
    huge = "a" * 1_000_000
    async with waiting_tree(make(tmp_path, LEAD_BASH)) as tree:
        rt, root = tree.runtime, tree.root
        error = await refused(
            lambda: rt.approve(huge, "lead") if which == "root" else rt.approve(root, huge),
            ErrorCode.NOT_FOUND,
            ErrorCode.INVALID_NAME,
        )
    assert len(str(error)) < 1_000


@pytest.mark.xfail(
    strict=True,
    reason="BUG: `run` returns once the whole runtime is quiescent, not its own tree: a tree "
    "whose call waits for approval (indefinitely, by default) holds up every other tree's run",
)
async def test_a_waiting_tree_does_not_hold_up_another_trees_run(tmp_path: Path) -> None:
    async with waiting_tree(make(tmp_path, GLOB_SCRIPT, approval="glob")) as waiting:
        rt = waiting.runtime
        owner = TaskOwner("second run")
        try:
            second = await start_tree(rt, Waits(rt), owner)
            await rt.deny(second.root, "lead", second.call_id)
            async with asyncio.timeout(2):  # a bound for the bug only: fixed, it returns now
                result = await second.run
            assert result.output == "lead done"
        finally:
            await waiting.runtime.deny(waiting.root, "lead", waiting.call_id)
            await owner.aclose()
