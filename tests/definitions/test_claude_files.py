"""Claude Code's agent files as they are: read from `.claude/agents`, names and models mapped."""

# ruff: noqa: E501 (the files are written exactly as Claude Code's documentation shows them)

from __future__ import annotations

from pathlib import Path

import pytest
from delegation_support import events, make_runtime

from subagents import DelegationOptions
from subagents.definitions import load_definitions, parse_definition
from subagents.sessions import RequestHeader

# Written as Claude Code's subagent documentation shows them.
CODE_REVIEWER = """\
---
name: code-reviewer
description: Expert code review specialist. Proactively reviews code for quality, security, and maintainability. Use immediately after writing or modifying code.
tools: Read, Grep, Glob, Bash
model: inherit
---

You are a senior code reviewer ensuring high standards of code quality and security.

When invoked:
1. Run git diff to see recent changes
2. Focus on modified files
3. Begin review immediately
"""

DEBUGGER = """\
---
name: debugger
description: Debugging specialist for errors, test failures, and unexpected behavior. Use proactively when encountering any issues.
tools: Read, Edit, Bash, Grep, Glob
---

You are an expert debugger specializing in root cause analysis.
"""

DATA_SCIENTIST = """\
---
name: data-scientist
description: Data analysis expert for SQL queries, BigQuery operations, and data insights. Use proactively for data analysis tasks and queries.
tools: Bash, Read, Write
model: sonnet
---

You are a data scientist specializing in SQL and BigQuery analysis.
"""

