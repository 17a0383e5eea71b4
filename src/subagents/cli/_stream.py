"""The newline-delimited JSON stream of `--stream` and `watch --json` (schema version 1).

Every line is one JSON object with `"v": 1` and a `type`:

- `event`: a durable event as it commits: `name` (the member's full name), `session_id`,
  `seq`, `kind`, `time` and `payload` (as `subagents log --json` prints them);
- `delta`: live model output that is never stored: `name`, `session_id`, `turn`, `step`,
  `kind` (`text` or `reasoning`) and `text`;
- `result`: the last line, the object `--json` prints.

A reader skips types and fields it does not know: a new field or type keeps version 1; a
changed meaning of one that exists bumps it.

`StreamPrinter` writes them for `run`, `resume` and `send --stream` (docs/streaming.md).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any, Literal, Self

from ..core import (
    AgentReasoningDelta,
    AgentRuntime,
    AgentTextDelta,
    PostedRecords,
    SessionEventPosted,
    event_json,
)
from ..sessions import EventRecord

__all__ = [
    "STREAM_VERSION",
    "StreamPrinter",
    "delta_line",
    "event_line",
    "line_text",
    "result_line",
]

STREAM_VERSION = 1
"""The version of the line schema above, on every line as `v`."""


def event_line(name: str, session_id: str, record: EventRecord) -> dict[str, Any]:
    """The line of one durable event of member `name`."""
    return {"v": STREAM_VERSION, "type": "event", "name": name, "session_id": session_id} | (
        event_json(record)
    )


def delta_line(
    name: str,
    session_id: str,
    *,
    turn: int,
    step: int,
    kind: Literal["text", "reasoning"],
    text: str,
) -> dict[str, Any]:
    """The line of one piece of live model output."""
    return {
        "v": STREAM_VERSION,
        "type": "delta",
        "name": name,
        "session_id": session_id,
        "turn": turn,
        "step": step,
        "kind": kind,
        "text": text,
    }


def result_line(result: dict[str, Any]) -> dict[str, Any]:
    """The last line: `result` is what `--json` prints."""
    return {"v": STREAM_VERSION, "type": "result"} | result


def line_text(line: dict[str, Any]) -> str:
    """One line of the stream: compact JSON, no newline inside."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


class StreamPrinter:
    """Prints a runtime's records and deltas on stdout as the lines above, while entered.

    Each line is flushed as it is written, so a reader sees an event when it commits. The
    runtime's `CausalOrder` gives the order: each session's records in seq order, a step's
    deltas after its `step/start` and before its `assistant/message`. `finish` writes the
    records the bus never posted (`PostedRecords`), then the last line. Disabled, it prints
    nothing.
    """

    def __init__(self, runtime: AgentRuntime, *, enabled: bool = True) -> None:
        self._runtime = runtime
        self._enabled = enabled
        self._unsubscribe: Callable[[], None] | None = None
        self._posted = PostedRecords()

    def __enter__(self) -> Self:
        if self._enabled:
            self._unsubscribe = self._runtime.subscribe(
                self._on_event, types=(SessionEventPosted, AgentTextDelta, AgentReasoningDelta)
            )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    async def finish(self, result: dict[str, Any]) -> None:
        """After the run (quiescent): the records not posted, then the last line, `result`.

        `result` is what `--json` prints.
        """
        if not self._enabled:
            return
        for event in await self._posted.missing(self._runtime):
            _write(event_line(event.name, event.agent_id, event.record))
        _write(result_line(result))

    def _on_event(self, event: object) -> None:
        match event:
            case SessionEventPosted(agent_id=session_id, name=name, record=record):
                self._posted.add(event)
                _write(event_line(name, session_id, record))
            case AgentTextDelta(agent_id=session_id, name=name, turn=turn, step=step, text=text):
                _write(delta_line(name, session_id, turn=turn, step=step, kind="text", text=text))
            case AgentReasoningDelta(
                agent_id=session_id, name=name, turn=turn, step=step, text=text
            ):
                _write(
                    delta_line(name, session_id, turn=turn, step=step, kind="reasoning", text=text)
                )
            case _:
                pass


def _write(line: dict[str, Any]) -> None:
    # Looked up at each write: `sys.stdout` may be replaced (a test capturing output).
    try:
        sys.stdout.write(line_text(line) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _stop_writing()


def _stop_writing() -> None:
    """The reader went away (`| head`): what is left to print goes nowhere.

    The tree still runs to its end, durably, and the exit shows no traceback.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
