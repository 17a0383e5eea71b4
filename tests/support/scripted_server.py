"""A loopback HTTP server that answers each request with the next of a queue of replies.

The model API servers of the tests (`chat_server`, `messages_server`) are this server with
their own request handler and reply kinds: it records every request, hands the handler the
next scripted reply (or the subclass's `exhausted` one when none is left), and runs on a
thread while used as a context manager.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

from subagents.messages import JsonObject

__all__ = ["ErrorReply", "HangReply", "RecordedRequest", "ScriptedHandler", "ScriptedServer"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: JsonObject = field(default_factory=dict[str, Any])


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A non-streaming error response with a JSON body."""

    status: int
    body: JsonObject
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class HangReply:
    """No answer at all until the server shuts down (for client timeouts)."""


class ScriptedHandler(BaseHTTPRequestHandler):
    """Records each POST and answers it with the server's next reply.

    An `ErrorReply` is sent as JSON and a `HangReply` holds the connection until the server
    shuts down; every other reply is a stream, whose text `stream_text` gives.
    """

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def stream_text(self, reply: Any) -> str:
        raise NotImplementedError

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: JsonObject = json.loads(raw) if raw else {}
        recorded = RecordedRequest(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        server = ScriptedServer[object].of(self)
        reply = server.take(recorded)
        if isinstance(reply, ErrorReply):
            self._send(reply.status, "application/json", json.dumps(reply.body), reply.headers)
        elif isinstance(reply, HangReply):
            server.released.wait()
            self.close_connection = True
        else:
            self._send(200, "text/event-stream", self.stream_text(reply))

    def _send(
        self, status: int, kind: str, text: str, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        payload = text.encode()
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(payload)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, scripted: ScriptedServer[Any], handler: type[BaseHTTPRequestHandler]):
        self.scripted = scripted
        super().__init__(("127.0.0.1", 0), handler)


class ScriptedServer(Generic[R]):
    """Replies of type R in order; `requests` lists what was received.

    `released` is set when the server shuts down (a reply that hangs waits for it).
    """

    what: ClassVar[str] = "scripted server"
    handler: ClassVar[type[BaseHTTPRequestHandler]]

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.released = threading.Event()
        self._replies: deque[R] = deque()
        self._requests: list[RecordedRequest] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def of(cls, handler: BaseHTTPRequestHandler) -> Self:
        """The scripted server a handler serves."""
        server = handler.server
        assert isinstance(server, _Server)
        scripted = server.scripted
        assert isinstance(scripted, cls)
        return scripted

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{self.what} is not running; use it as a context manager")
        port: int = self._server.server_address[1]
        return port

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def bodies(self) -> list[JsonObject]:
        return [request.body for request in self.requests]

    def enqueue(self, *replies: R) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    def take(self, request: RecordedRequest) -> R:
        with self._lock:
            self._requests.append(request)
            if self._replies:
                return self._replies.popleft()
            count = len(self._requests)
        return self.exhausted(f"{self.what}: no scripted reply left for request #{count}")

    def exhausted(self, message: str) -> R:
        """The reply to a request that finds the queue empty (an error saying `message`)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._server = _Server(self, self.handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},  # how soon shutdown() is noticed
            name=self.what.replace(" ", "-"),
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None
