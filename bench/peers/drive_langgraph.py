"""LangGraph: a hand-built ReAct graph (model node, `ToolNode`, `tools_condition`) for the lead.

Its `subagent` tool invokes a compiled child graph (one model node) with a fresh state, so
every delegation is a fresh child run. Both models are a custom `BaseChatModel` answering
from the script (the child after the same sleep); the recursion limit is raised so S1 can
run 201 lead steps.
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
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


class Counter:
    def __init__(self) -> None:
        self.calls = 0


class FakeChat(BaseChatModel):
    """Answers from `turns` (the lead) or with `child-answer` after `sleep` (children)."""

    turns: list[int] | None = None
    sleep: float = 0.0
    counter: Any = None

    @property
    def _llm_type(self) -> str:
        return "bench-fake"

    def _message(self) -> AIMessage:
        index = self.counter.calls
        self.counter.calls += 1
        if self.turns is None:
            return AIMessage(content=CHILD_ANSWER)
        calls = self.turns[index]
        if calls == 0:
            return AIMessage(content=LEAD_ANSWER)
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "name": "subagent",
                    "args": {"description": TOOL_DESCRIPTION, "prompt": CHILD_PROMPT},
                    "id": f"call-{index}-{n}",
                    "type": "tool_call",
                }
                for n in range(calls)
            ],
        )

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._message())])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        if self.turns is None and self.sleep > 0:
            await asyncio.sleep(self.sleep)
        return ChatResult(generations=[ChatGeneration(message=self._message())])


async def run(spec: RunSpec) -> Observed:
    turns = lead_turns(spec)
    lead_count, child_count = Counter(), Counter()
    lead_model = FakeChat(turns=turns, counter=lead_count)
    child_model = FakeChat(sleep=spec.child_sleep, counter=child_count)

    async def child_node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await child_model.ainvoke(state["messages"])]}

    child_builder = StateGraph(MessagesState)
    child_builder.add_node("agent", child_node)
    child_builder.add_edge(START, "agent")
    child_builder.add_edge("agent", END)
    child_graph = child_builder.compile()

    @tool("subagent", description=TOOL_DESCRIPTION)
    async def subagent(description: str, prompt: str) -> str:
        state = await child_graph.ainvoke({"messages": [HumanMessage(prompt)]})
        return str(state["messages"][-1].content)

    async def lead_node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await lead_model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", lead_node)
    builder.add_node("tools", ToolNode([subagent]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    graph = builder.compile()

    config: Any = {"recursion_limit": 2 * len(turns) + 10}
    runs = spec.size if spec.shape == "runs" else 1
    with Stopwatch() as watch:
        states: list[Any] = [
            await graph.ainvoke({"messages": [HumanMessage(LEAD_PROMPT)]}, config)
            for _ in range(runs)
        ]
    child_results = [
        str(m.content) for s in states for m in s["messages"] if isinstance(m, ToolMessage)
    ]
    return Observed(
        watch=watch,
        lead_calls=lead_count.calls,
        child_calls=child_count.calls,
        child_results=child_results,
        lead_outputs=[str(s["messages"][-1].content) for s in states],
    )


if __name__ == "__main__":
    raise SystemExit(worker_main("langgraph", run, version=f"langgraph {version('langgraph')}"))
