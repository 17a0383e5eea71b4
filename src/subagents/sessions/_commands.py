"""Commands to a held tree: what another process asks the holder to do, kept in the store.

A command (`send`, `steer`, `interrupt` a member, `approve` or `deny` one of its calls) is
one row, written by the asking process in its own transaction, so it is durable before the
holder hears of it. The holder executes
it and marks it `done` or `failed` with an outcome; a holder that dies first leaves it
`pending` for the next process that takes the tree. The store keeps rows as they are
(`CommandRow`); `parse_command` checks one before anything acts on it, so a row nobody could
have written through the API fails with `BAD_COMMAND` instead of doing something.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final, Literal, cast, get_args

import msgspec

from ..errors import ErrorCode, UsageError
from ..ids import MessageId, SessionId

__all__ = [
    "COMMAND_KINDS",
    "Command",
    "CommandKind",
    "CommandRow",
    "CommandState",
    "DECISION_KINDS",
    "MAX_CALL_ID",
    "MAX_COMMAND_TEXT",
    "MAX_DECIDER",
    "MAX_REASON",
    "decode_outcome",
    "encode_body",
    "encode_decision",
    "encode_outcome",
    "parse_command",
]

CommandKind = Literal["send", "steer", "interrupt", "approve", "deny"]
CommandState = Literal["pending", "done", "failed"]
COMMAND_KINDS: Final[tuple[str, ...]] = get_args(CommandKind)
MAX_COMMAND_TEXT: Final = 1_000_000
"""The longest message a command carries, in characters (a megabyte of prompt is a mistake)."""


@dataclass(frozen=True, slots=True)
class CommandRow:
    """One row of the `commands` table, as stored (unchecked)."""

    id: int
    root: str
    tenant: str
    target: str
    kind: str
    body: bytes
    created_at: float
    state: str
    outcome: bytes | None
    handled_at: float | None = None
    """Wall-clock time the holder marked it done or failed."""


@dataclass(frozen=True, slots=True)
class Command:
    """A checked command: `text` and `message_id` are set for `send` and `steer`.

    A decision (`approve`, `deny`) names its call (`call_id`) and who decided (`by`); a
    denial's `text` is its reason.
    """

    id: int
    root: SessionId
    tenant: str
    target: SessionId
    kind: CommandKind
    text: str | None
    message_id: MessageId | None
    call_id: str | None = None
    by: str | None = None


MAX_DECIDER: Final = 200
"""The longest `by` a decision carries (who decided, as listings show it)."""
MAX_CALL_ID: Final = 200
MAX_REASON: Final = 2_000
"""The longest denial reason a person may give (the model reads it)."""

DECISION_KINDS: Final = frozenset({"approve", "deny"})


class _Body(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    text: str | None = None
    message_id: str | None = None
    call_id: str | None = None
    by: str | None = None


def encode_body(text: str | None) -> bytes:
    """The body of a new command; a message gets its id now, so executing it twice is seen."""
    message_id = str(uuid.uuid4()) if text is not None else None
    return msgspec.json.encode(_Body(text=text, message_id=message_id))


def encode_decision(call_id: str, *, by: str, reason: str | None = None) -> bytes:
    """The body of an `approve` or `deny` command for one call."""
    return msgspec.json.encode(_Body(text=reason, call_id=call_id, by=by))


def _bad(row: CommandRow, why: str) -> UsageError:
    shown = " ".join(why.split())  # one line, whatever the row quoted
    if len(shown) > 300:
        shown = shown[:299] + "…"
    return UsageError(f"command {row.id} cannot be executed: {shown}", code=ErrorCode.BAD_COMMAND)


def _is_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def parse_command(row: CommandRow) -> Command:
    """Check a stored row before anything acts on it.

    Raises:
        UsageError: `BAD_COMMAND`, naming the first thing wrong with it.
    """
    if row.kind not in COMMAND_KINDS:
        raise _bad(row, f"unknown kind {row.kind[:40]!r}; known: {', '.join(COMMAND_KINDS)}")
    for label, value in (("root", row.root), ("target", row.target)):
        if not _is_uuid(value):
            raise _bad(row, f"its {label} {value[:40]!r} is not a session id")
    try:
        body = msgspec.json.decode(row.body, type=_Body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise _bad(row, f"its body is not a command body ({exc})") from None
    if row.kind in DECISION_KINDS:
        return _decision(row, body)
    if body.call_id is not None or body.by is not None:
        raise _bad(row, f"a {row.kind} command names no call")
    takes_text = row.kind != "interrupt"
    if takes_text != (body.text is not None) or takes_text != (body.message_id is not None):
        wanted = "a text and a message id" if takes_text else "no text"
        raise _bad(row, f"a {row.kind} command carries {wanted}")
    if body.text is not None and (not body.text.strip() or len(body.text) > MAX_COMMAND_TEXT):
        raise _bad(row, f"its text is empty or longer than {MAX_COMMAND_TEXT} characters")
    if body.message_id is not None and not _is_uuid(body.message_id):
        raise _bad(row, f"its message id {body.message_id[:40]!r} is not an id")
    return Command(
        id=row.id,
        root=SessionId(row.root),
        tenant=row.tenant,
        target=SessionId(row.target),
        kind=row.kind,  # pyright: ignore[reportArgumentType]  # checked against COMMAND_KINDS
        text=body.text,
        message_id=MessageId(body.message_id) if body.message_id is not None else None,
    )


def _decision(row: CommandRow, body: _Body) -> Command:
    if body.message_id is not None:
        raise _bad(row, f"a {row.kind} command carries no message id")
    if not (body.call_id or "").strip() or len(body.call_id or "") > MAX_CALL_ID:
        raise _bad(row, f"a {row.kind} command names the call it decides")
    if not (body.by or "").strip() or len(body.by or "") > MAX_DECIDER:
        raise _bad(row, f"a {row.kind} command says who decided, in at most {MAX_DECIDER} chars")
    if body.text is not None and (row.kind != "deny" or len(body.text) > MAX_REASON):
        raise _bad(row, f"only a deny command carries a reason, of at most {MAX_REASON} chars")
    return Command(
        id=row.id,
        root=SessionId(row.root),
        tenant=row.tenant,
        target=SessionId(row.target),
        kind=row.kind,  # pyright: ignore[reportArgumentType]  # checked against COMMAND_KINDS
        text=body.text,
        message_id=None,
        call_id=body.call_id,
        by=body.by,
    )


def encode_outcome(outcome: dict[str, Any]) -> bytes:
    """What the holder stores about a command it executed (or refused, with its code)."""
    return msgspec.json.encode(outcome)


def decode_outcome(raw: bytes | None) -> dict[str, Any]:
    """A stored outcome; an unreadable one reads as a failure that says so."""
    if raw is None:
        return {}
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        value = None
    if not isinstance(value, dict):
        return {"code": ErrorCode.BAD_COMMAND.value, "message": "the stored outcome is unreadable"}
    items = cast("dict[object, Any]", value)
    return {str(k): v for k, v in items.items()}
