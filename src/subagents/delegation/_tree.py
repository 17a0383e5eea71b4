"""A stored tree, listed from the store's summaries: members in pre-order with their full names."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Literal

import msgspec

from ..core import Status, TreeRow, stored_status
from ..errors import ErrorCode, NotFoundError, UsageError
from ..ids import SessionId
from ..names import ROOT_NAME, full_name
from ..sessions import (
    EventRecord,
    EventStore,
    MemberSummary,
    SessionHeader,
    SessionSummary,
)
from ._catalog import (
    check_name_path,
    named_path,
    resolve_name,
    store_readers,
)

__all__ = [
    "ListedMember",
    "TreeJsonRow",
    "TreeMember",
    "check_takes_messages",
    "find_member",
    "list_tree",
    "load_tree",
    "refuse_one_shot",
    "tree_json",
]


class ListedMember(msgspec.Struct, frozen=True, gc=False):
    """A member of a stored tree as a listing shows it: its row and its log's summary."""

    row: TreeRow
    summary: SessionSummary


class TreeMember(ListedMember, frozen=True, gc=False):
    """A member with its whole log."""

    records: list[EventRecord]


async def list_tree(
    store: EventStore, root: SessionHeader, *, held: bool = True
) -> list[ListedMember]:
    """Every session of `root`'s tree in pre-order (children in creation order), no log read.

    Members are named from their creators' catalogs and described by the store's summaries of
    their logs. `held` says whether a live process holds the tree; without one, an open turn's
    process died and it shows as `crashed`.
    """
    summaries = await store.tree_members(root.id, tenant=root.tenant)
    by_parent: dict[SessionId | None, list[MemberSummary]] = {}
    own: MemberSummary | None = None
    for member in summaries:
        if member.header.id == root.id:
            own = member
        else:
            by_parent.setdefault(member.header.parent, []).append(member)
    if own is None:
        raise NotFoundError(f'session "{root.id}" not found')
    for siblings in by_parent.values():
        if all(m.entry is not None for m in siblings):
            siblings.sort(key=_POSITION)  # each entry's seq in the parent's log: no ties
        else:
            siblings.sort(key=_sibling_order)
    listed: list[ListedMember] = []
    root_status = stored_status(own.summary.status, held=held)
    pending: list[tuple[MemberSummary, TreeRow]] = [
        (own, _row(own, ROOT_NAME, None, "root", root_status, "lead"))
    ]
    while pending:
        member, row = pending.pop()
        listed.append(ListedMember(row, member.summary))
        children = by_parent.get(member.header.id)
        if not children:
            continue
        named = row.name == ROOT_NAME or named_path(row.name)
        for child in reversed(children):  # a stack: the first child is listed next
            entry = child.entry
            mode = "one-shot" if entry is None else entry.mode
            name = (
                full_name(row.name, entry.name)
                if named and entry is not None and entry.name is not None
                else child.header.id
            )
            status = stored_status(
                child.summary.status, held=held, continuable=mode == "continuable"
            )
            label = "" if entry is None else entry.label
            pending.append((child, _row(child, name, row.name, mode, status, label)))
    return listed


_POSITION = attrgetter("entry.position")
_UNLISTED = sys.maxsize


def _sibling_order(member: MemberSummary) -> tuple[int, float, str]:
    """Siblings in their parent's catalog order; those without an entry after, oldest first."""
    entry = member.entry
    return (
        _UNLISTED if entry is None else entry.position,
        member.header.created_at,
        member.header.id,
    )


def _row(
    member: MemberSummary,
    name: str,
    parent: str | None,
    mode: Literal["root", "one-shot", "continuable"],
    status: Status,
    label: str,
) -> TreeRow:
    return TreeRow(
        header=member.header,
        name=name,
        parent=parent,
        mode=mode,
        status=status,
        label=label,
        usage=member.summary.usage,
    )


async def load_tree(
    store: EventStore, root: SessionHeader, *, held: bool = True
) -> list[TreeMember]:
    """`list_tree`, each member with its log."""
    return [
        TreeMember(
            member.row,
            member.summary,
            await store.read(member.row.header.id, tenant=member.row.header.tenant),
        )
        for member in await list_tree(store, root, held=held)
    ]


class UsageJson(msgspec.Struct, frozen=True, gc=False):
    """Token usage as every `--json` prints it."""

    input_tokens: int
    output_tokens: int
    model_calls: int


