"""Escapes from a workflow script (issue 6 item 5; docs/sandbox.md),
through the whole stack: `subagents.Runtime`, its workflow engine, a real guest
process and the real sandbox, on each backend this machine can use.

Every script first gets out of the curated builtins (through `object.__subclasses__()` to the
real `__import__`), so the hooks' API shaping is out of the way and only the OS confinement
stands. Each test then checks the effect on the host (the file that must not exist, the server
that must see no connection, the processes that must be gone), not only what the script says;
`danger-full-access` runs are the positive control that the same script succeeds unconfined.
"""

from __future__ import annotations

import asyncio
import errno
import os
import secrets
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import World, live_with_token, make_world, skip_where_processes_are_unbounded
from workflow_support import META, Gates, Recorder, guest_processes, run_to_end

import subagents
from subagents.core import Agent
from subagents.messages import JsonValue
from subagents.policy import Limits, SandboxMode
from subagents.policy._confine import BACKEND_ENV
from subagents.testing import FakeClock, RecordingModel
from subagents.workflows import (
    WorkflowEngine,
    WorkflowLogged,
    WorkflowOptions,
    WorkflowProcessStarted,
    WorkflowRequest,
    WorkflowResult,
)

CONFINED: list[SandboxMode] = ["read-only", "workspace-write"]
PROCESS_LIMIT = 16

# Gets the real `__import__` without any hook: `import os` and `open` are not in the script's
# builtins, but `os._wrap_close` is a subclass of `object` whose functions see the os module.
ESCAPE = """
try:
    import os
except ImportError:
    pass
else:
    raise AssertionError('the curated builtins let os in')
try:
    open
except NameError:
    pass
else:
    raise AssertionError('the curated builtins have open')
real_import = next(
    c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'
).__init__.__globals__['sys'].modules['builtins'].__import__
os = real_import('os')
"""

WRITE = """
done = {}
for path in args['paths']:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as exc:
        done[path] = 'denied ' + os.strerror(exc.errno)
    else:
        os.write(fd, b'escaped')
        os.close(fd)
        done[path] = 'written'
return done
"""

READ = """
seen = {}
for path in args['paths']:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        seen[path] = 'denied ' + os.strerror(exc.errno)
        continue
    try:
        seen[path] = os.read(fd, 100).decode('utf-8', 'replace')
    except OSError as exc:
        seen[path] = 'denied ' + os.strerror(exc.errno)
    finally:
        os.close(fd)
for path in args['dirs']:
    try:
        seen[path] = sorted(os.listdir(path))
    except OSError as exc:
        seen[path] = 'denied ' + os.strerror(exc.errno)
return seen
"""

CONNECT = """
socket = real_import('socket')
try:
    socket.create_connection(('127.0.0.1', args['port']), timeout=5).close()
except OSError as exc:
    return 'blocked ' + type(exc).__name__
return 'connected'
"""

# Every fork execs a sleep carrying the marker, so the host can count them in /proc; the
# script reports how far it got, then holds until the test has counted.
FORK_BOMB = """
r, w = os.pipe()  # not inherited across exec: EOF once every child has exec'd
forked = 0
code = 0
while forked < args['most']:
    try:
        pid = os.fork()
    except OSError as exc:
        code = exc.errno
        break
    if pid == 0:
        try:
            os.execv('/bin/sleep', ['/bin/sleep', args['marker']])
        finally:
            os._exit(1)
    forked += 1
os.close(w)
os.read(r, 1)
log(f'{forked} {code}')
await agent('hold')
return [forked, code]
"""

# A grandchild leaves the run's session and process group (setsid) and is orphaned; the
# script waits until it has exec'd (its end of the pipe closes on exec), then blocks.
DETACH = """
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    if os.fork() == 0:
        os.setsid()
        os.execv('/bin/sleep', ['/bin/sleep', args['marker']])
    os._exit(0)
os.close(w)
os.read(r, 1)
os.waitpid(pid, 0)
log('detached')
await agent('hold')
"""

