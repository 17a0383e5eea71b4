"""A stored tree, rebuilt from the log alone: members in pre-order with their full names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core import TreeRow, root_row, stored_status, total_usage, usage_json
from ..errors import ErrorCode, NotFoundError, UsageError
from ..ids import SessionId
from ..names import ROOT_NAME
from ..sessions import (
    EventRecord,
    EventStore,
    SessionHeader,
    StatusProjection,
    SubagentCatalog,
    UsageProjection,
    fold,
)
from ._budget_book import recorded_budget
from ._catalog import (
    catalog_entries,
    check_name_path,
    member_name,
    resolve_name,
    store_readers,
)

__all__ = [
    "TreeMember",
    "check_takes_messages",
    "find_member",
    "load_tree",
    "refuse_one_shot",
    "tree_json",
]


@dataclass(frozen=True, slots=True)
class TreeMember:
    row: TreeRow
    records: list[EventRecord]


async def load_tree(
    store: EventStore, root: SessionHeader, *, held: bool = True
) -> list[TreeMember]:
    """Every session of `root`'s tree in pre-order (children in creation order).

    Members are named from their creators' catalogs. `held` says whether a live process
    holds the tree; without one, an open turn's process died and it shows as `crashed`.
    """
    headers = await store.list_headers(tenant=root.tenant, roots_only=False, root=root.id)
    by_parent: dict[SessionId | None, list[SessionHeader]] = {}
    for header in headers:
        by_parent.setdefault(header.parent, []).append(header)
    members: list[TreeMember] = []

    async def visit(header: SessionHeader, row: TreeRow, records: list[EventRecord]) -> None:
        members.append(TreeMember(row, records))
        entries: dict[str, SubagentCatalog] = {e.child_id: e for e in catalog_entries(records)}
        names = {cid: e.name for cid, e in entries.items() if e.name is not None}
        order = {cid: i for i, cid in enumerate(entries)}
        children = sorted(
            by_parent.get(header.id, []),
            key=lambda h: (order.get(h.id, len(order)), h.created_at, h.id),
        )
        for child in children:
            child_records = await store.read(child.id, tenant=child.tenant)
            entry = entries.get(child.id)
            mode = entry.mode if entry is not None else "one-shot"
            status = stored_status(
                fold(StatusProjection(), child_records),
                held=held,
                continuable=mode == "continuable",
            )
            child_row = TreeRow(
                header=child,
                name=member_name(row.name, child.id, names),
                parent=row.name,
                mode=mode,
                status=status,
                label=entry.label if entry is not None else "",
                usage=fold(UsageProjection(), child_records),
            )
            await visit(child, child_row, child_records)

    root_records = await store.read(root.id, tenant=root.tenant)
    await visit(root, root_row(root, root_records, held=held), root_records)
    return members


def tree_json(members: list[TreeMember]) -> list[dict[str, object]]:
    """The rows of `subagents tree --json`; a member with a recorded budget shows its limits."""
    rows = [m.row.to_json() for m in members]
    for row, member in zip(rows, members, strict=True):
        budget = recorded_budget(member.records[member.row.header.seed_length :])
        if budget is not None:
            row["budget"] = {
                key: value
                for key, value in (
                    ("tokens", budget.tokens),
                    ("model_calls", budget.model_calls),
                    ("children", budget.children),
                )
                if value is not None
            }
    _roll_up_approvals(rows, members)
    if rows:
        rows[0]["total_usage"] = usage_json(total_usage([m.row for m in members]))
    return rows


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


def _roll_up_approvals(rows: list[dict[str, object]], members: list[TreeMember]) -> None:
    """Each row's pending approval requests (`approvals_pending`) and its subtree's below it."""
    own = {m.row.name: len(fold(StatusProjection(), m.records).waiting) for m in members}
    below = approvals_below(own, {m.row.name: m.row.parent for m in members})
    for row, member in zip(rows, members, strict=True):
        row["approvals_pending"] = own[member.row.name]
        row["approvals_below"] = below.get(member.row.name, 0)


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


def check_takes_messages(members: list[TreeMember], target: SessionId) -> None:
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
