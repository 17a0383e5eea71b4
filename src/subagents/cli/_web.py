"""`subagents web`: serve the web console of one tenant's trees on this machine (docs/web.md).

The console's modules (starlette, uvicorn) and the model specs are imported here, when the
command runs, so that every other command starts without them.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Annotated

import typer

from ..errors import SubagentsError
from ._common import check_tenant, fail, store_path
from ._options import ModelOpt, StoreOpt, TenantOpt
from ._watch import check_interval

__all__ = ["DEFAULT_PORT", "web"]

DEFAULT_PORT = 8765
DEFAULT_INTERVAL = 0.1

HostOpt = Annotated[
    str, typer.Option("--host", help="Address to listen on (a loopback address by default).")
]
PortOpt = Annotated[int, typer.Option("--port", help="Port to listen on (0: any free port).")]
IntervalOpt = Annotated[
    float,
    typer.Option(
        "--interval",
        help="Seconds between two looks at the store while a page watches (above 0, at most 5).",
    ),
]
RemoteOpt = Annotated[
    bool,
    typer.Option(
        "--allow-remote",
        help="Allow a --host that is not a loopback address (anyone with the token can then "
        "run agents here).",
    ),
]


def web(
    store: StoreOpt = None,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = DEFAULT_PORT,
    tenant: TenantOpt = "default",
    model: ModelOpt = None,
    interval: IntervalOpt = DEFAULT_INTERVAL,
    allow_remote: RemoteOpt = False,
) -> None:
    """Serve the web console: the tenant's trees live, transcripts, a timeline and controls.

    Prints the console's address with its token; open it in a browser. The console reads the
    store and never holds a tree; its buttons run `subagents send|steer|interrupt|resume|run`.
    Stop it with Ctrl-C.
    """
    check_tenant(tenant)
    check_interval(interval)
    model = model or os.environ.get("SUBAGENTS_MODEL") or None
    import asyncio

    from ..models import parse_model_spec
    from ..web import ConsoleConfig, console_door, is_loopback, listen, serve

    try:
        if model is not None:
            parse_model_spec(model)
        listener = listen(host, port, allow_remote=allow_remote)
    except SubagentsError as exc:
        fail(f"{exc.message} [{exc.code}]")
    door = console_door(listener)
    config = ConsoleConfig(
        store=store_path(store),
        tenant=tenant,
        door=door,
        model=model,
        interval=interval,
        cwd=Path.cwd(),
    )

    def ready() -> None:
        if not is_loopback(listener.host):
            typer.echo(
                f"subagents web: warning: listening on {listener.authority}, beyond this "
                "machine, without TLS; anyone who reaches it with the token can run agents "
                "as you",
                err=True,
            )
        typer.echo(f"subagents web: http://{listener.address}/?token={door.token}", err=True)

    with contextlib.suppress(KeyboardInterrupt):  # uvicorn takes Ctrl-C; a second one ends it
        asyncio.run(serve(config, listener, ready=ready))
