"""Network attacks from a confined run: no socket reaches anything outside the sandbox.

The defence is a seccomp filter applied under both backends: socket() of the IP, netlink,
packet and vsock families and of AF_UNIX datagram sockets fails, connect() of an AF_UNIX
stream socket fails whatever it aims at, io_uring cannot be set up, and socketpair() still
works (the workflow guest's asyncio loop needs it). Each attack is judged on the host: the
listeners this test owns are non-blocking and read after the run ended. `danger-full-access`
is the control: it includes the network (as in Codex), so the same attack reaches every one.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import socket
import subprocess

import pytest
from attack_scripts import NETWORK, host_listeners, socket_families
from sandbox_support import World, py

from subagents.policy import SandboxMode, run_command, spawn

CONFINED: list[SandboxMode] = ["read-only", "workspace-write"]


async def attack(world: World, mode: SandboxMode, spec: dict[str, object]) -> dict[str, str]:
    """Run the network attack under `mode`; what it reports it did."""
    result = await run_command(
        py(NETWORK, json.dumps(spec)), policy=world.policy(mode), cwd=str(world.workspace)
    )
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    found: dict[str, str] = json.loads(result.stdout)
    return found


@pytest.mark.parametrize("mode", CONFINED)
async def test_no_socket_of_an_outside_family_can_be_made(
    backend: str, world: World, mode: SandboxMode
) -> None:
    families = socket_families()
    done = await attack(world, mode, {"families": families})
    created = [name for name in families if done[f"socket {name}"] == "created"]
    assert created == [], f"the confined run created sockets of {created}: {done}"
    assert all(done[f"socket {name}"].startswith("denied ") for name in families), done


async def unix_attack(world: World, mode: SandboxMode, senders: tuple[str, ...]) -> None:
    """Aim `senders` at every host unix listener (through `spawn`); none may hear of it."""
    with host_listeners(world.workspace, world.outside) as listeners:
        spec = listeners.spec(unix=senders, ip=False)
        async with await spawn(
            py(NETWORK, json.dumps(spec)),
            policy=world.policy(mode),
            cwd=str(world.workspace),
            stderr=subprocess.DEVNULL,
        ) as proc:
            assert proc.process.stdout is not None
            printed = await proc.process.stdout.read()
            assert await proc.wait() == 0, printed
        reached = listeners.reached()
    done: dict[str, str] = json.loads(printed)
    got_through = {key: value for key, value in done.items() if value in ("connected", "sent")}
    assert reached == {}, (
        f"host unix listeners received connections or datagrams: {reached}; "
        f"what got through: {got_through}"
    )
    assert got_through == {}, done
    assert len(done) == len(spec["unix"])


@pytest.mark.parametrize("mode", CONFINED)
async def test_no_unix_socket_connects_to_a_host_listener(
    backend: str, world: World, mode: SandboxMode
) -> None:
    """Stream listeners in the workspace, outside it, in the host's /tmp and in the abstract
    namespace, and a seqpacket one: no connect() reaches them, and no AF_UNIX SOCK_DGRAM
    socket sends to the datagram ones."""
    await unix_attack(world, mode, ("stream", "seqpacket", "dgram"))


@pytest.mark.parametrize("mode", CONFINED)
async def test_no_datagram_reaches_a_host_unix_socket_from_a_raw_or_socketpair_socket(
    backend: str, world: World, mode: SandboxMode
) -> None:
    """The datagram sockets the SOCK_DGRAM rule does not name: socket(AF_UNIX, SOCK_RAW) is
    a datagram socket, and an end of socketpair(AF_UNIX, SOCK_DGRAM) sends to any address
    given to sendto(); neither may reach a host datagram listener (workspace, outside, the
    host's /tmp, abstract)."""
    await unix_attack(world, mode, ("raw", "socketpair-dgram"))


@pytest.mark.parametrize("mode", CONFINED)
async def test_no_tcp_or_udp_reaches_a_loopback_server(
    backend: str, world: World, mode: SandboxMode
) -> None:
    with host_listeners(world.workspace, world.outside) as listeners:
        done = await attack(world, mode, listeners.spec(unix=()))
        reached = listeners.reached()
    assert reached == {}, f"the host's loopback server received {reached}; the run said {done}"
    assert done["tcp"] != "connected", done
    assert done["udp"] != "sent", done


def _host_can_set_up_io_uring() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    params = ctypes.create_string_buffer(120)
    fd = int(syscall(ctypes.c_long(425), ctypes.c_long(8), params))
    if fd < 0:
        return False
    os.close(fd)
    return True


@pytest.mark.parametrize("mode", CONFINED)
async def test_io_uring_cannot_be_set_up(backend: str, world: World, mode: SandboxMode) -> None:
    """io_uring does its I/O (connect, openat, ...) outside the syscall filter: refused."""
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip(
            f"io_uring_setup is syscall 425 on x86_64 and aarch64, not {platform.machine()}"
        )
    done = await attack(world, mode, {"io_uring": True})
    assert done["io_uring"].startswith("denied "), f"io_uring was set up in the sandbox: {done}"
    if _host_can_set_up_io_uring():  # else the host's kernel refuses it anyway (sysctl)
        assert done["io_uring"] != "set up"


@pytest.mark.parametrize("mode", CONFINED)
async def test_a_socketpair_and_asyncio_still_work(
    backend: str, world: World, mode: SandboxMode
) -> None:
    """The control of the filter: the workflow guest's loop needs an AF_UNIX socketpair."""
    done = await attack(world, mode, {"socketpair": True, "asyncio": True})
    assert done == {"socketpair": "works", "asyncio": "works"}


async def test_danger_full_access_reaches_every_listener(world: World) -> None:
    """The control of the attacks above: unconfined, every one of them gets through."""
    with host_listeners(world.workspace, world.outside) as listeners:
        done = await attack(
            world,
            "danger-full-access",
            {**listeners.spec(), "families": {"AF_INET": socket_families()["AF_INET"]}},
        )
        reached = listeners.reached(expect=listeners.labels)
    assert done["tcp"] == "connected", done
    assert done["socket AF_INET"] == "created", done
    assert set(reached) == listeners.labels, (reached, done)
    assert reached["tcp"] == 1


def test_the_listeners_see_a_direct_connection(world: World) -> None:
    """The host-side check itself: what this process sends is seen once, then drained."""
    with host_listeners(world.workspace, world.outside) as listeners:
        assert listeners.reached() == {}
        with socket.create_connection(("127.0.0.1", listeners.ports["tcp"])):
            assert listeners.reached(expect={"tcp"}) == {"tcp": 1}
        assert listeners.reached() == {}
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.sendto(b"x", ("127.0.0.1", listeners.ports["udp"]))
        assert listeners.reached(expect={"udp"}) == {"udp": 1}
