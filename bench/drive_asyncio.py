"""The floor: the same scenarios as a minimal agent loop in bare asyncio, persisting nothing.

An agent keeps its message history in a list, calls a fake model (a script for the lead, a
fixed answer for children, with the same latency), and runs the tool calls of one response
at once in a TaskGroup; the delegation tool creates a fresh child agent and returns its
final text. Everything a framework adds on top of this is overhead.
"""

from __future__ import annotations

import asyncio
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field

from ._harness import (
    CHILD_ANSWER,
    CHILD_PROMPT,
    LEAD_ANSWER,
    LEAD_PROMPT,
    Observed,
    RunSpec,
    Stopwatch,
    worker_main,
)


@dataclass(frozen=True, slots=True)
class Call:
    id: str
    tool: str
    prompt: str


@dataclass(frozen=True, slots=True)
class Response:
    text: str = ""
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    content: str


Message = str | Response | ToolResult


class LeadModel:
    """Answers from a script by call index, counting calls."""

    def __init__(self, script: Sequence[Response]) -> None:
        self.script = script
        self.calls = 0

    async def __call__(self, history: list[Message]) -> Response:
        index = self.calls
        self.calls += 1
        return self.script[index]


class ChildModel:
    """Always answers `child-answer`, after `sleep` seconds."""

    def __init__(self, sleep: float) -> None:
        self.sleep = sleep
        self.calls = 0

    async def __call__(self, history: list[Message]) -> Response:
        self.calls += 1
        if self.sleep > 0:
            await asyncio.sleep(self.sleep)
        return Response(text=CHILD_ANSWER)


@dataclass(slots=True)
class Agent:
    model: LeadModel | ChildModel
    children: ChildModel
    history: list[Message] = field(default_factory=list[Message])

    async def run(self, prompt: str) -> str:
        self.history.append(prompt)
        while True:
            response = await self.model(self.history)
            self.history.append(response)
            if not response.calls:
                return response.text
            if len(response.calls) == 1:
                self.history.append(await self.delegate(response.calls[0]))
                continue
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self.delegate(call)) for call in response.calls]
            self.history.extend(task.result() for task in tasks)

    async def delegate(self, call: Call) -> ToolResult:
        child = Agent(model=self.children, children=self.children)  # a fresh child per call
        return ToolResult(call.id, await child.run(call.prompt))


def lead_script(spec: RunSpec) -> list[Response]:
    final = Response(text=LEAD_ANSWER)
    match spec.shape:
        case "sequential":
            calls = [
                Response(calls=(Call(f"call-{i}", "subagent", CHILD_PROMPT),))
                for i in range(spec.size)
            ]
            return [*calls, final]
        case "runs":
            return [Response(calls=(Call("call-0", "subagent", CHILD_PROMPT),)), final]
        case "fanout":
            calls = tuple(Call(f"call-{i}", "subagent", CHILD_PROMPT) for i in range(spec.size))
            return [Response(calls=calls), final]


async def run(spec: RunSpec) -> Observed:
    script = lead_script(spec)
    children = ChildModel(spec.child_sleep)
    runs = spec.size if spec.shape == "runs" else 1
    leads = [LeadModel(script) for _ in range(runs)]
    agents: list[Agent] = []
    outputs: list[str] = []
    with Stopwatch() as watch:
        for model in leads:
            agent = Agent(model=model, children=children)
            agents.append(agent)
            outputs.append(await agent.run(LEAD_PROMPT))
    results = [m.content for a in agents for m in a.history if isinstance(m, ToolResult)]
    return Observed(
        watch=watch,
        lead_calls=sum(m.calls for m in leads),
        child_calls=children.calls,
        child_results=results,
        lead_outputs=outputs,
    )


def main() -> int:
    return worker_main("asyncio", run, version=f"Python {platform.python_version()}")


if __name__ == "__main__":
    raise SystemExit(main())
