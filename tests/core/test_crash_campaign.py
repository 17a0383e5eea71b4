"""The crash campaign: SIGKILL a scripted tree at many points, then resume it from the log.

`campaign_child.py` runs a tree with background continuable children, a grandchild and
follow-up messages in flight, printing every event the runtime acknowledged as durable. A
baseline run counts the acknowledged events of a whole run (T); each case then kills a fresh
run right after one of them, chosen evenly over [0, T-1], and checks, from outside:

- the child died by SIGKILL, and every acknowledged event is in the file with its seq and kind;
- `subagents tree ROOT --json` reports no member `running`: the process that ran it is dead;
- `subagents resume ROOT` finishes the tree: every log stays append-only with contiguous seqs,
  no turn is left open and every tool call has one result, no acknowledged accepted message is
  missing or cancelled, every one was answered (the turn that entered it, or the re-runs of
  that turn after the crash cut it off, ended `completed`), `resume` printed the lead's answer
  and the lead's last turn ended `completed`; and the tree is complete: no input is left
  pending, and every background child's last activation was reported to its parent by a
  settlement notice the parent took in.

Broken properties that are known src bugs (labelled `BUG ...` below) are collected and reported
together at the end of a case, so one bug does not hide another; any other failure is immediate.

A turn the crash cut off runs again on resume (its re-run queued by crash repair), so plain
`resume` finishes the tree. Only a kill before the lead's prompt was durable leaves nothing to
resume: `resume` then exits 1 with a one-line reason, and the case resumes again with a prompt.

The suite runs `DEFAULT_KILLS` kill points; more with `SUBAGENTS_CAMPAIGN_KILLS=N` (at most T
distinct ones: every acknowledged event). The three `test_bug_*` tests pin, each at one chosen
kill point, the src bugs the campaign found. No sleeps: the test reads the child's stdout to EOF
and waits for its exit.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from campaign_child import CHILDREN, SCRIPT
from test_crash import assert_well_formed

from subagents.core import replay_inbox
from subagents.delegation._tree import TreeMember, load_tree
from subagents.ids import SessionId
from subagents.sessions import (
    AssistantMessageEvent,
    EventRecord,
    InboxSpliced,
    SqliteEventStore,
    SubagentSettled,
    TurnEnd,
    UserMessageEvent,
)
from subagents.sessions._repair import interrupted_turn_closers

CHILD = Path(__file__).with_name("campaign_child.py")
DEFAULT_KILLS = 20
KILLS = int(os.environ.get("SUBAGENTS_CAMPAIGN_KILLS") or DEFAULT_KILLS)
SETTLING_ATTEMPTS = 6
"""Runs tried for a settling-child kill point (a run may interleave past every one)."""
WATCHDOG_SECONDS = 30.0
"""Only for a process that hangs instead of finishing (a bug): kill it so the test fails."""
TENANT = "default"

# The src bugs the campaign found, as labels of the properties they break.
TREE_RUNNING = "BUG tree-running"
"""`subagents tree` shows a member of a killed tree as `running` (its turn was cut off)."""
INPUT_PENDING = "BUG input-left-pending"
"""After `resume`, accepted input waits unclaimed in the log of an agent nobody woke (seen: a
settlement notice delivered to a parent that was not loaded)."""
SETTLEMENT_LOST = "BUG settlement-lost"
"""After `resume`, a child's last activation was never reported to its parent."""


# -- the child process ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ack:
    """One acknowledged event, as the child printed it."""

    session: SessionId
    name: str
    seq: int
    kind: str
    accepted: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ChildRun:
    root: SessionId
    acks: list[Ack]
    finished: bool

    def by_session(self) -> dict[SessionId, list[Ack]]:
        sessions: dict[SessionId, list[Ack]] = {}
        for ack in self.acks:
            sessions.setdefault(ack.session, []).append(ack)
        return sessions

    def accepted(self) -> dict[SessionId, list[str]]:
        """Acknowledged accepted message ids, per session."""
        messages: dict[SessionId, list[str]] = {}
        for ack in self.acks:
            messages.setdefault(ack.session, []).extend(ack.accepted)
        return messages


@dataclass(frozen=True, slots=True)
class Files:
    store: Path
    script: Path
    home: Path


def make_files(directory: Path) -> Files:
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "script.yaml"
    script.write_text(SCRIPT, encoding="utf-8")
    home = directory / "home"
    home.mkdir()
    return Files(store=directory / "state.db", script=script, home=home)


