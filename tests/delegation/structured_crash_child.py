"""A process for the structured-output crash test: die once a background child's answer is durable.

    python tests/delegation/structured_crash_child.py STORE

A lead starts the `extractor` definition (which has an output schema) in the background; the
extractor calls `structured_output` and its turn ends. The store sends that turn's end to disk
at once and from then on keeps every later write off the disk, as a crash at that moment would;
once the end is committed the process prints `{"lead": ID, "child": ID}` and SIGKILLs itself.
The extractor's answer is in its log, its settlement never recorded and its parent never told,
whatever the loop did meanwhile (the settlement follows the answer within moments, and writes
share commits, so a kill from a bus listener could land after both).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Sequence

from subagents import DelegationOptions
from subagents.definitions import AgentDefinition
from subagents.delegation import DelegationRuntime
from subagents.ids import SessionId
from subagents.messages import JsonObject
from subagents.sessions import EventRecord, SqliteEventStore, ToolResultEvent, TurnEnd, WriteDone
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


class CrashAfterAnswer(SqliteEventStore):
    """A real store that stops writing after the extractor's answer, then kills the process."""

    lead: str = ""
    answered: str = ""
    frozen = False

    def append(
        self,
        session_id: SessionId,
        records: Sequence[EventRecord],
        *,
        done: WriteDone | None = None,
    ) -> asyncio.Future[None]:
        if self.frozen:
            return asyncio.get_running_loop().create_future()  # never reaches the disk
        written = super().append(session_id, records, done=done)
        if any(_is_answer(record.event) for record in records):
            self.answered = session_id
        if session_id == self.answered and any(
            isinstance(record.event, TurnEnd) for record in records
        ):
            self.frozen = True
            lead = self.lead

            def die(_: object) -> None:
                sys.stdout.write(json.dumps({"lead": lead, "child": session_id}) + "\n")
                sys.stdout.flush()
                os.kill(os.getpid(), signal.SIGKILL)

            self.flush().add_done_callback(die)
        return written


def _is_answer(event: object) -> bool:
    return isinstance(event, ToolResultEvent) and event.message.name == "structured_output"


async def main(store: str) -> None:
    crash = CrashAfterAnswer(store)
    async with DelegationRuntime(
        model=ScriptedModel.from_yaml(SCRIPT),
        store=crash,
        cwd=os.path.dirname(store),
        delegation=definitions(),
    ) as runtime:
        lead = await runtime.create_agent()
        crash.lead = lead.id
        await lead.followup("go")
        await runtime.wait_quiescent()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
