"""Commands to a live tree: executed by the process that holds it, asked for by any other.

The holder's side (`CommandDesk`) takes a tree's pending commands from the store, checks
each (tenant, membership, shape) and executes it as the user channel would in-process: a
`send` is the member's next turn, a `steer` joins its running turn, an `interrupt` stops
it. Each effect carries the command's identity into the member's log (the message id, or
the `turn/end` of the stopped turn), so a holder that dies after the effect and before
marking the command done does not execute it again: the next holder finds it done in the
log. The asking side (`ask_holder`) writes the command, wakes the holder through its
socket and waits for the outcome in the store; when no live process holds the tree any
more it takes the tree itself, which executes what is pending.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence, Set
from typing import TYPE_CHECKING, Any, Final, Literal

from ..core import lease_alive, replay_inbox, wake_holder
from ..errors import ErrorCode, LeaseHeld, NotFoundError, SubagentError, SubagentsError, UsageError
from ..ids import MessageId, SessionId
from ..messages import MessageSource, TextBlock, UserMessage
from ..sessions import (
    DECISION_KINDS,
    Command,
    CommandKind,
    CommandRow,
    EventRecord,
    InboxSpliced,
    SessionHeader,
    StatusProjection,
    TurnEnd,
    UserMessageEvent,
    decode_outcome,
    encode_body,
    encode_outcome,
    fold,
    parse_command,
)
from ._approvals import decide_here

log = logging.getLogger("subagents.commands")

if TYPE_CHECKING:
    from ._runtime import DelegationRuntime

__all__ = [
    "COMMAND_TIMEOUT_SECONDS",
    "CommandDesk",
    "Placement",
    "ask_holder",
    "wait_for_answer",
]

Placement = Literal["started", "queued", "joined", "next-turn"]
"""Where a message went: `started` a turn now, `queued` behind the running one, `joined`
the running turn at its next step (a steer), or became the `next-turn` (a steer that
found no running turn)."""

COMMAND_TIMEOUT_SECONDS: Final = 30.0
"""How long the asking side waits for a live holder to take a command before saying so."""
_WAKE_SECONDS: Final = 5.0
_RETRY_SECONDS: Final = 0.05
"""How long the asking side waits before it asks again for a command not taken yet."""
_FOLLOW_SECONDS: Final = 0.05
"""How often a process waiting on another's log checks the store for a change (one cheap
`data_version` read; the holder is never asked)."""


class CommandDesk:
    """The holder's side: executes the pending commands of the trees it works."""

    def __init__(self, runtime: DelegationRuntime) -> None:
        self._runtime = runtime
        self.ready: set[SessionId] = set()
        """Roots whose tree is loaded here, so their commands can run (not mid-resume)."""
        self.deciding: set[SessionId] = set()
        """Roots mid-resume: a decision on a call that waits here now is served at once (a
        recovered child may wait on it), any other command once the tree is ready."""

    async def serve(
        self, roots: Iterable[SessionId] | None = None, *, kinds: Set[str] | None = None
    ) -> None:
        """Execute the pending commands of `roots` (default: every ready root), oldest first.

        With `kinds`, only commands of those kinds.
        """
        store = self._runtime.store
        for root in list(self.deciding if roots is None else ()):
            for row in await store.pending_commands(root):
                if self._waits_here(row):
                    await self._execute_row(root, row)
        for root in list(self.ready if roots is None else roots):
            for row in await store.pending_commands(root):
                if kinds is None or row.kind in kinds:
                    await self._execute_row(root, row)

    def _waits_here(self, row: CommandRow) -> bool:
        """A decision whose call a turn of this process waits on now."""
        if row.kind not in DECISION_KINDS:
            return False
        try:
            command = parse_command(row)
        except SubagentsError:
            return False  # refused once the tree is ready
        assert command.call_id is not None
        return self._runtime.approval_desk.holds(str(command.target), command.call_id)

    async def _execute_row(self, root: SessionId, row: CommandRow) -> None:
        try:
            command = parse_command(row)
            if command.root != root:
                raise UsageError(f"command {row.id} names another tree", code=ErrorCode.BAD_COMMAND)
            outcome, state = await self.execute(command), "done"
        except SubagentsError as exc:
            outcome, state = {"code": exc.code.value, "message": exc.message}, "failed"
        except Exception as exc:  # a bug must not block the commands queued behind this one
            log.exception("executing command %d failed", row.id)
            message = f"executing the command failed: {type(exc).__name__}: {exc}"
            outcome, state = {"code": ErrorCode.INTERNAL.value, "message": message}, "failed"
        await self._runtime.store.finish_command(
            row.id, state=state, outcome=encode_outcome(outcome), now=time.time()
        )

    async def _member(self, command: Command) -> SessionHeader:
        """The target, which must be a session of the command's own tenant and tree."""
        runtime = self._runtime
        if command.tenant != runtime.tenant:
            raise NotFoundError(f'session "{command.target}" not found')
        header = await runtime.store.get_header(command.target, tenant=command.tenant)
        if header.root_id != command.root:
            raise NotFoundError(f'session "{command.target}" not found')
        return header

    async def execute(self, command: Command) -> dict[str, Any]:
        """Execute one checked command here; its outcome (raises `SubagentsError` on refusal)."""
        header = await self._member(command)
        if command.kind in DECISION_KINDS:
            assert command.call_id is not None
            assert command.by is not None
            return await decide_here(
                self._runtime,
                header,
                command.call_id,
                approved=command.kind == "approve",
                by=command.by,
                reason=command.text,
                command=command.id,
            )
        records = await self._runtime.read_log(header.id)
        if command.kind == "interrupt":
            if any(isinstance(r.event, TurnEnd) and r.event.command == command.id for r in records):
                return {"interrupted": True}  # a holder before us did it, then died
            return {"interrupted": await self._runtime.stop_member(header, command=command.id)}
        assert command.text is not None
        assert command.message_id is not None
        seen = _entered_at(records, command.message_id)
        if seen is not None:
            return {"placement": "queued", "first": seen, "message_id": command.message_id}
        message = UserMessage(
            id=command.message_id,
            content=(TextBlock(command.text),),
            source=MessageSource(kind="user"),
        )
        first, placement = await self._deliver(header, message, steer=command.kind == "steer")
        return {"placement": placement, "first": first, "message_id": command.message_id}

    async def _deliver(
        self, header: SessionHeader, message: UserMessage, *, steer: bool
    ) -> tuple[int, Placement]:
        runtime = self._runtime
        if header.parent is None:
            lead = runtime.get_agent(header.id) or await runtime.resume_agent(header.id)
            first, running = lead.session.next_seq, lead.status == "running"
            if steer:
                joined = lead.takes_steering
                await lead.steer(message)
                return first, "joined" if joined else "next-turn"
            await lead.followup(message)
            return first, "queued" if running else "started"
        act, _, joined = await runtime.continuable.deliver_as_user(header.id, message, steer=steer)
        if steer:
            return act.epoch_start, "joined" if joined else "next-turn"
        return act.epoch_start, "queued" if act.child.running else "started"