def env_for(files: Files) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SUBAGENTS_", "OPENAI_", "DEEPSEEK_"))
    }
    env["SUBAGENTS_HOME"] = str(files.home)
    return env


def run_child(files: Files, point: Sequence[str] = ()) -> ChildRun:
    """Run the child to its end or its kill (`point`: its kill option), reading stdout to EOF."""
    command = [sys.executable, str(CHILD), "--store", str(files.store)]
    command += ["--script", str(files.script), *point]
    stderr = files.store.with_name("child.stderr")
    lines: list[dict[str, Any]] = []
    with (
        stderr.open("wb") as errors,
        subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=env_for(files),
            start_new_session=True,
        ) as child,
    ):
        hung = threading.Event()
        watchdog = threading.Timer(WATCHDOG_SECONDS, lambda: (hung.set(), child.kill()))
        watchdog.start()
        try:
            assert child.stdout is not None
            lines.extend(json.loads(raw) for raw in child.stdout)
            code = child.wait()
        finally:
            watchdog.cancel()
    detail = f"child printed {lines}; stderr: {stderr.read_text(encoding='utf-8')}"
    assert not hung.is_set(), f"the child hung; {detail}"
    assert lines, detail
    assert set(lines[0]) == {"root"}, detail
    finished = lines[-1] == {"finished": True}
    assert code == (0 if finished else -signal.SIGKILL), detail
    acks = [
        Ack(
            session=SessionId(line["session"]),
            name=str(line["name"]),
            seq=int(line["seq"]),
            kind=str(line["kind"]),
            accepted=tuple(line.get("accepted", ())),
        )
        for line in lines[1 : len(lines) - finished]
    ]
    return ChildRun(SessionId(lines[0]["root"]), acks, finished)


def cli(files: Files, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "subagents", *args, "--store", str(files.store)],
        capture_output=True,
        text=True,
        env=env_for(files),
        cwd=files.store.parent,
        timeout=WATCHDOG_SECONDS,
        check=False,
    )


async def read_tree(path: Path, root: SessionId) -> list[TreeMember]:
    async with SqliteEventStore(path) as store:
        header = await store.get_header(root, tenant=TENANT)
        return await load_tree(store, header)


async def tree_rows(files: Files, root: SessionId) -> list[dict[str, Any]]:
    shown = await asyncio.to_thread(cli, files, "tree", root, "--json")
    assert shown.returncode == 0, shown.stderr
    rows: list[dict[str, Any]] = json.loads(shown.stdout)
    return rows


# -- properties -------------------------------------------------------------------------------


def entered_ids(records: Sequence[EventRecord]) -> set[str]:
    return {r.event.message.id for r in records if isinstance(r.event, UserMessageEvent)}


def check_acknowledged_stored(run: ChildRun, members: Sequence[TreeMember]) -> None:
    """Each session's acknowledged events are a prefix of its stored log, seqs from 0."""
    logs = {member.row.header.id: member.records for member in members}
    for session, acks in run.by_session().items():
        assert session in logs, f"acknowledged events of {acks[0].name} but no such session"
        printed = [(ack.seq, ack.kind) for ack in acks]
        assert [seq for seq, _ in printed] == list(range(len(printed))), printed
        stored = [(r.seq, r.kind) for r in logs[session][: len(printed)]]
        assert stored == printed, f"{acks[0].name}: acknowledged {printed}, stored {stored}"


def check_no_message_lost(run: ChildRun, members: Sequence[TreeMember]) -> int:
    """Every acknowledged accepted message is entered by a turn or still pending, never
    cancelled or missing; returns how many were checked."""
    accepted = run.accepted()
    for member in members:
        records = member.records
        pending = replay_inbox(records[member.row.header.seed_length :]).pending_ids()
        kept = entered_ids(records) | set(pending)
        lost = [m for m in accepted.get(member.row.header.id, []) if m not in kept]
        assert not lost, f"{member.row.name} lost acknowledged messages {lost}"
        canceled = [r for r in records if isinstance(r.event, InboxSpliced) and r.event.outcome]
        assert not canceled, f"{member.row.name} cancelled input: {canceled}"
    return sum(len(ids) for ids in accepted.values())


