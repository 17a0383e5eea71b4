"""The web console: a live view and controls of one tenant's agent trees (docs/web.md).

Built on starlette, uvicorn and server-sent events; the page is plain static files shipped in
the package. Imported only by `subagents web`, so other commands do not pay for it.
"""

from ._app import ConsoleConfig as ConsoleConfig, create_app as create_app
from ._security import ConsoleGuard as ConsoleGuard, Door as Door
from ._serve import (
    Listener as Listener,
    console_door as console_door,
    is_loopback as is_loopback,
    listen as listen,
    serve as serve,
)

__all__ = [
    "ConsoleConfig",
    "ConsoleGuard",
    "Door",
    "Listener",
    "console_door",
    "create_app",
    "is_loopback",
    "listen",
    "serve",
]
