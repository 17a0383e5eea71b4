"""The turn and step loop: claim input, call the model, run tools, record everything.

A turn drains the inbox; a step is one model request plus the tool calls it asked for. Each
request is built from caches the agent keeps up to date (transcript, tool schemas), never
re-derived from the whole log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..errors import ErrorCode, ModelError, SubagentsError
from ..ids import new_message_id
from ..messages import (
    AssistantMessage,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    UserMessage,
)
from ..models import (
    BlockAssembler,
    FinishReason,
    ModelChunk,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolSchema,
)
from ..sessions import (
    ApprovalRequest,
    AssistantMessageEvent,
    ModelErrorEvent,
    RequestHeader,
    StepEnd,
    StepStart,
    StopReason,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
    WaitingStep,
)
from ..tools import (
    Escalation,
    ToolOutcome,
    check_call,
    parse_arguments,
    raised_outcome,
    returned_outcome,
    run_checked,
)
from ._agent import CONTEXT_CLEARED, CONTEXT_SOURCE
from ._approvals import denied_outcome
from ._bus import AgentFailed, AgentReasoningDelta, AgentTextDelta

if TYPE_CHECKING:
    from ._agent import Agent
    from ._budget import CallReservation

__all__ = ["run_turn"]

log = logging.getLogger("subagents.loop")

StepOutcome = Literal["completed", "continue", "max-tokens", "refusal"]

ABORTED_TEXT = "Error: tool call aborted"
ABORTED_BEFORE_DISPATCH_TEXT = "Error: tool call aborted before dispatch"
_CLEARED_BLOCKS = (TextBlock(CONTEXT_CLEARED),)


class _Turn:
    """Where a turn is: its number, its current step, and whether that step is open."""

    __slots__ = ("number", "step", "step_open")

    def __init__(self, number: int) -> None:
        self.number = number
        self.step = 0
        self.step_open = False


async def run_turn(agent: Agent) -> StopReason:
    """Run one turn to its end and record how it ended.

    A turn a restart left waiting for an approval (`agent.waiting`) is taken up where it
    stopped, in its own turn and step, instead of starting a new one.
    """
    waiting = agent.take_waiting()
    record = agent.record
    if waiting is None:
        agent.turn_number += 1
        turn = _Turn(agent.turn_number)
        record(TurnStart(turn=turn.number))
    else:
        turn = _Turn(waiting.turn)
        turn.step, turn.step_open = waiting.step, True
    try:
        end = await _run_steps(agent, turn, waiting)
    except asyncio.CancelledError:
        cause = agent.take_abort_cause()
        _close_step(agent, turn)
        record(
            TurnEnd(
                turn=turn.number,
                reason="aborted",
                cause=cause or agent.outside_cause,
                command=agent.abort_command if cause is not None else None,
            )
        )
        if cause is None:
            raise  # a cancellation from outside always wins
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        return "aborted"
    except Exception as exc:
        end = _error_end(agent, turn.number, exc)
    _close_step(agent, turn)
    record(end)
    return end.reason


def _close_step(agent: Agent, turn: _Turn) -> None:
    if turn.step_open:
        turn.step_open = False
        agent.record(StepEnd(turn=turn.number, step=turn.step))


async def _run_steps(agent: Agent, turn: _Turn, waiting: WaitingStep | None) -> TurnEnd:
    """Steps until the model stops asking for tools and no step input is pending."""
    record = agent.record
    reason: StopReason = "completed"
    if waiting is not None:
        agent.prepared()
        batch = _ToolBatch(agent, turn.number, turn.step, waiting.calls)
        concluded = await batch.run_guarded(start=waiting.committed, request=waiting.request)
        _close_step(agent, turn)
        if concluded and not agent.inbox.next_step:
            return TurnEnd(turn=turn.number, reason=reason)
    while True:
        batch = agent.inbox.claim(first_step=turn.step == 0)
        if turn.step == 0 and not batch:
            break  # the waking input was withdrawn: nothing to run
        turn.step += 1
        record(StepStart(turn=turn.number, step=turn.step))
        turn.step_open = True
        agent.prepared()
        if agent.before_call is not None:  # before the context: it may change what is told
            await agent.before_call(agent)
        _enter_context(agent, turn.number)
        for message in batch:
            record(UserMessageEvent(message=message, turn=turn.number))
            agent.transcript.append(message)
        del batch  # in the transcript now; not kept through the model call
        # Reserved before the call, so concurrent siblings cannot overspend a shared budget.
        reservation = agent.ledger.reserve_call() if agent.ledger is not None else None
        if isinstance(reservation, str):
            _close_step(agent, turn)
            return _budget_end(turn.number, reservation)
        try:
            outcome = await _run_step(agent, turn.number, turn.step, reservation)
        finally:
            if reservation is not None:
                reservation.release()  # the call never reached the model (no-op once settled)
        _close_step(agent, turn)
        if outcome == "continue":
            continue
        if outcome == "max-tokens" or (outcome == "refusal" and reason != "max-tokens"):
            reason = outcome  # max-tokens is sticky: a later completed step keeps it
        if not agent.inbox.next_step:
            break
    return TurnEnd(turn=turn.number, reason=reason)


def _enter_context(agent: Agent, turn: int) -> None:
    """Enter the agent's runtime context when its text changed since the last one entered.

    It is a message after the system prompt and tools, so those stay one prefix for every
    agent of a scope; a fork's seed keeps its parent's snapshots and the fork enters its own.
    """
    blocks = agent.config.context_blocks
    entered = agent.context_snapshot
    if blocks == entered:
        return
    if entered and _joined(blocks) == _joined(entered):  # the same text cut otherwise (an old log)
        agent.context_snapshot = blocks
        return
    message = UserMessage(
        id=new_message_id(), content=blocks or _CLEARED_BLOCKS, source=CONTEXT_SOURCE
    )
    agent.record(UserMessageEvent(message=message, turn=turn))
    agent.transcript.append(message)
    agent.context_snapshot = blocks


def _joined(blocks: tuple[TextBlock, ...]) -> str:
    return "".join(block.text for block in blocks)


def _budget_end(turn: int, spent: str) -> TurnEnd:
    return TurnEnd(
        v=2,
        turn=turn,
        reason="budget",
        error_code=str(ErrorCode.BUDGET_EXHAUSTED),
        error_message=f"{spent}; no further model call was made",
    )


def _error_end(agent: Agent, turn: int, exc: Exception) -> TurnEnd:
    retryable: bool | None = None
    if isinstance(exc, SubagentsError):
        code, message, retryable = str(exc.code), exc.message, exc.retryable
    else:
        log.exception("turn %d of %s failed", turn, agent.name)
        code, message = str(ErrorCode.INTERNAL), f"{type(exc).__name__}: {exc}"
    agent.bus.emit(AgentFailed(agent.id, agent.name, turn, code, message))
    return TurnEnd(
        turn=turn, reason="error", error_code=code, error_message=message, retryable=retryable
    )


def _build_request(agent: Agent) -> ModelRequest:
    return ModelRequest(
        agent_name=agent.name,
        session_id=agent.id,
        call_index=agent.call_index,
        system=agent.config.system_prompt,
        messages=agent.transcript,
        tools=agent.tools.schemas(),
        max_tokens=agent.config.max_tokens,
    )


class _ToolNames:
    """The names of the last tool tuple a request offered, kept once for every agent.

    Agents whose scope adds nothing share their registry's tuple, so a fan-out names it once
    instead of keeping a tuple of names per child; another tuple is named when it comes.
    """

    def __init__(self) -> None:
        self.tools: Sequence[ToolSchema] = ()
        self.names: tuple[str, ...] = ()

    def of(self, tools: Sequence[ToolSchema]) -> tuple[str, ...]:
        if tools is not self.tools:
            self.tools, self.names = tools, tuple(t.name for t in tools)
        return self.names


_tool_names = _ToolNames()


def _log_request_header(agent: Agent, request: ModelRequest) -> None:
    key = (agent.model.provider, agent.model.name, request.system, _tool_names.of(request.tools))
    if key == agent.last_header:
        return
    reason = agent.header_reason if agent.last_header is None else "change"
    agent.last_header = key
    agent.record(
        RequestHeader(reason=reason, provider=key[0], model=key[1], system=key[2], tools=key[3])
    )


async def _run_step(
    agent: Agent, turn: int, step: int, reservation: CallReservation | None
) -> StepOutcome:
    request = _build_request(agent)
    _log_request_header(agent, request)
    # Made with the first chunk: until then the call only waits (thousands of children's
    # calls at once in a fan-out), and an empty assembler is three objects to walk each.
    assembler: BlockAssembler | None = None
    agent.call_index += 1
    emit_delta = _delta_emitter(agent, turn, step)
    try:
        async for chunk in agent.model.stream(request):
            if assembler is None:
                assembler = _assembler(agent)
            assembler.feed(chunk)
            if emit_delta is not None:
                emit_delta(chunk)
    except asyncio.CancelledError:
        _interrupted(agent, assembler, turn, step, reservation)
        raise
    except Exception as exc:
        raise _failed(agent, exc, turn, step, reservation) from exc
    message, finish = _answered(agent, assembler, turn, step, reservation)
    # The assembler is not kept through the tool calls below: in a fan-out it holds the
    # parts of thousands of calls.
    assembler = None
    if finish in ("max-tokens", "refusal"):
        return "max-tokens" if finish == "max-tokens" else "refusal"
    if not message.tool_calls:
        return "completed"
    concluded = await _run_tools(agent, turn, step, message)
    return "completed" if concluded else "continue"


def _answered(
    agent: Agent,
    assembler: BlockAssembler | None,
    turn: int,
    step: int,
    reservation: CallReservation | None,
) -> tuple[AssistantMessage, FinishReason]:
    """Record a call's whole answer (a stream without a chunk is an empty one)."""
    if assembler is None:
        assembler = _assembler(agent)
    message = assembler.message()
    finish, usage = assembler.finish, assembler.usage
    agent.record(
        AssistantMessageEvent(turn=turn, step=step, message=message, finish=finish, usage=usage)
    )
    if reservation is not None:
        reservation.settle(usage)
    if message.content:
        agent.transcript.append(message)
    return message, finish