def check_every_message_answered(run: ChildRun, members: Sequence[TreeMember]) -> None:
    """Every acknowledged accepted message was entered by a turn that finished its work: the
    turn ended `completed`, or a crash cut it off and its re-runs (crash-retry turns, which
    come next) ended `completed`. Nothing is left pending."""
    accepted = run.accepted()
    for member in members:
        records = member.records[member.row.header.seed_length :]
        ends: list[tuple[int, TurnEnd]] = [
            (i, r.event) for i, r in enumerate(records) if isinstance(r.event, TurnEnd)
        ]
        for message_id in accepted.get(member.row.header.id, []):
            entered = next(
                i
                for i, r in enumerate(records)
                if isinstance(r.event, UserMessageEvent) and r.event.message.id == message_id
            )
            outcome = next(end for i, end in ends if i > entered and end.reason != "interrupted")
            assert outcome.reason == "completed", (
                f"{member.row.name}: accepted message {message_id} was not answered: {outcome}"
            )


def running_rows(rows: Sequence[dict[str, Any]]) -> list[str]:
    return [
        f"{TREE_RUNNING}: `subagents tree` shows {row['name']} as running although no "
        "process runs the tree"
        for row in rows
        if row["status"] == "running"
    ]


def left_pending(members: Sequence[TreeMember]) -> list[str]:
    found: list[str] = []
    for member in members:
        pending = replay_inbox(member.records[member.row.header.seed_length :])
        texts = [m.text.splitlines()[0] for m in (*pending.next_step, *pending.next_turn)]
        if texts:
            found.append(
                f"{INPUT_PENDING}: after resume {member.row.name} holds accepted input no "
                f"turn took in: {texts}"
            )
    return found


def unreported_settlements(members: Sequence[TreeMember]) -> list[str]:
    """Children whose parent took in no settlement notice of their last activation.

    A notice quotes the child's closing message, and every answer of the script is unique,
    so the notice of the last activation is the one quoting its last answer (a time
    comparison is not enough: the parent may take in an older notice after the child's
    next activation ended).
    """
    by_name = {member.row.name: member for member in members}
    found: list[str] = []
    for member in members[1:]:
        assert member.row.mode == "continuable", member.row
        assert member.row.parent is not None
        # The `subagent/settled` marker is written after the notice it records.
        last = next(r for r in reversed(member.records) if not isinstance(r.event, SubagentSettled))
        answers = [
            r.event.message.text
            for r in member.records
            if isinstance(r.event, AssistantMessageEvent) and r.event.message.text
        ]
        closing = answers[-1] if answers else ""
        notices = [
            r
            for r in by_name[member.row.parent].records
            if isinstance(r.event, UserMessageEvent)
            and r.event.message.source.kind == "subagent-settled"
            and r.event.message.source.name == member.row.name
            and r.time >= last.time
            and closing in r.event.message.text
        ]
        if not notices:
            found.append(
                f"{SETTLEMENT_LOST}: after resume {member.row.parent} never took in a "
                f"settlement notice of {member.row.name} after its last event "
                f"(seq {last.seq}, {last.kind})"
            )
    return found


def last_turn_end(records: Sequence[EventRecord]) -> tuple[int, TurnEnd]:
    ends = [(r.seq, r.event) for r in records if isinstance(r.event, TurnEnd)]
    assert ends
    return ends[-1]


# -- one crash and resume ---------------------------------------------------------------------


@dataclass
class Outcome:
    run: ChildRun
    killed: list[TreeMember]
    """The tree as the kill left it."""
    members: list[TreeMember]
    """The tree after the resume."""
    violations: list[str]
    """Broken properties that are known src bugs (the others fail at once)."""
    messages: int
    reprompted: bool


