"""The console's read side: the tenant's trees, followed from the store and shared by pages.

Each tree a page looks at is a `WatchedTree` (the same fold `subagents watch` uses), kept here
so that every page and stream of one tree shares one follower: a refresh reads only what was
committed since the last one, and a store nobody wrote to costs one cheap query. The console
never writes and never holds a tree.

Beside each tree its approval requests are folded from the same records (`ApprovalFold`), so
the requests that wait, and each member's count of them, are read without a runtime and
without reading any log twice.
"""

from __future__ import annotations

import asyncio
import re
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..core import event_json, iso
from ..delegation import MemberRow, PendingApproval, WatchedTree, approvals_below
from ..errors import NotFoundError
from ..ids import SessionId
from ..sessions import (
    ApprovalDecided,
    ApprovalRequest,
    ApprovalRequested,
    EventRecord,
    EventStore,
    SessionHeader,
    ToolCallEvent,
    ToolResultEvent,
    approval_requests,
)

__all__ = ["MAX_RECORDS", "MAX_SESSIONS", "ApprovalFold", "Trees", "row_json"]

MAX_SESSIONS = 200
"""The sessions page lists the newest this many root sessions."""
MAX_RECORDS = 500
"""Records in one page of a member's transcript."""
_CAPACITY = 256
"""Trees kept followed; the least recently looked at is dropped (and re-read if needed)."""
_SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class ApprovalFold:
    """The approval records of one tree's members, kept as the tree is followed.

    Only what `approval_requests` reads is kept: each request, and the decision, `tool/call`
    and result of a call that has a request. A fork's seed (its parent's records) is skipped,
    as every listing of requests does.
    """

    def __init__(self) -> None:
        self._records: dict[SessionId, list[EventRecord]] = {}
        self._calls: dict[SessionId, set[str]] = {}
        self._requests: dict[SessionId, tuple[int, list[ApprovalRequest]]] = {}

    def apply(self, batch: Iterable[tuple[SessionHeader, EventRecord]]) -> None:
        for header, record in batch:
            if record.seq < header.seed_length:
                continue
            calls = self._calls.setdefault(header.id, set())
            match record.event:
                case ApprovalRequested(call_id=call_id):
                    calls.add(call_id)
                case ApprovalDecided(call_id=call_id) | ToolCallEvent(call_id=call_id):
                    if call_id not in calls:
                        continue
                case ToolResultEvent(message=message):
                    if message.call_id not in calls:
                        continue
                case _:
                    continue
            self._records.setdefault(header.id, []).append(record)

    def requests(self, session_id: SessionId) -> list[ApprovalRequest]:
        """The member's requests, oldest first, with what became of each."""
        records = self._records.get(session_id, [])
        cached = self._requests.get(session_id)
        if cached is None or cached[0] != len(records):
            cached = (len(records), approval_requests(records))
            self._requests[session_id] = cached
        return cached[1]

    def pending(self, session_id: SessionId) -> int:
        """How many of the member's requests nobody decided yet."""
        return sum(1 for r in self.requests(session_id) if r.pending)


def approval_counts(
    fold: ApprovalFold, rows: Sequence[MemberRow]
) -> dict[SessionId, tuple[int, int]]:
    """Each member's pending requests and those of its subtree below it, by session id."""
    own = {r.name: fold.pending(r.session_id) for r in rows}
    below = approvals_below(own, {r.name: r.parent for r in rows})
    return {r.session_id: (own[r.name], below.get(r.name, 0)) for r in rows}


def row_json(row: MemberRow, counts: tuple[int, int]) -> dict[str, Any]:
    """A member's row as the API gives it, with `approvals_pending` and `approvals_below`."""
    pending, below = counts
    return row.to_json() | {"approvals_pending": pending, "approvals_below": below}


