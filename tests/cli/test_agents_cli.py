"""`subagents agents` and `run --agent` (docs/design.md §8, §13), as real subprocesses.

The `cli` fixture runs in `tmp_path` (the project directory) with SUBAGENTS_HOME=`home`.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import Cli, write_script

REVIEWER = """\
---
name: reviewer
description: Reviews code for bugs.
tools: team_task_list, subagent
color: blue
max_depth: 1
---
You are a careful code reviewer.
"""


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def project(tmp_path: Path) -> Path:
    return tmp_path / ".subagents" / "agents"


def test_agents_lists_definitions_and_warns_about_bad_files(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    mine = write(project(tmp_path), "reviewer.md", REVIEWER)
    user = write(home / "agents", "writer.md", "---\nname: writer\ndescription: Writes.\n---\nW\n")
    broken = write(home / "agents", "broken.md", "---\nname: broken\ndescription: [\n---\nB\n")
    unknown = write(home / "agents", "odd.md", "---\nname: odd\ndescription: d\nfoo: 1\n---\nO\n")
    shadow = write(home / "agents", "reviewer.md", "---\nname: reviewer\ndescription: U\n---\nU\n")

    listed = cli("agents", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [
        {
            "name": "reviewer",
            "description": "Reviews code for bugs.",
            "source": str(mine),
            "tier": "project",
        },
        {"name": "writer", "description": "Writes.", "source": str(user), "tier": "user"},
    ]
    assert listed.stderr.splitlines() == [
        f"subagents: warning: {mine}:5: ignored Claude Code key `color`: subagents does not use it",
        f"subagents: warning: {broken}:3: invalid YAML: expected the node content, but found "
        "'<stream end>'; the file is skipped",
        f"subagents: warning: {unknown}:4: unknown key `foo`; the keys are: name, description, "
        "tools, disallowed_tools, model, context, max_depth, max_tokens, background, "
        "output_schema, budget, approval, approval_timeout, approver, mcp_servers; the file is "
        "skipped",
        f'subagents: warning: {shadow}:2: agent "reviewer" is also defined by the project file '
        f"{mine}, which takes precedence; the file is skipped",
    ]

    text = cli("agents")
    assert text.returncode == 0
    assert text.stdout.splitlines() == [
        "NAME      TIER     DESCRIPTION",
        "reviewer  project  Reviews code for bugs.",
        f"                   {mine}",
        "writer    user     Writes.",
        f"                   {user}",
    ]


def test_agents_with_nothing_defined(cli: Cli, tmp_path: Path, home: Path) -> None:
    done = cli("agents", "--json")
    assert (done.returncode, json.loads(done.stdout), done.stderr) == (0, [], "")
    text = cli("agents")
    assert text.stdout.strip() == (
        f"no agent definitions in {project(tmp_path)}, {tmp_path / '.claude' / 'agents'}, "
        f"{home / 'agents'}, {home / 'claude' / 'agents'}"
    )
    assert not (home / "state.db").exists()


def test_a_tenant_sees_only_its_own_definitions(cli: Cli, tmp_path: Path, home: Path) -> None:
    write(project(tmp_path), "reviewer.md", REVIEWER)
    acme = write(home / "tenants" / "acme" / "agents", "a.md", REVIEWER.replace("reviewer", "a"))
    rows = json.loads(cli("agents", "--json", "--tenant", "acme").stdout)
    assert rows == [
        {
            "name": "a",
            "description": "Reviews code for bugs.",
            "source": str(acme),
            "tier": "tenant",
        }
    ]
    assert [r["name"] for r in json.loads(cli("agents", "--json").stdout)] == ["reviewer"]


def test_run_agent_runs_the_definition_as_the_lead(cli: Cli, tmp_path: Path, home: Path) -> None:
    write(project(tmp_path), "reviewer.md", REVIEWER)
    spec = write_script(
        tmp_path / "s.yaml",
        """
lead:
  - calls: [{tool: subagent, args: {description: Check, prompt: Check it}}]
  - text: Reviewed.
agent-1:
  - text: Checked.
""",
    )
    done = cli("run", "review app.py", "--agent", "reviewer", "--model", spec, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "Reviewed."

    def header(name: str) -> dict[str, object]:
        events = json.loads(cli("log", name, "--json").stdout)
        return next(e["payload"] for e in events if e["kind"] == "request/header")

    def context(name: str) -> str:
        events = json.loads(cli("log", name, "--json").stdout)
        return next(
            "".join(b["text"] for b in e["payload"]["message"]["content"])
            for e in events
            if e["kind"] == "user/message"
            and e["payload"]["message"]["source"]["name"] == "context"
        )

    lead = header("lead")
    assert str(lead["system"]).endswith("\n\nYou are a careful code reviewer.")
    assert "Current file policy: workspace-write." in context("lead")
    assert lead["tools"] == ["team_task_list", "subagent"]
    child = header("agent-1")
    # The lead's scope, never more; at its depth cap, without the delegation tools.
    assert child["tools"] == ["team_task_list"]
    assert child["system"] == lead["system"]
    assert "Delegation depth: current 1, maximum 1; do not delegate further" in context("agent-1")


def test_run_agent_uses_the_definitions_model(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - text: From the definition's model.\n")
    write(project(tmp_path), "pinned.md", REVIEWER.replace("max_depth: 1", f"model: {spec}"))
    done = cli("run", "hi", "--agent", "reviewer")
    assert (done.returncode, done.stdout) == (0, "From the definition's model.\n")


def test_run_agent_refuses_a_conflicting_model(cli: Cli, tmp_path: Path, home: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - text: x\n")
    pinned = write(
        project(tmp_path), "pinned.md", REVIEWER.replace("max_depth: 1", "model: openai:gpt-4o")
    )
    done = cli("run", "hi", "--agent", "reviewer", "--model", spec)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"subagents: error: agent 'reviewer' asks for model 'openai:gpt-4o' but --model is "
        f"'{spec}'; drop --model or set `model: inherit` in {pinned}"
    )
    assert not (home / "state.db").exists()


def test_an_unknown_agent_exits_2_and_writes_nothing(cli: Cli, tmp_path: Path, home: Path) -> None:
    write(project(tmp_path), "reviewer.md", REVIEWER)
    write(home / "agents", "writer.md", "---\nname: writer\ndescription: Writes.\n---\nW\n")
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - text: never\n")
    done = cli("run", "hi", "--agent", "ghost", "--model", spec)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1] == (
        "subagents: error: unknown agent 'ghost' for tenant 'default'; the definitions are: "
        "reviewer, writer (see `subagents agents`)"
    )
    assert not (home / "state.db").exists()
    none = cli("run", "hi", "--agent", "ghost", "--model", spec, "--tenant", "acme")
    assert none.returncode == 2
    assert "the definitions are: none are defined" in none.stderr
    assert not (home / "state.db").exists()
