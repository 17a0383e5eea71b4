"""The console's door: the token, the cookie, the Origin and Host checks and the page headers.

A pure ASGI middleware in front of every route, so no route can forget a check:

- every request carries the token: in the `Authorization: Bearer` header (scripts), in the
  console's cookie, or once in the page address (`?token=`), which is swapped for the cookie
  (`HttpOnly`, `SameSite=Strict`) and a redirect to the same address without it;
- a request that changes something comes from the console's own page (its `Origin`), or
  from a script that sends the token in the header and no `Origin` (a browser cannot set
  that header on a cross-site request without a CORS preflight, which the console never
  grants);
- on a loopback bind the `Host` header names the console, so a DNS-rebound name is refused.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from starlette.requests import cookie_parser

from ..errors import ErrorCode

__all__ = ["ConsoleGuard", "Door", "error_body"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_SAFE_METHODS = frozenset({"GET", "HEAD"})
_PAGE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def error_body(code: ErrorCode, message: str) -> bytes:
    """The JSON of an error response: `{"error": {"code", "message"}}`."""
    return json.dumps({"error": {"code": str(code), "message": message}}).encode()


@dataclass(frozen=True, slots=True)
class Door:
    """What the guard lets in: the token, the console's origins and, on loopback, its hosts."""

    token: str
    origins: frozenset[str]
    """`http://HOST:PORT` for each name the console answers to."""
    hosts: frozenset[str] | None
    """The `Host` values accepted (lowercase); None accepts any (an explicit remote bind)."""
    cookie: str
    """The cookie's name; it carries the port, since browsers share cookies across ports."""


class ConsoleGuard:
    """Refuses every request the `Door` does not let in; adds the page headers to the rest."""

    def __init__(self, app: ASGIApp, door: Door) -> None:
        self._app = app
        self._door = door

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)  # lifespan
            return
        refusal = self._check(scope)
        if refusal is not None:
            await refusal(send)
            return
        swap = self._token_in_query(scope)
        if swap is not None:
            await swap(send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *_PAGE_HEADERS]
            await send(message)

        await self._app(scope, receive, send_with_headers)

    def _check(self, scope: Scope) -> Callable[[Send], Awaitable[None]] | None:
        headers = _headers(scope)
        door = self._door
        if door.hosts is not None and headers.get("host", "").lower() not in door.hosts:
            return _refuse(403, ErrorCode.BAD_HOST, "this console does not answer to that host")
        bearer = _bearer(headers.get("authorization"))
        by_header = bearer is not None and _same(bearer, door.token)
        by_cookie = _same(_cookie(headers.get("cookie"), door.cookie) or "", door.token)
        safe = scope["method"] in _SAFE_METHODS
        # The address's token only opens pages: a change needs the cookie or the header.
        by_query = safe and _same(_query_token(scope) or "", door.token)
        if not (by_header or by_cookie or by_query):
            return _refuse(
                401,
                ErrorCode.UNAUTHORIZED,
                "this console needs its token: open the address `subagents web` printed",
            )
        if not safe:
            origin = headers.get("origin")
            own = door.origins
            if door.hosts is None and "host" in headers:  # a remote bind: its own name counts
                own = own | {f"http://{headers['host'].lower()}"}
            if (origin is None and not by_header) or (
                origin is not None and origin.lower() not in own
            ):
                return _refuse(
                    403,
                    ErrorCode.BAD_ORIGIN,
                    "a change must come from the console's own page (its Origin)",
                )
        return None

    def _token_in_query(self, scope: Scope) -> Callable[[Send], Awaitable[None]] | None:
        """A page address with the (valid) token: set the cookie, redirect to it without."""
        if _query_token(scope) is None or scope["method"] not in _SAFE_METHODS:
            return None
        rest = [(k, v) for k, v in _query(scope) if k != "token"]
        location = _local_path(scope.get("path", "/")) + (f"?{urlencode(rest)}" if rest else "")
        cookie = f"{self._door.cookie}={self._door.token}; HttpOnly; SameSite=Strict; Path=/"

        async def respond(send: Send) -> None:
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [
                        (b"location", location.encode()),
                        (b"set-cookie", cookie.encode()),
                        (b"content-length", b"0"),
                        *_PAGE_HEADERS,
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})

        return respond


def _local_path(path: str) -> str:
    """`path` as a redirect target that stays on this console.

    Leading slashes and backslashes collapse to one (`//evil.example/` would be another host
    to a browser), and the path is percent-encoded again (a decoded CR LF must not reach the
    `Location` header).
    """
    return quote("/" + path.lstrip("/\\"), safe="/:@!$&'()*+,;=-._~")


def _refuse(status: int, code: ErrorCode, message: str) -> Callable[[Send], Awaitable[None]]:
    body = error_body(code, message)

    async def respond(send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *_PAGE_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return respond


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lowercase name (a repeated one: the last; latin-1, as HTTP)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _query(scope: Scope) -> list[tuple[str, str]]:
    raw: bytes = scope.get("query_string", b"")
    return parse_qsl(raw.decode("latin-1"), keep_blank_values=True)


def _query_token(scope: Scope) -> str | None:
    tokens = [v for k, v in _query(scope) if k == "token"]
    return tokens[-1] if tokens else None


def _bearer(value: str | None) -> str | None:
    if value is None:
        return None
    scheme, _, credential = value.partition(" ")
    return credential.strip() if scheme.lower() == "bearer" else None


def _cookie(header: str | None, name: str) -> str | None:
    """The value of cookie `name`, parsed leniently as browsers do.

    Other sites' odd cookies beside ours (a JSON value, a stray quote) must not hide it.
    """
    return cookie_parser(header).get(name) if header else None


def _same(given: str, token: str) -> bool:
    """Compare in constant time (the token must not leak through timing)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), token.encode())
