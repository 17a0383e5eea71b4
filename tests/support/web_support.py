"""Helpers for the web console's tests: a console in this process or as a real `subagents web`.

`local_console` runs the app in-process behind starlette's test client (its lifespan opens the
real SQLite store); the client sends the token as a bearer header and the console's Host, as
a script would. `console_process` starts `python -m subagents web --port 0` for real and reads
the address it prints; a test then talks to it over loopback (httpx) or with a browser.
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
from typing import Any

import httpx2 as httpx
from live_support import WAIT_SECONDS, environment
from starlette.testclient import TestClient

from subagents.web import ConsoleConfig, console_door, create_app, listen


@dataclass
class LocalConsole:
    client: TestClient
    token: str
    origin: str
    """`http://127.0.0.1:PORT`: the console's own origin (its page sends it as `Origin`)."""
    cookie: str

    def post(self, path: str, body: Any, **kwargs: Any) -> httpx.Response:
        """A POST as the console's own page makes it: JSON, the cookie, its Origin."""
        headers = {"origin": self.origin, **kwargs.pop("headers", {})}
        return self.client.post(path, json=body, headers=headers, **kwargs)


@contextmanager
def local_console(
    store: Path, *, tenant: str = "default", model: str | None = None, cwd: Path | None = None
) -> Generator[LocalConsole, None, None]:
    """The console app in this process over `store` (a real SQLite file)."""
    listener = listen("127.0.0.1", 0, allow_remote=False)
    listener.sock.close()  # only its port is needed: the test client speaks ASGI directly
    door = console_door(listener)
    config = ConsoleConfig(store=store, tenant=tenant, door=door, model=model, cwd=cwd)
    origin = f"http://127.0.0.1:{listener.port}"
    with TestClient(
        create_app(config),
        base_url=origin,
        cookies={door.cookie: door.token},
        follow_redirects=False,
    ) as client:
        yield LocalConsole(client, door.token, origin, door.cookie)


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
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        assert process.stderr is not None
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