async def crash_and_resume(files: Files, point: Sequence[str]) -> Outcome:
    """Kill the child at `point`, check the stored tree, resume it and check the result."""
    run = await asyncio.to_thread(run_child, files, point)
    killed = await read_tree(files.store, run.root)
    check_acknowledged_stored(run, killed)
    violations = running_rows(await tree_rows(files, run.root))

    resumed = await asyncio.to_thread(cli, files, "resume", run.root)
    members = await read_tree(files.store, run.root)
    reprompted = False
    if resumed.returncode != 0:
        # Only a kill before the prompt was durable (only the lead's sandbox mode was) leaves
        # nothing to resume; `resume` then says so in one line. A cut turn runs again.
        assert resumed.returncode == 1, resumed.stderr
        assert not any(isinstance(r.event, TurnEnd) for r in members[0].records), resumed
        assert run.accepted().get(run.root, []) == [], run.accepted()
        assert resumed.stderr.count("\n") == 1, resumed.stderr
        again = await asyncio.to_thread(cli, files, "resume", run.root, "Finish up.")
        assert again.returncode == 0, again.stderr
        reprompted = True
        members = await read_tree(files.store, run.root)
    else:
        assert resumed.stdout.strip(), "resume printed no answer"

    names = {m.row.header.id: m.row.name for m in members}
    assert {m.row.header.id: m.row.name for m in killed}.items() <= names.items()
    assert set(names.values()) <= {"lead", *CHILDREN}
    before = {m.row.header.id: [(r.seq, r.kind) for r in m.records] for m in killed}
    for member in members:
        stored = before.get(member.row.header.id, [])
        assert [(r.seq, r.kind) for r in member.records[: len(stored)]] == stored  # append-only
        assert_well_formed(member.records)  # contiguous seqs, turns closed, calls answered
        assert member.row.status != "running", member.row
    messages = check_no_message_lost(run, members)
    check_every_message_answered(run, members)
    assert last_turn_end(members[0].records)[1].reason == "completed"
    assert members[0].row.status == "completed"
    violations += left_pending(members) + unreported_settlements(members)
    return Outcome(run, killed, members, violations, messages, reprompted)


# -- the campaign -----------------------------------------------------------------------------


@dataclass
class Tally:
    """What the campaign checked, reported when the module ends."""

    cases: int = 0
    kills: int = 0
    events: int = 0
    messages: int = 0
    reprompted: int = 0
    resumed: Counter[str] = field(default_factory=Counter[str])
    killed_on: Counter[str] = field(default_factory=Counter[str])
    violations: Counter[str] = field(default_factory=Counter[str])


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    tally = Tally()
    yield tally
    plugins = request.config.pluginmanager
    reporter: Any = plugins.get_plugin("terminalreporter")
    capture: Any = plugins.get_plugin("capturemanager")
    if tally.cases and reporter is not None and capture is not None:
        resumed = ", ".join(f"{name} {n}" for name, n in sorted(tally.resumed.items()))
        killed_on = ", ".join(f"{name} {n}" for name, n in sorted(tally.killed_on.items()))
        bugs = ", ".join(f"{bug}: {n} cases" for bug, n in sorted(tally.violations.items()))
        with capture.global_and_fixture_disabled():
            reporter.write_line(
                f"\ncrash campaign: {tally.cases} kill points ({tally.kills} SIGKILLs, "
                f"after events of {killed_on}); "
                f"{tally.events} acknowledged events and {tally.messages} acknowledged "
                f"messages checked; {tally.reprompted} cases resumed again with a prompt; "
                f"members that resumed work: {resumed or 'none'}; "
                f"{bugs or 'no known bug hit'}"
            )


@pytest.fixture(scope="module")
def total(tmp_path_factory: pytest.TempPathFactory) -> int:
    """The number of events a whole run acknowledges, from one run without a kill."""
    run = run_child(make_files(tmp_path_factory.mktemp("baseline")))
    assert run.finished
    assert {ack.name for ack in run.acks} == {"lead", *CHILDREN}
    # 4 prompts, 2 follow-ups, 4 notices: beta settles once before its follow-up arrives and
    # once after it, alpha once, alpha/sub once (the scripted run interleaves the same way
    # every time; a change of that order shows here first).
    assert sum(len(ack.accepted) for ack in run.acks) == 10
    return len(run.acks)


def kill_points(total: int, count: int) -> list[int]:
    """`count` acknowledged-event indices spread evenly over [0, total - 1], both ends
    included (all of them when `count` >= `total`)."""
    if count >= total:
        return list(range(total))
    if count == 1:
        return [total - 1]
    return sorted({round(i * (total - 1) / (count - 1)) for i in range(count)})


@pytest.mark.parametrize("case", range(KILLS), ids=lambda i: f"kill{i:03d}")
async def test_sigkill_anywhere_then_resume_completes_the_tree(
    case: int, total: int, tally: Tally, tmp_path: Path
) -> None:
    points = kill_points(total, KILLS)
    if case >= len(points):
        pytest.skip(f"a run acknowledges only {total} events; each is already a kill point")
    kill_at = points[case]
    outcome = await crash_and_resume(make_files(tmp_path), ("--kill-at", str(kill_at)))
    run = outcome.run
    if not run.finished:  # it died right after the chosen event
        assert len(run.acks) == kill_at + 1

    tally.cases += 1
    tally.kills += not run.finished
    if run.acks and not run.finished:
        tally.killed_on[run.acks[-1].name] += 1
    tally.events += len(run.acks)
    tally.messages += outcome.messages
    tally.reprompted += outcome.reprompted
    grown = {m.row.header.id: len(m.records) for m in outcome.killed}
    for member in outcome.members:
        if len(member.records) > grown.get(member.row.header.id, 0):
            tally.resumed[member.row.name] += 1
    for bug in {violation.split(":")[0] for violation in outcome.violations}:
        tally.violations[bug] += 1
    assert not outcome.violations, (
        f"after SIGKILL at acknowledged event {kill_at} of {total}:\n"
        + "\n".join(outcome.violations)
    )