RESEARCHER = """\
---
name: researcher
description: Researches a question on the web and in the code.
tools: WebFetch, WebSearch, Read, TodoWrite, Bash(git log:*), mcp__github__search_issues
disallowedTools: Write, Edit
model: claude-opus-4-5
color: blue
permissionMode: plan
maxTurns: 20
memory: project
futureKey: something Claude Code adds later
---

You research.
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def claude_parse(text: str, **aliases: str) -> tuple[object, list[str]]:
    definition, problems = parse_definition(
        text,
        source="x.md",
        tier="claude-project",
        aliases={"sonnet": "openai:gpt-5", **aliases},
    )
    return definition, [p.message for p in problems]


def test_documented_files_load_with_their_tools_mapped() -> None:
    reviewer, problems = parse_definition(CODE_REVIEWER, source="r.md", tier="claude-project")
    assert problems == []
    assert reviewer is not None
    assert reviewer.tools == ("read_file", "grep", "glob", "bash")
    assert reviewer.model == "inherit"
    debugger, problems = parse_definition(DEBUGGER, source="d.md", tier="claude-user")
    assert problems == []
    assert debugger is not None
    assert debugger.tools == ("read_file", "edit_file", "bash", "grep", "glob")


def test_a_model_alias_resolves_through_the_given_aliases() -> None:
    definition, problems = claude_parse(DATA_SCIENTIST)
    assert problems == []
    assert getattr(definition, "model", None) == "openai:gpt-5"
    # Without a configured alias, the built-in one names Claude.
    builtin, _ = parse_definition(DATA_SCIENTIST, source="x.md", tier="claude-project")
    assert builtin is not None
    assert builtin.model == "anthropic:claude-sonnet-4-5"


def test_what_we_cannot_give_is_a_warning_and_never_more_than_asked() -> None:
    definition, problems = claude_parse(RESEARCHER)
    assert definition is not None
    assert getattr(definition, "tools", None) == ("read_file", "mcp__github__search_issues")
    assert getattr(definition, "disallowed_tools", None) == ("write_file", "edit_file")
    assert getattr(definition, "model", None) == "anthropic:claude-opus-4-5"
    assert problems == [  # by line
        "`tools`: Claude Code tool `WebFetch` has no equivalent here; dropped",
        "`tools`: Claude Code tool `WebSearch` has no equivalent here; dropped",
        "`tools`: Claude Code tool `TodoWrite` has no equivalent here; dropped",
        "`tools`: `Bash(git log:*)`: argument rules are not supported; the tool is not given",
        "ignored Claude Code key `color`: subagents does not use it",
        "ignored Claude Code key `permissionMode`: subagents does not use it",
        "ignored Claude Code key `maxTurns`: subagents does not use it",
        "ignored Claude Code key `memory`: subagents does not use it",
        "ignored unknown key `futureKey`",
    ]


def test_a_task_tool_grants_delegation_and_a_rule_in_a_deny_list_denies_the_whole_tool() -> None:
    text = CODE_REVIEWER.replace(
        "tools: Read, Grep, Glob, Bash", "tools: Task, Read, Agent(worker, tester)"
    ).replace("model: inherit", "model: inherit\ndisallowedTools: Bash(rm:*)")
    definition, problems = claude_parse(text)
    assert getattr(definition, "tools", None) == (
        "subagent",
        "subagent_fork",
        "send_message",
        "list_agents",
        "interrupt_agent",
        "read_transcript",
        "read_file",
    )
    assert getattr(definition, "disallowed_tools", None) == ("bash",)
    assert problems == [
        "`tools`: `Agent(worker, tester)`: argument rules are not supported; the tool is not given",
        "`disallowed_tools`: `Bash(rm:*)`: argument rules are not supported; all of Bash is denied",
    ]


def test_an_unknown_alias_skips_the_file_with_its_code() -> None:
    definition, problems = claude_parse(DATA_SCIENTIST.replace("model: sonnet", "model: turbo"))
    assert definition is None
    assert any("unknown model alias 'turbo'" in p and "MODEL_ALIAS_UNKNOWN" in p for p in problems)


def test_our_own_files_keep_refusing_unknown_keys() -> None:
    definition, problems = parse_definition(RESEARCHER, source="x.md", tier="project")
    assert definition is None
    assert any(p.message.startswith("unknown key `futureKey`") for p in problems)


def test_tiers_project_over_user_and_ours_over_claude_codes(tmp_path: Path) -> None:
    cwd, home, claude = tmp_path / "proj", tmp_path / "home", tmp_path / "claude"
    ours = write(
        cwd / ".subagents" / "agents",
        "reviewer.md",
        CODE_REVIEWER.replace("code-reviewer", "reviewer"),
    )
    theirs = write(
        cwd / ".claude" / "agents", "reviewer.md", DEBUGGER.replace("debugger", "reviewer")
    )
    write(cwd / ".claude" / "agents", "debugger.md", DEBUGGER)
    write(home / "agents", "debugger.md", CODE_REVIEWER.replace("code-reviewer", "debugger"))
    user_claude = write(claude / "agents", "data-scientist.md", DATA_SCIENTIST)
    write(claude / "agents", "debugger.md", DEBUGGER)
    found, problems = load_definitions(cwd, home, "default", claude=claude)
    assert {name: d.tier for name, d in found.items()} == {
        "data-scientist": "claude-user",
        "debugger": "claude-project",
        "reviewer": "project",
    }
    assert found["reviewer"].source == str(ours)
    assert found["data-scientist"].source == str(user_claude)
    shadowed = [p for p in problems if "takes precedence" in p.message]
    assert str(theirs) in {p.path for p in shadowed}
    assert len(shadowed) == 3


def test_another_tenant_never_reads_claude_codes_folders(tmp_path: Path) -> None:
    cwd, home, claude = tmp_path / "proj", tmp_path / "home", tmp_path / "claude"
    write(cwd / ".claude" / "agents", "debugger.md", DEBUGGER)
    write(claude / "agents", "debugger.md", DEBUGGER)
    found, problems = load_definitions(cwd, home, "acme", claude=claude)
    assert (found, problems) == ({}, [])


@pytest.mark.parametrize("tier", ["claude-project", "claude-user"])
def test_mcp_servers_key_lists_names_and_inline_servers(tier: str) -> None:
    text = CODE_REVIEWER.replace(
        "model: inherit",
        "model: inherit\nmcpServers:\n  - github\n  - local:\n      command: ./server\n      args: [--x]",
    )
    definition, problems = parse_definition(text, source="x.md", tier=tier)  # type: ignore[arg-type]
    assert problems == []
    assert definition is not None
    assert definition.mcp_servers == ("github", "local")
    assert definition.mcp_inline == {"local": {"command": "./server", "args": ["--x"]}}


async def test_a_claude_file_child_runs_with_mapped_tools_and_its_aliased_model(
    tmp_path: Path,
) -> None:
    child_script = tmp_path / "child.yaml"
    child_script.write_text("data-scientist:\n  - text: the numbers add up\n", encoding="utf-8")
    write(tmp_path / ".claude" / "agents", "data-scientist.md", DATA_SCIENTIST)
    options = DelegationOptions(model_aliases={"sonnet": f"scripted:{child_script}"})
    rt, model = make_runtime(
        "lead:\n  - calls: [{tool: subagent, args: {description: d, prompt: p, "
        "agent: data-scientist}}]\n  - text: done\n",
        delegation=options,
        cwd=str(tmp_path),
    )
    async with rt:
        result = await rt.run("go")
        assert result.output == "done"
        headers = await rt.store.list_headers(tenant="default", roots_only=False)
        child = next(h for h in headers if h.depth == 1)
        header = events(await rt.read_log(child.id), RequestHeader)[0]
    assert header.model == str(child_script)
    assert set(header.tools) >= {"bash", "read_file", "write_file"}
    assert not set(header.tools) & {"edit_file", "grep", "glob", "subagent"}
    assert [r.agent_name for r in model.requests] == ["lead", "lead"]
