"""Spec texts the model must read (issue 11): its file policy (spec workflow-sandbox 6.2), and
the wording of a cancelled or empty child run (spec subagents 5.4, 7.6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from delegation_support import Gates, ToolReply, context_of, conversation, make_runtime, replies

from subagents import DelegationOptions, Runtime
from subagents.core import AgentConfig
from subagents.core._agent import CONTEXT_OPENING
from subagents.delegation._wording import (
    CANCELLED_TEXT,
    DELEGATION,
    FILE_POLICY,
    NO_OUTPUT_TEXT,
    RUNTIME_GUIDANCE,
    STRUCTURED_OUTPUT,
    failure_headline,
    file_policy_statement,
    told,
    with_recorded_prompt,
)
from subagents.errors import ErrorCode
from subagents.policy import SandboxMode
from subagents.testing import FakeClock, InMemoryEventStore, RecordingModel

TWO_TURNS = """\
lead:
  - calls: [{tool: subagent, args: {description: d, prompt: p, name: kid}}]
  - text: first
  - text: second
kid:
  - text: kid done
"""


def policy_paragraphs(system: str) -> list[str]:
    return [p for p in system.split("\n\n") if p.startswith("Current file policy: ")]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "read-only",
            "Current file policy: read-only. Files cannot be modified here; if the task needs a "
            "change, do not refuse it from this policy alone: try the tool and follow what its "
            "denial says.",
        ),
        (
            "workspace-write",
            'Current file policy: workspace-write. You may modify files under the workspace "/w '
            'x"; some temporary areas of the platform may be writable too.',
        ),
        (
            "danger-full-access",
            "Current file policy: danger-full-access. The file sandbox does not restrict "
            "modifications.",
        ),
    ],
)
def test_one_sentence_per_mode(mode: SandboxMode, expected: str) -> None:
    assert file_policy_statement(mode, "/w x") == expected


def test_the_policy_paragraph_is_replaced_in_place() -> None:
    child = told(AgentConfig(name="kid", instructions="Body."), DELEGATION, "You are kid.")
    child = told(child, STRUCTURED_OUTPUT, "Return JSON.")
    policy = told(child, FILE_POLICY, "Current file policy: read-only. A.")
    # Not in the system prompt: in the runtime context, the answer's instruction last.
    assert policy.system_prompt == "Body."
    assert policy.context_text == (
        f"{CONTEXT_OPENING}\n\nYou are kid.\n\nCurrent file policy: read-only. A.\n\nReturn JSON."
    )
    switched = told(policy, FILE_POLICY, "Current file policy: danger-full-access. B.")
    assert policy_paragraphs(switched.context_text) == [
        "Current file policy: danger-full-access. B."
    ]
    assert switched.instructions == "Body."  # what its own children inherit
    root = told(
        AgentConfig(instructions="Root."), FILE_POLICY, "Current file policy: read-only. A."
    )
    assert root.context_text == f"{CONTEXT_OPENING}\n\nCurrent file policy: read-only. A."


def test_a_recorded_prompt_gives_back_the_own_instructions_it_began_with() -> None:
    """A re-run after a crash says exactly what it said; its own part is what its children
    inherit, so a grandchild is not told its parent's instructions as the runtime's."""
    config = told(AgentConfig(name="kid"), DELEGATION, "You are kid.")
    recorded = f"{RUNTIME_GUIDANCE}\n\nYou review code."
    restored = with_recorded_prompt(config, recorded)
    assert restored.system_prompt == recorded
    assert (restored.preamble, restored.instructions) == (RUNTIME_GUIDANCE, "You review code.")
    assert restored.context == config.context  # where it stands is told apart
    # A prompt without the runtime's preamble is kept whole as its instructions.
    other = with_recorded_prompt(config, "Something else entirely.")
    assert (other.preamble, other.instructions) == ("", "Something else entirely.")
    assert other.system_prompt == "Something else entirely."


async def test_root_and_child_are_told_their_policy_and_a_switch(tmp_path: Path) -> None:
    rt, model = make_runtime(TWO_TURNS, cwd=str(tmp_path))
    workspace = json.dumps(str(tmp_path))
    async with rt:
        lead = await rt.create_agent()
        await rt.run("go", agent=lead)
        rt.set_sandbox_mode(lead, "read-only")
        await rt.run("again", agent=lead)
    first, second, third = model.requests_of("lead")
    assert policy_paragraphs(context_of(first)) == [
        "Current file policy: workspace-write. You may modify files under the workspace "
        f"{workspace}; some temporary areas of the platform may be writable too."
    ]
    assert first.system == second.system == third.system  # never in the system prompt
    # The switch reaches the next request as a new runtime context that supersedes the old.
    assert policy_paragraphs(context_of(third)) == [
        file_policy_statement("read-only", str(tmp_path))
    ]
    told_lead = [m for m in third.messages if m not in conversation(third)]
    assert len(told_lead) == 2
    assert len([m for m in second.messages if m not in conversation(second)]) == 1
    # The child is told its own (inherited) policy once, after its delegation statement.
    [kid] = model.requests_of("kid")
    paragraphs = context_of(kid).split("\n\n")
    assert policy_paragraphs(context_of(kid)) == [policy_paragraphs(context_of(first))[0]]
    assert paragraphs[1].startswith('You are the delegated subagent "kid"')
    assert kid.system == first.system
    model.assert_complete()


async def test_a_read_only_runtime_tells_read_only(tmp_path: Path) -> None:
    model = RecordingModel.from_yaml("lead:\n  - text: ok\n", clock=FakeClock())
    assert isinstance(model, RecordingModel)
    rt = Runtime(
        model=model,
        store=InMemoryEventStore(),
        cwd=str(tmp_path),
        sandbox="read-only",
        delegation=DelegationOptions(definitions={}),
    )
    async with rt:
        await rt.run("go")
    [request] = model.requests_of("lead")
    assert policy_paragraphs(context_of(request)) == [
        file_policy_statement("read-only", str(tmp_path))
    ]


def test_child_outcome_texts_are_the_spec_s() -> None:
    assert failure_headline("aborted") == CANCELLED_TEXT == "subagent run was cancelled"
    assert NO_OUTPUT_TEXT == "subagent completed but returned no output"


HELD_KID = """\
lead:
  - calls: [{tool: subagent, args: {description: d, prompt: "do it", name: kid}}]
  - text: done
kid:
  - calls: [{tool: hold, args: {label: a}}]
  - text: "{text}"
"""


async def test_a_foreground_child_cancelled_with_its_parent_reads_cancelled() -> None:
    gates = Gates()
    rt, _ = make_runtime(HELD_KID.replace("{text}", "never"), tools=[gates.tool()])
    async with rt:
        lead = await rt.create_agent()
        await lead.send("go")
        await gates.started("a").wait()
        await lead.cancel()
        await lead.when_idle()
        assert replies(lead) == [
            ToolReply("subagent", f"Error: {CANCELLED_TEXT}", True, ErrorCode.ABORTED)
        ]


async def test_a_child_completing_without_text_reads_no_output() -> None:
    gates = Gates()
    rt, _ = make_runtime(HELD_KID.replace("{text}", ""), tools=[gates.tool()])
    async with rt:
        lead = await rt.create_agent()
        await lead.send("go")
        await gates.started("a").wait()
        gates.release("a")
        await lead.when_idle()
        assert replies(lead) == [
            ToolReply("subagent", f"Error: {NO_OUTPUT_TEXT}", True, ErrorCode.TOOL_FAILED)
        ]