HOLD = "agent-1: [{calls: [{tool: hold, args: {label: h}}]}, {text: released}]"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    """A workspace, a directory outside it, and $HOME / $SUBAGENTS_HOME holding secrets."""
    return make_world(tmp_path, monkeypatch)


@asynccontextmanager
async def open_runtime(
    world: World,
    mode: SandboxMode,
    *,
    children: str = '"*": [{text: done}]',
    gates: Gates | None = None,
) -> AsyncGenerator[tuple[subagents.Runtime, Agent, WorkflowEngine], None]:
    """The whole runtime users embed, its SQLite store in $SUBAGENTS_HOME, a lead in `mode`."""
    clock = FakeClock()
    runtime = subagents.Runtime(
        model=RecordingModel.from_yaml(children, clock=clock),
        store=world.store.parent / "agents.db",
        clock=clock,
        cwd=world.workspace,
        tools=[gates.tool()] if gates is not None else [],
        delegation=subagents.DelegationOptions(definitions={}),
        sandbox=mode,
        workflow_options=WorkflowOptions(wall_seconds=30.0, limits=Limits(processes=PROCESS_LIMIT)),
    )
    async with runtime:
        lead = await runtime.create_agent()
        yield runtime, lead, runtime.workflows
    assert guest_processes() == []


def start(engine: WorkflowEngine, lead: Agent, script: str, args: JsonValue) -> Any:
    return engine.start(WorkflowRequest(script=ESCAPE + script, meta=META, parent=lead, args=args))


async def run_script(world: World, mode: SandboxMode, script: str, args: JsonValue) -> Any:
    async with open_runtime(world, mode) as (_, lead, engine):
        recorder = Recorder(engine)
        result: WorkflowResult = await run_to_end(start(engine, lead, script, args))
    [started] = recorder.of(WorkflowProcessStarted)
    assert started.mode == mode
    assert started.backend == (None if mode == "danger-full-access" else os.environ[BACKEND_ENV])
    assert result.stop_reason == "completed", result.error
    return result.value


async def test_read_only_writes_nothing_anywhere(backend: str, world: World) -> None:
    # 76, from a script that escaped its builtins
    targets = [world.workspace / "inside.txt", world.outside / "outside.txt"]
    value = await run_script(world, "read-only", WRITE, {"paths": [str(p) for p in targets]})
    assert all(value[str(p)].startswith("denied") for p in targets), value
    assert [p.exists() for p in targets] == [False, False]


async def test_workspace_write_writes_only_inside_the_workspace(backend: str, world: World) -> None:
    inside = world.workspace / "inside.txt"
    outside = world.outside / "outside.txt"
    home = world.home / "planted.txt"
    paths = [inside, outside, home]
    value = await run_script(world, "workspace-write", WRITE, {"paths": [str(p) for p in paths]})
    assert value[str(inside)] == "written"
    assert value[str(outside)].startswith("denied"), value
    assert value[str(home)].startswith("denied"), value
    assert inside.read_text() == "escaped"
    assert not outside.exists()
    assert not home.exists()


async def test_unconfined_the_same_script_writes_anywhere(world: World) -> None:
    """The positive control of the two tests above."""
    outside = world.outside / "outside.txt"
    value = await run_script(world, "danger-full-access", WRITE, {"paths": [str(outside)]})
    assert value == {str(outside): "written"}
    assert outside.read_text() == "escaped"


def secret_paths(world: World) -> dict[str, JsonValue]:
    store = world.store.parent / "agents.db"
    return {
        "paths": [str(world.secret), str(world.store), str(store)],
        "dirs": [str(world.home), str(world.store.parent)],
    }


