"""The `bash` tool: real `/bin/bash` processes, confined like workflow scripts (issue 6 items 4, 5).

Escape tests run under workspace-write and each has a control showing the same command does
what it tries when the sandbox allows it (under danger-full-access), so a refusal is the
sandbox's doing and not a broken test.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sandbox_support import live_with_token, skip_where_processes_are_unbounded
from workspace_support import Box

from subagents._task_owner import TaskOwner
from subagents.errors import ErrorCode
from subagents.messages import JsonObject


def survivors(token: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line contains `token`."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path("/proc", entry, "cmdline").read_bytes()
            state = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone while we looked
        if token.encode() in cmdline and state not in {"Z", "X"}:
            found.append(int(entry))
    return found


def token() -> str:
    """A number no other process has on its command line, usable as `sleep`'s argument."""
    return str(900_000 + uuid.uuid4().int % 99_999)


# -- happy path ------------------------------------------------------------------------------


async def test_runs_in_the_agents_cwd_and_reports_streams_and_exit_code(box: Box) -> None:
    (box.ws / "sub").mkdir()
    box.cwd = box.ws / "sub"
    out = await box.ok("bash", {"command": "pwd; echo oops >&2; exit 3"})
    assert out == f"{box.ws / 'sub'}\n[stderr]\noops\n[exit code 3]"
    assert await box.ok("bash", {"command": "echo hi"}) == "hi\n[exit code 0]"


async def test_workspace_write_can_write_in_the_workspace(box: Box) -> None:
    assert await box.ok("bash", {"command": "echo made > made.txt"}) == "[exit code 0]"
    assert (box.ws / "made.txt").read_text() == "made\n"


async def test_read_only_refuses_writes_and_marks_the_denial(box: Box) -> None:
    box.mode = "read-only"
    out = await box.ok("bash", {"command": "echo x > made.txt"})
    assert out.endswith("[sandbox: file access denied under read-only mode]\n[exit code 1]")
    assert not (box.ws / "made.txt").exists()


async def test_the_environment_is_emptied(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "sk-do-not-leak")
    out = await box.ok("bash", {"command": 'echo "[$SECRET_TOKEN]"; env'})
    assert out.startswith("[]\n")
    assert "sk-do-not-leak" not in out


async def test_long_output_is_clipped_head_and_tail(box: Box) -> None:
    out = await box.ok("bash", {"command": "seq 1 20000"})
    assert out.startswith("1\n2\n3\n")
    assert "characters omitted] …" in out
    assert out.endswith("19999\n20000\n[exit code 0]")
    assert len(out) < 31_000


async def test_timeout_kills_the_command_and_says_so(box: Box) -> None:
    mark = token()
    outcome = await box.call("bash", {"command": f"echo started; sleep {mark}", "timeout_ms": 300})
    assert outcome.is_error
    assert outcome.code == ErrorCode.TIMEOUT
    assert outcome.content == (
        "Error: command timed out after 300 ms; it and every process it started were killed "
        "(raise timeout_ms, up to 600000, or split the work)\nstarted"
    )
    assert survivors(mark) == []


