"""Escape attempts from a confined run, on each backend this machine can use (spec 8, 76-78).

Every test runs a real process under `spawn`/`run_command` and checks the host-side effect
(the file that must not exist, the server that must see no connection, the process that must
be gone), not only what the confined process says. `danger-full-access` runs serve as the
positive control: the same script succeeds there, so a failure under confinement is the
sandbox's doing.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import socket
import sys
import uuid

import pytest
from sandbox_scripts import (
    CONNECT,
    ENVIRONMENT,
    ESCAPEE,
    FORK_BOMB,
    HOST,
    LEAVER,
    LIST,
    READ,
    RLIMITS,
    WRITE,
)
from sandbox_support import World, live_with_token, py, skip_where_processes_are_unbounded

from subagents.errors import ErrorCode, SandboxUnavailable
from subagents.policy import Limits, SandboxMode, _confine, confinement, run_command, spawn
from subagents.policy._confine import BACKEND_ENV
from subagents.policy._launcher import landlock_abi

CONFINED: list[SandboxMode] = ["read-only", "workspace-write"]


async def test_read_only_cannot_write_into_the_workspace(backend: str, world: World) -> None:
    # 76
    target = world.workspace / "new.txt"
    result = await run_command(
        py(WRITE, str(target)), policy=world.policy("read-only"), cwd=str(world.workspace)
    )
    assert result.stdout.split() == [str(target), "denied", result.stdout.split()[-1]]
    assert not target.exists()
    assert result.facts is not None
    assert (result.facts.mode, result.facts.backend) == ("read-only", backend)
    assert result.facts.enforcement == "full"


async def test_workspace_write_writes_inside_the_workspace_only(backend: str, world: World) -> None:
    inside = world.workspace / "sub" / "inside.txt"
    inside.parent.mkdir()
    outside = world.outside / "outside.txt"
    result = await run_command(
        py(WRITE, str(inside), str(outside), "/etc/subagents-escape"),
        policy=world.policy("workspace-write"),
        cwd=str(world.workspace),
    )
    lines = result.stdout.splitlines()
    assert lines[0] == f"{inside} written"
    assert lines[1].startswith(f"{outside} denied")
    assert lines[2].startswith("/etc/subagents-escape denied")
    assert inside.read_text() == "x"
    assert not outside.exists()
    assert not await asyncio.to_thread(os.path.lexists, "/etc/subagents-escape")


async def test_the_private_temp_dir_is_writable_under_workspace_write(
    backend: str, world: World
) -> None:
    result = await run_command(
        py("import os, tempfile\ntempfile.mkstemp(dir=os.environ['TMPDIR'])\nprint('ok')"),
        policy=world.policy("workspace-write"),
        cwd=str(world.workspace),
    )
    assert (result.exit_code, result.stdout) == (0, "ok\n"), result.stderr


@pytest.mark.parametrize("mode", CONFINED)
async def test_home_and_the_store_are_not_visible(
    backend: str, world: World, mode: SandboxMode
) -> None:
    listing = f"{world.home}/../subagents-home"
    result = await run_command(
        py(READ + LIST, str(world.secret), str(world.store), str(world.home), listing),
        policy=world.policy(mode),
        cwd=str(world.workspace),
    )
    assert "home-secret" not in result.stdout
    assert "store-secret" not in result.stdout
    assert f"{world.secret} denied" in result.stdout
    assert f"{world.store} denied" in result.stdout
    # bubblewrap shows empty directories (none at all under a private /tmp), Landlock refuses
    listed = [line for line in result.stdout.splitlines() if line.startswith("list ")]
    assert len(listed) == 2
    endings = ("[]", "denied PermissionError", "denied FileNotFoundError")
    assert all(line.endswith(endings) for line in listed), listed


async def test_danger_full_access_sees_home_and_writes_anywhere(world: World) -> None:
    """The positive control of the two tests above: unconfined, the same scripts succeed."""
    outside = world.outside / "outside.txt"
    written = await run_command(
        py(WRITE, str(outside)), policy=world.policy("danger-full-access"), cwd=str(world.workspace)
    )
    read = await run_command(
        py(READ, str(world.secret)),
        policy=world.policy("danger-full-access"),
        cwd=str(world.workspace),
    )
    assert outside.read_text() == "x"
    assert written.stdout == f"{outside} written\n"
    assert read.stdout == f"{world.secret} read home-secret\n"
    assert written.facts is not None
    assert (written.facts.backend, written.facts.enforcement) == (None, None)


@pytest.mark.parametrize("mode", CONFINED)
async def test_no_tcp_connection_reaches_a_loopback_server(
    backend: str, world: World, mode: SandboxMode
) -> None:
    accepted: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        confined = await run_command(
            py(CONNECT, str(port)), policy=world.policy(mode), cwd=str(world.workspace)
        )
        assert confined.stdout.startswith("blocked"), confined
        assert accepted == []
        control = await run_command(
            py(CONNECT, str(port)),
            policy=world.policy("danger-full-access"),
            cwd=str(world.workspace),
        )
    assert control.stdout == "connected\n"
    assert accepted == [1]


@pytest.mark.parametrize("mode", CONFINED)
async def test_the_host_process_is_out_of_reach(
    backend: str, world: World, mode: SandboxMode
) -> None:
    """No reading the host's environment through /proc, no signalling it."""
    result = await run_command(
        py(HOST, str(os.getpid())), policy=world.policy(mode), cwd=str(world.workspace)
    )
    environ, signal = result.stdout.splitlines()
    assert environ.startswith("environ denied"), result.stdout
    # bubblewrap: another pid namespace; Landlock: signals scoped to the run from ABI 6
    if backend == "bwrap" or landlock_abi() >= 6:
        assert signal.startswith("signal denied"), result.stdout
    control = await run_command(
        py(HOST, str(os.getpid())),
        policy=world.policy("danger-full-access"),
        cwd=str(world.workspace),
    )
    assert control.stdout.split()[:2] == ["environ", "read"]
    assert control.stdout.splitlines()[1] == "signal delivered"


