"""`subagents run` with a workflow: the lead's script fans out children in a confined process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import Cli, write_script

LEAD = """\
lead:
  - calls:
      - tool: workflow
        args:
          meta: {name: fan-out, description: Ask two children.}
          args: {topics: [a, b]}
          script: |
            phase("ask")
            answers = await parallel([lambda t=t: agent(f"say {t}") for t in args["topics"]])
            return {"answers": answers}
  - text: done
"*":
  - text: child answer
"""


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
def test_a_workflow_fans_out_children_and_returns_its_value(
    cli: Cli, tmp_path: Path, mode: str
) -> None:
    spec = write_script(tmp_path / "s.yaml", LEAD)
    done = cli("run", "go", "--model", spec, "--sandbox", mode, "--json")
    assert done.returncode == 0, done.stderr
    session = json.loads(done.stdout)["session_id"]
    events = json.loads(cli("log", "lead", "--json").stdout)
    [result] = [e["payload"]["message"] for e in events if e["kind"] == "tool/result"]
    assert result["is_error"] is False
    assert result["content"] == (
        'workflow "fan-out" completed (2 agents).\nReturn value:\n'
        + json.dumps({"answers": ["child answer", "child answer"]}, indent=2)
    )
    tree = json.loads(cli("tree", session, "--json").stdout)
    assert sorted(r["label"] for r in tree[1:]) == ["fan-out child 1", "fan-out child 2"]
    assert {r["status"] for r in tree[1:]} == {"completed"}


def test_a_script_that_does_not_parse_is_an_error_result(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(
        tmp_path / "s.yaml",
        "lead:\n  - calls: [{tool: workflow, args: {meta: {name: x, description: y}, "
        "script: 'return ('}}]\n  - text: fixed\n",
    )
    done = cli("run", "go", "--model", spec, "--json")
    assert done.returncode == 0, done.stderr
    events = json.loads(cli("log", "lead", "--json").stdout)
    [result] = [e["payload"]["message"] for e in events if e["kind"] == "tool/result"]
    assert result["is_error"] is True
    assert result["content"].startswith("Error: workflow script does not parse: ")
