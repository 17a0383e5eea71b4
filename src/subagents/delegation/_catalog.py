"""The creator's catalog of children, folded from its log, and name resolution over it.

Names live only in creators' catalogs: a member's full name is rebuilt by walking its creation
chain and reading each creator's catalog entry for the next segment. A member below a creator
that recorded no name (a historical catalog payload before v3, or no entry at all) is named by
its session id.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence

from ..errors import ErrorCode, SubagentError
from ..ids import SessionId
from ..names import ROOT_NAME, is_name
from ..sessions import EventRecord, EventStore, SessionHeader, SubagentCatalog

__all__ = [
    "HeaderReader",
    "LogReader",
    "catalog_entries",
    "check_name_path",
    "child_names",
    "full_name_of",
    "named_path",
    "resolve_name",
    "store_readers",
]


def catalog_entries(records: Iterable[EventRecord]) -> list[SubagentCatalog]:
    """The catalog entries of a creator's log, in creation order."""
    # `type() is`, not isinstance: a tree's root log holds tens of thousands of records, and
    # the exact test takes a third of the time (the event classes are final).
    return [event for r in records if type(event := r.event) is SubagentCatalog]


def child_names(records: Iterable[EventRecord]) -> dict[str, str]:
    """Child session id -> the name its creator recorded (children without one are absent)."""
    return {e.child_id: e.name for e in catalog_entries(records) if e.name is not None}


LogReader = Callable[[SessionId], Awaitable[Sequence[EventRecord]]]
HeaderReader = Callable[[SessionId], Awaitable[SessionHeader]]


def store_readers(store: EventStore, tenant: str) -> tuple[LogReader, HeaderReader]:
    """Readers over the store alone (for a tree no process has loaded)."""

    async def read(session_id: SessionId) -> Sequence[EventRecord]:
        return await store.read(session_id, tenant=tenant)

    async def header(session_id: SessionId) -> SessionHeader:
        return await store.get_header(session_id, tenant=tenant)

    return read, header


async def resolve_name(read: LogReader, *, start: SessionId, path: str) -> SessionId | None:
    """Resolve a name path (`reviewer/checker`) below `start`.

    Reads only the catalogs along the path. Grants nothing: callers authorize the returned id
    themselves.
    """
    segments = _segments(path)
    if not segments:
        return None
    current = start
    for segment in segments:
        records = await read(current)
        found = next(
            (
                SessionId(e.child_id)
                for e in reversed(catalog_entries(records))
                if e.name == segment
            ),
            None,
        )
        if found is None:
            return None
        current = found
    return current


async def full_name_of(read: LogReader, read_header: HeaderReader, header: SessionHeader) -> str:
    """A member's full name, rebuilt from the catalogs along its creation chain.

    A member whose creator (or any creator above it) recorded no name is named by its id.
    """
    segments: list[str] = []
    current = header
    while current.parent is not None:
        name = child_names(await read(current.parent)).get(current.id)
        if name is None:
            return header.id
        segments.append(name)
        current = await read_header(current.parent)
    return "/".join(reversed(segments)) or ROOT_NAME


def _segments(path: str) -> Sequence[str]:
    """The names of `path`, or () when it is not a name path.

    One leading `/` is the absolute form (`/reviewer/checker`); nothing else is stripped, so
    `kid/`, `//kid` and `a//b` name nobody instead of passing for `kid` or `a/b`.
    """
    parts = path.removeprefix("/").split("/")
    return parts if all(is_name(p) for p in parts) else ()


def check_name_path(path: object) -> str:
    """`path` when it is a full name (`reviewer/checker`, `/reviewer`) or `lead`.

    For names a person types (`subagents send SID NAME`), where a stray slash must be an
    error rather than a near miss.

    Raises:
        SubagentError: `INVALID_NAME`, saying what is wrong with the path.
    """
    if not isinstance(path, str):  # a caller from Python may pass anything
        raise SubagentError(
            f"an agent name is text, got {type(path).__name__}", code=ErrorCode.INVALID_NAME
        )
    if path in (ROOT_NAME, f"/{ROOT_NAME}") or _segments(path):
        return path
    if not path.strip():
        problem = "the name is empty"
    elif path.removeprefix("/").endswith("/") or "//" in path or path.strip("/") == "":
        problem = "a slash may only separate two names"
    else:
        problem = "each part must be a name: lower-case letters, digits or '-'"
    raise SubagentError(
        f"invalid agent name {path[:80]!r}: {problem}; give a full name such as `reviewer` or "
        "`reviewer/checker` (see `subagents tree`)",
        code=ErrorCode.INVALID_NAME,
    )


def named_path(path: str) -> bool:
    """Every part of `path` is a name: its children are named under it (else by session id)."""
    return all(is_name(p) for p in path.split("/"))
