"""A stored tree, listed from the store's summaries: members in pre-order with their full names."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import attrgetter
from typing import Literal, Protocol, TypeVar

import msgspec

from ..core import Status, TreeRow, stored_status
from ..errors import ErrorCode, NotFoundError, UsageError
from ..ids import SessionId
from ..names import ROOT_NAME, full_name
from ..sessions import (
    CatalogEntry,
    EventRecord,
    EventStore,
    ListingRow,
    MemberSummary,
    SessionHeader,
    SessionSummary,
    listing_row,
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
    "tree_rows",
]


class ListedMember(msgspec.Struct, frozen=True, gc=False):
    """A member of a stored tree as a listing shows it: its row and its log's summary."""

    row: TreeRow
    summary: SessionSummary


class TreeMember(ListedMember, frozen=True, gc=False):
    """A member with its whole log."""

    records: list[EventRecord]


class _Listed(Protocol):
    """What ordering and naming a tree's members needs: a `MemberSummary` or a `ListingRow`."""

    @property
    def id(self) -> SessionId: ...

    @property
    def parent(self) -> SessionId | None: ...

    @property
    def created_at(self) -> float: ...

    @property
    def entry(self) -> CatalogEntry | None: ...


_M = TypeVar("_M", bound=_Listed)
Mode = Literal["root", "one-shot", "continuable"]


def _preorder(
    root: SessionId, members: Iterable[_M]
) -> Iterator[tuple[_M, str, str | None, Mode, str]]:
    """Each member with its full name, its parent's, its mode and label, in pre-order.

    Children come in their parent's catalog order. Members are named from their creators'
    catalogs; a member without an entry (or below one) goes by its id.
    """
    by_parent: dict[SessionId | None, list[_M]] = {}
    unlisted: set[SessionId | None] = set()  # parents of a member without an entry
    own: _M | None = None
    for member in members:
        if member.id == root:
            own = member
            continue
        parent = member.parent
        siblings = by_parent.get(parent)
        if siblings is None:
            by_parent[parent] = [member]
        else:
            siblings.append(member)
        if member.entry is None:
            unlisted.add(parent)
    if own is None:
        raise NotFoundError(f'session "{root}" not found')
    for parent, siblings in by_parent.items():
        # Each entry's seq in the parent's log: no ties. Without entries, by age.
        siblings.sort(key=_sibling_order if parent in unlisted else _POSITION)
    pending: list[tuple[_M, str, str | None, Mode, str]] = [(own, ROOT_NAME, None, "root", "lead")]
    while pending:
        placed = pending.pop()
        yield placed
        member, name = placed[0], placed[1]
        children = by_parent.get(member.id)
        if not children:
            continue
        named = name == ROOT_NAME or named_path(name)
        for child in reversed(children):  # a stack: the first child is listed next
            entry = child.entry
            if entry is None:
                pending.append((child, child.id, name, "one-shot", ""))
            elif named and entry.name is not None:
                pending.append((child, full_name(name, entry.name), name, entry.mode, entry.label))
            else:
                pending.append((child, child.id, name, entry.mode, entry.label))


async def list_tree(
    store: EventStore, root: SessionHeader, *, held: bool = True
) -> list[ListedMember]:
    """Every session of `root`'s tree in pre-order (children in creation order), no log read.

    Members are named from their creators' catalogs and described by the store's summaries of
    their logs. `held` says whether a live process holds the tree; without one, an open turn's
    process died and it shows as `crashed`.
    """
    members = await store.tree_members(root.id, tenant=root.tenant)
    return [
        ListedMember(
            TreeRow(
                header=member.header,
                name=name,
                parent=parent,
                mode=mode,
                status=stored_status(
                    member.summary.status, held=held, continuable=mode == "continuable"
                ),
                label=label,
                usage=member.summary.usage,
            ),
            member.summary,
        )
        for member, name, parent, mode, label in _preorder(root.id, members)
    ]


async def tree_rows(
    store: EventStore, root: SessionHeader, *, held: bool = True
) -> list[TreeJsonRow]:
    """`tree_json(await list_tree(...))`, from the store's listing rows: what `tree` prints.

    The listing rows carry only what a row shows; for 10,000 members this is several times
    faster than ordering their whole summaries and then their rows.
    """
    members = await store.tree_listing(root.id, tenant=root.tenant)
    # A big tree's members share a few statuses: each is worked out once.
    statuses: dict[tuple[str, str | None, bool, Mode], Status] = {}
    rows: list[TreeJsonRow] = []
    for member, name, parent, mode, label in _preorder(root.id, members):
        facts = (member.status, member.last_stop, member.waiting > 0, mode)
        status = statuses.get(facts)
        if status is None:
            continuable = mode == "continuable"
            status = statuses[facts] = stored_status(member, held=held, continuable=continuable)
        rows.append(_json_row(member, name, parent, mode, status, label))
    return _rolled_up(rows)


_POSITION = attrgetter("entry.position")
_UNLISTED = sys.maxsize


def _sibling_order(member: _Listed) -> tuple[int, float, str]:
    """Siblings in their parent's catalog order; those without an entry after, oldest first."""
    entry = member.entry
    return (_UNLISTED if entry is None else entry.position, member.created_at, member.id)


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
    return _rolled_up(
        [
            _json_row(
                listing_row(MemberSummary(m.row.header, m.summary, None)),
                m.row.name,
                m.row.parent,
                m.row.mode,
                m.row.status,
                m.row.label,
            )
            for m in members
        ]
    )


def _json_row(
    member: ListingRow, name: str, parent: str | None, mode: Mode, status: Status, label: str
) -> TreeJsonRow:
    limits = member.limits
    return TreeJsonRow(
        member.id,
        name,
        parent,
        mode,
        status,
        label,
        member.depth,
        UsageJson(member.input_tokens, member.output_tokens, member.model_calls),
        member.waiting,
        0,
        None if limits is None or limits == _NO_LIMITS else BudgetJson(*limits),
    )


def _rolled_up(rows: list[TreeJsonRow]) -> list[TreeJsonRow]:
    """`rows` (in pre-order, the root first) with their subtrees' approvals and the total usage.

    Most trees wait for nothing: then no parent map is built to roll nothing up.
    """
    if any(row.approvals_pending for row in rows):
        below = approvals_below(
            {row.name: row.approvals_pending for row in rows},
            {row.name: row.parent for row in rows},
        )
        rows = [
            msgspec.structs.replace(row, approvals_below=below[row.name])
            if row.name in below
            else row
            for row in rows
        ]
    if rows:
        tokens_in = tokens_out = calls = 0
        for row in rows:
            usage = row.usage
            tokens_in += usage.input_tokens
            tokens_out += usage.output_tokens
            calls += usage.model_calls
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
