"""Network attacks through the `bash` tool, as a hostile agent would write them.

The unix-socket attack runs the system's `python3` from bash (what an agent reaches for: bash
has no unix sockets); the TCP and UDP ones use bash's own `/dev/tcp` and `/dev/udp`. The host
judges each by its listeners, read after the call returned; `danger-full-access` is the
control (full access includes the network), where the same command reaches every listener.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys

import pytest
from attack_scripts import NETWORK, SENDERS, HostListeners, host_listeners
from workspace_support import Box

from subagents.policy import SandboxMode

CONFINED: list[SandboxMode] = ["read-only", "workspace-write"]
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


def unix_command(box: Box, listeners: HostListeners, senders: tuple[str, ...] = SENDERS) -> str:
    (box.ws / "attack.py").write_text(NETWORK)
    spec = json.dumps(listeners.spec(unix=senders, ip=False))
    return f"{PYTHON} attack.py {shlex.quote(spec)}"


def ip_command(listeners: HostListeners) -> str:
    tcp, udp = listeners.ports["tcp"], listeners.ports["udp"]
    return (
        f"exec 3<>/dev/tcp/127.0.0.1/{tcp} && echo TCP-CONNECTED; "
        f"echo escaped > /dev/udp/127.0.0.1/{udp} && echo UDP-SENT"
    )


@pytest.mark.parametrize(
    "senders",
    [
        pytest.param(("stream", "seqpacket", "dgram"), id="connect-or-dgram-socket"),
        pytest.param(("raw", "socketpair-dgram"), id="raw-or-socketpair-datagrams"),
    ],
)
@pytest.mark.parametrize("mode", CONFINED)
async def test_bash_reaches_no_host_unix_socket(
    box: Box, backend: str, mode: SandboxMode, senders: tuple[str, ...]
) -> None:
    """Stream and datagram listeners in the workspace, outside it, in the host's /tmp and in
    the abstract namespace, and a seqpacket one: connect() from stream and seqpacket sockets,
    sendto() from an AF_UNIX SOCK_DGRAM socket, or from the datagram sockets that rule does not
    name (SOCK_RAW, a datagram socketpair); none may be heard by the host."""
    with host_listeners(box.ws, box.outside) as listeners:
        command = unix_command(box, listeners, senders)
        box.mode = mode
        out = await box.ok("bash", {"command": command})
        reached = listeners.reached()
    assert reached == {}, f"host unix listeners received something: {reached}; bash said {out}"


@pytest.mark.parametrize("mode", CONFINED)
async def test_bash_reaches_no_loopback_tcp_or_udp_server(
    box: Box, backend: str, mode: SandboxMode
) -> None:
    with host_listeners(box.ws, box.outside) as listeners:
        box.mode = mode
        out = await box.ok("bash", {"command": ip_command(listeners)})
        reached = listeners.reached()
    assert reached == {}, f"the host's loopback servers received {reached}; bash said {out}"
    assert "TCP-CONNECTED" not in out
    assert "UDP-SENT" not in out


async def test_unconfined_bash_reaches_every_listener(box: Box) -> None:
    """The control of the two tests above."""
    box.mode = "danger-full-access"
    with host_listeners(box.ws, box.outside) as listeners:
        out = await box.ok("bash", {"command": unix_command(box, listeners)})
        unix = listeners.reached(expect=listeners.labels - {"tcp", "udp"})
        ip = await box.ok("bash", {"command": ip_command(listeners)})
        reached = listeners.reached(expect={"tcp", "udp"})
    assert set(unix) == listeners.labels - {"tcp", "udp"}, out
    assert reached == {"tcp": 1, "udp": 1}, ip
    assert "TCP-CONNECTED" in ip
