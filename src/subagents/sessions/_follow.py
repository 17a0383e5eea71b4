"""`TreeFollower`: a stored tree's new records, read incrementally from outside its process.

A follower only reads the store, so following a tree costs its holder nothing. The store's
`change_count` tells an idle store from a busy one: a poll of an unchanged store makes that one
cheap query and returns at once.

Cost of a poll after a change (decided here): one `list_headers` query for the tree (to discover
new members) plus one `read` per known session from its next seq, which finds nothing for the
sessions that did not change. The store protocol has no per-session change marker, so one
query per known session is the floor; what each query returns is only what is new.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from ..ids import SessionId
from ._events import EventRecord, SessionHeader
from ._store import EventStore

__all__ = ["TreeFollower"]

Sleep = Callable[[float], Awaitable[object]]


class TreeFollower:
    """Follows every session of `root`'s tree (the root and all its descendants)."""

    def __init__(self, store: EventStore, *, tenant: str, root: SessionId) -> None:
        self._store = store
        self._tenant = tenant
        self._root = root
        self._members: dict[SessionId, SessionHeader] = {}
        self._next_seq: dict[SessionId, int] = {}
        self._seen_count: int | None = None

    @property
    def members(self) -> list[SessionHeader]:
        """The sessions discovered so far, parents before their children."""
        return list(self._members.values())

    async def changed(self) -> bool:
        """Whether anything was committed to the store since the last poll (one cheap query)."""
        return await self._store.change_count() != self._seen_count

    async def poll(self) -> list[tuple[SessionHeader, EventRecord]]:
        """Every record committed since the last poll, in seq order per session.

        A parent's new records come before its children's. An unchanged store returns [] after
        one `change_count` query, reading nothing else.
        """
        count = await self._store.change_count()
        if count == self._seen_count:
            return []
        # Taken before reading: a commit made while we read moves the count again, so the
        # next poll reads once more instead of missing it.
        self._seen_count = count
        await self._discover()
        batch: list[tuple[SessionHeader, EventRecord]] = []
        for session_id, header in self._members.items():
            records = await self._store.read(
                session_id, tenant=self._tenant, from_seq=self._next_seq[session_id]
            )
            if records:
                self._next_seq[session_id] = records[-1].seq + 1
                batch.extend((header, record) for record in records)
        return batch

    async def wait_change(self, *, interval: float, sleep: Sleep = asyncio.sleep) -> None:
        """Return once the store changed since the last poll, checking every `interval` s."""
        while not await self.changed():
            await sleep(interval)

    async def _discover(self) -> None:
        """Add the tree's new sessions, keeping parents ahead of their children."""
        headers = await self._store.list_headers(
            tenant=self._tenant, roots_only=False, root=self._root
        )
        new = [h for h in headers if h.id not in self._members]
        if not new:
            return
        for header in new:
            self._next_seq[header.id] = 0
        # A child is created after its parent and is one level deeper: ordering by depth,
        # then creation, puts every parent ahead of its children.
        members = [*self._members.values(), *new]
        members.sort(key=lambda h: (h.depth, h.created_at))
        self._members = {h.id: h for h in members}
