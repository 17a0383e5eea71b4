"""How the model names other agents.

A name path relative to the caller, an absolute path from the root (`/reviewer/checker`), or
a session id. Resolution reads catalogs only and grants nothing; every operation authorizes
the resolved id itself.
"""

from __future__ import annotations

import re

from ..core import Agent, AgentRuntime
from ..errors import ErrorCode, SubagentError
from ..ids import SessionId
from ..names import ROOT_NAME, is_name
from ._catalog import resolve_name

__all__ = ["resolve_reference"]

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _malformed(reference: str) -> SubagentError:
    return SubagentError(
        f"invalid agent reference {reference!r}: give a child's name (`reviewer`), a path "
        "below you (`reviewer/checker`), a path from the root (`/reviewer/checker`) or a "
        "session id",
        code=ErrorCode.INVALID_NAME,
    )


async def resolve_reference(
    runtime: AgentRuntime, caller: Agent, reference: str, *, action: str
) -> SessionId:
    """The session id `reference` names, from `caller`'s point of view."""
    reference = reference.strip()
    if _UUID.fullmatch(reference):
        return SessionId(reference)
    absolute = reference.startswith("/")
    path = reference[1:] if absolute else reference
    segments = path.split("/")
    if not path or not all(is_name(s) or s == ROOT_NAME for s in segments):
        raise _malformed(reference)
    root = caller.session.header.root_id
    if absolute and path == ROOT_NAME:
        return root
    if ROOT_NAME in segments:
        raise _malformed(reference)
    start = root if absolute else caller.id
    found = await resolve_name(runtime.read_log, start=start, path=path)
    if found is None:
        where = "in this tree" if absolute else "among the agents you started"
        raise SubagentError(
            f"no agent named {reference!r} {where}; list_agents shows the names ({action})",
            code=ErrorCode.NOT_FOUND,
        )
    return found