def _entered_at(records: Sequence[EventRecord], message_id: MessageId) -> int | None:
    """The seq where a message was queued or entered, None when the log never saw it."""
    for record in records:
        match record.event:
            case InboxSpliced(inserted=inserted) if any(m.id == message_id for m in inserted):
                return record.seq
            case UserMessageEvent(message=message) if message.id == message_id:
                return record.seq
            case _:
                pass
    return None


async def ask_holder(
    runtime: DelegationRuntime,
    header: SessionHeader,
    target: SessionHeader,
    kind: CommandKind,
    text: str | None,
    *,
    take_over: Callable[[SessionHeader], Awaitable[None]],
    patience: float = COMMAND_TIMEOUT_SECONDS,
    body: bytes | None = None,
) -> dict[str, Any]:
    """Have the process holding `header`'s tree execute a command; its outcome once taken.

    The command is durable before anyone is woken. When the holder is gone (its lease
    expired or its process died), `take_over` makes this runtime the holder, which executes
    what is pending, this command included. A live holder that does not take it within
    `patience` seconds leaves it pending (`HOLDER_UNREACHABLE`): it is never lost.

    Raises:
        SubagentsError: the holder refused the command (its code and message).
    """
    store = runtime.store
    command_id = await store.submit_command(
        root=header.id,
        tenant=runtime.tenant,
        target=target.id,
        kind=kind,
        body=body if body is not None else encode_body(text),
        now=time.time(),
    )
    deadline = runtime.clock.now() + patience
    while True:
        row = await store.get_command(command_id)
        if row is not None and row.state != "pending":
            return _outcome(row)
        lease = await store.get_lease(header.id)
        if lease is None or not lease_alive(lease, now=time.time()):
            with contextlib.suppress(LeaseHeld):  # another process took it first: ask it
                await take_over(header)
        elif runtime.clock.now() >= deadline:
            raise SubagentError(
                f"the process holding session {header.id} (pid {lease.pid}) did not take "
                f"command {command_id} within {patience:g} s; it is still queued and runs "
                "when that process serves it or the tree is resumed, so do not repeat it",
                code=ErrorCode.HOLDER_UNREACHABLE,
            )
        elif lease.address is not None:
            left = max(deadline - runtime.clock.now(), 0.0)
            await wake_holder(lease.address, command_id, within=min(_WAKE_SECONDS, left))
        row = await store.get_command(command_id)
        if row is not None and row.state != "pending":
            return _outcome(row)
        # Not taken yet (the holder is loading the tree, or unreachable): look again soon,
        # never in a tight loop.
        await runtime.clock.sleep(_RETRY_SECONDS)