def _interrupted(
    agent: Agent,
    assembler: BlockAssembler | None,
    turn: int,
    step: int,
    reservation: CallReservation | None,
) -> None:
    """Record what a cancelled call had said, if anything visible."""
    if assembler is not None and assembler.has_visible_text():
        partial = assembler.message(interrupted=True)
        agent.record(
            AssistantMessageEvent(
                turn=turn, step=step, message=partial, usage=assembler.usage, interrupted=True
            )
        )
        agent.transcript.append(partial)
        if reservation is not None:
            reservation.settle(assembler.usage)
    else:
        # Nothing of this call reached the log, so it consumed no response: a live agent
        # and one resumed from the log must agree on the next call index.
        agent.call_index -= 1


def _failed(
    agent: Agent, exc: Exception, turn: int, step: int, reservation: CallReservation | None
) -> ModelError:
    """Record a failed call; the error its turn ends with."""
    error = (
        exc
        if isinstance(exc, ModelError)
        else ModelError(f"model adapter failed: {type(exc).__name__}: {exc}")
    )
    agent.record(
        ModelErrorEvent(
            turn=turn,
            step=step,
            code=error.code,
            message=error.message,
            retryable=error.retryable,
        )
    )
    if reservation is not None:
        reservation.settle(None)
    return error


