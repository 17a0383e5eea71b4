"""Agent definition files (docs/design.md §8): parsing, tiers and
precedence, problems with path and line, and the `subagent` tool's `agent` parameter.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from delegation_support import (
    Lifecycle,
    ToolReply,
    catalog,
    make_runtime,
    replies,
    session_count,
)

from subagents import Budget, DelegationOptions
from subagents.definitions import (
    AgentDefinition,
    DefinitionProblem,
    aload_definitions,
    load_definitions,
    parse_definition,
)
from subagents.delegation._wording import tool_description
from subagents.errors import ErrorCode
from subagents.messages import JsonObject

FULL = """\
---
name: reviewer
description: Reviews a change for bugs.
tools: [read_file, grep]
disallowedTools: bash, write_file
model: " openai:gpt-4o "
context: fork
max_depth: 1
background: false
output_schema:
  type: object
  properties: {verdict: {type: string}}
budget: {tokens: 5000, model_calls: 10, children: 2}
---
You review code.

Be precise.
"""


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def simple(name: str, description: str = "Does things.", body: str = "Do it.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


# -- one file ---------------------------------------------------------------------------------


def test_a_full_definition_parses_every_key() -> None:
    definition, problems = parse_definition(FULL, source="reviewer.md", tier="user")
    assert problems == []
    assert definition == AgentDefinition(
        name="reviewer",
        description="Reviews a change for bugs.",
        body="You review code.\n\nBe precise.",
        tools=("read_file", "grep"),
        disallowed_tools=("bash", "write_file"),
        model="openai:gpt-4o",
        context="fork",
        max_depth=1,
        background=False,
        output_schema={"type": "object", "properties": {"verdict": {"type": "string"}}},
        budget=Budget(tokens=5000, model_calls=10, children=2),
        source="reviewer.md",
        line=2,
        tier="user",
    )


def test_defaults_and_comma_separated_tools() -> None:
    text = "---\nname: helper\ndescription: Helps.\ntools: ' a ,b,, a'\n---\nHelp.\n"
    definition, problems = parse_definition(text, source="helper.md")
    assert problems == []
    assert definition is not None
    assert definition.tools == ("a", "b")
    assert definition.disallowed_tools == ()
    assert (definition.model, definition.context, definition.max_depth) == ("inherit", None, None)
    assert definition.background is True
    assert (definition.output_schema, definition.budget) == (None, None)


def test_claude_code_keys_are_ignored_with_a_warning() -> None:
    text = (
        "---\nname: helper\ndescription: Helps.\ncolor: blue\npermissionMode: plan\n"
        "hooks: {Stop: []}\n---\nHelp.\n"
    )
    definition, problems = parse_definition(text, source="helper.md")
    assert definition is not None
    assert [str(p) for p in problems] == [
        "helper.md:4: ignored Claude Code key `color`: subagents does not use it",
        "helper.md:5: ignored Claude Code key `permissionMode`: subagents does not use it",
        "helper.md:6: ignored Claude Code key `hooks`: subagents does not use it",
    ]
    assert not any(p.skipped for p in problems)


def bad(text: str, line: int | None, message: str) -> pytest.ParameterSet:
    return pytest.param(text, line, message)


HEAD = "---\nname: helper\ndescription: Helps.\n"
MALFORMED = [
    bad("name: helper\n", 1, "no frontmatter: an agent definition starts with a '---' line"),
    bad("", 1, "no frontmatter"),
    bad("---\nname: helper\n", 1, "the frontmatter opened on line 1 is never closed"),
    bad("---\nname: helper\ndescription: [a\n---\nb\n", 3, "invalid YAML: expected ',' or ']'"),
    bad("---\nname: a\n  description: d\n---\nb\n", 3, "invalid YAML: mapping values"),
    bad("---\n---\nbody\n", 2, "the frontmatter is empty"),
    bad("---\n- a\n---\nbody\n", 2, "the frontmatter must be a mapping of keys"),
    bad(HEAD + "colour: blue\n---\nb\n", 4, "unknown key `colour`; the keys are: name,"),
    bad(HEAD + "name: other\n---\nb\n", 4, "key `name` is given twice (first on line 2)"),
    bad("---\ndescription: d\n---\nb\n", 1, "missing required key `name`"),
    bad("---\nname: helper\n---\nb\n", 1, "missing required key `description`"),
    bad(HEAD + "---\n\n  \n", 4, "the definition has no instructions"),
    bad("---\nname: Helper\ndescription: d\n---\nb\n", 2, "invalid agent name 'Helper'"),
    bad("---\nname: lead\ndescription: d\n---\nb\n", 2, "`lead` is reserved"),
    bad("---\nname: 7\ndescription: d\n---\nb\n", 2, "`name` must be non-empty text, got int 7"),
    bad("---\nname: a\ndescription: ''\n---\nb\n", 3, "`description` must be non-empty text"),
    bad(HEAD + "tools: 5\n---\nb\n", 4, "`tools` must be a list of tool names or a comma"),
    bad(HEAD + "tools: [a, 3]\n---\nb\n", 4, "`tools` must name tools as text, got int 3"),
    bad(HEAD + "disallowed_tools: {a: 1}\n---\nb\n", 4, "`disallowed_tools` must be a list"),
    bad(HEAD + "model: fastest\n---\nb\n", 4, "`model`: unknown model alias 'fastest'"),
    bad(HEAD + "model: 3\n---\nb\n", 4, "`model` must be `inherit`, an alias or a model spec"),
    bad(HEAD + "context: thread\n---\nb\n", 4, "`context` must be one of spawn, fork"),
    bad(HEAD + "max_depth: -1\n---\nb\n", 4, "`max_depth` must be an integer >= 0, got int -1"),
    bad(HEAD + "max_depth: two\n---\nb\n", 4, "`max_depth` must be an integer >= 0"),
    bad(HEAD + "max_depth: true\n---\nb\n", 4, "`max_depth` must be an integer >= 0"),
    bad(HEAD + "background: yes please\n---\nb\n", 4, "`background` must be true or false"),
    bad(HEAD + "output_schema: [a]\n---\nb\n", 4, "`output_schema` must be a JSON Schema"),
    bad(HEAD + "output_schema: {type: 5}\n---\nb\n", 4, "`output_schema` is not a valid JSON"),
    bad(HEAD + "budget: 5\n---\nb\n", 4, "`budget` must be a mapping of tokens, model_calls"),
    bad(HEAD + "budget: {tokens: 0}\n---\nb\n", 4, "budget `tokens` must be a positive integer"),
    bad(HEAD + "budget: {turns: 3}\n---\nb\n", 4, "unknown budget key `turns`"),
]


@pytest.mark.parametrize(("text", "line", "message"), MALFORMED)
def test_a_malformed_file_is_a_problem_with_its_line(
    text: str, line: int | None, message: str
) -> None:
    definition, problems = parse_definition(text, source="agents/helper.md")
    assert definition is None
    errors = [p for p in problems if p.skipped]
    assert errors, problems
    assert errors[0].path == "agents/helper.md"
    assert (errors[0].line, errors[0].message[: len(message)]) == (line, message)
    assert str(errors[0]).startswith(f"agents/helper.md:{line}: {message}")
    assert str(errors[0]).endswith("; the file is skipped")


def test_every_problem_of_a_file_is_reported_in_line_order() -> None:
    text = HEAD + "colour: blue\nmax_depth: -2\ncolor: red\ncontext: x\n---\nb\n"
    _, problems = parse_definition(text, source="h.md")
    assert [(p.line, p.skipped) for p in problems] == [(4, True), (5, True), (6, False), (7, True)]


# -- tiers ------------------------------------------------------------------------------------


def test_the_project_tier_wins_and_the_shadowed_user_file_is_reported(tmp_path: Path) -> None:
    project = tmp_path / "repo" / ".subagents" / "agents"
    home = tmp_path / "home"
    mine = write(project, "reviewer.md", simple("reviewer", "Project reviewer."))
    user = simple("reviewer", "User reviewer.").replace("---\n", "---\n# a copy\n", 1)
    theirs = write(home / "agents", "reviewer.md", user)
    write(home / "agents", "writer.md", simple("writer"))
    write(home / "agents", "notes.txt", "not a definition")
    found, problems = load_definitions(tmp_path / "repo", home, "default")
    assert list(found) == ["reviewer", "writer"]
    assert found["reviewer"].description == "Project reviewer."
    assert (found["reviewer"].tier, found["writer"].tier) == ("project", "user")
    assert found["reviewer"].source == str(mine)
    assert problems == [
        DefinitionProblem(
            str(theirs),
            3,
            f'agent "reviewer" is also defined by the project file {mine}, which takes precedence',
        )
    ]


def test_a_duplicate_name_within_a_tier_skips_the_later_file(tmp_path: Path) -> None:
    agents = tmp_path / "home" / "agents"
    first = write(agents, "a.md", simple("helper", "First."))
    second = write(agents, "b.md", simple("helper", "Second."))
    found, problems = load_definitions(tmp_path / "repo", tmp_path / "home", "default")
    assert found["helper"].description == "First."
    assert [str(p) for p in problems] == [
        f'{second}:2: duplicate agent name "helper": {first} already defines it in this tier; '
        "the file is skipped"
    ]


def test_malformed_files_are_skipped_and_the_rest_load(tmp_path: Path) -> None:
    agents = tmp_path / "repo" / ".subagents" / "agents"
    broken = write(agents, "broken.md", "---\nname: broken\ndescription: [\n---\nb\n")
    write(agents, "good.md", simple("good"))
    latin = agents / "latin.md"
    latin.write_bytes("---\nname: caf\xe9\n".encode("latin-1"))
    found, problems = load_definitions(tmp_path / "repo", tmp_path / "home", "default")
    assert list(found) == ["good"]
    assert [(p.path, p.line) for p in problems] == [(str(broken), 3), (str(latin), 1)]
    assert problems[1].message == "not UTF-8 text"


def test_another_tenant_reads_only_its_own_directory(tmp_path: Path) -> None:
    repo, home = tmp_path / "repo", tmp_path / "home"
    write(repo / ".subagents" / "agents", "project.md", simple("project-agent"))
    write(home / "agents", "user.md", simple("user-agent"))
    write(home / "tenants" / "acme" / "agents", "acme.md", simple("acme-agent"))
    write(home / "tenants" / "other" / "agents", "other.md", simple("other-agent"))
    found, problems = load_definitions(repo, home, "acme")
    assert (list(found), problems) == (["acme-agent"], [])
    assert found["acme-agent"].tier == "tenant"
    assert list(load_definitions(repo, home, "default")[0]) == ["project-agent", "user-agent"]
    assert load_definitions(repo, home, "nobody") == ({}, [])


@pytest.mark.parametrize("tenant", ["../other", "..", "a/b", ""])
def test_a_tenant_that_is_not_one_path_segment_loads_nothing(tmp_path: Path, tenant: str) -> None:
    home = tmp_path / "home"
    write(home / "tenants" / "other" / "agents", "other.md", simple("other-agent"))
    found, problems = load_definitions(tmp_path, home, tenant)
    assert found == {}
    assert len(problems) == 1
    assert "cannot name a directory; no definitions loaded" in problems[0].message


async def test_loading_from_async_code_runs_off_the_event_loop(tmp_path: Path) -> None:
    write(tmp_path / ".subagents" / "agents", "helper.md", simple("helper"))
    found, problems = await aload_definitions(tmp_path, tmp_path / "home", "default")
    assert (list(found), problems) == (["helper"], [])


# -- the runtime and the tool -----------------------------------------------------------------


async def test_the_runtime_loads_its_tenants_definitions_on_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("SUBAGENTS_HOME", str(home))
    write(tmp_path / ".subagents" / "agents", "reviewer.md", simple("reviewer", "Reviews code."))
    broken = write(home / "agents", "broken.md", "---\nname: broken\n")
    rt, _ = make_runtime("{}", cwd=str(tmp_path))
    async with rt:
        assert list(rt.definitions) == ["reviewer"]
        assert [(p.path, p.line) for p in rt.definition_problems] == [(str(broken), 1)]
        assert f"{broken}:1: the frontmatter opened on line 1 is never closed" in caplog.text
        spec = rt.tools.get("subagent")
        assert spec is not None
        assert spec.description.endswith("\n- reviewer: Reviews code.")
        assert spec.parameters["properties"]["agent"]["enum"] == ["reviewer"]


def definitions(*items: AgentDefinition) -> DelegationOptions:
    return DelegationOptions(definitions={d.name: d for d in items})


def agent_def(name: str, **fields: object) -> AgentDefinition:
    base = AgentDefinition(name=name, description=f"The {name}.", body=f"You are the {name}.")
    return dataclasses.replace(base, **fields)


async def test_without_definitions_the_tool_is_unchanged() -> None:
    rt, _ = make_runtime("{}", delegation=DelegationOptions(definitions={}))
    async with rt:
        spec = rt.tools.get("subagent")
        assert spec is not None
        assert spec.description == tool_description(
            inherits=False, background=True, continuable=True
        )
        assert "agent" not in spec.parameters["properties"]


async def test_the_tools_list_the_definitions_they_can_start() -> None:
    options = definitions(
        agent_def("reviewer"),
        agent_def("planner", context="fork", background=False),
        agent_def("fresh", context="spawn"),
    )
    rt, _ = make_runtime("{}", delegation=options)
    async with rt:
        spawn, fork = rt.tools.get("subagent"), rt.tools.get("subagent_fork")
        assert spawn is not None
        assert fork is not None
        assert spawn.description.split("\n")[-3:] == [
            "- reviewer: The reviewer.",
            "- planner (inherits this conversation) (foreground only): The planner.",
            "- fresh: The fresh.",
        ]
        assert fork.description.split("\n")[-2:] == [
            "- reviewer: The reviewer.",
            "- planner (foreground only): The planner.",
        ]
        # Loaded again: the wording follows.
        rt.subagents.set_definitions({"solo": agent_def("solo")})
        spawn = rt.tools.get("subagent")
        assert spawn is not None
        assert spawn.description.endswith("\n- solo: The solo.")


def refused(args: JsonObject, expected: str, code: ErrorCode, *, tool: str = "subagent") -> object:
    return pytest.param(tool, args, expected, code, id=expected[:40])


OK: JsonObject = {"description": "Review", "prompt": "Review app.py"}
BAD_AGENT = [
    refused(
        {**OK, "agent": "ghost"},
        'Error: unknown agent definition "ghost"; the definitions are: reviewer, planner, '
        "fresh, pinned, sync",
        ErrorCode.UNKNOWN_DEFINITION,
    ),
    refused(
        {**OK, "agent": "fresh"},
        'Error: agent definition "fresh" declares `context: spawn` (a fresh context), so '
        "subagent_fork cannot start it; call subagent with a self-contained prompt",
        ErrorCode.USAGE,
        tool="subagent_fork",
    ),
    refused(
        {**OK, "agent": "sync", "run_in_background": True},
        'Error: agent definition "sync" may not run in the background (`background: false`); '
        "call without run_in_background to wait for its answer",
        ErrorCode.BACKGROUND_DISABLED,
    ),
    refused(
        {**OK, "agent": "pinned"},
        'Error: agent definition "pinned" asks for model "scripted:/nonexistent/pinned.yaml", '
        "which cannot be opened: cannot read the model script '/nonexistent/pinned.yaml': No "
        "such file or directory; pass an existing YAML file as --model scripted:PATH",
        ErrorCode.SCRIPT_UNREADABLE,
    ),
    refused(
        {**OK, "agent": 3},
        "Error: invalid arguments: agent: 3 is not of type 'string'",
        ErrorCode.INVALID_ARGS,
    ),
]


@pytest.mark.parametrize(("tool", "args", "expected", "code"), BAD_AGENT)
async def test_a_bad_agent_argument_is_an_error_result_and_starts_nothing(
    tool: str, args: JsonObject, expected: str, code: ErrorCode
) -> None:
    options = definitions(
        agent_def("reviewer"),
        agent_def("planner", context="fork"),
        agent_def("fresh", context="spawn"),
        agent_def("pinned", model="scripted:/nonexistent/pinned.yaml", source="pinned.md"),
        agent_def("sync", background=False),
    )
    rt, model = make_runtime(
        f"lead:\n  - calls: [{{tool: {tool}, args: {json.dumps(args)}}}]\n  - text: fixed\n",
        delegation=options,
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [ToolReply(tool, expected, True, code)]
        assert result.output == "fixed"
        assert await session_count(rt) == 1
        assert catalog(lead) == []
        assert lifecycle.events == []
    model.assert_complete()


async def test_a_definition_naming_unknown_tools_is_refused_at_start() -> None:
    options = definitions(
        agent_def("typo", tools=("task_lst",), disallowed_tools=("Bash",), source="typo.md")
    )
    rt, model = make_runtime(
        "lead:\n  - calls: [{tool: subagent, args: {description: d, prompt: p, agent: typo}}]\n"
        "  - text: ok\n",
        delegation=options,
    )
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        [reply] = replies(lead)
        assert (reply.is_error, reply.code) == (True, ErrorCode.CONFIG)
        assert reply.content.startswith(
            'Error: agent definition "typo" (typo.md) names tools this runtime does not have: '
            "task_lst, Bash; the tools are: bash, edit_file, glob, grep, interrupt_agent, "
            "list_agents, read_file, read_transcript, send_message, "
        )
        assert reply.content.endswith(". Fix the definition's tools or disallowed_tools")
        assert await session_count(rt) == 1
    model.assert_complete()


async def test_agent_is_refused_when_no_definitions_are_loaded() -> None:
    rt, model = make_runtime(
        "lead:\n  - calls: [{tool: subagent, args: {description: d, prompt: p, agent: x}}]\n"
        "  - text: ok\n",
        delegation=DelegationOptions(definitions={}),
    )
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [
            ToolReply(
                "subagent",
                'Error: unknown agent definition "x"; the definitions are: none are loaded',
                True,
                ErrorCode.UNKNOWN_DEFINITION,
            )
        ]
        assert await session_count(rt) == 1
    model.assert_complete()


async def test_a_matching_model_is_accepted() -> None:
    options = definitions(agent_def("pinned", model="scripted:s.yaml"))
    rt, model = make_runtime(
        "lead:\n  - calls: [{tool: subagent, args: {description: d, prompt: p, agent: pinned}}]\n"
        "  - text: ok\npinned:\n  - text: pinned answer\n",
        delegation=options,
    )
    rt.model_spec = "scripted:s.yaml"
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [ToolReply("subagent", "pinned answer", False, None)]
    model.assert_complete()


@pytest.mark.parametrize(
    ("line", "expected"),
    [("", None), ("tools:\n", None), ("tools: []\n", ()), ("tools: ''\n", ())],
    ids=["absent", "blank", "empty-list", "empty-string"],
)
def test_an_empty_tools_list_means_none_and_no_key_means_all(
    line: str, expected: tuple[str, ...] | None
) -> None:
    text = f"---\nname: helper\ndescription: Helps.\n{line}---\nHelp.\n"
    definition, problems = parse_definition(text, source="helper.md")
    assert problems == []
    assert definition is not None
    assert definition.tools == expected


async def test_a_child_from_a_definition_with_tools_empty_gets_no_tools(tmp_path: Path) -> None:
    agents = tmp_path / ".subagents" / "agents"
    write(agents, "bare.md", "---\nname: bare\ndescription: No tools.\ntools: []\n---\nBare.\n")
    write(agents, "full.md", simple("full", "All tools."))
    rt, model = make_runtime(
        "lead:\n  - calls:\n"
        "      - {tool: subagent, args: {description: d, prompt: p, agent: bare}}\n"
        "      - {tool: subagent, args: {description: d, prompt: p, agent: full}}\n"
        "  - text: ok\nbare:\n  - text: bare done\nfull:\n  - text: full done\n",
        cwd=str(tmp_path),
    )
    async with rt:
        await rt.run("go")
    [bare] = model.requests_of("bare")
    [full] = model.requests_of("full")
    assert [t.name for t in bare.tools] == []
    lead_tools = {t.name for t in model.requests_of("lead")[0].tools}
    assert {t.name for t in full.tools} == lead_tools
    model.assert_complete()
