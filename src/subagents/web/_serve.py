"""Serving the console: the listening socket, the door it implies, and uvicorn on top.

The socket is bound before the app is built, so the door knows the real port (`--port 0`
picks one) and the printed address works the moment it is printed.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

from ..errors import ErrorCode, UsageError
from ._app import ConsoleConfig, create_app
from ._security import Door

__all__ = ["Listener", "console_door", "is_loopback", "listen", "serve"]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or `localhost`)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Listener:
    """A bound, listening socket and the address to print."""

    sock: socket.socket
    host: str
    port: int

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def address(self) -> str:
        """Where a browser reaches it: a wildcard bind (`0.0.0.0`, `::`) via loopback."""
        if ipaddress.ip_address(self.host).is_unspecified:
            return f"127.0.0.1:{self.port}" if ":" not in self.host else f"[::1]:{self.port}"
        return self.authority


def listen(host: str, port: int, *, allow_remote: bool) -> Listener:
    """Bind `host:port`; a non-loopback host needs `allow_remote` (else `USAGE`)."""
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: give a port from 0 to 65535")
    if not is_loopback(host) and not allow_remote:
        raise UsageError(
            f"--host {host} would open the console, which runs agents with your credentials, "
            "beyond this machine; pass --allow-remote as well if that is what you want"
        )
    address = "127.0.0.1" if host == "localhost" else host.strip("[]")
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    except ValueError:
        raise UsageError(
            f"--host {host[:80]!r}: give an IP address (127.0.0.1, ::1) or localhost"
        ) from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", code=ErrorCode.USAGE
        ) from None
    return Listener(sock, address, sock.getsockname()[1])


def console_door(listener: Listener, *, token: str | None = None) -> Door:
    """The door of a console on `listener`: a fresh token unless given, and its names."""
    port = listener.port
    names = {f"{name}:{port}" for name in _LOOPBACK_NAMES} | {listener.authority}
    loopback = is_loopback(listener.host)
    return Door(
        token=token or secrets.token_urlsafe(32),
        origins=frozenset(f"http://{name}" for name in names),
        # A remote bind answers to whatever name reaches it; its page's Origin is then its
        # own Host (ConsoleGuard), and the token is what keeps strangers out.
        hosts=frozenset(names) if loopback else None,
        cookie=f"subagents-console-{port}",
    )


async def serve(
    config: ConsoleConfig, listener: Listener, *, ready: Callable[[], None] | None = None
) -> None:
    """Serve the console on `listener` until stopped (Ctrl-C or SIGTERM)."""
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=1,
            access_log=False,
        )
    )
    if ready is not None:
        ready()
    await server.serve(sockets=[listener.sock])