def _assembler(agent: Agent) -> BlockAssembler:
    return BlockAssembler(provider=agent.model.provider, model=agent.model.name)


def _delta_emitter(agent: Agent, turn: int, step: int) -> Callable[[ModelChunk], None] | None:
    """What passes this step's text and reasoning pieces to the bus, or None: nobody listens.

    Asked once per step, so a run without listeners builds no event per chunk. A listener
    subscribed during the step hears from the next one.
    """
    bus = agent.bus
    text = bus.wants(AgentTextDelta)
    reasoning = bus.wants(AgentReasoningDelta)
    if not (text or reasoning):
        return None
    agent_id, name = agent.id, agent.name

    def emit(chunk: ModelChunk) -> None:
        if text and isinstance(chunk, TextDelta) and chunk.text:
            bus.emit(AgentTextDelta(agent_id, name, turn, step, chunk.text))
        elif reasoning and isinstance(chunk, ReasoningDelta) and chunk.text:
            bus.emit(AgentReasoningDelta(agent_id, name, turn, step, chunk.text))

    return emit


class _CallContext:
    """The `ToolContext` a handler receives."""

    __slots__ = ("agent", "call_id", "concluded", "grant", "tool_name")

    def __init__(self, agent: Agent, call: ToolCallBlock) -> None:
        self.agent = agent
        self.call_id = call.id
        self.tool_name = call.name
        self.concluded = [False]
        self.grant: str | None = None

    @property
    def agent_id(self) -> str:
        return self.agent.id

    @property
    def agent_name(self) -> str:
        return self.agent.name

    def conclude_turn(self) -> None:
        self.concluded[0] = True


