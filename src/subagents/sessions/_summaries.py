"""Members of a tree without reading their logs: each session's summary and catalog entry.

A tree listing (`subagents tree`, `list_agents`, the web console) needs of every member only
its status, usage and budget, and the name its creator gave it. Folding every member's log for
that costs a read and a decode of every event of the tree: seconds for 10,000 children. So the
SQLite store keeps, in the transaction that appends the events, one `SessionSummary` per
session (the `StatusProjection` and `UsageProjection` of its log, folded with the very same
projections, and its descriptor's limits) and one catalog entry per child. They are derived
data: the log stays the truth, a store migrated to them rebuilds them from the logs
(schema version 4), and `tests/sessions/test_summaries.py` checks that they agree with a
fold of the log after any sequence of writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal

import msgspec

from ..ids import SessionId
from ._events import (
    KIND_OF,
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageEvent,
    EventRecord,
    ModelErrorEvent,
    SessionHeader,
    StopReason,
    SubagentCatalog,
    SubagentDescriptor,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
)
from ._projections import StatusProjection, StatusView, UsageProjection, UsageView

__all__ = [
    "SUMMARY_KINDS",
    "CatalogEntry",
    "CatalogRow",
    "Limits",
    "ListingRow",
    "MemberSummary",
    "SessionSummary",
    "catalog_row",
    "decode_listing",
    "decode_members",
    "decode_summary",
    "encode_summary",
    "listing_row",
    "summarize",
    "summaries_from_logs",
]

SUMMARY_KINDS: Final = frozenset(
    KIND_OF[kind]
    for kind in (
        TurnStart,
        TurnEnd,
        ApprovalRequested,
        ApprovalDecided,
        ToolResultEvent,
        AssistantMessageEvent,
        ModelErrorEvent,
        SubagentDescriptor,
        SubagentCatalog,
    )
)
"""The event kinds that change a summary or the catalog; the others are not looked at."""

Limits = tuple[int | None, int | None, int | None]
"""A descriptor's budget: tokens, model calls, children (None: no limit of that kind)."""


class SessionSummary(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """What a listing shows of one session, kept current with its log."""

    status: StatusView = StatusView()
    usage: UsageView = UsageView()
    limits: Limits | None = None
    """The limits of its own descriptor (None: no descriptor after its seed yet)."""
    seed_length: int = 0
    """Records copied from another log; a descriptor among them is not this session's."""


_STATUS = StatusProjection()
_USAGE = UsageProjection()
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(SessionSummary)


def summarize(summary: SessionSummary, records: Iterable[EventRecord]) -> SessionSummary:
    """`summary` after `records` (the next records of its session's log, in order)."""
    status, usage, limits = summary.status, summary.usage, summary.limits
    for record in records:
        status = _STATUS.apply(status, record)
        usage = _USAGE.apply(usage, record)
        event = record.event
        if (
            limits is None
            and isinstance(event, SubagentDescriptor)
            and record.seq >= summary.seed_length
        ):
            limits = (event.budget_tokens, event.budget_model_calls, event.budget_children)
    if status is summary.status and usage is summary.usage and limits is summary.limits:
        return summary
    return SessionSummary(status, usage, limits, summary.seed_length)


def encode_summary(summary: SessionSummary) -> bytes:
    return _encoder.encode(summary)


def decode_summary(payload: bytes) -> SessionSummary:
    return _decoder.decode(payload)


CatalogRow = tuple[str, str, int, str | None, str, str]
"""A catalog table row: child id, creator, seq of the entry in the creator's log, and the
entry's name, mode and label."""


def catalog_row(creator: str, record: EventRecord) -> CatalogRow | None:
    """The catalog row of `record` in `creator`'s log; None for any other event."""
    event = record.event
    if not isinstance(event, SubagentCatalog):
        return None
    return (event.child_id, creator, record.seq, event.name, event.mode, event.label)


class CatalogEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """What a child's creator (its parent) recorded of it: its latest catalog entry."""

    name: str | None
    mode: Literal["one-shot", "continuable"]
    label: str
    position: int
    """The seq of the parent's first entry for it: its place among its siblings."""


class MemberSummary(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One session of a tree as a listing needs it."""

    header: SessionHeader
    summary: SessionSummary
    entry: CatalogEntry | None
    """None for the root, and for a child its parent recorded no entry for."""

    # What ordering a tree needs, named as `ListingRow` names it.
    @property
    def id(self) -> SessionId:
        return self.header.id

    @property
    def parent(self) -> SessionId | None:
        return self.header.parent

    @property
    def created_at(self) -> float:
        return self.header.created_at


class ListingRow(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One member of a tree as `subagents tree` shows it, and nothing more: a flat row.

    `MemberSummary` carries a member's whole header and summary (some 560 bytes of JSON); a
    listing of 10,000 members spent most of its time reading and decoding what it then threw
    away. The SQLite store keeps this row beside the summary, in the same transaction
    (`_migrations.refresh_listing`: the same fields, taken out of the stored JSON by SQL), and
    `listing_row` is its definition, which the tests hold the stored rows to.
    """

    id: SessionId
    parent: SessionId | None
    created_at: float
    depth: int
    entry: CatalogEntry | None
    status: Literal["idle", "running"]
    last_stop: StopReason | None
    waiting: int
    """How many of its open turn's tool calls wait for an approval decision."""
    input_tokens: int
    output_tokens: int
    model_calls: int
    limits: Limits | None


def listing_row(member: MemberSummary) -> ListingRow:
    """What a listing shows of `member`."""
    header, summary = member.header, member.summary
    status, usage = summary.status, summary.usage
    return ListingRow(
        header.id,
        header.parent,
        header.created_at,
        header.depth,
        member.entry,
        status.status,
        status.last_stop,
        len(status.waiting),
        usage.usage.input_tokens,
        usage.usage.output_tokens,
        usage.model_calls,
        summary.limits,
    )


_listing_decoder = msgspec.json.Decoder(list[ListingRow])


def decode_listing(text: bytes) -> list[ListingRow] | None:
    """A JSON array of stored listing rows in one decode; None when it does not decode."""
    try:
        return _listing_decoder.decode(text)
    except msgspec.DecodeError:
        return None


_members_decoder = msgspec.json.Decoder(list[MemberSummary])


def decode_members(text: bytes) -> list[MemberSummary] | None:
    """A JSON array of stored member rows (`[header, summary, entry]` each) in one decode.

    None when it does not decode: the caller then reads the members one by one.
    """
    try:  # one call into msgspec for the whole tree, not three per member
        return _members_decoder.decode(text)
    except msgspec.DecodeError:
        return None


def summaries_from_logs(
    headers: Sequence[SessionHeader], logs: Mapping[SessionId, Sequence[EventRecord]]
) -> list[MemberSummary]:
    """The members of `headers` folded from their logs (stores that keep no summaries)."""
    entries: dict[str, CatalogEntry] = {}
    parents: dict[str, str | None] = {h.id: h.parent for h in headers}
    for header in headers:
        for record in logs[header.id]:
            event = record.event
            if isinstance(event, SubagentCatalog) and parents.get(event.child_id) == header.id:
                first = entries.get(event.child_id)
                position = record.seq if first is None else first.position
                entries[event.child_id] = CatalogEntry(
                    event.name, event.mode, event.label, position
                )
    return [
        MemberSummary(
            header,
            summarize(SessionSummary(seed_length=header.seed_length), logs[header.id]),
            entries.get(header.id),
        )
        for header in headers
    ]
