"""Helpers for the web console's tests: a console in this process or as a real `subagents web`.

`console` runs the app in-process behind starlette's test client (its lifespan opens the real
SQLite store); its client sends nothing by itself, and `Console.get/post` add the cookie (and
the console's Origin) as its page would. A server fault is a 500 answer, not an exception.
`console_process` starts `python -m subagents web --port 0` for real and reads the address it
prints; a test then talks to it over loopback (httpx) or with a browser.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx2 as httpx
from live_support import WAIT_SECONDS, StoreView, environment
from starlette.testclient import TestClient

from subagents.web import ConsoleConfig, console_door, create_app, listen


@dataclass
class Console:
    """An in-process console whose client sends nothing by itself: no cookie, no token."""

    client: TestClient
    token: str
    origin: str
    cookie: str
    """The cookie's name (`subagents-console-PORT`)."""
    port: int

    @property
    def cookie_auth(self) -> dict[str, str]:
        return {"cookie": f"{self.cookie}={self.token}"}

    @property
    def bearer(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"}

    def get(self, path: str, **params: str) -> httpx.Response:
        return self.client.get(path, params=params, headers=self.cookie_auth)

    def post(self, path: str, body: Any) -> httpx.Response:
        """As the console's page posts: JSON, the cookie and the console's Origin."""
        headers = {**self.cookie_auth, "origin": self.origin}
        return self.client.post(path, json=body, headers=headers)

    def post_raw(
        self, path: str, content: bytes, content_type: str | None = "application/json"
    ) -> httpx.Response:
        headers = {**self.cookie_auth, "origin": self.origin}
        if content_type is not None:
            headers["content-type"] = content_type
        return self.client.post(path, content=content, headers=headers)

    def jobs(self) -> list[dict[str, Any]]:
        response = self.get("/api/jobs")
        assert response.status_code == 200, response.text
        return cast("list[dict[str, Any]]", response.json()["jobs"])


@contextmanager
def console(
    store: Path, *, tenant: str = "default", model: str | None = None, cwd: Path | None = None
) -> Generator[Console, None, None]:
    """The console app in this process; a server error is a 500 answer, not an exception."""
    listener = listen("127.0.0.1", 0, allow_remote=False)
    listener.sock.close()
    door = console_door(listener)
    config = ConsoleConfig(store=store, tenant=tenant, door=door, model=model, cwd=cwd)
    origin = f"http://127.0.0.1:{listener.port}"
    with TestClient(
        create_app(config),
        base_url=origin,
        follow_redirects=False,
        raise_server_exceptions=False,
    ) as client:
        yield Console(client, door.token, origin, door.cookie, listener.port)


def snapshot(store: Path) -> tuple[object, ...]:
    """What the store holds: every event (session, seq, kind, payload), command and root."""
    view = StoreView(store)
    events = tuple((e.session_id, e.seq, e.kind, repr(e.event)) for e in view.events())
    return events, tuple(view.commands()), tuple(sorted(view.roots()))


@dataclass
class ConsoleProcess:
    process: subprocess.Popen[str]
    url: str
    """The address it printed, with the token."""

    @property
    def base(self) -> str:
        return self.url.split("/?token=")[0]

    @property
    def token(self) -> str:
        return self.url.split("?token=")[1]

    def client(self) -> httpx.Client:
        """An HTTP client that authenticates as a script does (bearer token, no Origin)."""
        return httpx.Client(
            base_url=self.base,
            headers={"authorization": f"Bearer {self.token}"},
            timeout=WAIT_SECONDS,
        )


@contextmanager
def console_process(
    home: Path, cwd: Path, *args: str, store: Path | None = None
) -> Generator[ConsoleProcess, None, None]:
    """`python -m subagents web --port 0 ARGS` as a real process, stopped (SIGINT) after."""
    command = [sys.executable, "-m", "subagents", "web", "--port", "0", "--interval", "0.05"]
    if store is not None:
        command += ["--store", str(store)]
    process = subprocess.Popen(
        [*command, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(home),
        cwd=cwd,
    )
    try:
        yield ConsoleProcess(process, _printed_url(process))
    finally:
        stop(process)


def stop(process: subprocess.Popen[Any]) -> None:
    """Stop a console process as Ctrl-C does (SIGINT), killing it if it does not exit."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stderr is not None:
        process.stderr.close()


def _printed_url(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 0.5)
        if ready:
            line = process.stderr.readline()
            if "subagents web: http://" in line:
                return line.split("subagents web: ", 1)[1].strip()
            if not line and process.poll() is not None:
                break
    raise AssertionError(f"`subagents web` printed no address (exit {process.poll()})")


def sse_events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, data) of each server-sent event of a streamed response."""
    name, data = "message", list[str]()
    for line in response.iter_lines():
        if line.startswith(":"):
            continue  # a comment (the keep-alive ping)
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", list[str]()
        elif line.startswith("event:"):
            name = line.partition(":")[2].strip()
        elif line.startswith("data:"):
            data.append(line.partition(":")[2].removeprefix(" "))