class Trees:
    """The followed trees of one tenant's store."""

    def __init__(
        self,
        store: EventStore,
        tenant: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.tenant = tenant
        self._clock = clock
        self._trees: OrderedDict[SessionId, WatchedTree] = OrderedDict()
        self._locks: dict[SessionId, asyncio.Lock] = {}
        self._folds: weakref.WeakKeyDictionary[WatchedTree, ApprovalFold] = (
            weakref.WeakKeyDictionary()
        )
        """Each followed tree's approvals, folded from the records its refreshes returned."""
        self._rows: dict[SessionId, tuple[int, dict[str, Any]]] = {}
        """Each listed tree's sessions-page row, with the tree's version it was made from."""

    async def root(self, reference: str) -> SessionHeader:
        """The tenant's root session `reference` (its id); `NOT_FOUND` for anything else.

        Another tenant's session, a child's id and garbage all read as not found, with no
        hint of which: a console of one tenant learns nothing of another's.
        """
        if not _SESSION_ID.fullmatch(reference):
            raise NotFoundError(f"no session {reference[:80]!r}: give a root session's id")
        try:
            header = await self.store.get_header(SessionId(reference), tenant=self.tenant)
        except NotFoundError:
            header = None
        if header is None or header.parent is not None:
            raise NotFoundError(f"no root session {reference} in this console's tenant")
        return header

    async def current(self, root: SessionHeader) -> WatchedTree:
        """`root`'s tree, with what was committed since it was last looked at folded in."""
        watched = self._trees.get(root.id)
        if watched is None:
            watched = WatchedTree(self.store, root, clock=self._clock)
            self._trees[root.id] = watched
            if len(self._trees) > _CAPACITY:
                dropped, _ = self._trees.popitem(last=False)
                self._locks.pop(dropped, None)
                self._rows.pop(dropped, None)
        self._trees.move_to_end(root.id)
        lock = self._locks.setdefault(root.id, asyncio.Lock())
        async with lock:  # one refresh at a time: a follower reads from where it stopped
            batch = await watched.refresh()
            # A tree the cache dropped and read again is a new object: its fold starts at 0.
            self.fold(watched).apply(batch)
        return watched

    def fold(self, watched: WatchedTree) -> ApprovalFold:
        """The approvals of a followed tree, folded as far as its last refresh."""
        fold = self._folds.get(watched)
        if fold is None:
            fold = self._folds[watched] = ApprovalFold()
        return fold

    def counts(
        self, watched: WatchedTree, rows: Sequence[MemberRow]
    ) -> dict[SessionId, tuple[int, int]]:
        """`approval_counts` of a tree `current` returned."""
        return approval_counts(self.fold(watched), rows)

    async def approvals(self, root: SessionHeader) -> list[PendingApproval]:
        """The requests that wait in `root`'s tree: members in pre-order, oldest first in each.

        The same rows `subagents approvals` lists, read from the followed tree.
        """
        watched = await self.current(root)
        return self.waiting(watched, watched.view.rows(held=watched.held, now=time.time()))

    def waiting(self, watched: WatchedTree, rows: Sequence[MemberRow]) -> list[PendingApproval]:
        """The requests that wait in a followed tree whose `rows` are given (pre-order)."""
        fold = self.fold(watched)
        root = watched.view.root.id
        return [
            PendingApproval(root, row.session_id, row.name, request, watched.held)
            for row in rows
            for request in fold.requests(row.session_id)
            if request.outstanding
        ]

    async def all_approvals(self) -> list[PendingApproval]:
        """The requests that wait in every tree of the tenant, newest tree first."""
        headers = await self.store.list_headers(tenant=self.tenant, roots_only=True)
        found: list[PendingApproval] = []
        for header in headers:
            found.extend(await self.approvals(header))
        return found

    async def member(self, root: SessionHeader, reference: str) -> tuple[WatchedTree, SessionId]:
        """The tree and the session id of one of its members; `NOT_FOUND` if it is not one."""
        watched = await self.current(root)
        session_id = SessionId(reference)
        if not _SESSION_ID.fullmatch(reference) or session_id not in watched.view:
            raise NotFoundError(f"no member {reference[:80]!r} in session {root.id}")
        return watched, session_id

    async def sessions(self, query: str | None = None) -> list[dict[str, Any]]:
        """The newest root sessions (at most `MAX_SESSIONS`), each as the sessions page shows it.

        `query` keeps the rows whose id, status or first prompt contains it (any case).
        """
        headers = await self.store.list_headers(tenant=self.tenant, roots_only=True)
        rows = [await self._session_row(header) for header in headers[:MAX_SESSIONS]]
        if query:
            needle = query.lower()
            rows = [r for r in rows if needle in _haystack(r)]
        return rows

    async def _session_row(self, header: SessionHeader) -> dict[str, Any]:
        """The tree's row, made again only when the tree changed (a row folds every member)."""
        watched = await self.current(header)
        cached = self._rows.get(header.id)
        if cached is not None and cached[0] == watched.version:
            return cached[1]
        row = session_row(watched)
        self._rows[header.id] = (watched.version, row)
        return row

    async def records(
        self, root: SessionHeader, reference: str, *, from_seq: int, limit: int
    ) -> dict[str, Any]:
        """One page of a member's events from `from_seq`, as `subagents log --json` prints them."""
        _, session_id = await self.member(root, reference)
        page = await self.store.read(session_id, tenant=self.tenant, from_seq=from_seq, limit=limit)
        return {
            "records": [event_json(r) for r in page],
            "next": page[-1].seq + 1 if page else from_seq,
        }


def session_row(watched: WatchedTree) -> dict[str, Any]:
    """One root session as the sessions page lists it."""
    view = watched.view
    lead = view.row(view.root.id, held=watched.held, now=time.time())
    return {
        "session_id": view.root.id,
        "created_at": iso(view.root.created_at),
        "status": str(lead.status),
        "held": watched.held,
        "members": len(view),
        "total_usage": view.usage_rows()[0]["total_usage"],
        "prompt": view.details(view.root.id)["prompt"],
    }


def _haystack(row: dict[str, Any]) -> str:
    return " ".join(str(row[key] or "") for key in ("session_id", "status", "prompt")).lower()