async def _execute(agent: Agent, call: ToolCallBlock) -> ToolOutcome:
    """`execute_tool` in one coroutine frame: a fan-out holds thousands of these.

    So it awaits the handler itself rather than through `run_checked` (about 300 bytes per
    call in flight, and a coroutine fewer for every tool call to make and resume).
    """
    ctx = _CallContext(agent, call)
    checked = check_call(agent.tools, call, ctx)
    if isinstance(checked, ToolOutcome):
        return checked
    try:
        running = checked.spec.handler(checked.args, ctx)
        # Not kept while it runs: the checked call holds the parsed arguments, which a
        # handler that has read them (as `subagent`'s does, in the call) no longer needs.
        del checked
        value = await running
    except Exception as exc:
        return raised_outcome(call, exc)
    return returned_outcome(call, value, concluded=ctx.concluded[0])


def _groups(
    agent: Agent, calls: tuple[ToolCallBlock, ...], alone: Set[int] = frozenset()
) -> list[list[int]]:
    """Consecutive parallel-safe calls share a group (up to the cap); others run alone.

    A gated call runs alone (as do the calls in `alone`: those asking for an escalation):
    nothing else of its response starts before it is decided.
    """
    cap = agent.config.max_parallel_tools
    gates = agent.gates
    groups: list[list[int]] = []
    current: list[int] = []
    for index, call in enumerate(calls):
        spec = agent.tools.get(call.name)
        shared = index not in alone and gates.gates(call.name) is None
        if spec is not None and spec.parallel_safe and shared:
            if cap is not None and len(current) >= cap:
                groups.append(current)
                current = []
            current.append(index)
            continue
        if current:
            groups.append(current)
            current = []
        groups.append([index])
    if current:
        groups.append(current)
    return groups


async def _escalations(agent: Agent, calls: tuple[ToolCallBlock, ...]) -> dict[int, Escalation]:
    """The calls that need more than the agent's sandbox mode, under `sandbox:ask` only."""
    if not agent.gates.escalation:
        return {}
    found: dict[int, Escalation] = {}
    for index, call in enumerate(calls):
        spec = agent.tools.get(call.name)
        if spec is None or spec.escalation is None:
            continue
        arguments = parse_arguments(call.arguments)
        if isinstance(arguments, ToolOutcome):
            continue  # the call fails as usual when it runs
        escalation = await spec.escalation(_CallContext(agent, call), arguments)
        if escalation is not None:
            found[index] = escalation
    return found