async def test_without_a_working_backend_confined_modes_refuse(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_SANDBOX_BACKEND", "none")
    for mode in ("read-only", "workspace-write"):
        box.mode = mode
        outcome = await box.call("bash", {"command": "echo x > made.txt"})
        assert outcome.code == ErrorCode.SANDBOX_UNAVAILABLE
        assert outcome.content.startswith(f"Error: cannot enforce the {mode} file policy: ")
    assert not (box.ws / "made.txt").exists()
    box.mode = "danger-full-access"
    assert await box.ok("bash", {"command": "echo x > made.txt"}) == "[exit code 0]"
    assert (box.ws / "made.txt").exists()


# -- bad input -------------------------------------------------------------------------------

INVALID = "Error: invalid arguments: "


@pytest.mark.parametrize(
    ("args", "text"),
    [
        pytest.param({}, INVALID + "'command' is a required property", id="no-command"),
        pytest.param({"command": 7}, INVALID + "command: 7 is not of type 'string'", id="int"),
        pytest.param(
            {"command": "true", "timeout_ms": "fast"},
            INVALID + "timeout_ms: 'fast' is not of type 'integer'",
            id="timeout-str",
        ),
        pytest.param(
            {"command": "true", "timeout_ms": 1.5},
            INVALID + "timeout_ms: 1.5 is not of type 'integer'",
            id="timeout-fraction",
        ),
        pytest.param(
            {"command": "true", "timeout_ms": 0},
            "Error: invalid arguments: timeout_ms: 0 is less than the minimum of 1",
            id="timeout-zero",
        ),
        pytest.param(
            {"command": "true", "timeout_ms": -5},
            "Error: invalid arguments: timeout_ms: -5 is less than the minimum of 1",
            id="timeout-negative",
        ),
        pytest.param(
            {"command": "true", "timeout_ms": 600_001},
            "Error: invalid arguments: timeout_ms: 600001 is greater than the maximum of 600000",
            id="timeout-too-long",
        ),
        pytest.param({"command": "  "}, "Error: command must not be empty", id="blank"),
    ],
)
async def test_bad_input_is_refused_before_anything_runs(
    box: Box, args: JsonObject, text: str
) -> None:
    before = box.snapshot()
    outcome = await box.call("bash", args)
    assert (outcome.is_error, outcome.code, outcome.content) == (
        True,
        ErrorCode.INVALID_ARGS,
        text,
    )
    assert box.snapshot() == before


# -- escapes (workspace-write, under each backend) -------------------------------------------


@pytest.fixture(params=["bwrap", "landlock"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Force one confinement backend (the probe picks bwrap here when nothing is forced)."""
    name = str(request.param)
    monkeypatch.setenv("SUBAGENTS_SANDBOX_BACKEND", name)
    return name


async def test_cannot_write_outside_the_workspace(box: Box, backend: str) -> None:
    os.symlink(box.outside, box.ws / "out-dir")
    command = f"echo pwned > {box.outside}/a.txt; echo pwned > out-dir/b.txt; touch {box.home}/c"
    await box.ok("bash", {"command": command})
    assert sorted(os.listdir(box.outside)) == []
    assert sorted(os.listdir(box.home)) == []
    box.mode = "danger-full-access"  # control: the same command does write when allowed
    await box.ok("bash", {"command": command})
    assert sorted(os.listdir(box.outside)) == ["a.txt", "b.txt"]


async def test_cannot_read_home_or_the_store(box: Box, backend: str) -> None:
    (box.home / "secret.txt").write_text("TOPSECRET\n")
    (box.store / "state.db").write_text("TENANT LOG\n")
    os.symlink(box.home / "secret.txt", box.ws / "secret-link")
    command = f"cat {box.home}/secret.txt secret-link {box.store}/state.db; ls {box.home}"
    out = await box.ok("bash", {"command": command})
    assert "TOPSECRET" not in out
    assert "TENANT LOG" not in out
    assert "secret.txt" not in out.splitlines()  # `ls` listed nothing
    box.mode = "danger-full-access"  # control
    out = await box.ok("bash", {"command": command})
    assert "TOPSECRET" in out
    assert "TENANT LOG" in out
    assert "secret.txt" in out.splitlines()


@pytest.fixture
async def listener() -> AsyncIterator[tuple[int, list[str]]]:
    """A TCP server on loopback; the list collects the peers that connected."""
    peers: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(str(writer.get_extra_info("peername")))
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    async with server:
        yield port, peers


async def test_cannot_open_a_network_connection(
    box: Box, backend: str, listener: tuple[int, list[str]]
) -> None:
    port, peers = listener
    command = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED"
    out = await box.ok("bash", {"command": command})
    assert "CONNECTED" not in out
    assert "[sandbox:" not in out  # a refused connection is not a file access
    assert peers == []
    box.mode = "danger-full-access"  # control: unconfined, the connection is made
    assert "CONNECTED" in await box.ok("bash", {"command": command})


async def test_a_fork_bomb_is_contained(box: Box, backend: str) -> None:
    skip_where_processes_are_unbounded(backend, box.mode)
    mark = token()
    name = f"bomb{mark}"
    command = f"{name}() {{ {name} | {name} & }}; {name}; sleep {mark}"
    outcome = await box.call("bash", {"command": command, "timeout_ms": 1500})
    assert outcome.code == ErrorCode.TIMEOUT or not outcome.is_error
    assert survivors(mark) == []
    # The host can still start processes.
    process = await asyncio.create_subprocess_exec("true")
    assert await process.wait() == 0


async def test_background_processes_do_not_survive_the_call(box: Box, backend: str) -> None:
    skip_where_processes_are_unbounded(backend, box.mode, reaping=True)
    marks = [token(), token(), token()]
    command = (
        f"sleep {marks[0]} & disown; "
        f"setsid sleep {marks[1]} </dev/null >/dev/null 2>&1 & "
        f"nohup sleep {marks[2]} </dev/null >/dev/null 2>&1 & "
        "echo left"
    )
    # The call ends when bash does, although `sleep` still holds its stdout then.
    outcome = await box.call("bash", {"command": command, "timeout_ms": 10_000})
    assert (outcome.is_error, outcome.content) == (False, "left\n[exit code 0]")
    for mark in marks:
        assert survivors(mark) == []


def test_survivors_finds_a_live_process() -> None:
    """The check the escape tests rely on does see a process that is running."""
    mark = token()
    process = subprocess.Popen(["sleep", mark])
    try:
        assert survivors(mark) == [process.pid]
    finally:
        process.kill()
        process.wait()
    assert survivors(mark) == []


async def test_a_cancelled_call_leaves_no_process(box: Box, backend: str) -> None:
    """Cancelling the call (its agent stopped) kills the command and whatever it detached."""
    skip_where_processes_are_unbounded(backend, box.mode, reaping=True)
    marks = [token(), token()]
    fifo = box.ws / "ready"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # read-write: never sees a hang-up
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()
    loop.add_reader(reader, ready.set)
    # The detached process itself says it is ready, once it runs with its token in argv: a
    # shell's `echo` after `(setsid sleep &)` could come before the sleep exists.
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    detached = "import time; open('ready', 'w').write('ready'); time.sleep(3600)"
    command = f'(setsid {python} -c "{detached}" {marks[0]} &); sleep {marks[1]}'
    owner = TaskOwner("test")
    try:
        call = owner.spawn(box.call("bash", {"command": command, "timeout_ms": 60_000}))
        await ready.wait()
        assert len(live_with_token(marks[0])) == 1  # the detached sleep runs, seen from the host
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert survivors(marks[0]) == []
        assert survivors(marks[1]) == []
    finally:
        loop.remove_reader(reader)
        os.close(reader)
        await owner.aclose()
