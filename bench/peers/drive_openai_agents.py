"""openai-agents: a lead `Agent` whose `subagent` tool is the child agent's `as_tool`.

Fairness: a minimal fake `Model` (the SDK's own `testing.ScriptedModel` deep-copies history
and is slower), tracing disabled (nothing leaves the process), `max_turns` raised so S1 can
run 201 lead turns. Every delegation is a fresh nested run of the child agent.
"""

from __future__ import annotations

import asyncio
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # for bench._harness

from agents import Agent, ModelSettings, Runner, Usage, set_tracing_disabled
from agents.items import ModelResponse, ToolCallOutputItem
from agents.models.interface import Model
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
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

ARGUMENTS = '{"input":"' + CHILD_PROMPT + '"}'


def _text(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
    )


class FakeModel(Model):
    """Answers the lead from `lead_turns`, or children with `child-answer` after a sleep."""

    def __init__(self, turns: list[int] | None, sleep: float = 0.0) -> None:
        self.turns = turns
        self.sleep = sleep
        self.calls = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        index = self.calls
        self.calls += 1
        if self.turns is None:
            if self.sleep > 0:
                await asyncio.sleep(self.sleep)
            output: list[Any] = [_text(CHILD_ANSWER)]
        else:
            calls = self.turns[index]
            if calls == 0:
                output = [_text(LEAD_ANSWER)]
            else:
                output = [
                    ResponseFunctionToolCall(
                        id=f"fc-{index}-{n}",
                        call_id=f"call-{index}-{n}",
                        type="function_call",
                        name="subagent",
                        arguments=ARGUMENTS,
                    )
                    for n in range(calls)
                ]
        return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def run(spec: RunSpec) -> Observed:
    set_tracing_disabled(True)
    turns = lead_turns(spec)
    lead_model = FakeModel(turns)
    child_model = FakeModel(None, spec.child_sleep)
    child = Agent(name="child", instructions="Answer.", model=child_model)
    lead = Agent(
        name="lead",
        instructions="Delegate.",
        model=lead_model,
        tools=[child.as_tool(tool_name="subagent", tool_description=TOOL_DESCRIPTION)],
        model_settings=ModelSettings(parallel_tool_calls=True),
    )
    runs = spec.size if spec.shape == "runs" else 1
    max_turns = len(turns) + 10
    with Stopwatch() as watch:
        results: list[Any] = [
            await Runner.run(lead, LEAD_PROMPT, max_turns=max_turns) for _ in range(runs)
        ]
    child_results = [
        str(item.output)
        for result in results
        for item in result.new_items
        if isinstance(item, ToolCallOutputItem)
    ]
    return Observed(
        watch=watch,
        lead_calls=lead_model.calls,
        child_calls=child_model.calls,
        child_results=child_results,
        lead_outputs=[str(r.final_output) for r in results],
    )


if __name__ == "__main__":
    raise SystemExit(
        worker_main("openai-agents", run, version=f"openai-agents {version('openai-agents')}")
    )
