"""Plain-text and JSON renderings of sessions, trees and logs.

Every command imports this module (for `dumps`), so what a rendering needs is imported by it
(startup time; tests/cli/test_startup.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core import RunResult, SessionRow
    from ..delegation import TreeJsonRow
    from ..messages import AssistantMessage
    from ..sessions import EventRecord

__all__ = [
    "RunUsage",
    "dumps",
    "render_log",
    "render_sessions",
    "render_tree",
    "result_json",
    "tree_usage",
]


def dumps(value: Any) -> str:
    """`value` as indented JSON (UTF-8 text, not escaped): what every `--json` prints.

    msgspec, not `json.dumps`: the pure-Python indenting encoder spent most of the time of
    `subagents tree --json` over a big tree (80 ms of ~250 for 10,000 members).
    """
    import msgspec  # startup time: see the module's docstring

    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()


def render_sessions(rows: Sequence[SessionRow]) -> str:
    from ..core import iso  # startup time: see the module's docstring

    if not rows:
        return "no sessions"
    lines = [f"{'SESSION':36}  {'CREATED':27}  {'STATUS':9}  TENANT"]
    lines += [
        f"{r.header.id:36}  {iso(r.header.created_at):27}  {r.status:9}  {r.header.tenant}"
        for r in rows
    ]
    return "\n".join(lines)


def render_tree(rows: Sequence[TreeJsonRow]) -> str:
    lines: list[str] = []
    for row in rows:
        usage = row.usage
        indent = "  " * row.depth
        budget = row.budget
        limits = (
            "  budget "
            + ", ".join(
                f"{key.replace('_', ' ')} {value}"
                for key in budget.__struct_fields__
                if (value := getattr(budget, key)) is not None
            )
            if budget is not None
            else ""
        )
        pending = f"  {pending_below(row.approvals_below)}" if row.approvals_below else ""
        lines.append(
            f"{indent}{row.name}  [{row.status}]  {row.mode}  "
            f"tokens in/out {usage.input_tokens}/{usage.output_tokens}, "
            f"{usage.model_calls} model calls{limits}{pending}  ({row.session_id})"
        )
    if rows and rows[0].total_usage is not None:
        total = rows[0].total_usage
        lines.append(
            f"total: tokens in/out {total.input_tokens}/{total.output_tokens}, "
            f"{total.model_calls} model calls"
        )
    return "\n".join(lines)


def pending_below(count: int) -> str:
    """The roll-up an ancestor of waiting members shows: `1 approval pending below`."""
    return f"{count} approval{'s' if count != 1 else ''} pending below"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _assistant_line(message: AssistantMessage) -> str:
    parts: list[str] = []
    if message.text:
        parts.append(_short(message.text))
    parts.extend(f"→ {c.name}({_short(c.arguments, 80)})" for c in message.tool_calls)
    return "  ".join(parts) or "(empty)"


def render_log(records: Sequence[EventRecord]) -> str:
    """A human transcript: prompts, answers, tool calls and results, turn endings."""
    # Startup time: see the module's docstring.
    from ..core import CONTEXT_SOURCE
    from ..sessions import (
        AssistantMessageEvent,
        InboxSpliced,
        ModelErrorEvent,
        ToolCallEvent,
        ToolResultEvent,
        TurnEnd,
        TurnStart,
        UserMessageEvent,
    )

    lines: list[str] = []
    for record in records:
        match record.event:
            case InboxSpliced(inserted=inserted, outcome=outcome):
                lines.extend(f"{record.seq:>5}  queued     {_short(m.text)}" for m in inserted)
                if outcome == "canceled":
                    lines.append(f"{record.seq:>5}  cancelled  pending input")
            case TurnStart(turn=turn):
                lines.append(f"{record.seq:>5}  turn {turn}")
            case UserMessageEvent(message=message) if message.source == CONTEXT_SOURCE:
                lines.append(f"{record.seq:>5}  context    {_short(message.text)}")
            case UserMessageEvent(message=message):
                lines.append(f"{record.seq:>5}  user       {_short(message.text)}")
            case AssistantMessageEvent(message=message, interrupted=interrupted):
                tag = "assistant*" if interrupted else "assistant "
                lines.append(f"{record.seq:>5}  {tag} {_assistant_line(message)}")
            case ModelErrorEvent(code=code, message=message):
                lines.append(f"{record.seq:>5}  model err  {code}: {_short(message)}")
            case ToolCallEvent(name=name):
                lines.append(f"{record.seq:>5}  tool call  {name}")
            case ToolResultEvent(message=message):
                lines.append(
                    f"{record.seq:>5}  result     {message.name}: {_short(message.content)}"
                )
            case TurnEnd(turn=turn, reason=reason, error_message=error):
                detail = f" ({error})" if error else ""
                lines.append(f"{record.seq:>5}  turn {turn} ended {reason}{detail}")
            case _:
                pass
    return "\n".join(lines)


RunUsage = tuple["dict[str, int] | None", "dict[str, int]"]
"""What a run's JSON shows of its tree: the agent's own usage (if listed), the tree's total."""


def tree_usage(rows: Sequence[TreeJsonRow], session_id: str) -> RunUsage | None:
    """`session_id`'s usage and the total, from `subagents tree --json`'s rows (None: no rows)."""
    import msgspec  # startup time: see the module's docstring

    if not rows:
        return None
    own = next((r.usage for r in rows if r.session_id == session_id), None)
    total: dict[str, int] = msgspec.to_builtins(rows[0].total_usage)
    return (None if own is None else msgspec.to_builtins(own)), total


def result_json(result: RunResult, usage: RunUsage | None = None) -> dict[str, Any]:
    """The JSON of a run's result, the same keys in `run`, `resume`, `send` and `demo`.

    With its tree's `usage`, `usage` is the agent's own (with its model calls) and
    `total_usage` the whole tree's, as in `subagents tree --json`.
    """
    payload: dict[str, Any] = {
        "session_id": result.session_id,
        "stop_reason": result.stop_reason,
        "output": result.output,
        "usage": {
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
        },
    }
    if usage is not None:
        own, total = usage
        if own is not None:
            payload["usage"] = own
        payload["total_usage"] = total
    if result.error_code:
        payload["error"] = {"code": result.error_code, "message": result.error_message}
    return payload