async def _run_alone(
    agent: Agent, calls: tuple[ToolCallBlock, ...], index: int, outcomes: dict[int, ToolOutcome]
) -> None:
    """Run one exclusive call, storing its outcome in `outcomes`.

    A handler may swallow our cancellation; the turn must still end aborted, and a success
    that finished after the abort is left out, so it is committed as `ABORTED`.
    """
    outcome = await _execute(agent, calls[index])
    if agent.take_abort_cause() is not None:
        if outcome.is_error:
            outcomes[index] = outcome
        raise asyncio.CancelledError
    outcomes[index] = outcome


@dataclass(frozen=True, slots=True)
class _Ask:
    """Why a new request is made, and the escalation an approval grants (if any)."""

    reason: str
    grant: str | None = None

    @classmethod
    def of(cls, pattern: str | None, escalation: Escalation | None) -> _Ask:
        gated = f"gated by {pattern!r}" if pattern is not None else None
        if escalation is None:
            assert gated is not None
            return cls(gated)
        reason = escalation.reason if gated is None else f"{gated}; {escalation.reason}"
        return cls(reason, escalation.grant)


class _ToolBatch:
    """The tool calls of one response: started in groups, committed strictly in call order."""

    def __init__(self, agent: Agent, turn: int, step: int, calls: tuple[ToolCallBlock, ...]):
        self.agent = agent
        self.turn = turn
        self.step = step
        self.calls = calls
        self.outcomes: dict[int, ToolOutcome] = {}
        self.tasks: dict[int, asyncio.Task[ToolOutcome]] = {}
        self.started: set[int] = set()
        self.committed = 0
        self.concluded = False

    def record_call(self, index: int) -> None:
        call = self.calls[index]
        self.agent.record(
            ToolCallEvent(
                turn=self.turn,
                step=self.step,
                call_id=call.id,
                name=call.name,
                arguments=call.arguments,
            )
        )
        self.started.add(index)

    def _needs_checkpoint(self, group: list[int]) -> bool:
        for index in group:
            spec = self.agent.tools.get(self.calls[index].name)
            if spec is not None and spec.checkpoint:
                return True
        return False

    def commit(self, index: int, outcome: ToolOutcome) -> None:
        call = self.calls[index]
        result = ToolResultMessage(
            id=new_message_id(),
            call_id=call.id,
            name=call.name,
            content=outcome.content,
            is_error=outcome.is_error,
        )
        self.agent.record(
            ToolResultEvent(
                turn=self.turn,
                step=self.step,
                message=result,
                code=outcome.code,
                concludes_turn=outcome.concludes_turn,
            )
        )
        self.agent.transcript.append(result)
        self.committed = index + 1
        self.concluded = self.concluded or outcome.concludes_turn

    async def run_guarded(self, *, start: int = 0, request: ApprovalRequest | None = None) -> bool:
        """`run`, committing whatever a cancellation left (see `settle_cancelled`)."""
        self.committed = start
        try:
            return await self.run(start=start, request=request)
        except asyncio.CancelledError:
            await self.settle_cancelled()
            raise

    async def run(self, *, start: int = 0, request: ApprovalRequest | None = None) -> bool:
        """Run the calls from `start` on; `request` is the waiting call's, made before a restart."""
        gates = self.agent.gates
        asks = await _escalations(self.agent, self.calls[start:])
        asks = {start + index: escalation for index, escalation in asks.items()}
        for group in _groups(self.agent, self.calls, alone=asks.keys()):
            if group[0] < start:
                continue
            if len(group) == 1:
                index = group[0]
                resumed = request if request is not None and index == start else None
                pattern = gates.gates(self.calls[index].name)
                ask = asks.get(index)
                if resumed is not None or pattern is not None or ask is not None:
                    await self._run_gated(index, resumed or _Ask.of(pattern, ask))
                    self.commit(index, self.outcomes[index])
                    continue
            for index in group:
                self.record_call(index)
            if self._needs_checkpoint(group):
                # Tools with effects outside our log start only once their calls are durable.
                await self.agent.session.flush()
            if len(group) == 1:
                await _run_alone(self.agent, self.calls, group[0], self.outcomes)
            else:
                async with asyncio.TaskGroup() as tg:
                    for index in group:
                        self.tasks[index] = tg.create_task(_execute(self.agent, self.calls[index]))
                for index in group:
                    self.outcomes[index] = self.tasks[index].result()
            for index in group:
                self.commit(index, self.outcomes[index])
        return self.concluded

    async def _run_gated(self, index: int, asked: ApprovalRequest | _Ask) -> None:
        """A gated call: checked, put to a person, and run only once approved.

        `asked` is a new request's reason, or the request a restart left waiting. Its
        `tool/call` is recorded only when it starts (approved) or gets its result: a request
        without one never ran. An approved escalation's grant is given to this call only.
        """
        agent = self.agent
        call = self.calls[index]
        ctx = _CallContext(agent, call)
        request = asked if isinstance(asked, ApprovalRequest) else None
        checked = check_call(agent.tools, call, ctx)
        if isinstance(checked, ToolOutcome) and request is None:
            self.record_call(index)
            self.outcomes[index] = checked
            return
        decision = await agent.approvals.wait(
            agent,
            turn=self.turn,
            step=self.step,
            call=call,
            reason=asked.reason,
            request=request,
            grant=asked.grant,
        )
        if not decision.approved:
            self.record_call(index)
            self.outcomes[index] = denied_outcome(decision, call.name)
            return
        ctx.grant = asked.grant
        self.record_call(index)
        if isinstance(checked, ToolOutcome):  # approved before a restart; it fails now
            self.outcomes[index] = checked
            return
        if checked.spec.checkpoint:
            await agent.session.flush()
        outcome = await run_checked(checked, call, ctx, concluded=ctx.concluded)
        if agent.take_abort_cause() is not None:
            if outcome.is_error:
                self.outcomes[index] = outcome
            raise asyncio.CancelledError
        self.outcomes[index] = outcome

    async def settle_cancelled(self) -> None:
        """Commit every call left after a cancellation.

        Finished calls keep their results, started ones become `ABORTED`, calls never started
        get a `tool/call` + `tool/result` pair `ABORTED_BEFORE_DISPATCH`.
        """
        for index in range(self.committed, len(self.calls)):
            task = self.tasks.get(index)
            finished = task is not None and task.done() and not task.cancelled()
            if index not in self.outcomes and task is not None and finished:
                self.outcomes[index] = task.result()
            if index in self.outcomes:
                outcome = self.outcomes[index]
            elif index in self.started:
                # A tool may say in its own words what a cut call means (a delegation: the
                # child's run was cancelled).
                spec = self.agent.tools.get(self.calls[index].name)
                text = spec.aborted_text if spec is not None and spec.aborted_text else None
                outcome = ToolOutcome(text or ABORTED_TEXT, True, ErrorCode.ABORTED)
            else:
                self.record_call(index)
                outcome = ToolOutcome(
                    ABORTED_BEFORE_DISPATCH_TEXT, True, ErrorCode.ABORTED_BEFORE_DISPATCH
                )
            self.commit(index, outcome)


async def _run_tools(agent: Agent, turn: int, step: int, message: AssistantMessage) -> bool:
    """Run the calls of one response; True when a result concluded the turn."""
    return await _ToolBatch(agent, turn, step, message.tool_calls).run_guarded()