async def test_a_fork_bomb_is_bounded_by_the_process_limit(backend: str, world: World) -> None:
    skip_where_processes_are_unbounded(backend, "workspace-write")
    limit = 12
    async with await spawn(
        py(FORK_BOMB),
        policy=world.policy("workspace-write"),
        cwd=str(world.workspace),
        limits=Limits(processes=limit),
    ) as proc:
        await proc.wait()
        assert proc.process.stdout is not None
        forked, code = map(int, (await proc.process.stdout.read()).split())
        assert code == errno.EAGAIN
        assert 0 < forked < limit
        assert proc.facts.processes == "cgroup"
        if proc.peak_processes is not None:  # pids.peak: kernels since 6.1 (v1) / 6.2 (v2)
            assert proc.peak_processes <= limit
    after = await run_command(
        py("print(1)"), policy=world.policy("read-only"), cwd=str(world.workspace)
    )
    assert after.stdout == "1\n"  # the host and the next run are fine


async def _kill_leaves_nothing(world: World, mode: SandboxMode) -> None:
    token = f"escapee-{uuid.uuid4().hex}"
    async with await spawn(
        py(ESCAPEE, token), policy=world.policy(mode), cwd=str(world.workspace)
    ) as proc:
        assert proc.process.stdout is not None
        assert await proc.process.stdout.readline() == b"ready\n"
        before = live_with_token(token)
        assert len(before) >= 2  # the main process and the grandchild at least
        await proc.kill()
        assert live_with_token(token) == []
        assert proc.returncode is not None
        await proc.kill()  # idempotent
        assert await proc.wait() == proc.returncode


@pytest.mark.parametrize("mode", CONFINED)
async def test_kill_leaves_no_process_not_even_a_setsid_grandchild(
    backend: str, world: World, mode: SandboxMode
) -> None:
    # 77
    skip_where_processes_are_unbounded(backend, mode, reaping=True)
    await _kill_leaves_nothing(world, mode)


async def test_kill_under_bwrap_without_a_cgroup_ends_the_pid_namespace(
    world: World, no_cgroup: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BACKEND_ENV, "bwrap")
    verdict = confinement()
    if verdict.backend is None:
        pytest.skip(f"bwrap is unusable on this machine: {verdict.detail}")
    await _kill_leaves_nothing(world, "workspace-write")