@pytest.mark.parametrize("mode", CONFINED)
async def test_home_and_the_store_cannot_be_read(
    backend: str, world: World, mode: SandboxMode
) -> None:
    value = await run_script(world, mode, READ, secret_paths(world))
    text = repr(list(value.values()))
    for leaked in ("home-secret", "store-secret", "SQLite format", "secret.txt", "agents.db"):
        assert leaked not in text, value
    assert value[str(world.secret)].startswith("denied"), value
    assert value[str(world.store)].startswith("denied"), value
    # bubblewrap shows the hidden directories empty, Landlock refuses them
    for directory in (world.home, world.store.parent):
        assert value[str(directory)] == [] or value[str(directory)].startswith("denied"), value


async def test_unconfined_the_same_script_reads_the_secrets(world: World) -> None:
    value = await run_script(world, "danger-full-access", READ, secret_paths(world))
    assert value[str(world.secret)] == "home-secret\n"
    assert value[str(world.store)] == "store-secret\n"
    assert value[str(world.store.parent / "agents.db")].startswith("SQLite format 3")


async def connect_to_a_loopback_server(world: World, mode: SandboxMode) -> tuple[Any, int]:
    accepted: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        value = await run_script(world, mode, CONNECT, {"port": port})
    return value, len(accepted)


@pytest.mark.parametrize("mode", CONFINED)
async def test_no_connection_reaches_a_loopback_server(
    backend: str, world: World, mode: SandboxMode
) -> None:
    value, accepted = await connect_to_a_loopback_server(world, mode)
    assert value.startswith("blocked"), value
    assert accepted == 0


async def test_unconfined_the_same_script_connects(world: World) -> None:
    assert await connect_to_a_loopback_server(world, "danger-full-access") == ("connected", 1)


def marker() -> str:
    """A sleep duration (in seconds) no other process on the machine is running with."""
    return str(1_000_000_000 + secrets.randbelow(1_000_000_000))


@pytest.mark.parametrize("mode", CONFINED)
async def test_a_fork_bomb_is_bounded_and_ends_with_the_run(
    backend: str, world: World, mode: SandboxMode
) -> None:
    skip_where_processes_are_unbounded(backend, mode)
    gates = Gates()
    token = marker()
    async with open_runtime(world, mode, children=HOLD, gates=gates) as (_, lead, engine):
        recorder = Recorder(engine)
        # unbounded, it would stop at 4x the limit (not at the machine's)
        run = start(engine, lead, FORK_BOMB, {"marker": token, "most": 4 * PROCESS_LIMIT})
        [logged] = await recorder.wait_for(WorkflowLogged)
        await gates.started("h").wait()
        forked, code = map(int, logged.message.split())
        assert code == errno.EAGAIN
        assert 0 < forked < PROCESS_LIMIT
        assert len(live_with_token(token)) == forked  # seen from the host, all still there
        gates.release("h")
        result = await run_to_end(run)
    assert result.value == [forked, code]
    assert live_with_token(token) == []  # the run ended, and took its processes with it


@pytest.mark.parametrize("mode", CONFINED)
@pytest.mark.parametrize("stop", ["cancel", "dispose"])
async def test_a_setsid_grandchild_does_not_outlive_a_stopped_run(
    backend: str, world: World, mode: SandboxMode, stop: str
) -> None:
    # 77, on both backends
    skip_where_processes_are_unbounded(backend, mode, reaping=True)
    gates = Gates()
    token = marker()
    async with open_runtime(world, mode, children=HOLD, gates=gates) as (_, lead, engine):
        recorder = Recorder(engine)
        run = start(engine, lead, DETACH, {"marker": token})
        await recorder.wait_for(WorkflowLogged)
        await gates.started("h").wait()
        [escapee] = live_with_token(token)
        guest = await recorder.pid()
        assert _session(escapee) != _session(guest)  # it left the run's session
        if stop == "cancel":
            run.cancel("stop")
        else:
            await run.dispose()
        result = await run.result
        assert result.stop_reason == "cancelled"
        assert live_with_token(token) == []
        assert gates.cancelled == ["h"]


def _session(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