def _outcome(row: CommandRow) -> dict[str, Any]:
    outcome = decode_outcome(row.outcome)
    if row.state == "done":
        return outcome
    code = outcome.get("code")
    known = code in ErrorCode.__members__.values()
    raise SubagentError(
        str(outcome.get("message") or f"command {row.id} failed"),
        code=ErrorCode(code) if known else ErrorCode.BAD_COMMAND,
    )


async def wait_for_answer(
    runtime: DelegationRuntime,
    header: SessionHeader,
    target: SessionHeader,
    outcome: dict[str, Any],
    *,
    name: str,
    take_over: Callable[[SessionHeader], Awaitable[None]],
) -> list[EventRecord] | None:
    """Follow the member's log (in the store) until the turn its message entered has ended.

    Returns the member's records, or None when the holder died first and `take_over` ran
    the tree here (the caller then reads the log as it stands). Its records from the
    message on are posted on this runtime's bus as they are read, so a stream here
    (`--stream`) shows the member's work in the other process.
    """
    store = runtime.store
    message_id = str(outcome["message_id"])
    posted = int(outcome["first"]) - 1
    records: list[EventRecord] = []
    seen = -1
    while True:
        count = await store.change_count()
        if count != seen:
            seen = count
            records += await store.read(target.id, tenant=runtime.tenant, from_seq=len(records))
            for record in records[posted + 1 :]:
                runtime.bus.post(target.id, name, record)
            posted = max(posted, len(records) - 1)
            if _answered(records[target.seed_length :], message_id):
                return records
            lease = await store.get_lease(header.id)
            if lease is None or not lease_alive(lease, now=time.time()):
                try:
                    await take_over(header)
                except LeaseHeld:
                    continue  # another process took it first: follow its work instead
                return None
        await runtime.clock.sleep(_FOLLOW_SECONDS)


def _answered(records: Sequence[EventRecord], message_id: str) -> bool:
    """Whether the member is done with `message_id`.

    Done: the turn it entered has ended and the member is not running, or the message was
    cancelled before it entered a turn.
    """
    entered = queued = False
    for record in records:
        match record.event:
            case InboxSpliced(inserted=inserted) if any(m.id == message_id for m in inserted):
                queued = True
            case UserMessageEvent(message=message) if message.id == message_id:
                entered = True
            case TurnEnd() if entered:
                return fold(StatusProjection(), records).status != "running"
            case _:
                pass
    return queued and not entered and message_id not in replay_inbox(records).pending_ids()
