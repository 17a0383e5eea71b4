"""Network attacks from a workflow script, through the whole stack (`subagents.Runtime`, its
workflow engine, a real guest process and the real sandbox), on each backend.

The script gets the real `__import__` out of its curated builtins (as in test_escapes.py) and
attacks: socket() of the outside families, unix sockets the host listens on (connect and
datagrams), TCP and UDP on loopback, io_uring. The guest's own channel to the host is a
socketpair it inherits, and its asyncio loop makes one: the run completing is the control that
the filter leaves those alone. The host judges the attack by its listeners, read after the
run ended; `danger-full-access` is the control where every listener is reached.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from attack_scripts import NETWORK_WORKFLOW, SENDERS, host_listeners, socket_families
from sandbox_support import World, make_world
from workflow_support import META, guest_processes, run_to_end

import subagents
from subagents.policy import Limits, SandboxMode
from subagents.policy._confine import BACKEND_ENV
from subagents.testing import FakeClock, RecordingModel
from subagents.workflows import (
    WorkflowOptions,
    WorkflowProcessStarted,
    WorkflowRequest,
    WorkflowResult,
)

CONFINED: list[SandboxMode] = ["read-only", "workspace-write"]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    return make_world(tmp_path, monkeypatch)


async def run_attack(world: World, mode: SandboxMode, spec: dict[str, Any]) -> dict[str, str]:
    """Run the network attack as a workflow of a lead in `mode`; the script's value."""
    clock = FakeClock()
    runtime = subagents.Runtime(
        model=RecordingModel.from_yaml('"*": [{text: done}]', clock=clock),
        store=world.store.parent / "agents.db",
        clock=clock,
        cwd=world.workspace,
        delegation=subagents.DelegationOptions(definitions={}),
        sandbox=mode,
        workflow_options=WorkflowOptions(wall_seconds=30.0, limits=Limits(processes=16)),
    )
    started: list[WorkflowProcessStarted] = []
    async with runtime:
        lead = await runtime.create_agent()
        engine = runtime.workflows
        engine.subscribe(
            lambda event: (
                started.append(event) if isinstance(event, WorkflowProcessStarted) else None
            )
        )
        run = engine.start(
            WorkflowRequest(script=NETWORK_WORKFLOW, meta=META, parent=lead, args=spec)
        )
        result: WorkflowResult = await run_to_end(run)
    assert guest_processes() == []
    assert [s.mode for s in started] == [mode]
    expected = None if mode == "danger-full-access" else os.environ[BACKEND_ENV]
    assert started[0].backend == expected
    assert result.stop_reason == "completed", result.error
    value: dict[str, str] = result.value
    return value


@pytest.mark.parametrize("mode", CONFINED)
async def test_a_workflow_script_reaches_nothing_outside_the_sandbox(
    backend: str, world: World, mode: SandboxMode
) -> None:
    families = socket_families()
    with host_listeners(world.workspace, world.outside) as listeners:
        spec = {**listeners.spec(unix=("stream", "seqpacket", "dgram")), "families": families}
        done = await run_attack(world, mode, {**spec, "io_uring": True, "socketpair": True})
        reached = listeners.reached()
    assert reached == {}, f"host listeners received connections or datagrams: {reached}; {done}"
    created = [name for name in families if done[f"socket {name}"] == "created"]
    assert created == [], f"the script created sockets of {created}"
    assert done["tcp"] != "connected"
    assert done["udp"] != "sent"
    assert done["io_uring"].startswith("denied "), done["io_uring"]
    assert done["socketpair"] == "works"


@pytest.mark.parametrize("mode", CONFINED)
async def test_a_workflow_script_sends_no_datagram_to_a_host_unix_socket(
    backend: str, world: World, mode: SandboxMode
) -> None:
    """From the datagram sockets the SOCK_DGRAM rule does not name: SOCK_RAW (a datagram
    socket for AF_UNIX) and an end of a datagram socketpair, which sendto() any address."""
    with host_listeners(world.workspace, world.outside) as listeners:
        done = await run_attack(
            world, mode, listeners.spec(unix=("raw", "socketpair-dgram"), ip=False)
        )
        reached = listeners.reached()
    assert reached == {}, f"host unix listeners received datagrams: {reached}; {done}"


async def test_unconfined_the_same_script_reaches_every_listener(world: World) -> None:
    with host_listeners(world.workspace, world.outside) as listeners:
        done = await run_attack(world, "danger-full-access", listeners.spec(unix=SENDERS))
        reached = listeners.reached(expect=listeners.labels)
    assert done["tcp"] == "connected", done
    assert set(reached) == listeners.labels, (reached, done)
