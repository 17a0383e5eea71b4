"""Resume finishes what a crash cut off: one-shot children run again, child-first.

Each test runs a scripted tree in a real process (`recovery_child.py`) on a real SQLite file
and SIGKILLs it at an exact acknowledged event, then resumes it (through the CLI or the child
process again) and reads the logs: the cut-off child ran again, its answer reached the call or
the notice its creator was waiting for, no member is left with an open turn, and a turn that
kills its process every time ends `error` after the bounded number of re-runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from delegation_support import inputs

from subagents.errors import ErrorCode
from subagents.ids import SessionId
from subagents.sessions import (
    AssistantMessageEvent,
    EventRecord,
    SessionHeader,
    SqliteEventStore,
    ToolResultEvent,
    TurnEnd,
)
from subagents.sessions._repair import (
    CRASH_RETRY_SOURCE,
    DEFAULT_CRASH_RETRIES,
    TOOL_OUTCOME_UNKNOWN_TEXT,
    has_open_turn,
)

CHILD = Path(__file__).with_name("recovery_child.py")
HANG_GUARD_S = 120.0
"""Only for a process that hangs instead of finishing (a bug): the test then fails."""

FOREGROUND = """\
lead:
  - calls:
      - tool: subagent
        args: {description: Count the files, prompt: Count the files here., name: worker}
  - text: Lead heard back.
  - text: Lead spare.
worker:
  - calls:
      - tool: glob
        args: {pattern: "*"}
  - text: Worker counted 42 files.
  - text: Worker spare.
"""

ALWAYS_CRASHES = """\
lead:
  - calls:
      - tool: subagent
        args: {description: Count the files, prompt: Count the files here., name: worker}
  - text: Lead heard back.
worker:
""" + "".join('  - calls: [{tool: glob, args: {pattern: "*"}}]\n' for _ in range(8))

BACKGROUND = """\
lead:
  - calls:
      - tool: subagent
        args:
          description: Count the files
          prompt: Count the files here.
          name: bg
          run_in_background: true
  - text: Lead waits for bg.
  - text: Lead got the notice.
  - text: Lead spare one.
  - text: Lead spare two.
bg:
  - calls:
      - tool: glob
        args: {pattern: "*"}
  - text: Bg counted 7 files.
"""


@dataclass(frozen=True)
class Tree:
    store: Path
    script: Path

    def env(self) -> dict[str, str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("SUBAGENTS_")}
        return {**clean, "SUBAGENTS_HOME": str(self.store.parent / "home")}

    def child(self, *args: str) -> tuple[int, list[dict[str, object]]]:
        command = [sys.executable, str(CHILD), "--store", str(self.store)]
        done = subprocess.run(
            [*command, "--script", str(self.script), *args],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=HANG_GUARD_S,
            check=False,
        )
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, lines

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "subagents", *args, "--store", str(self.store)],
            capture_output=True,
            text=True,
            env=self.env(),
            cwd=self.store.parent,
            timeout=HANG_GUARD_S,
            check=False,
        )


def make_tree(tmp_path: Path, script: str) -> Tree:
    (tmp_path / "script.yaml").write_text(script)
    return Tree(tmp_path / "state.db", tmp_path / "script.yaml")


async def logs(tree: Tree, root: str) -> dict[str, tuple[SessionHeader, list[EventRecord]]]:
    """Every member's header and log, by the member's catalog name (`lead` for the root)."""
    async with SqliteEventStore(tree.store) as store:
        headers = await store.list_headers(tenant="default", roots_only=False, root=SessionId(root))
        by_id = {h.id: (h, await store.read(h.id, tenant="default")) for h in headers}
    names = {SessionId(root): "lead"}
    for _, records in by_id.values():
        for record in records:
            child_id = getattr(record.event, "child_id", None)
            if child_id is not None:
                names[SessionId(child_id)] = str(getattr(record.event, "name", None))
    return {names[k]: v for k, v in by_id.items()}


def last_end(records: list[EventRecord]) -> TurnEnd:
    return [r.event for r in records if isinstance(r.event, TurnEnd)][-1]


def results(records: list[EventRecord], tool: str) -> list[ToolResultEvent]:
    return [
        r.event
        for r in records
        if isinstance(r.event, ToolResultEvent) and r.event.message.name == tool
    ]


def entered(records: list[EventRecord]) -> list[str]:
    return [e.message.text for e in inputs(records)]


def root_of(lines: list[dict[str, object]]) -> str:
    return str(lines[0]["root"])


def killed_at(tree: Tree, point: str, *options: str) -> str:
    """Run the tree until SIGKILL right after `point` (NAME:KIND); the root session's id."""
    code, lines = tree.child(*options, "--kill", point)
    assert code == -signal.SIGKILL, lines
    return root_of(lines)