async def test_danger_full_access_still_scrubs_the_env_and_reaps(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_TEST_SECRET", "host-secret")
    result = await run_command(
        py(ENVIRONMENT), policy=world.policy("danger-full-access"), cwd=str(world.workspace)
    )
    assert "host-secret" not in result.stdout
    assert set(json.loads(result.stdout)["env"]) == {"PATH", "LANG", "TMPDIR", "HOME"}
    skip_where_processes_are_unbounded("none", "danger-full-access", reaping=True)
    await _kill_leaves_nothing(world, "danger-full-access")


@pytest.mark.parametrize("mode", [*CONFINED, "danger-full-access"])
async def test_a_run_ends_with_its_main_process_even_if_a_child_holds_stdout(
    backend: str, world: World, mode: SandboxMode
) -> None:
    token = f"leftover-{uuid.uuid4().hex}"
    result = await run_command(
        py(LEAVER, token), policy=world.policy(mode), cwd=str(world.workspace), timeout=30
    )
    assert (result.exit_code, result.stdout, result.timed_out) == (0, "left\n", False)
    assert live_with_token(token) == []
    async with await spawn(
        py(LEAVER, token), policy=world.policy(mode), cwd=str(world.workspace)
    ) as proc:
        assert await proc.wait() == 0
        assert live_with_token(token) == []


@pytest.mark.parametrize("mode", CONFINED)
async def test_the_environment_is_emptied_and_stdin_is_empty(
    backend: str, world: World, mode: SandboxMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_TEST_SECRET", "host-secret")
    monkeypatch.setenv("PYTHONPATH", "/nowhere")
    result = await run_command(
        py(ENVIRONMENT),
        policy=world.policy(mode),
        cwd=str(world.workspace),
        env={"EXTRA": "given"},
    )
    seen = json.loads(result.stdout)
    assert seen["stdin"] == ""
    env = seen["env"]
    if backend == "bwrap":  # bubblewrap always sets PWD to the directory it starts in
        assert env.pop("PWD") == str(world.workspace)
    assert set(env) == {"PATH", "LANG", "TMPDIR", "HOME", "EXTRA"}
    assert (env["PATH"], env["LANG"], env["EXTRA"]) == ("/usr/bin:/bin", "C.UTF-8", "given")
    assert env["HOME"] == env["TMPDIR"]
    assert "host-secret" not in result.stdout


async def test_rlimits_are_applied(backend: str, world: World) -> None:
    limits = Limits(cpu_seconds=30, address_space_mb=512, open_files=64, file_size_mb=1)
    result = await run_command(
        py(RLIMITS), policy=world.policy("workspace-write"), cwd=str(world.workspace), limits=limits
    )
    first, second = result.stdout.splitlines()
    assert first.split() == ["30", str(512 * 1024 * 1024), "64", str(1024 * 1024), "0"]
    assert second == f"write failed {errno.EFBIG}"
    assert (world.workspace / "big.bin").stat().st_size == 1024 * 1024


async def test_the_wall_clock_limit_kills_the_run(backend: str, world: World) -> None:
    async with await spawn(
        py("import signal\nwhile True: signal.pause()"),
        policy=world.policy("read-only"),
        cwd=str(world.workspace),
        limits=Limits(wall_seconds=0.2),
    ) as proc:
        code = await proc.wait()
        assert proc.timed_out
        assert code != 0


async def test_run_command_times_out_and_truncates(backend: str, world: World) -> None:
    # The command never ends on its own (it waits for a signal that never comes), so the
    # timeout is the only way out, however slowly the machine starts it; the timeout may then
    # fall before or after its first line, which is kept when it was written.
    slow = await run_command(
        py("import signal\nprint('started', flush=True)\nwhile True: signal.pause()"),
        policy=world.policy("read-only"),
        cwd=str(world.workspace),
        timeout=0.2,
    )
    assert (slow.exit_code, slow.timed_out, slow.truncated) == (None, True, False)
    assert slow.stdout in ("", "started\n")
    loud = await run_command(
        py("import sys; sys.stdout.write('x' * 100_000)"),
        policy=world.policy("read-only"),
        cwd=str(world.workspace),
        max_output=1000,
    )
    assert (loud.exit_code, loud.truncated, loud.stdout) == (0, True, "x" * 1000)


async def test_a_passed_fd_reaches_the_confined_process(backend: str, world: World) -> None:
    host, guest = socket.socketpair()
    with host, guest:
        async with await spawn(
            py("import os, sys; os.write(int(sys.argv[1]), b'hello')", str(guest.fileno())),
            policy=world.policy("read-only"),
            cwd=str(world.workspace),
            pass_fds=[guest.fileno()],
        ) as proc:
            guest.close()
            host.setblocking(False)
            assert await asyncio.get_running_loop().sock_recv(host, 5) == b"hello"
            assert await proc.wait() == 0


async def test_the_interpreter_under_a_hidden_home_stays_usable(
    backend: str, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    installation = await asyncio.to_thread(os.path.realpath, sys.base_prefix)
    monkeypatch.setenv("HOME", os.path.dirname(installation))
    result = await run_command(
        py("print('ok')"), policy=world.policy("workspace-write"), cwd=str(world.workspace)
    )
    assert (result.exit_code, result.stdout) == (0, "ok\n"), result.stderr


async def test_readable_and_hidden_paths(backend: str, world: World) -> None:
    shared = world.home / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("shared-notes")
    private = world.outside / "private"
    private.mkdir()
    (private / "key.txt").write_text("private-key")
    result = await run_command(
        py(READ, str(shared / "notes.txt"), str(private / "key.txt")),
        policy=world.policy("read-only"),
        cwd=str(world.workspace),
        readable=[str(shared)],
        hidden=[str(private)],
    )
    assert result.stdout.splitlines()[0] == f"{shared / 'notes.txt'} read shared-notes"
    assert "private-key" not in result.stdout


async def test_a_hidden_path_inside_the_workspace(backend: str, world: World) -> None:
    private = world.workspace / "private"
    private.mkdir()
    (private / "key.txt").write_text("private-key")
    marker = world.workspace / "ran.txt"
    command = py(READ + f"\nopen({str(marker)!r}, 'w').close()", str(private / "key.txt"))
    if backend == "bwrap":
        result = await run_command(
            command,
            policy=world.policy("workspace-write"),
            cwd=str(world.workspace),
            hidden=[str(private)],
        )
        assert result.facts is not None
        assert "private-key" not in result.stdout
        assert result.facts.enforcement == "full"
        assert marker.exists()
    else:  # Landlock only grants: inside the granted workspace it cannot hide, so it refuses
        with pytest.raises(SandboxUnavailable) as caught:
            await spawn(
                command,
                policy=world.policy("read-only"),
                cwd=str(world.workspace),
                hidden=[str(private)],
            )
        assert caught.value.code == ErrorCode.SANDBOX_UNAVAILABLE
        assert "Landlock cannot hide a path inside what it grants" in caught.value.message
        assert not marker.exists()


async def test_without_a_backend_confined_modes_refuse_and_danger_runs(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 78
    monkeypatch.setenv(BACKEND_ENV, "none")
    for mode in CONFINED:
        target = world.workspace / f"{mode}.txt"
        with pytest.raises(SandboxUnavailable) as caught:
            await spawn(py(WRITE, str(target)), policy=world.policy(mode), cwd=str(world.workspace))
        assert caught.value.code == ErrorCode.SANDBOX_UNAVAILABLE
        assert f"cannot enforce the {mode} file policy" in caught.value.message
        assert "bubblewrap" in caught.value.message
        assert not target.exists()
    result = await run_command(
        py(WRITE, str(world.outside / "x.txt")),
        policy=world.policy("danger-full-access"),
        cwd=str(world.workspace),
    )
    assert result.exit_code == 0
    assert (world.outside / "x.txt").read_text() == "x"


def test_a_forced_unknown_backend_confines_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKEND_ENV, "chroot")
    verdict = confinement()
    assert (verdict.backend, verdict.enforcement) == (None, None)
    assert "'chroot' is not one of bwrap, landlock, none" in verdict.detail


async def test_landlock_confines_where_bubblewrap_cannot_run(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing forced: when bubblewrap's probe fails, the probe falls back to Landlock."""
    monkeypatch.delenv(BACKEND_ENV, raising=False)

    def broken_bwrap(*, dedicated_uid: bool = False) -> tuple[str | None, str]:
        return None, "bubblewrap does not run here (test)"

    monkeypatch.setattr(_confine, "bwrap_usable", broken_bwrap)
    verdict = await asyncio.to_thread(confinement)
    if verdict.backend is None:
        pytest.skip(f"Landlock is unusable on this machine: {verdict.detail}")
    assert verdict.backend == "landlock"
    assert verdict.detail.startswith("bubblewrap does not run here (test); Landlock ABI")
    target = world.workspace / "new.txt"
    result = await run_command(
        py(WRITE, str(target)), policy=world.policy("read-only"), cwd=str(world.workspace)
    )
    assert result.facts is not None
    assert (result.facts.mode, result.facts.backend) == ("read-only", "landlock")
    assert f"{target} denied" in result.stdout
    assert not target.exists()
