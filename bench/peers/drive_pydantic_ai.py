"""pydantic-ai: a lead `Agent` whose `subagent` tool runs a child `Agent` (a fresh run each time).

Fairness: async `FunctionModel`s that report usage (otherwise pydantic-ai estimates tokens
from the whole history on every call); the request limit is lifted so S1 can make 201 lead
requests. Parallel tool calls run concurrently (pydantic-ai's default).
"""

from __future__ import annotations

import asyncio
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # for bench._harness

from bench._harness import (
    CHILD_ANSWER,
    CHILD_PROMPT,
    LEAD_ANSWER,
    LEAD_PROMPT,
    TOOL_DESCRIPTION,
    Observed,
    RunSpec,
    Stopwatch,
    lead_turns,
    worker_main,
)
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

USAGE = RequestUsage(input_tokens=10, output_tokens=5)


class Counter:
    def __init__(self) -> None:
        self.calls = 0


async def run(spec: RunSpec) -> Observed:
    turns = lead_turns(spec)
    lead_count = Counter()
    child_count = Counter()

    async def lead_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        index = lead_count.calls
        lead_count.calls += 1
        calls = turns[index]
        if calls == 0:
            return ModelResponse(parts=[TextPart(LEAD_ANSWER)], usage=USAGE)
        parts: list[Any] = [
            ToolCallPart(
                "subagent",
                {"description": TOOL_DESCRIPTION, "prompt": CHILD_PROMPT},
                tool_call_id=f"call-{index}-{n}",
            )
            for n in range(calls)
        ]
        return ModelResponse(parts=parts, usage=USAGE)

    async def child_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        child_count.calls += 1
        if spec.child_sleep > 0:
            await asyncio.sleep(spec.child_sleep)
        return ModelResponse(parts=[TextPart(CHILD_ANSWER)], usage=USAGE)

    child = Agent(FunctionModel(child_fn), instructions="Answer.")
    lead = Agent(FunctionModel(lead_fn), instructions="Delegate.")

    @lead.tool_plain(name="subagent", description=TOOL_DESCRIPTION)
    async def subagent(description: str, prompt: str) -> str:
        result = await child.run(prompt)
        return result.output

    limits = UsageLimits(request_limit=None)
    runs = spec.size if spec.shape == "runs" else 1
    with Stopwatch() as watch:
        results: list[Any] = [await lead.run(LEAD_PROMPT, usage_limits=limits) for _ in range(runs)]
    child_results = [
        str(part.content)
        for result in results
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    return Observed(
        watch=watch,
        lead_calls=lead_count.calls,
        child_calls=child_count.calls,
        child_results=child_results,
        lead_outputs=[str(r.output) for r in results],
    )


if __name__ == "__main__":
    raise SystemExit(
        worker_main("pydantic-ai", run, version=f"pydantic-ai-slim {version('pydantic-ai-slim')}")
    )