async def test_a_foreground_child_cut_mid_turn_runs_again_and_its_parent_gets_the_answer(
    tmp_path: Path,
) -> None:
    tree = make_tree(tmp_path, FOREGROUND)
    root = killed_at(tree, "worker:tool/call")
    before = await logs(tree, root)
    assert has_open_turn(before["lead"][1])
    assert has_open_turn(before["worker"][1])

    resumed = tree.cli("resume", root)
    assert (resumed.returncode, resumed.stdout, resumed.stderr) == (0, "Lead heard back.\n", "")

    after = await logs(tree, root)
    assert not any(has_open_turn(records) for _, records in after.values())
    worker = after["worker"][1]
    assert entered(worker)[-1].startswith("[runtime] Your previous turn was cut off")
    assert (last_end(worker).reason, "Worker counted 42 files.") == (
        "completed",
        [r.event.message.text for r in worker if isinstance(r.event, AssistantMessageEvent)][-1],
    )
    # The lead's cut-off delegation call carries the child's real answer, not "unknown".
    (answer,) = results(after["lead"][1], "subagent")
    assert answer.message.content != TOOL_OUTCOME_UNKNOWN_TEXT
    assert "Worker counted 42 files." in answer.message.content
    assert not answer.message.is_error
    assert last_end(after["lead"][1]).reason == "completed"

    again = tree.cli("resume", root)  # nothing left to run: where the tree stands
    assert (again.returncode, again.stdout) == (0, "Lead heard back.\n")
    assert await logs(tree, root) == after


async def test_a_turn_that_crashes_every_time_ends_error_after_the_bounded_re_runs(
    tmp_path: Path,
) -> None:
    tree = make_tree(tmp_path, ALWAYS_CRASHES)
    root = killed_at(tree, "worker:tool/call")
    for _ in range(DEFAULT_CRASH_RETRIES):  # every re-run dies the same way
        code, _ = tree.child("--resume", root, "--kill", "worker:tool/call")
        assert code == -signal.SIGKILL
    code, lines = tree.child("--resume", root, "--kill", "worker:tool/call")
    assert code == 0, lines
    assert lines[-1] == {"stop_reason": "completed", "output": "Lead heard back."}

    after = await logs(tree, root)
    worker = after["worker"][1]
    sources = [e.message.source for e in inputs(worker)]
    assert sources[1:] == [CRASH_RETRY_SOURCE] * DEFAULT_CRASH_RETRIES
    end = last_end(worker)
    assert (end.reason, end.error_code) == ("error", str(ErrorCode.CRASH_RETRIES_EXHAUSTED))
    assert "4 times in a row" in str(end.error_message)
    (answer,) = results(after["lead"][1], "subagent")
    assert answer.message.is_error
    assert "cut off by a crash 4 times" in answer.message.content
    assert not any(has_open_turn(records) for _, records in after.values())


async def test_a_background_task_cut_mid_turn_runs_again_and_its_creator_is_told(
    tmp_path: Path,
) -> None:
    tree = make_tree(tmp_path, BACKGROUND)
    root = killed_at(tree, "bg:tool/call", "--background-mode", "one-shot")

    resumed = tree.cli("resume", root)
    assert resumed.returncode == 0, resumed.stderr

    after = await logs(tree, root)
    assert not any(has_open_turn(records) for _, records in after.values())
    assert last_end(after["bg"][1]).reason == "completed"
    lead = after["lead"][1]
    notices = [text for text in entered(lead) if "was cut off by a crash and ran again" in text]
    assert len(notices) == 1
    assert "Bg counted 7 files." in notices[0]
    assert "[status: completed]" in notices[0]
    assert last_end(lead).reason == "completed"


async def test_an_interrupt_of_the_dead_tree_stops_the_cut_turn_instead_of_re_running_it(
    tmp_path: Path,
) -> None:
    tree = make_tree(tmp_path, FOREGROUND)
    root = killed_at(tree, "worker:tool/call")
    stopped = tree.cli("interrupt", root, "lead")
    assert stopped.returncode == 0, stopped.stderr

    resumed = tree.cli("resume", root)
    after = await logs(tree, root)
    assert not any(has_open_turn(records) for _, records in after.values())
    lead, worker = after["lead"][1], after["worker"][1]
    assert last_end(lead).reason == "interrupted"  # the user's stop holds: no re-run
    assert not any(r.kind == "assistant/message" for r in worker[len(before_kill(worker)) :])
    assert last_end(worker).reason == "interrupted"  # nobody waits for it: closed, not re-run
    assert resumed.returncode == 1
    assert resumed.stderr.count("\n") == 1
    assert "interrupted" in resumed.stderr


def before_kill(records: list[EventRecord]) -> list[EventRecord]:
    """The records up to the first repair (the first `turn/end` written with `interrupted`)."""
    for index, record in enumerate(records):
        if isinstance(record.event, TurnEnd) and record.event.reason == "interrupted":
            return records[:index]
    return records


@pytest.mark.parametrize("kind", ["assistant/message", "tool/result"])
async def test_a_cut_lead_answers_its_prompt_on_resume(tmp_path: Path, kind: str) -> None:
    """The lead's only turn was cut: `resume` re-runs it and prints the answer."""
    tree = make_tree(tmp_path, FOREGROUND)
    root = killed_at(tree, f"lead:{kind}")
    resumed = tree.cli("resume", root)
    assert (resumed.returncode, resumed.stdout) == (0, "Lead heard back.\n"), resumed.stderr
    after = await logs(tree, root)
    assert not any(has_open_turn(records) for _, records in after.values())
