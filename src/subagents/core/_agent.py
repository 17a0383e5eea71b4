"""`Agent`: one session's inbox, status, cancellation and the driver that runs its turns."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from .._task_owner import TaskOwner
from ..errors import ClosedError, ErrorCode, UsageError
from ..ids import SessionId
from ..messages import Message, MessageSource, TextBlock, UserMessage, user_message
from ..models import Model
from ..sessions import (
    AssistantMessageEvent,
    EventRecord,
    InboxTarget,
    ModelErrorEvent,
    RequestHeader,
    Session,
    SessionEvent,
    TranscriptProjection,
    TurnStart,
    UserMessageEvent,
    WaitingStep,
    fold,
)
from ..tools import ToolScope
from ._approvals import ApprovalDesk, ApprovalPolicy
from ._budget import Ledger
from ._bus import AgentDisposed, AgentStatusChanged, EventBus
from ._inbox import Inbox

__all__ = [
    "Agent",
    "AgentConfig",
    "CONTEXT_CLEARED",
    "CONTEXT_OPENING",
    "CONTEXT_SOURCE",
    "CancelCause",
    "check_max_tokens",
]

log = logging.getLogger("subagents.agent")

CONTEXT_OPENING = "Current runtime context; it supersedes any earlier runtime-context message."
CONTEXT_CLEARED = "Current runtime context: none. Earlier runtime-context messages no longer apply."
CONTEXT_SOURCE = MessageSource(kind="runtime", name="context")
"""The source of a runtime-context message, entered by the loop (see `AgentConfig.context`)."""


def check_max_tokens(value: object, what: str) -> int | None:
    """`value` as a response cap: None, or a whole number of at least 1 (`USAGE` otherwise)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(
            f"{what} must be a whole number of at least 1 (or None for the server's default), "
            f"got {value!r}",
            code=ErrorCode.USAGE,
        )
    return value


CancelCause = Literal["user", "parent", "disposed", "hook", "shutdown"]


class _Idle:
    """`asyncio.Event` for one flag, without its deque (600 bytes an agent, mostly unused)."""

    __slots__ = ("_waiters", "is_set")

    def __init__(self) -> None:
        self.is_set = True
        self._waiters: list[asyncio.Future[None]] | None = None
        """Made by the first waiter: a foreground child has none (its parent runs it)."""

    def set(self) -> None:
        self.is_set = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self.is_set = False

    async def wait(self) -> None:
        if self.is_set:
            return
        waiter = asyncio.get_running_loop().create_future()
        waiters = self._waiters
        if waiters is None:
            waiters = self._waiters = []
        waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter in waiters:  # cancelled: not left behind for `set`
                waiters.remove(waiter)


