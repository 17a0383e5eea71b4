"""A process for the structured-output crash test: die once a background child's answer is durable.

    python tests/delegation/structured_crash_child.py STORE

A lead starts the `extractor` definition (which has an output schema) in the background; the
extractor calls `structured_output`. Right after that call's result is durable (the runtime
emits `SessionEventPosted` only then) the process prints `{"lead": ID, "child": ID}` and
SIGKILLs itself: the extractor's answer is in its log, its settlement never recorded and its
parent never told.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

from subagents import DelegationOptions
from subagents.core import SessionEventPosted
from subagents.definitions import AgentDefinition
from subagents.delegation import DelegationRuntime
from subagents.messages import JsonObject
from subagents.sessions import SqliteEventStore, ToolResultEvent
from subagents.testing import ScriptedModel

__all__ = ["SCHEMA", "definitions"]

SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "score": {"type": "integer", "minimum": 0}},
    "required": ["title", "score"],
    "additionalProperties": False,
}

SCRIPT = """
lead:
  - calls:
      - {tool: subagent, args: {description: Extract, prompt: Extract it, agent: extractor,
                                run_in_background: true}}
  - text: Started.
extractor:
  - calls: [{tool: structured_output, args: {title: Crash, score: 5}}]
"""


def definitions(schema: JsonObject | None = SCHEMA) -> DelegationOptions:
    definition = AgentDefinition(
        name="extractor",
        description="Extracts a title and a score.",
        body="You extract things.",
        output_schema=schema,
    )
    return DelegationOptions(definitions={"extractor": definition})


async def main(store: str) -> None:
    async with DelegationRuntime(
        model=ScriptedModel.from_yaml(SCRIPT),
        store=SqliteEventStore(store),
        cwd=os.path.dirname(store),
        delegation=definitions(),
    ) as runtime:
        lead = await runtime.create_agent()

        def listener(event: object) -> None:
            if (
                isinstance(event, SessionEventPosted)
                and isinstance(event.record.event, ToolResultEvent)
                and event.record.event.message.name == "structured_output"
            ):
                sys.stdout.write(json.dumps({"lead": lead.id, "child": event.agent_id}) + "\n")
                sys.stdout.flush()
                os.kill(os.getpid(), signal.SIGKILL)

        runtime.subscribe(listener, types=(SessionEventPosted,))
        await lead.followup("go")
        await runtime.wait_quiescent()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
