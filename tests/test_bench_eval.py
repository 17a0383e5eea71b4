"""The delegation evaluation (`bench/eval_delegation.py`) on the scripted model.

Its checks must tell a task done right from one done wrong, or its figures for a real model
would mean nothing: a script that does each task right passes, and scripts that get the
form or the shape wrong are caught and named.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench.eval_delegation import TASKS, MeasuringModel, Task, run_task

from subagents.models import ScriptedModel

REPO = Path(__file__).resolve().parents[1]


def test_the_scripted_run_does_every_task_with_valid_calls() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.eval_delegation", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    outcomes = json.loads(done.stdout)
    assert [o["task"] for o in outcomes] == ["foreground", "background", "schema", "fan-out"]
    for outcome in outcomes:
        assert outcome["success"], outcome
        assert outcome["tool_calls"] == outcome["valid_calls"] > 0
        assert outcome["refused"] == []
        assert all(tokens > 1000 for tokens in outcome["prompt_tokens"])  # counted, not zero


def _task(name: str) -> Task:
    return next(t for t in TASKS if t.name == name)


WRONG: dict[str, tuple[str, str, list[str]]] = {
    # Two responses instead of one: the children exist but were not fanned out.
    "fan-out": (
        """
lead:
  - calls: [{tool: subagent, args: {name: one, description: One, prompt: one}}]
  - calls:
      - {tool: subagent, args: {name: two, description: Two, prompt: two}}
      - {tool: subagent, args: {name: three, description: Three, prompt: three}}
  - text: done
"*":
  - text: ok
""",
        "the three children were not started in one response",
        [],
    ),
    # A name outside the grammar, then a foreground child: no `poet` in the background.
    "background": (
        """
lead:
  - calls: [{tool: subagent, args: {name: The Poet, description: Poem, prompt: rain,
             run_in_background: true}}]
  - calls: [{tool: subagent, args: {name: poet, description: Poem, prompt: rain}}]
  - text: done
poet:
  - text: a haiku
""",
        "poet was not started in the background",
        ["lead: subagent INVALID_NAME"],
    ),
    # A definition that does not exist: nothing started from the scorer.
    "schema": (
        """
lead:
  - calls: [{tool: subagent, args: {agent: rater, description: Rate, prompt: rate it}}]
  - text: done
""",
        "no child started from the scorer definition",
        ["lead: subagent UNKNOWN_DEFINITION"],
    ),
}


@pytest.mark.parametrize("name", sorted(WRONG))
async def test_a_task_done_wrong_is_caught_and_named(name: str, tmp_path: Path) -> None:
    script, problem, refused = WRONG[name]
    task = dataclasses.replace(_task(name), script=script)
    model = MeasuringModel(ScriptedModel.from_yaml(script))
    outcome = await run_task(task, model, str(tmp_path), max_tokens=None)
    assert (outcome.success, outcome.problem, outcome.refused) == (False, problem, refused)
    assert outcome.valid_calls == outcome.tool_calls - len(refused)