@functools.lru_cache(maxsize=64)
def _system_prompt(preamble: str, instructions: str) -> str:
    """One string for every agent with the same prompt (a tree has few), not one each."""
    return f"{preamble}\n\n{instructions}" if preamble else instructions


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """How an agent talks to its model: its full name, instructions and loop limits."""

    name: str = "lead"
    instructions: str = "You are a helpful agent. Use the tools you have when they help."
    """The agent's own instructions (a definition's body, say): what its children inherit."""
    preamble: str = ""
    """What the runtime says before the instructions, the same for every agent it runs (how
    its tree works), so agents with other instructions still share that prefix."""
    context: tuple[tuple[str, str], ...] = ()
    """What the runtime tells the agent about where it stands: one paragraph per topic (its
    place in the tree, its file policy, ...), kept apart so each can be replaced without
    parsing the text. It is not part of the system prompt: the loop enters it as a
    runtime-context message whenever its text changed (`context_text`), so the system prompt
    and tools stay one prefix that every agent of a scope shares with a server's cache."""
    max_parallel_tools: int | None = None
    """Cap on parallel-safe calls of one response running at once (None: no cap)."""
    max_tokens: int | None = None

    @property
    def system_prompt(self) -> str:
        """The system message: the preamble, then the instructions (nothing per agent)."""
        return _system_prompt(self.preamble, self.instructions)

    @property
    def context_text(self) -> str:
        """The runtime-context snapshot `context` renders ("" when it says nothing)."""
        return "".join(block.text for block in self.context_blocks)

    @property
    def context_blocks(self) -> tuple[TextBlock, ...]:
        """The text blocks of the runtime-context message `context` renders (() for none).

        The opening and the first paragraph are one block, the other paragraphs one more,
        which agents saying the same share: the first topic is the one that says who the
        agent is (delegation ranks it first), and a fan-out of thousands of children would
        otherwise hold thousands of copies of the rest. Joined, the blocks are the text a
        model is sent.
        """
        context = self.context
        if not context:
            return ()
        head = TextBlock(f"{CONTEXT_OPENING}\n\n{context[0][1]}")
        if len(context) == 1:
            return (head,)
        return (head, _shared_paragraphs(tuple(text for _, text in context[1:])))

    def with_context(self, topic: str, text: str, *, order: Sequence[str] = ()) -> AgentConfig:
        """This config telling `text` about `topic`, in place of what it said about it before.

        A new topic goes last, unless `order` ranks topics: then they are sorted by it (topics
        it does not name keep their place after those it does).
        """
        return dataclasses.replace(self, context=self.context_with(topic, text, order=order))

    def context_with(
        self, topic: str, text: str, *, order: Sequence[str] = ()
    ) -> tuple[tuple[str, str], ...]:
        """The `context` that `with_context` gives (for a caller changing more than it)."""
        return self.context_saying(((topic, text),), order=order)

    def context_saying(
        self, told: Sequence[tuple[str, str]], *, order: Sequence[str] = ()
    ) -> tuple[tuple[str, str], ...]:
        """The `context` telling each `(topic, text)` of `told`, as `context_with` tells one.

        A topic told takes the place of its first paragraph and drops any later one; a topic
        not there yet goes last.
        """
        new = dict(told)
        context: list[tuple[str, str]] = []
        placed: set[str] = set()
        for item in self.context:  # a new agent has none yet
            topic = item[0]
            if topic not in new:
                context.append(item)
            elif topic not in placed:
                placed.add(topic)
                context.append((topic, new[topic]))
        context.extend(item for item in new.items() if item[0] not in placed)
        if order:
            rank = _rank(tuple(order))
            last = len(rank)
            context.sort(key=lambda item: rank.get(item[0], last))
        return tuple(context)


@functools.lru_cache(maxsize=64)
def _shared_paragraphs(texts: tuple[str, ...]) -> TextBlock:
    """The block after a runtime context's first paragraph (one object for every sibling)."""
    return TextBlock("\n\n" + "\n\n".join(texts))


@functools.lru_cache(maxsize=16)
def _rank(order: tuple[str, ...]) -> dict[str, int]:
    """Each topic's place in `order` (a runtime has one or two orders, asked per agent)."""
    return {name: index for index, name in enumerate(order)}


