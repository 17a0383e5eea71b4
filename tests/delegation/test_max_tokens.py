"""A cap on each model response: in the config, per definition and per run, on every call.

The end-to-end test sends through the real `openai` SDK to a chat-completions server on
loopback and reads the bodies it received.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_server import ChatServer, finish_chunk, stream_reply, text_chunk, tool_chunk
from delegation_support import context_of, make_runtime

from subagents import DelegationOptions
from subagents.definitions import AgentDefinition, parse_definition
from subagents.delegation import DelegationRuntime
from subagents.errors import ErrorCode, UsageError
from subagents.models import OpenAICompatModel
from subagents.sessions import SqliteEventStore
from subagents.testing import InMemoryEventStore

TREE = """
lead:
  - calls:
      - {tool: subagent, args: {name: helper, description: Help, prompt: Help}}
      - {tool: subagent, args: {name: terse, description: Terse, prompt: Be brief, agent: terse}}
  - text: done
helper:
  - text: helped
terse:
  - calls: [{tool: subagent, args: {name: sub, description: Sub, prompt: Go}}]
  - text: brief
terse/sub:
  - text: sub done
"""
TERSE = AgentDefinition(name="terse", description="Brief.", body="Be brief.", max_tokens=50)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def caps(model: Any, name: str) -> list[int | None]:
    return [r.max_tokens for r in model.requests_of(name)]


async def test_the_config_the_definition_and_the_run_set_the_cap() -> None:
    options = DelegationOptions(max_tokens=300, definitions={"terse": TERSE})
    rt, model = make_runtime(TREE + "  - text: again\n", delegation=options)
    async with rt:
        lead = await rt.create_agent()
        await rt.run("go", agent=lead)
        assert lead.config.max_tokens == 300
    assert caps(model, "lead") == [300, 300]
    assert caps(model, "helper") == [300]  # a child takes its parent's cap
    assert caps(model, "terse") == [50, 50]  # a definition's own cap replaces it
    assert caps(model, "terse/sub") == [50]  # and its children take that one
    assert "Each of your responses may be at most 300 tokens long." in context_of(
        model.requests_of("lead")[0]
    )
    assert "at most 50 tokens" in context_of(model.requests_of("terse")[0])


async def test_a_runs_cap_holds_for_that_run_only() -> None:
    script = """
lead:
  - calls: [{tool: subagent, args: {name: helper, description: Help, prompt: Help}}]
  - text: first
  - text: second
helper:
  - text: helped
"""
    rt, model = make_runtime(script, delegation=DelegationOptions(max_tokens=300))
    async with rt:
        lead = await rt.create_agent()
        await rt.run("go", agent=lead, max_tokens=40)
        await rt.run("again", agent=lead)
    assert caps(model, "lead") == [40, 40, 300]
    assert caps(model, "helper") == [40]
    first, _, last = model.requests_of("lead")
    assert "at most 40 tokens" in context_of(first)
    assert "at most 300 tokens" in context_of(last)  # told again: the old one no longer holds


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "100"])
async def test_a_bad_cap_is_refused_and_changes_nothing(bad: object) -> None:
    with pytest.raises(UsageError) as caught:
        DelegationOptions(max_tokens=bad)  # pyright: ignore[reportArgumentType]
    assert caught.value.code == ErrorCode.USAGE
    assert "max_tokens must be a whole number of at least 1" in caught.value.message
    rt, _ = make_runtime("lead:\n  - text: never\n")
    async with rt:
        with pytest.raises(UsageError) as run_caught:
            await rt.run("go", max_tokens=bad)  # pyright: ignore[reportArgumentType]
        assert run_caught.value.code == ErrorCode.USAGE
        assert await rt.store.list_headers(tenant=rt.tenant, roots_only=False) == []


def test_a_definition_states_its_cap_in_its_frontmatter() -> None:
    text = "---\nname: terse\ndescription: Brief.\nmax_tokens: 64\n---\nBe brief.\n"
    definition, problems = parse_definition(text, source="terse.md")
    assert problems == []
    assert definition is not None
    assert definition.max_tokens == 64
    bad, found = parse_definition(text.replace("64", "0"), source="terse.md")
    assert bad is None
    assert [p.line for p in found] == [4]
    assert "max_tokens" in found[0].message


async def test_every_call_sends_the_cap_to_the_server(chat_server: ChatServer) -> None:
    call = json.dumps({"name": "helper", "description": "Help", "prompt": "Help"})
    chat_server.enqueue(
        stream_reply(
            tool_chunk(0, id="call-1", name="subagent", arguments=call),
            finish_chunk("tool_calls"),
        ),
        stream_reply(text_chunk("helped"), finish_chunk("stop")),
        stream_reply(text_chunk("done"), finish_chunk("stop")),
    )
    model = OpenAICompatModel("test-model", base_url=chat_server.base_url, api_key="k")
    async with DelegationRuntime(
        model=model, store=InMemoryEventStore(), delegation=DelegationOptions(max_tokens=77)
    ) as runtime:
        result = await runtime.run("go")
    assert result.output == "done"
    assert [body["max_tokens"] for body in chat_server.bodies] == [77, 77, 77]


async def test_a_resumed_agent_keeps_its_cap_around_a_capped_run(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    script = "lead:\n  - text: one\n  - text: two\n  - text: three\n"
    options = DelegationOptions(max_tokens=300, definitions={"terse": TERSE})
    rt, _ = make_runtime(script, store=SqliteEventStore(path), delegation=options)
    async with rt:
        lead = await rt.create_agent_from("terse")
        await rt.run("first", agent=lead)
    # A new process: the definition is not even loaded; the cap it started with is recorded.
    rt2, model = make_runtime(
        script, store=SqliteEventStore(path), delegation=DelegationOptions(max_tokens=300)
    )
    async with rt2:
        resumed = await rt2.resume_agent(lead.id)
        await rt2.run("second", agent=resumed, max_tokens=40)
        await rt2.run("third", agent=resumed)
    assert caps(model, "lead") == [40, 50]
    assert "at most 50 tokens" in context_of(model.requests_of("lead")[-1])