# -- the bugs it found, each at one kill point ------------------------------------------------


async def test_bug_tree_shows_a_killed_turn_as_running(tmp_path: Path) -> None:
    """Killed inside the lead's first turn: `subagents tree` shows the lead `crashed` (its
    turn was cut off and the lease holder is dead: resume runs it again), not `running`."""
    files = make_files(tmp_path)
    run = await asyncio.to_thread(run_child, files, ("--kill-on", "lead:5"))
    rows = await tree_rows(files, run.root)
    assert [(row["name"], row["status"]) for row in rows][:1] == [("lead", "crashed")]


async def test_bug_resume_leaves_a_grandchilds_notice_unclaimed(tmp_path: Path) -> None:
    """Killed once `alpha/sub` accepted its prompt, `alpha` still in the turn that started it.

    `resume_unsettled` reactivates alpha first: alpha's cut-off turn is closed, it runs the
    lead's follow-up (if accepted) and settles, telling the lead it finished, before alpha/sub is
    reactivated. alpha/sub then runs without a live parent, and its notice is left in alpha's
    log, never taken in: alpha's outcome, as the lead heard it, ignores alpha/sub's work.
    Expected: alpha stays resident while alpha/sub runs, takes in its notice, and settles after.
    """
    files = make_files(tmp_path)
    outcome = await crash_and_resume(files, ("--kill-on", "alpha/sub:1"))
    killed = {m.row.name: m.records for m in outcome.killed}
    assert interrupted_turn_closers(killed["alpha"]), "the kill should cut alpha's turn"
    assert replay_inbox(killed["alpha/sub"]).next_turn, "alpha/sub's prompt should be pending"
    violations = [v for v in outcome.violations if not v.startswith(TREE_RUNNING)]
    assert not violations, "\n".join(violations)


async def test_bug_resume_never_redelivers_a_cut_off_settlement(tmp_path: Path) -> None:
    """Killed right before a child's settlement notice was written, with the rest of the tree
    idle and its log durable (in the scripted run: `beta`'s last settlement, once the lead
    ended the turn that took in the earlier notices).

    No turn is open (and often nothing is pending), so `resume_unsettled` reactivated nobody and
    the lead never heard how alpha and beta ended. Expected: a member whose latest activation
    ended without its notice in its parent's log is settled again on resume (its notice
    delivered, the parent woken), as `resume_unsettled` promises ("its parent hears how it
    ended").

    Once that was fixed, a second bug showed here in 5 of 160 runs under load, wherever
    the kill landed: resume reactivated `alpha` before `alpha/sub`, so alpha settled at once
    and alpha/sub's notice resumed it again while the first activation was still writing its
    `subagent/settled` marker; the second copy, loaded from the log without it, lost the
    notice. Resume now holds every member it reactivates until the whole tree is back, and an
    activation stays registered until its last write (pinned in-process by
    `test_a_message_during_a_settlement_goes_to_the_next_epoch_of_the_whole_log`).
    """
    # A seq would depend on how the run interleaves: the child finds the moment itself,
    # waiting a few commits at each notice for the rest of the tree to idle. A run that never
    # gets there is resumed and checked too, then the case tries a fresh one.
    for attempt in range(SETTLING_ATTEMPTS):
        files = make_files(tmp_path / f"attempt{attempt}")
        outcome = await crash_and_resume(files, ("--kill-settling",))
        if not outcome.run.finished:
            break
    else:
        pytest.fail(f"no run of {SETTLING_ATTEMPTS} reached a settling child")
    for member in outcome.killed:
        assert not interrupted_turn_closers(member.records), member.row.name
    # Input may already wait for an idle member (a message whose acceptance was not
    # acknowledged yet); what matters is the cut settlement.
    assert unreported_settlements(outcome.killed), "the kill should cut a settlement"
    violations = [v for v in outcome.violations if not v.startswith(TREE_RUNNING)]
    assert not violations, "\n".join(violations)