class BudgetJson(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """A member's recorded limits, those it has."""

    tokens: int | None = None
    model_calls: int | None = None
    children: int | None = None


class TreeJsonRow(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """One row of `subagents tree --json`: encoded as it is, with no dict built per member."""

    session_id: str
    name: str
    parent: str | None
    mode: str
    status: Status
    label: str
    depth: int
    usage: UsageJson
    approvals_pending: int
    """Its own approval requests that wait for a decision."""
    approvals_below: int
    """Those of its subtree below it."""
    budget: BudgetJson | None = None
    """Only for a member with a recorded limit."""
    total_usage: UsageJson | None = None
    """Only on the first row (the root): the whole tree's."""


def tree_json(members: Sequence[ListedMember]) -> list[TreeJsonRow]:
    """The rows of `subagents tree --json`; a member with a recorded budget shows its limits."""
    pending = [len(m.summary.status.waiting) for m in members]
    # Most trees wait for nothing: then no parent map is built to roll nothing up.
    below = (
        approvals_below(
            {m.row.name: n for m, n in zip(members, pending, strict=True)},
            {m.row.name: m.row.parent for m in members},
        )
        if any(pending)
        else {}
    )
    rows: list[TreeJsonRow] = []
    tokens_in = tokens_out = calls = 0
    for member, waiting in zip(members, pending, strict=True):
        row = member.row
        view = row.usage
        usage = view.usage
        tokens_in += usage.input_tokens
        tokens_out += usage.output_tokens
        calls += view.model_calls
        limits = member.summary.limits
        rows.append(
            TreeJsonRow(
                row.header.id,
                row.name,
                row.parent,
                row.mode,
                row.status,
                row.label,
                row.header.depth,
                UsageJson(usage.input_tokens, usage.output_tokens, view.model_calls),
                waiting,
                below.get(row.name, 0) if below else 0,
                None if limits is None or limits == _NO_LIMITS else BudgetJson(*limits),
            )
        )
    if rows:
        total = UsageJson(tokens_in, tokens_out, calls)
        rows[0] = msgspec.structs.replace(rows[0], total_usage=total)
    return rows


_NO_LIMITS = (None, None, None)


def approvals_below(own: Mapping[str, int], parents: Mapping[str, str | None]) -> dict[str, int]:
    """Each member's count of pending requests in its subtree below it, by full name.

    `own` is each member's own count, `parents` each member's parent's full name.
    """
    below: dict[str, int] = {}
    for name, count in own.items():
        parent = parents.get(name)
        seen: set[str] = set()
        while count and parent is not None and parent not in seen:
            seen.add(parent)
            below[parent] = below.get(parent, 0) + count
            parent = parents.get(parent)
    return below


async def find_member(store: EventStore, root: SessionHeader, name: str) -> SessionHeader:
    """The session of `name` (a full path, optionally with a leading `/`) in `root`'s tree.

    A malformed name (`kid/`, `//kid`) is refused (`INVALID_NAME`), not taken for a near one.
    """
    check_name_path(name)
    if name in (ROOT_NAME, f"/{ROOT_NAME}"):
        return root
    read, _ = store_readers(store, root.tenant)
    child = await resolve_name(read, start=root.id, path=name.lstrip("/"))
    if child is None:
        raise NotFoundError(
            f"no agent named {name!r} in session {root.id}; `subagents tree {root.id}` lists "
            "the names"
        )
    return await store.get_header(child, tenant=root.tenant)


def check_takes_messages(members: Sequence[ListedMember], target: SessionId) -> None:
    """Refuse (`NOT_RESUMABLE`) a message to a member that cannot take one.

    Only the lead and continuable children have a conversation to continue; a one-shot child
    (foreground, background task or workflow child) ran once and is settled for good.
    """
    member = next((m for m in members if m.row.header.id == target), None)
    if member is not None:
        row = member.row
        refuse_one_shot(row.mode, row.name, row.status, row.parent, row.header.root_id)


def refuse_one_shot(mode: str, name: str, status: str, parent: str | None, root: str) -> None:
    """`NOT_RESUMABLE` for a member of `mode` one-shot, saying whom to message instead."""
    if mode != "one-shot":
        return
    raise UsageError(
        f"{name} is a one-shot child that ran once and is {status}: it cannot take "
        f"messages; send to its parent ({parent}) instead, for example: subagents send "
        f"{root} {parent} '...'",
        code=ErrorCode.NOT_RESUMABLE,
    )
