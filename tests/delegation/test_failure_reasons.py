"""A failed child's parent learns why: the child's error code, one line of reason, and
whether retrying may help, in a foreground call's error and in a settlement notice.

The transient failure comes from the real `openai` SDK against a chat-completions server
on loopback that answers 503.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from chat_server import ChatServer, error_reply, finish_chunk, stream_reply, text_chunk, tool_chunk
from continuable_support import Settlements
from delegation_support import inputs, make_runtime, replies

from subagents.delegation import DelegationRuntime
from subagents.errors import ErrorCode
from subagents.models import OpenAICompatModel
from subagents.sessions import TurnEnd
from subagents.testing import InMemoryEventStore


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


async def test_a_transient_failure_says_its_code_reason_and_that_a_retry_may_help(
    chat_server: ChatServer,
) -> None:
    call = json.dumps({"name": "helper", "description": "Help", "prompt": "Help"})
    chat_server.enqueue(
        stream_reply(
            tool_chunk(0, id="call-1", name="subagent", arguments=call),
            finish_chunk("tool_calls"),
        ),
        error_reply(503, "the server is overloaded"),
        stream_reply(text_chunk("I will try again later."), finish_chunk("stop")),
    )
    model = OpenAICompatModel(
        "test-model", base_url=chat_server.base_url, api_key="k", max_retries=0
    )
    async with DelegationRuntime(model=model, store=InMemoryEventStore()) as rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        [reply] = replies(lead)
    assert result.output == "I will try again later."
    assert reply.code == ErrorCode.TOOL_FAILED
    assert reply.is_error
    headline, diagnostic = reply.content.splitlines()
    assert headline == "Error: subagent run failed"
    assert diagnostic.startswith("Diagnostic: SERVER: ")
    assert "(503)" in diagnostic
    assert diagnostic.endswith("(transient: retrying may help)")


async def test_a_permanent_failure_says_a_retry_will_not_help_in_the_notice() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent, args: {name: helper, description: Help, prompt: Help,
                                run_in_background: true}}
  - text: Started.
  - text: Noted.
helper:
  - error: the request was malformed
"""
    )
    async with rt:
        settled = Settlements(rt)
        lead = await rt.create_agent()
        await rt.run("go", agent=lead)
        await settled.reached(1)
        await rt.wait_quiescent()
        [notice] = [e.message.text for e in inputs(lead.session.records)][1:]
    opening, diagnostic, *_ = notice.splitlines()
    assert opening == "Background subagent helper failed before it finished."
    assert diagnostic == (
        "Diagnostic: MODEL_ERROR: the request was malformed "
        "(retrying will not help until the cause is fixed)"
    )
    model.assert_complete()


async def test_the_turn_end_records_whether_the_failure_was_transient() -> None:
    rt, _ = make_runtime("lead:\n  - error: boom\n")
    async with rt:
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        [end] = [r.event for r in lead.session.records if isinstance(r.event, TurnEnd)]
    assert (end.reason, end.error_code, end.retryable) == ("error", "MODEL_ERROR", False)
    assert result.error_code == "MODEL_ERROR"


def test_a_reason_is_one_line() -> None:
    from subagents.delegation._results import one_line

    assert one_line("first\n  second\tthird") == "first second third"
    assert one_line("x" * 400, limit=10) == "x" * 9 + "…"
