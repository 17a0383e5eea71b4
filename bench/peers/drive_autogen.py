"""AutoGen AgentChat: a lead `AssistantAgent` whose `subagent` tool runs a fresh child agent.

Fairness: both models are `ReplayChatCompletionClient`s (the children's waits the same sleep
first); every delegation builds a fresh `AssistantAgent` (AutoGen agents hold state) and runs
it; the lead loops over tool calls (`max_tool_iterations`) without reflection, so it makes
exactly one model call per scripted response. Parallel tool calls run concurrently (AutoGen's
default). The replay client logs a warning for every non-text message of the history on every
call ("Token count has been done only on string content"); that is an artifact of the fake
model, so its logger is raised to ERROR.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # for bench._harness

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import ToolCallExecutionEvent
from autogen_core import EVENT_LOGGER_NAME, FunctionCall
from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
from autogen_core.tools import FunctionTool
from autogen_ext.models.replay import ReplayChatCompletionClient
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

INFO = ModelInfo(
    vision=False,
    function_calling=True,
    json_output=False,
    family=ModelFamily.UNKNOWN,
    structured_output=False,
)
ARGUMENTS = json.dumps({"description": TOOL_DESCRIPTION, "prompt": CHILD_PROMPT})


class SleepyReplay(ReplayChatCompletionClient):
    """A replay client that waits `sleep` seconds before each answer."""

    def __init__(self, completions: list[Any], sleep: float) -> None:
        super().__init__(completions, model_info=INFO)
        self.sleep = sleep

    async def create(self, messages: Any, **kwargs: Any) -> CreateResult:
        if self.sleep > 0:
            await asyncio.sleep(self.sleep)
        return await super().create(messages, **kwargs)


def lead_completions(turns: list[int]) -> list[Any]:
    completions: list[Any] = []
    for index, calls in enumerate(turns):
        if calls == 0:
            completions.append(LEAD_ANSWER)
            continue
        content = [
            FunctionCall(id=f"call-{index}-{n}", arguments=ARGUMENTS, name="subagent")
            for n in range(calls)
        ]
        completions.append(
            CreateResult(
                finish_reason="function_calls",
                content=content,
                usage=RequestUsage(prompt_tokens=10, completion_tokens=5),
                cached=False,
            )
        )
    return completions


async def run(spec: RunSpec) -> Observed:
    logging.getLogger(EVENT_LOGGER_NAME).setLevel(logging.ERROR)
    turns = lead_turns(spec)
    lead_client = ReplayChatCompletionClient(lead_completions(turns), model_info=INFO)
    child_client = SleepyReplay([CHILD_ANSWER] * (spec.size), spec.child_sleep)

    async def subagent(description: str, prompt: str) -> str:
        child = AssistantAgent("child", model_client=child_client, system_message="Answer.")
        result = await child.run(task=prompt)
        return str(result.messages[-1].content)

    tool = FunctionTool(subagent, description=TOOL_DESCRIPTION, name="subagent")
    runs = spec.size if spec.shape == "runs" else 1
    results: list[Any] = []
    with Stopwatch() as watch:
        for _ in range(runs):
            lead = AssistantAgent(
                "lead",
                model_client=lead_client,
                tools=[tool],
                system_message="Delegate.",
                reflect_on_tool_use=False,
                max_tool_iterations=len(turns) + 1,
            )
            results.append(await lead.run(task=LEAD_PROMPT))
    child_results = [
        str(r.content)
        for result in results
        for message in result.messages
        if isinstance(message, ToolCallExecutionEvent)
        for r in message.content
    ]
    return Observed(
        watch=watch,
        lead_calls=len(lead_client.create_calls),
        child_calls=len(child_client.create_calls),
        child_results=child_results,
        lead_outputs=[str(r.messages[-1].content) for r in results],
    )


if __name__ == "__main__":
    raise SystemExit(
        worker_main("autogen", run, version=f"autogen-agentchat {version('autogen-agentchat')}")
    )
