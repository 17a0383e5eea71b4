"""Structured output: a child started with an output schema answers through a tool (spec 3.6).

The child gets a private `structured_output` tool whose parameters are the schema, and a
trailing instruction. Arguments are validated with a full Draft 2020-12 validator; invalid ones
come back as `INVALID_ARGS` so the model retries in the same turn, within a bounded budget. The
first accepted call concludes the turn; a guard then refuses every later call of the child. The
value is committed only when that call's final tool result in the child's log is a success.
A clean finish without a committed value is an `error`, never a re-prompt.

A continuable child gets one capture per activation: each activation must end with its own
valid call, and once its answer is decided (recorded, or the invalid budget spent) the
activation takes no more input. A resumed activation recovers its state from its own log.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import cast

import msgspec

from ..core import Agent
from ..errors import ErrorCode, SubagentError, SubagentsError
from ..messages import JsonObject
from ..sessions import EventRecord, ToolCallEvent, ToolResultEvent
from ..tools import ToolContext, ToolHandler, ToolSpec, validate_arguments
from ._results import SubagentResult
from ._wording import (
    MISSING_DIAGNOSTIC,
    RECORDED_TEXT,
    STRUCTURED_OUTPUT,
    STRUCTURED_TOOL,
    WAIT_TEXT,
    exhausted_guard_text,
    invalid_diagnostic,
    recorded_guard_text,
    structured_instruction,
    told,
)

__all__ = ["MAX_INVALID_ATTEMPTS", "StructuredCapture", "check_output_schema"]

MAX_INVALID_ATTEMPTS = 3
"""Invalid `structured_output` calls a child may make before its run fails."""

DESCRIPTION = (
    "Report your final structured result. Call it exactly once, when your work is complete, "
    "with arguments matching the schema; the call ends your run."
)


def check_output_schema(schema: JsonObject, *, definition: str) -> None:
    """Refuse a schema the runtime cannot use as tool parameters (before any child exists)."""
    where = f'agent definition "{definition}"'
    if schema.get("type") != "object":
        raise SubagentError(
            f"{where} has an output_schema whose root is not an object schema "
            "(`type: object`); structured output must be a JSON object",
            code=ErrorCode.USAGE,
            definition=definition,
        )
    remote = _remote_ref(schema)
    if remote is not None:
        raise SubagentError(
            f'{where} has an output_schema with a remote reference "{remote}"; only local '
            'references ("#/...") are supported',
            code=ErrorCode.USAGE,
            definition=definition,
        )


def _remote_ref(value: object) -> str | None:
    if isinstance(value, dict):
        mapping = cast("dict[str, object]", value)
        for key, item in mapping.items():
            if key in ("$ref", "$dynamicRef") and isinstance(item, str):
                if not item.startswith("#"):
                    return item
            elif (found := _remote_ref(item)) is not None:
                return found
    elif isinstance(value, list):
        for item in cast("list[object]", value):
            if (found := _remote_ref(item)) is not None:
                return found
    return None


class StructuredCapture:
    """The structured-output state of one child run (or one continuable activation).

    It holds the staging, the guard and settlement.
    """

    def __init__(
        self,
        schema: JsonObject,
        *,
        delegated_work: Callable[[Agent], bool] | None = None,
        max_invalid: int = MAX_INVALID_ATTEMPTS,
    ) -> None:
        self._schema = schema
        self._delegated_work = delegated_work
        self._max_invalid = max_invalid
        self.staged: tuple[str, JsonObject] | None = None
        """The accepted call id and its value (committed by `settle`)."""
        self.invalid = 0

    @property
    def exhausted(self) -> bool:
        return self.invalid >= self._max_invalid

    @property
    def sealed(self) -> bool:
        """Whether the answer is decided: a value was recorded or the invalid budget is spent."""
        return self.staged is not None or self.exhausted

    def restore(self, records: Sequence[EventRecord]) -> None:
        """Start over from what an activation's own records already hold.

        Empty for a fresh activation. After a crash, the records since the last settlement its
        parent heard of, so an answer recorded in a turn that ended before the crash counts (a
        turn the crash cut off counts as stopped, as for any continuable child).
        """
        self.staged = None
        self.invalid = 0
        arguments: dict[str, str] = {}
        for record in records:
            event = record.event
            if isinstance(event, ToolCallEvent) and event.name == STRUCTURED_TOOL:
                arguments[event.call_id] = event.arguments
            elif isinstance(event, ToolResultEvent) and event.message.name == STRUCTURED_TOOL:
                if event.code == ErrorCode.INVALID_ARGS:
                    self.invalid += 1
                elif not event.message.is_error and event.message.call_id in arguments:
                    value = json.loads(arguments[event.message.call_id])
                    if isinstance(value, dict):
                        self.staged = (event.message.call_id, cast("JsonObject", value))

    def install(self, agent: Agent) -> None:
        """Register the tool and the guard in the child's own scope (before its prompt)."""
        # The handler validates, so every attempt (valid or not) counts against the budget.
        self._spec = ToolSpec(
            name=STRUCTURED_TOOL,
            description=DESCRIPTION,
            parameters=self._schema,
            handler=self._handler(agent),
            validate=False,
        )
        agent.tools.register(self._spec)
        agent.tools.add_guard(self._guard)

    def install_activation(self, agent: Agent, records: Sequence[EventRecord]) -> None:
        """Install into a continuable activation whose own records so far are `records`.

        The state starts from those records and the trailing instruction joins the agent's
        instructions (a continuable child's are composed when it activates).
        """
        self.restore(records)
        self.install(agent)
        agent.config = told(agent.config, STRUCTURED_OUTPUT, structured_instruction())

    def _handler(self, agent: Agent) -> ToolHandler:
        async def handle(args: JsonObject, ctx: ToolContext) -> str:
            invalid = validate_arguments(self._spec, args)
            if invalid is not None:
                self.invalid += 1
                message = invalid.content.removeprefix("Error: ")
                if self.exhausted:
                    message += (
                        f"; this was attempt {self.invalid} of {self._max_invalid}, so the run "
                        "has failed: stop now"
                    )
                raise SubagentsError(message, code=ErrorCode.INVALID_ARGS)
            if bool(agent.inbox) or (
                self._delegated_work is not None and self._delegated_work(agent)
            ):
                raise SubagentsError(WAIT_TEXT, code=ErrorCode.USAGE)
            self.staged = (ctx.call_id, args)
            ctx.conclude_turn()
            return RECORDED_TEXT

        return handle

    def _guard(self, spec: ToolSpec, args: JsonObject, ctx: ToolContext) -> str | None:
        if self.staged is not None:
            return recorded_guard_text(spec.name)
        if self.exhausted:
            return exhausted_guard_text(self.invalid, spec.name)
        return None

    def committed(self, records: Sequence[EventRecord]) -> JsonObject | None:
        """The staged value, if its call's final tool result in the log is a success."""
        if self.staged is None:
            return None
        call_id, value = self.staged
        for record in reversed(records):
            event = record.event
            if isinstance(event, ToolResultEvent) and event.message.call_id == call_id:
                return None if event.message.is_error else value
        return None

    def settle(self, result: SubagentResult, records: Sequence[EventRecord]) -> SubagentResult:
        """The run's result with the captured value; a finish without one is an `error`."""
        value = self.committed(records)
        if value is not None:
            return msgspec.structs.replace(result, structured=value, stop_reason="completed")
        if self.exhausted:
            return msgspec.structs.replace(
                result, stop_reason="error", diagnostic=invalid_diagnostic(self.invalid)
            )
        if result.stop_reason == "completed":
            return msgspec.structs.replace(
                result, stop_reason="error", diagnostic=MISSING_DIAGNOSTIC
            )
        return result
