"""The host bindings, driven directly (docs/design.md §9: the
guest is hostile, and the host enforces the caps too).

No guest process here: the tests call the bindings as the guest would, with the hostile inputs
of note N0, and a starter whose children they control.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from subagents._task_owner import TaskOwner
from subagents.errors import ErrorCode, WorkflowError
from subagents.messages import JsonValue
from subagents.workflows import (
    AbortSignal,
    WorkflowAgentEnded,
    WorkflowAgentStarted,
    WorkflowEvent,
    WorkflowLogged,
    WorkflowMeta,
    WorkflowPhaseStarted,
    WorkflowRunInfo,
)
from subagents.workflows._host import (
    ChildOutcome,
    ChildRequest,
    HostLimits,
    WorkflowHost,
)

T = TypeVar("T")
LIMITS = HostLimits(
    max_concurrent_agents=4, max_total_agents=10, max_items_per_call=100, sync_timeout_ms=1000
)
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"answer": {"type": "number"}}}


class FakeChild:
    def __init__(self, child_id: str) -> None:
        self.child_id = child_id
        self.result: asyncio.Future[ChildOutcome] = asyncio.get_running_loop().create_future()
        self.disposals = 0
        self.waiting = asyncio.Event()
        self.disposing = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()
        self.fail_dispose = False

    async def wait(self) -> ChildOutcome:
        self.waiting.set()
        return await asyncio.shield(self.result)

    async def dispose(self) -> None:
        self.disposals += 1
        self.disposing.set()
        await self.release.wait()
        if self.fail_dispose:
            raise RuntimeError("dispose exploded")


class FakeStarter:
    def __init__(self) -> None:
        self.requests: list[tuple[ChildRequest, int]] = []
        self.children: list[FakeChild] = []
        self.gate: asyncio.Future[None] | None = None
        self.entered = asyncio.Event()
        self.error: Exception | None = None

    async def __call__(self, request: ChildRequest, *, call_id: int) -> FakeChild:
        self.requests.append((request, call_id))
        self.entered.set()
        if self.gate is not None:
            await self.gate
        if self.error is not None:
            raise self.error
        child = FakeChild(f"child-{call_id}")
        self.children.append(child)
        return child


class Harness:
    def __init__(self, limits: HostLimits = LIMITS) -> None:
        self.abort = AbortSignal()
        self.events: list[WorkflowEvent] = []
        self.starter = FakeStarter()
        self.owner = TaskOwner("test calls")
        self.host = WorkflowHost(
            info=WorkflowRunInfo("run-1", WorkflowMeta(name="host-test", description="d")),
            body="return None",
            args={"files": ["a.py"]},
            limits=limits,
            starter=self.starter,
            abort=self.abort,
            emit=self.events.append,
        )

    async def call(self, name: str, value: JsonValue) -> JsonValue:
        return await self.host.bindings[name](value)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        return self.owner.spawn(coro)


async def turns(count: int = 20) -> None:
    """Give every ready task some turns of the loop (no time passes)."""
    for _ in range(count):
        await asyncio.sleep(0)


async def rejection(call: Any) -> WorkflowError:
    with pytest.raises(WorkflowError) as caught:
        await call
    return caught.value


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("startChild", None, "requires an object"),
        ("startChild", [], "requires an object"),
        ("startChild", {"prompt": 7}, "prompt must be a string"),
        ("startChild", {"prompt": "p", "provider": 7}, "provider must be a string"),
        ("startChild", {"prompt": "p", "model": False}, "model must be a string"),
        ("progress", {}, "requires an array of events"),
        ("progress", [{"type": "phase", "title": None}], "phase must be a string"),
        ("progress", [{"type": "agent-start", "info": {"seq": 0}}], "sequence must be a positive"),
        (
            "progress",
            [{"type": "agent-end", "info": {"outcome": "x"}}],
            "invalid workflow agent outcome",
        ),
        ("progress", [{"type": "unknown"}], "invalid workflow progress event"),
        ("childResult", {"callId": "1"}, "call id must be an integer"),
        ("disposeChild", {"callId": 99}, "child call is not active"),
    ],
)
async def test_malformed_callback_data_is_rejected_with_the_spec_text(
    name: str, value: JsonValue, message: str
) -> None:
    harness = Harness()
    error = await rejection(harness.call(name, value))
    assert message in error.message
    assert harness.events == []
    assert harness.starter.requests == []


async def test_the_exact_binding_messages() -> None:
    harness = Harness()
    texts = [
        (await rejection(harness.call("startChild", None))).message,
        (await rejection(harness.call("startChild", {"prompt": 7}))).message,
        (await rejection(harness.call("progress", [{"type": "log", "message": 1}]))).message,
        (
            await rejection(harness.call("progress", [{"type": "agent-start", "info": {"seq": 1}}]))
        ).message,
        (await rejection(harness.call("childResult", {"callId": 1}))).message,
    ]
    assert texts == [
        "workflow binding requires an object",
        "workflow prompt must be a string",
        "workflow log must be a string",
        "workflow agent label must be a string",
        "workflow child call is not active",
    ]


async def test_start_child_checks_the_schema_subset_and_starts_nothing() -> None:
    harness = Harness()
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}
    error = await rejection(harness.call("startChild", {"prompt": "p", "schema": schema}))
    assert error.code == ErrorCode.UNSUPPORTED_SCHEMA
    assert error.message == (
        "workflow schema is outside the supported subset — schema.properties.a: keyword "
        '"pattern" is not supported (supported: type, properties, required, '
        "additionalProperties, items, enum, const, oneOf)"
    )
    not_object = await rejection(harness.call("startChild", {"prompt": "p", "schema": [1]}))
    assert not_object.message == "workflow binding requires an object"
    assert harness.starter.requests == []
    assert harness.host.agents_started == 0


async def test_begin_hands_out_the_script_once() -> None:
    harness = Harness()
    init = await harness.call("begin", {})
    assert init == {
        "meta": {"name": "host-test", "description": "d"},
        "body": "return None",
        "args": {"files": ["a.py"]},
        "limits": {
            "maxConcurrentAgents": 4,
            "maxTotalAgents": 10,
            "maxItemsPerCall": 100,
            "syncTimeoutMs": 1000,
        },
    }
    again = await rejection(harness.call("begin", {}))
    assert again.message == "workflow begin may only be called once"


async def test_a_child_starts_reports_its_result_and_is_disposed() -> None:
    harness = Harness()
    started = await harness.call("startChild", {"prompt": "answer", "schema": SCHEMA, "model": "m"})
    assert started == {"callId": 1, "childId": "child-1"}
    [(request, call_id)] = harness.starter.requests
    assert (request, call_id) == (
        ChildRequest(prompt="answer", schema=SCHEMA, model="m"),
        1,
    )
    child = harness.starter.children[0]
    child.result.set_result(
        ChildOutcome(output="", stop_reason="completed", structured={"answer": 42})
    )
    result = await harness.call("childResult", {"callId": 1})
    assert result == {"output": [], "structured": {"answer": 42}, "stopReason": "completed"}
    assert await harness.call("disposeChild", {"callId": 1}) is None
    assert child.disposals == 1
    gone = await rejection(harness.call("childResult", {"callId": 1}))
    assert gone.message == "workflow child call is not active"


async def test_a_text_result_is_projected_as_text_blocks() -> None:
    harness = Harness()
    await harness.call("startChild", {"prompt": "p"})
    harness.starter.children[0].result.set_result(
        ChildOutcome(output="hello", stop_reason="completed")
    )
    assert await harness.call("childResult", {"callId": 1}) == {
        "output": [{"type": "text", "text": "hello"}],
        "stopReason": "completed",
    }
    assert harness.starter.requests[0][0] == ChildRequest(prompt="p")  # no overrides


async def test_call_ids_follow_start_order() -> None:
    harness = Harness()
    first = await harness.call("startChild", {"prompt": "a"})
    second = await harness.call("startChild", {"prompt": "b"})
    assert [first, second] == [
        {"callId": 1, "childId": "child-1"},
        {"callId": 2, "childId": "child-2"},
    ]


async def test_a_failed_start_rejects_counts_its_call_id_and_emits_nothing() -> None:
    harness = Harness()
    harness.starter.error = WorkflowError("provider refused", code=ErrorCode.AGENT_START)
    error = await rejection(harness.call("startChild", {"prompt": "p"}))
    assert error.message == "provider refused"
    assert harness.host.agents_started == 1
    assert harness.events == []
    harness.starter.error = None
    assert await harness.call("startChild", {"prompt": "p"}) == {
        "callId": 2,
        "childId": "child-2",
    }


async def test_disposal_is_memoized_across_guest_calls() -> None:
    harness = Harness()
    await harness.call("startChild", {"prompt": "p"})
    child = harness.starter.children[0]
    child.release.clear()
    first = harness.spawn(harness.call("disposeChild", {"callId": 1}))
    await child.disposing.wait()
    second = harness.spawn(harness.call("disposeChild", {"callId": 1}))
    child.release.set()
    assert [await first, await second] == [None, None]
    assert child.disposals == 1


async def test_a_failing_dispose_is_logged_and_the_child_leaves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = Harness()
    await harness.call("startChild", {"prompt": "p"})
    harness.starter.children[0].fail_dispose = True
    with caplog.at_level(logging.WARNING, "subagents.workflows"):
        assert await harness.call("disposeChild", {"callId": 1}) is None
    assert "workflow: child dispose failed: RuntimeError: dispose exploded" in caplog.text
    error = await rejection(harness.call("disposeChild", {"callId": 1}))
    assert error.message == "workflow child call is not active"


async def test_settlement_releases_a_wait_with_workflow_settled() -> None:
    harness = Harness()
    await harness.call("startChild", {"prompt": "p"})
    wait = harness.spawn(harness.call("childResult", {"callId": 1}))
    await harness.starter.children[0].waiting.wait()
    harness.abort.abort("workflow settled")
    await harness.host.settle()
    error = await rejection(wait)
    assert error.message == "workflow settled"
    assert harness.starter.children[0].disposals == 1


async def test_cancellation_releases_a_wait_with_its_reason() -> None:
    harness = Harness()
    await harness.call("startChild", {"prompt": "p"})
    wait = harness.spawn(harness.call("childResult", {"callId": 1}))
    await harness.starter.children[0].waiting.wait()
    harness.abort.abort("stop now")
    harness.host.dispose_all()
    error = await rejection(wait)
    assert error.message == "stop now"
    assert error.code == ErrorCode.CANCELLED
    await harness.host.settle()
    assert harness.starter.children[0].disposals == 1


async def test_a_wait_on_a_child_the_guest_disposes_is_released() -> None:
    harness = Harness()
    await harness.call("startChild", {"prompt": "p"})
    wait = harness.spawn(harness.call("childResult", {"callId": 1}))
    await harness.starter.children[0].waiting.wait()
    await harness.call("disposeChild", {"callId": 1})
    error = await rejection(wait)
    assert error.message == "workflow child disposed"


async def test_a_child_published_after_cancellation_is_disposed() -> None:
    harness = Harness()
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    harness.starter.gate = gate
    start = harness.spawn(harness.call("startChild", {"prompt": "p"}))
    await harness.starter.entered.wait()
    harness.abort.abort("stop during child startup")
    harness.host.dispose_all()
    gate.set_result(None)
    error = await rejection(start)
    assert error.message == "workflow child started after cancellation"
    await harness.host.settle()
    assert harness.starter.children[0].disposals == 1


async def test_settlement_waits_for_a_pending_start_and_disposes_its_child() -> None:
    harness = Harness()
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    harness.starter.gate = gate
    start = harness.spawn(harness.call("startChild", {"prompt": "p"}))
    await harness.starter.entered.wait()
    harness.abort.abort("workflow settled")
    settling = harness.spawn(harness.host.settle())
    await turns()
    assert not settling.done()  # it cannot settle while a start is pending
    gate.set_result(None)
    await settling
    assert harness.starter.children[0].disposals == 1
    assert (await rejection(start)).message == "workflow child started after cancellation"


async def test_bindings_fail_with_the_abort_reason_once_aborted() -> None:
    harness = Harness()
    harness.abort.abort("stop requested")
    for name, value in [
        ("begin", {}),
        ("startChild", {"prompt": "p"}),
        ("progress", [{"type": "phase", "title": "late"}]),
        ("childResult", {"callId": 1}),
    ]:
        error = await rejection(harness.call(name, value))
        assert error.message == "stop requested", name
    assert harness.events == []
    assert harness.host.agents_started == 0


async def test_progress_dispatches_phases_logs_and_paired_agent_events() -> None:
    harness = Harness()
    info = {"seq": 1, "label": "child", "childId": "c", "phase": "p1"}
    assert (
        await harness.call(
            "progress",
            [
                {"type": "phase", "title": "p1"},
                {"type": "log", "message": "hello"},
                {"type": "agent-start", "info": info},
            ],
        )
        is None
    )
    await harness.call("progress", [{"type": "agent-end", "info": {**info, "outcome": "failed"}}])
    await harness.call(
        "progress", [{"type": "agent-end", "info": {**info, "outcome": "cancelled"}}]
    )
    await harness.call(
        "progress",
        [{"type": "agent-end", "info": {**info, "seq": 7, "outcome": "completed"}}],
    )
    assert [type(e) for e in harness.events] == [
        WorkflowPhaseStarted,
        WorkflowLogged,
        WorkflowAgentStarted,
        WorkflowAgentEnded,
    ]
    ended = harness.events[-1]
    assert isinstance(ended, WorkflowAgentEnded)
    assert (ended.agent.seq, ended.agent.label, ended.agent.phase, ended.outcome) == (
        1,
        "child",
        "p1",
        "failed",
    )


async def test_a_batch_is_validated_before_any_event_is_dispatched() -> None:
    harness = Harness()
    error = await rejection(
        harness.call("progress", [{"type": "phase", "title": "ok"}, {"type": "nope"}])
    )
    assert error.message == "invalid workflow progress event"
    assert harness.events == []


async def test_a_live_sequence_cannot_start_twice() -> None:
    harness = Harness()
    info = {"seq": 3, "label": "child", "childId": "c"}
    await harness.call("progress", [{"type": "agent-start", "info": info}])
    error = await rejection(harness.call("progress", [{"type": "agent-start", "info": info}]))
    assert error.message == "workflow agent sequence 3 is already live"
    assert len(harness.events) == 1


async def test_settlement_ends_every_live_agent_as_cancelled() -> None:
    harness = Harness()
    info = {"seq": 1, "label": "child", "childId": "c"}
    await harness.call("progress", [{"type": "agent-start", "info": info}])
    harness.abort.abort("workflow settled")
    await harness.host.settle()
    ended = harness.events[-1]
    assert isinstance(ended, WorkflowAgentEnded)
    assert (ended.agent.seq, ended.outcome) == (1, "cancelled")


async def test_the_host_enforces_the_total_agent_cap() -> None:
    harness = Harness(
        HostLimits(
            max_concurrent_agents=4, max_total_agents=2, max_items_per_call=1, sync_timeout_ms=1
        )
    )
    await harness.call("startChild", {"prompt": "a"})
    await harness.call("startChild", {"prompt": "b"})
    error = await rejection(harness.call("startChild", {"prompt": "c"}))
    assert error.code == ErrorCode.AGENT_CAP
    assert error.message.startswith("this run reached its total agent cap (2)")
    assert harness.host.agents_started == 2


async def test_the_host_enforces_the_concurrency_cap() -> None:
    harness = Harness(
        HostLimits(
            max_concurrent_agents=1, max_total_agents=5, max_items_per_call=1, sync_timeout_ms=1
        )
    )
    await harness.call("startChild", {"prompt": "a"})
    error = await rejection(harness.call("startChild", {"prompt": "b"}))
    assert error.message.startswith("this run reached its concurrency cap (1 agents at once)")
    await harness.call("disposeChild", {"callId": 1})
    assert await harness.call("startChild", {"prompt": "b"}) == {
        "callId": 2,
        "childId": "child-2",
    }