class Agent:
    """An agent and its session, which share one id.

    Input arrives through the inbox (`followup`, `steer`, `inject`); a driver task runs turns
    while there is work; `cancel` stops the current turn with a recorded cause; `dispose`
    reaches quiescence and releases the agent.
    """

    # Slots: a fan-out holds thousands of agents at once, and a dict of 30 attributes each
    # was the largest object of an idle child.
    __slots__ = (
        "__weakref__",
        "_abort_cause",
        "_abort_command",
        "_disposed",
        "_disposers",
        "_driver",
        "_hosted",
        "_idle",
        "_in_turn",
        "_posting",
        "_status",
        "_tasks",
        "_turn_over",
        "_wake",
        "approvals",
        "before_call",
        "bus",
        "call_index",
        "config",
        "context_snapshot",
        "gates",
        "header_reason",
        "id",
        "inbox",
        "last_header",
        "ledger",
        "model",
        "prepare",
        "record",
        "session",
        "tools",
        "transcript",
        "turn_number",
        "waiting",
    )

    def __init__(
        self,
        *,
        session: Session,
        model: Model,
        tools: ToolScope,
        bus: EventBus,
        config: AgentConfig,
        approvals: ApprovalDesk | None = None,
    ) -> None:
        self.session: Final = session
        self.id: Final[SessionId] = session.id
        self.record: Final[Callable[[SessionEvent], EventRecord]] = session.submit
        """Append without waiting; a later flush or durable append acknowledges it (the
        session's own `submit`: an event is recorded a dozen times per child)."""
        self.model = model
        self.tools = tools
        self.bus = bus
        self.config = config
        self.ledger: Ledger | None = None
        """The budget its model calls are charged to (None: no budget above or on it)."""
        self.gates = ApprovalPolicy()
        """Which of its calls wait for a decision (the runtime fixes it from its log)."""
        self.approvals = approvals if approvals is not None else ApprovalDesk()
        self.waiting: WaitingStep | None = None
        """A turn a restart left waiting for a decision, which its next run takes up."""
        self.inbox = Inbox(session)
        self._tasks: TaskOwner | None = None
        """Made when it first starts a driver task: a foreground child runs in its host's."""
        self._status: Literal["idle", "running"] = "idle"
        self._idle = _Idle()
        self._driver: asyncio.Task[Any] | None = None
        """The task running its turns: its own, or the host's (`run_here`); None between."""
        self._hosted = False
        """Whether its turns run in a host's task (`run_here`), not a task of its own."""
        self._in_turn = False
        """Whether the driver is inside a turn: only then does a cancel reach the turn."""
        self._turn_over: asyncio.Future[None] | None = None
        """Set when the current turn ends, for a cancel that waits for it (made on demand)."""
        self._abort_cause: str | None = None
        self._abort_command: int | None = None
        self._wake = False
        self._disposed = False
        self._disposers: list[Callable[[Agent], Awaitable[None]]] = []
        self.before_call: Callable[[Agent], Awaitable[None]] | None = None
        """Awaited before each of this agent's model calls, after `prepare`: what it is
        offered may need work first (an MCP server starting on first use)."""
        self.prepare: Callable[[Agent], None] | None = None
        """Called once, before this agent's first model call here: when everything that
        binds it (its profile, budget, tools) is done, the runtime settles what it is told
        and offered (`prepared`)."""
        self._restore(session.records)
        self._posting = True
        """Whether it posts its records on the bus (until it is gone)."""
        session.observe(self._posted)

    def _restore(self, records: Sequence[EventRecord]) -> None:
        """Rebuild the caches a loop needs from the stored log (cold load or fork seed).

        A fork's seed (the first `seed_length` records) shows in the transcript, but its
        inbox work, model calls and request headers belong to the parent, not to this agent.
        """
        own = records[self.session.header.seed_length :]
        self.inbox.replay(own)
        self.turn_number = 0
        self.call_index = 0
        self.transcript: list[Message] = list(fold(TranscriptProjection(), records))
        self.last_header: tuple[str, str, str, tuple[str, ...]] | None = None
        self.header_reason: Literal["initial", "resume"] = "initial"
        self.context_snapshot: tuple[TextBlock, ...] = ()
        """The runtime context this agent's own log last entered (() for none or cleared)."""
        for record in own:
            match record.event:
                case UserMessageEvent(message=message) if message.source == CONTEXT_SOURCE:
                    cleared = message.text == CONTEXT_CLEARED
                    self.context_snapshot = () if cleared else message.content
                case TurnStart(turn=turn):
                    self.turn_number = turn
                case AssistantMessageEvent() | ModelErrorEvent():
                    self.call_index += 1
                case RequestHeader():
                    self.header_reason = "resume"
                case _:
                    pass

    # -- identity and state ------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def status(self) -> Literal["idle", "running"]:
        return self._status

    @property
    def disposed(self) -> bool:
        return self._disposed

    def _set_status(self, status: Literal["idle", "running"]) -> None:
        if status != self._status:
            self._status = status
            self.bus.emit(AgentStatusChanged(self.id, self.name, status))

    async def _append(self, event: SessionEvent) -> EventRecord:
        """Append durably: returns once the event is in the store."""
        return await self.session.append(event)

    def _posted(self, session: Session, record: EventRecord) -> None:
        self.bus.post(self.id, self.name, record)

    def prepared(self) -> None:
        """Run `prepare` if it has not run yet (the loop calls this before each step)."""
        prepare, self.prepare = self.prepare, None
        if prepare is not None:
            prepare(self)

    def when_idle(self) -> Coroutine[Any, Any, None]:
        """Wait until no turn runs and no waking work is pending.

        The idle flag's own wait, not a coroutine around it: a parent waits through this
        for every foreground child, one frame fewer each.
        """
        return self._idle.wait()

    # -- input ------------------------------------------------------------------------------

    async def send(
        self,
        message: UserMessage | str,
        *,
        target: InboxTarget = "next-turn",
        wake: bool = True,
        source: MessageSource | None = None,
        durable: bool = True,
    ) -> UserMessage:
        """Queue `message`; it is durable in the log when this returns.

        `durable=False` skips the wait, for internal deliveries whose acceptance nobody
        outside waits for (the store still commits it before anything written later).
        """
        if self._disposed:
            raise ClosedError(f"agent {self.name!r} ({self.id}) is disposed; it takes no input")
        if isinstance(message, str):
            message = user_message(message, source=source)
        if wake and self._abort_cause is not None:
            # The current activity is being aborted: the message waits for the next turn.
            target = "next-turn"
        await self.inbox.append(message, target, durable=durable)
        if wake:
            self._wake = True
            self._kick()
        return message

    async def followup(self, message: UserMessage | str) -> UserMessage:
        """Queue an ordinary later turn."""
        return await self.send(message, target="next-turn", wake=True)

    async def steer(self, message: UserMessage | str) -> UserMessage:
        """Enter `message` at the next step boundary, starting a turn if idle."""
        return await self.send(message, target="next-step", wake=True)

    async def inject(self, message: UserMessage | str) -> UserMessage:
        """Enter `message` at the next step boundary without waking an idle agent."""
        return await self.send(message, target="next-step", wake=False)

    def wake(self) -> bool:
        """Run pending work (after a resume); False when there is none.

        Pending input of either list is work: a turn's first step claims every next-step
        item too. A crash can leave a steered message (a settlement notice, say) accepted but
        never claimed, once the turn it was meant for ended or was cut off. A turn left
        waiting for an approval is work: it takes its wait up again.
        """
        if self._disposed or not (self.inbox or self.waiting is not None):
            return False
        self._wake = True
        self._kick()
        return True

    # -- driver -----------------------------------------------------------------------------

    def _kick(self) -> None:
        if self._disposed:
            # Disposed while the input was being written: it is in the log, and the disposal
            # decides its fate (kept for a resume, or cancelled) as for input a moment older.
            return
        if self._driver is None or self._driver.done():
            self._idle.clear()
            self._set_status("running")
            self._driver = self._task_owner().spawn(self._drive(), name=f"driver {self.name}")

    def run_here(self) -> Coroutine[Any, Any, None]:
        """Run its pending turns in the calling task, then return once it is idle.

        For a host that would only wait for them (a parent waiting on a foreground child):
        no task of its own, one scheduling hop fewer each way. A cancel of its turn cancels
        the host task for that turn only (`run_turn` takes it back); a cancellation of the
        host cuts the turn on the way to the child's disposal. With a driver already
        running, or nothing pending, this only waits.
        """
        driver = self._driver
        if (driver is not None and not driver.done()) or self._disposed or not self._has_work():
            return self._idle.wait()
        self._idle.clear()
        self._set_status("running")
        self._driver = asyncio.current_task()
        self._hosted = True
        return self._drive()

    def _has_work(self) -> bool:
        return (
            self.waiting is not None
            or bool(self.inbox.next_turn)
            or (self._wake and bool(self.inbox.next_step))
        )

    async def _drive(self) -> None:
        """Run turns while work is pending, each in this task (not a task per turn).

        `cancel` cancels this task only while `_in_turn` is set, and `run_turn` absorbs a
        cancellation it was given a cause for, so the loop goes on to pending work.
        """
        from ._loop import run_turn

        try:
            while not self._disposed and self._has_work():
                self._wake = False
                self._abort_cause = self._abort_command = None
                self._in_turn = True
                try:
                    reason = await run_turn(self)
                finally:
                    self._in_turn = False
                    over, self._turn_over = self._turn_over, None
                    if over is not None and not over.done():
                        over.set_result(None)
                if reason == "error":
                    break  # queued work waits for the next wake
        finally:
            self._abort_cause = self._abort_command = None
            self._driver = None
            self._hosted = False
            self._set_status("idle")
            self._idle.set()

    def take_waiting(self) -> WaitingStep | None:
        """The waiting turn to take up (once), or None."""
        waiting, self.waiting = self.waiting, None
        return waiting

    @property
    def waits_for_approval(self) -> bool:
        """Whether its turn waits for a decision now (or will, once it runs again)."""
        return self.waiting is not None or bool(self.approvals.waiting(self.id))

    @property
    def takes_steering(self) -> bool:
        """Whether input for the next step joins the turn running now (not the next one)."""
        return self._status == "running" and self._abort_cause is None and not self._disposed

    @property
    def abort_command(self) -> int | None:
        """The control command that asked for the current abort (None: none did)."""
        return self._abort_command

    def take_abort_cause(self) -> str | None:
        """The cause of our own cancellation of the current turn (None: not ours)."""
        return self._abort_cause

    @property
    def outside_cause(self) -> str:
        """The cause a turn records for a cancellation that was not ours.

        A hosted turn is cut from outside only when its host is cancelled, which disposes
        the child: the log says so, as it would had the disposal cut the turn itself.
        """
        return "disposed" if self._hosted else "cancelled"

    # -- cancellation and disposal -------------------------------------------------------------

    async def cancel(
        self, cause: CancelCause = "user", *, keep_inbox: bool = False, command: int | None = None
    ) -> None:
        """Stop the current turn, recording `cause` (the first cause wins).

        Without `keep_inbox` pending input is durably cancelled first; with it, pending
        next-turn work runs once the aborted turn has closed. An idle agent aborts nothing.
        `command` is the control command asking for it, recorded with the turn's end; with
        one, this returns once that end is durable.
        """
        if not keep_inbox:
            self._wake = False
            if self.inbox:
                await self.inbox.clear()
        driver = self._driver
        if self._in_turn and driver is not None and self._abort_cause is None:
            self._abort_cause = cause
            self._abort_command = command
            driver.cancel()
            if command is not None:
                # Its turn's end names the command: once that is durable, the command is done.
                over = self._turn_over
                if over is None:
                    over = self._turn_over = asyncio.get_running_loop().create_future()
                await over
                await self.session.flush()

    def add_disposer(self, disposer: Callable[[Agent], Awaitable[None]]) -> None:
        """Run `disposer` when this agent is disposed, after its turn stopped, newest first.

        Owners of work tied to this agent (background tasks, children) release it here, so
        disposal reaches quiescence of everything the agent started. It is called with this
        agent, so one bound method serves every agent (no closure each: thousands live at once).
        """
        self._disposers.append(disposer)

    async def dispose(self, *, keep_inbox: bool = False) -> None:
        """Abort, wait for quiescence and release the agent; safe to call twice.

        `keep_inbox=True` leaves pending input in the log so a later resume runs it.
        """
        if self._disposed:
            if self._tasks is not None:
                await self._tasks.aclose()
            return
        self._disposed = True
        await self.cancel("disposed", keep_inbox=keep_inbox)
        driver = self._driver
        if driver is not None and not driver.done():
            # A host's task goes on after our turns: wait for those, not for the task.
            await (self._idle.wait() if self._hosted else asyncio.wait([driver]))
        while self._disposers:
            disposer = self._disposers.pop()
            try:
                await disposer(self)
            except Exception:
                log.exception("a disposer of agent %s failed", self.name)
        if self._tasks is not None:
            await self._tasks.aclose()
        self.tools.close()
        self._idle.set()
        # No wait for the disk here: the store commits in submission order, so the next
        # acknowledgement anyone gets (the parent's tool result, the run's end, a flush)
        # covers these records too. The last of them are posted once the store has told
        # their outcome, and only then is the agent announced gone, so a follower of the
        # bus sees its whole log.
        self.session.when_told(self._gone)

    def _gone(self) -> None:
        """After disposal, once the store has told every write: stop posting, announce it."""
        broken = self.session.broken
        if broken is not None:
            log.error("agent %s was disposed with writes that failed: %s", self.name, broken)
        if self._posting:
            self._posting = False
            self.session.unobserve(self._posted)
        self.bus.emit(AgentDisposed(self.id, self.name))

    async def append_after(self, event: SessionEvent) -> EventRecord:
        """Append durably to the log of this agent, disposed or not, and post the record.

        For a record its owner writes once the agent is disposed (a settlement): the agent
        no longer posts its log once it is gone, and a follower of the bus must still see it.
        """
        record = await self.session.append(event)
        if not self._posting:
            self._posted(self.session, record)
        return record

    def live_tasks(self) -> int:
        return 0 if self._tasks is None else len(self._tasks)

    def _task_owner(self) -> TaskOwner:
        if self._tasks is None:
            self._tasks = TaskOwner(f"agent {self.name}")
        return self._tasks
