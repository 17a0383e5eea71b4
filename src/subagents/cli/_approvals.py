"""`subagents approvals | approve | deny`: the calls that wait for a person, and decisions.

A decision is addressed by tree, member name and call id (the member's only pending call
when omitted) and goes where the tree is: to the process that holds it, through its
control channel, or into the member's log when no process does (a resume applies it). The
listing is read from the store, scoped to one tenant.

The runtime is imported by the functions that build one (startup time: the app imports this
module for every command; tests/cli/test_startup.py).
"""

from __future__ import annotations

import getpass
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any, Self

import typer

from ._common import (
    SESSION_HELP,
    check_tenant,
    open_store,
    require_existing_store,
    resolve_root,
    run_async,
)
from ._options import JsonOpt, StoreOpt, TenantOpt
from ._render import dumps

if TYPE_CHECKING:
    from ..core import AgentRuntime
    from ..delegation import PendingApproval

__all__ = ["ApprovalNotices", "approvals", "approve", "decider", "deny"]

NameArg = Annotated[str, typer.Argument(help="Full name of the agent whose call waits.")]
CallArg = Annotated[
    str | None,
    typer.Argument(help="The call id (`subagents approvals` lists them); its only one if omitted."),
]


def decider() -> str:
    """Who decides from this command line: `cli:` and the login name."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name for this uid (a container)
        user = "unknown"
    return f"cli:{user}"[:200]


def approvals(
    session: Annotated[
        str | None, typer.Argument(help=f"{SESSION_HELP} Omit it to list every tree's.")
    ] = None,
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """List the tool calls that wait for a decision (one tree's, or the tenant's)."""
    from ._runtime import runtime_for  # startup time: see the module's docstring

    check_tenant(tenant)
    require_existing_store(store)

    async def main() -> list[PendingApproval]:
        cwd = None
        if session is not None:
            async with open_store(store) as opened:
                cwd = (await resolve_root(opened, tenant, session)).cwd
        async with runtime_for(store, tenant=tenant, cwd=cwd, definitions={}) as runtime:
            root = None
            if session is not None:
                root = (await resolve_root(runtime.store, tenant, session)).id
            return await runtime.approvals(root)

    found = run_async(main)
    if as_json:
        typer.echo(dumps([row.to_json() for row in found]))
        return
    typer.echo(render_approvals(found))


def render_approvals(rows: Sequence[PendingApproval]) -> str:
    if not rows:
        return "no approval requests wait"
    lines: list[str] = []
    for row in rows:
        request = row.request
        state = request.state
        if state == "pending":
            hint = (
                f"    decide: subagents approve {row.root} {row.name} {request.call_id}"
                f"  |  subagents deny {row.root} {row.name} {request.call_id} --reason TEXT"
            )
        else:
            state += ", applied when the tree runs again"
            hint = f"    resume: subagents resume {row.root}"
        lines.append(
            f"{row.root}  {row.name}  {request.call_id}  {request.name}  [{state}]\n"
            f"    arguments: {_short(request.arguments)}\n{hint}"
        )
    return "\n".join(lines)


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _decide(
    session: str,
    name: str,
    call_id: str | None,
    *,
    store: str | None,
    tenant: str,
    approved: bool,
    reason: str | None,
) -> dict[str, Any]:
    # Startup time: see the module's docstring.
    from ..core import check_reason
    from ._runtime import runtime_for

    check_tenant(tenant)
    require_existing_store(store)
    if call_id is not None and not call_id.strip():
        raise typer.BadParameter("the call id must not be empty")

    async def main() -> dict[str, Any]:
        check_reason(reason)  # before anything is opened: refused in one line, as `USAGE`
        async with open_store(store) as opened:
            header = await resolve_root(opened, tenant, session)
        async with runtime_for(store, tenant=tenant, cwd=header.cwd, definitions={}) as runtime:
            if approved:
                outcome = await runtime.approve(header.id, name, call_id, by=decider())
            else:
                outcome = await runtime.deny(header.id, name, call_id, reason=reason, by=decider())
            return {"root": header.id, **outcome}

    return run_async(main)


def _said(outcome: dict[str, Any]) -> str:
    verb = "approved" if outcome["approved"] else "denied"
    what = f"{verb} {outcome['tool']} call {outcome['call_id']} of {outcome['name']}"
    if outcome["applied"]:
        return f"{what}: " + ("it runs now" if outcome["approved"] else "its model is told why")
    return (
        f"{what}: recorded; it takes effect when the tree runs again "
        f"(subagents resume {outcome['root']})"
    )


def approve(
    session: Annotated[str, typer.Argument(help=SESSION_HELP)],
    name: NameArg,
    call_id: CallArg = None,
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Approve a waiting tool call: it runs, once."""
    outcome = _decide(
        session, name, call_id, store=store, tenant=tenant, approved=True, reason=None
    )
    typer.echo(dumps(outcome) if as_json else _said(outcome))


def deny(
    session: Annotated[str, typer.Argument(help=SESSION_HELP)],
    name: NameArg,
    call_id: CallArg = None,
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Why (the agent's model reads it, with what to do instead)."),
    ] = None,
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Deny a waiting tool call: it does not run, and the agent is told why."""
    outcome = _decide(
        session, name, call_id, store=store, tenant=tenant, approved=False, reason=reason
    )
    typer.echo(dumps(outcome) if as_json else _said(outcome))


class ApprovalNotices:
    """While a run goes on: one stderr line each time a call starts waiting for a decision."""

    def __init__(self, runtime: AgentRuntime, root: str | None = None) -> None:
        self._runtime = runtime
        self._root = root
        self._unsubscribe = None

    def __enter__(self) -> Self:
        from ..core import ApprovalWaiting  # startup time: see the module's docstring

        self._unsubscribe = self._runtime.subscribe(self._on_event, types=(ApprovalWaiting,))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()

    def _on_event(self, event: object) -> None:
        from ..core import ApprovalWaiting  # startup time: see the module's docstring

        if not isinstance(event, ApprovalWaiting):
            return
        agent = self._runtime.get_agent(event.agent_id)
        root = agent.session.header.root_id if agent is not None else "SESSION"
        request = event.request
        typer.echo(
            f"subagents: {event.name} waits for approval of {request.name} "
            f"{_short(request.arguments, 120)} (call {request.call_id}); decide with: "
            f"subagents approve {root} {event.name} {request.call_id}  (or deny ... --reason)",
            err=True,
        )
