"""`run --budget-*`: a budget for the whole tree, kept across `resume`, bad values refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import Cli, write_script

DELEGATE = "  - calls: [{tool: subagent, args: {description: d, prompt: p}}]\n"


def test_a_spent_budget_exits_1_and_resume_keeps_it(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(
        tmp_path / "s.yaml",
        "lead:\n" + DELEGATE + "  - text: first\n  - text: never\n'*':\n  - text: child\n",
    )
    done = cli("run", "go", "--model", spec, "--budget-model-calls", "3", "--json")
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout)
    assert first["output"] == "first"
    # resume takes no budget flags: the recorded budget (3 calls, all used) still holds.
    again = cli("resume", first["session_id"], "more", "--json")
    assert again.returncode == 1
    payload = json.loads(again.stdout)
    assert payload["stop_reason"] == "budget"
    assert payload["error"]["code"] == "BUDGET_EXHAUSTED"
    assert "(3 of 3 calls used)" in payload["error"]["message"]
    assert "subagents: BUDGET_EXHAUSTED: the model-call budget of lead" in again.stderr


def test_a_children_budget_of_zero_refuses_delegation(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n" + DELEGATE + "  - text: alone\n")
    done = cli("run", "go", "--model", spec, "--budget-children", "0", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["output"] == "alone"
    tree = json.loads(cli("tree", result["session_id"], "--json").stdout)
    assert [row["name"] for row in tree] == ["lead"]


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--budget-tokens", "-1"), ("--budget-model-calls", "many"), ("--budget-children", "1.5")],
)
def test_a_bad_budget_is_a_usage_error_and_writes_nothing(
    cli: Cli, tmp_path: Path, home: Path, flag: str, value: str
) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - text: hi\n")
    done = cli("run", "go", "--model", spec, flag, value)
    assert done.returncode == 2
    assert flag in done.stderr
    assert not (home / "state.db").exists()


def test_tree_shows_each_members_recorded_budget(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(
        tmp_path / "s.yaml", "lead:\n" + DELEGATE + "  - text: done\n'*':\n  - text: child\n"
    )
    done = cli("run", "go", "--model", spec, "--budget-model-calls", "9", "--json")
    assert done.returncode == 0, done.stderr
    session = json.loads(done.stdout)["session_id"]
    rows = json.loads(cli("tree", session, "--json").stdout)
    # The lead recorded the run's budget; its child the 8 calls the lead had left at its start.
    assert [r.get("budget") for r in rows] == [{"model_calls": 9}, {"model_calls": 8}]
    text = cli("tree", session).stdout.splitlines()
    assert "2 model calls  budget model calls 9  (" in text[0]
    assert "1 model calls  budget model calls 8  (" in text[1]


def test_parallel_children_never_overspend_the_model_call_budget(cli: Cli, tmp_path: Path) -> None:
    # The lead's call leaves 1 of its 2 calls, then three children start at once; each child's
    # call lasts a moment, so the others try while it is in flight. Before calls were reserved
    # each of them took the last call ("4 of 2 calls used").
    three = ", ".join(["{tool: subagent, args: {description: d, prompt: p}}"] * 3)
    spec = write_script(
        tmp_path / "s.yaml",
        "lead:\n  - calls: ["
        + three
        + "]\n  - text: never\n'*':\n  - text: child\n    sleep: 0.05\n",
    )
    done = cli("run", "go", "--model", spec, "--budget-model-calls", "2", "--json")
    assert done.returncode == 1
    payload = json.loads(done.stdout)
    assert payload["stop_reason"] == "budget"
    assert "(2 of 2 calls used)" in payload["error"]["message"]
    rows = json.loads(cli("tree", payload["session_id"], "--json").stdout)
    assert sum(row["usage"]["model_calls"] for row in rows) == 2
    # Each child that got no call ended its turn `budget`, as its log says.
    for row in rows[1:]:
        if row["usage"]["model_calls"] == 0:
            log = cli("log", row["session_id"], "--json")
            ends = [e for e in json.loads(log.stdout) if e["kind"] == "turn/end"]
            assert [e["payload"]["reason"] for e in ends] == ["budget"]


def test_max_tokens_caps_every_agent_and_is_told(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(
        tmp_path / "s.yaml", "lead:\n" + DELEGATE + "  - text: done\n'*':\n  - text: child\n"
    )
    done = cli("run", "go", "--model", spec, "--max-tokens", "64", "--json")
    assert done.returncode == 0, done.stderr
    session = json.loads(done.stdout)["session_id"]
    for name in ("lead", "agent-1"):
        events = json.loads(cli("log", name, "--session", session, "--json").stdout)
        told = [
            "".join(b["text"] for b in e["payload"]["message"]["content"])
            for e in events
            if e["kind"] == "user/message"
            and e["payload"]["message"]["source"]["name"] == "context"
        ]
        assert len(told) == 1
        assert "Each of your responses may be at most 64 tokens long." in told[0]


@pytest.mark.parametrize("value", ["0", "-3", "lots"])
def test_a_bad_max_tokens_is_a_usage_error_and_writes_nothing(
    cli: Cli, tmp_path: Path, home: Path, value: str
) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - text: hi\n")
    done = cli("run", "go", "--model", spec, "--max-tokens", value)
    assert done.returncode == 2
    assert "--max-tokens" in done.stderr
    assert not (home / "state.db").exists()
