"""Directory selection and the file policy of a run (docs/design.md §9;
docs/sandbox.md), with real, confined guest processes.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from sandbox_support import skip_where_processes_are_unbounded
from workflow_support import (
    Gates,
    Recorder,
    guest_processes,
    open_engine,
    request,
    run_to_end,
)

from subagents.core import Agent
from subagents.ids import SessionId
from subagents.policy import Confinement, SandboxMode, confinement, resolve_policy
from subagents.sessions import SandboxModeSet, SubagentCatalog, ToolResultEvent
from subagents.workflows import (
    GuestProcessRuntime,
    RunOutcome,
    RunSpec,
    WorkflowProcessStarted,
    WorkflowResult,
)

UNCONFINED = Confinement(None, None, "no backend in this test")


class RecordingRuntime(GuestProcessRuntime):
    """The real guest runtime, keeping the spec of every run it was asked for."""

    def __init__(self, *, probe: Confinement | None = None) -> None:
        if probe is None:
            super().__init__()
        else:
            super().__init__(probe=lambda: probe)
        self.specs: list[RunSpec] = []

    async def run(self, spec: RunSpec) -> RunOutcome:
        self.specs.append(spec)
        return await super().run(spec)


async def backend() -> str | None:
    return (await asyncio.to_thread(confinement)).backend


async def test_a_confined_run_gets_the_session_cwd_and_policy() -> None:
    runtime = RecordingRuntime()
    async with open_engine(runtime=runtime, sandbox="read-only") as (_, lead, engine, _):
        recorder = Recorder(engine)
        result = await run_to_end(engine.start(request(lead, "return await agent('a')")))
        expected = await asyncio.to_thread(
            lambda: resolve_policy(
                cwd=lead.session.header.cwd, mode="read-only", session_id=lead.id
            )
        )
    assert result == WorkflowResult(value="done", stop_reason="completed", agents_started=1)
    [spec] = runtime.specs
    assert spec.cwd == lead.session.header.cwd
    assert spec.policy == expected
    assert spec.limits.wall_seconds is None  # the engine keeps the run's wall clock itself
    [started] = recorder.of(WorkflowProcessStarted)
    assert (started.mode, started.backend) == ("read-only", await backend())
    assert started.backend is not None


async def test_the_selected_directory_is_kept_for_the_process_and_every_child(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "selected").mkdir(parents=True)
    (workspace / "later").mkdir()
    answers = iter([workspace / "selected", workspace / "later"])
    asked: list[str] = []

    async def directory(parent: Agent) -> str:
        asked.append(parent.name)
        return str(next(answers))

    runtime = RecordingRuntime()
    async with open_engine(
        runtime=runtime, directory=directory, cwd=str(workspace), sandbox="workspace-write"
    ) as (rt, lead, engine, _):
        script = "await agent('first')\nawait agent('second')"
        result = await run_to_end(engine.start(request(lead, script)))
        children = [r.event for r in lead.session.records if isinstance(r.event, SubagentCatalog)]
        cwds = [(await rt.read_header(SessionId(c.child_id))).cwd for c in children]
        root = await asyncio.to_thread(lambda: str(workspace.resolve()))
    assert result.stop_reason == "completed", result.error
    assert asked == ["lead"]
    [spec] = runtime.specs
    assert spec.cwd == str(workspace / "selected")
    assert cwds == [str(workspace / "selected")] * 2
    assert spec.policy.workspace_root == root  # the session's origin, not the selection


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_a_policy_that_cannot_be_enforced_is_refused(mode: SandboxMode) -> None:
    runtime = RecordingRuntime(probe=UNCONFINED)
    async with open_engine(runtime=runtime, sandbox=mode) as (_, lead, engine, _):
        recorder = Recorder(engine)
        result = await run_to_end(engine.start(request(lead, "return 1")))
    assert result.stop_reason == "error"
    assert result.error == f"cannot enforce the {mode} file policy: no backend in this test"
    assert runtime.specs == []
    assert recorder.names() == ["workflow/start", "workflow/end"]


async def test_full_access_runs_without_confinement() -> None:
    runtime = RecordingRuntime(probe=UNCONFINED)
    async with open_engine(runtime=runtime, sandbox="read-only") as (_, lead, engine, _):
        lead.record(SandboxModeSet(mode="danger-full-access", source="user"))
        recorder = Recorder(engine)
        result = await run_to_end(engine.start(request(lead)))
    assert result == WorkflowResult(value=None, stop_reason="completed", agents_started=0)
    [started] = recorder.of(WorkflowProcessStarted)
    assert (started.mode, started.backend) == ("danger-full-access", None)


async def test_a_failed_directory_lookup_settles_before_the_policy_check() -> None:
    async def directory(parent: Agent) -> str:
        raise OSError("selected directory is unavailable")

    runtime = RecordingRuntime(probe=UNCONFINED)
    async with open_engine(runtime=runtime, directory=directory, sandbox="read-only") as (
        _,
        lead,
        engine,
        _,
    ):
        result = await run_to_end(engine.start(request(lead)))
    assert result.stop_reason == "error"
    assert result.error is not None
    assert "selected directory is unavailable" in result.error
    assert runtime.specs == []


async def test_a_vanished_session_directory_is_an_error(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    runtime = RecordingRuntime()
    async with open_engine(runtime=runtime, cwd=str(gone)) as (_, lead, engine, _):
        gone.rmdir()
        result = await run_to_end(engine.start(request(lead)))
    assert (
        result.error == f"the working directory {gone} is unavailable (not an accessible directory)"
    )
    assert runtime.specs == []


ESCAPE = """
os = agent.__func__.__globals__['os']
try:
    fd = os.open(args['path'], os.O_WRONLY | os.O_CREAT, 0o644)
except OSError as exc:
    return ['denied', exc.strerror]
os.write(fd, b'x')
os.close(fd)
return ['written']
"""


@pytest.mark.parametrize("mode", ["read-only", "danger-full-access"])
async def test_a_script_that_escapes_the_hooks_still_cannot_write_under_read_only(
    tmp_path: Path, mode: SandboxMode
) -> None:
    target = tmp_path / "escaped.txt"
    async with open_engine(cwd=str(tmp_path), sandbox=mode) as (_, lead, engine, _):
        result = await run_to_end(engine.start(request(lead, ESCAPE, args={"path": str(target)})))
    assert result.stop_reason == "completed", result.error
    if mode == "read-only":
        assert result.value is not None
        assert result.value[0] == "denied"
        assert not target.exists()
    else:
        assert result.value == ["written"]
        assert target.read_text() == "x"


DETACH = """
os = agent.__func__.__globals__['os']
pid = os.fork()
if pid == 0:
    os.setsid()
    os.execv('/bin/sleep', ['/bin/sleep', args['marker']])
await agent('hold')
"""


@pytest.mark.parametrize("mode", ["read-only", "danger-full-access"])
async def test_cancel_leaves_no_process_of_the_run(mode: SandboxMode) -> None:
    if mode == "danger-full-access":  # unconfined: only a cgroup catches a setsid grandchild
        skip_where_processes_are_unbounded("none", mode, reaping=True)
    gates = Gates()
    marker = str(1_000_000 + os.getpid())  # a sleep no other test run starts
    children = "agent-1: [{calls: [{tool: hold, args: {label: h}}]}, {text: never}]"
    async with open_engine(children, tools=[gates.tool()], sandbox=mode) as (_, lead, engine, _):
        run = engine.start(request(lead, DETACH, args={"marker": marker}))
        await gates.started("h").wait()
        run.cancel("stop")
        result = await run_to_end(run)
    assert result.stop_reason == "cancelled"
    assert guest_processes() == []
    assert _sleepers(marker) == []


def _sleepers(marker: str) -> list[int]:
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if cmdline[:2] == [b"/bin/sleep", marker.encode()] and state != "Z":
                found.append(int(entry.name))
    return found


WRITER = """
"*":
  - calls: [{tool: write_file, args: {path: made.txt, content: child}}]
  - text: tried
"""


async def test_a_workflow_child_runs_under_its_parents_mode(tmp_path: Path) -> None:
    """Children take the parent's policy (recorded in their own log) and their tools obey it."""
    async with open_engine(WRITER, cwd=str(tmp_path), sandbox="read-only") as (rt, lead, eng, _):
        result = await run_to_end(eng.start(request(lead, "return await agent('write')")))
        [entry] = [r.event for r in lead.session.records if isinstance(r.event, SubagentCatalog)]
        records = await rt.store.read(SessionId(entry.child_id), tenant=rt.tenant)
    assert result.value == "tried"
    modes = [(r.event.mode, r.event.source) for r in records if isinstance(r.event, SandboxModeSet)]
    assert modes == [("read-only", "delegation")]
    [(text, is_error)] = [
        (r.event.message.content, r.event.message.is_error)
        for r in records
        if isinstance(r.event, ToolResultEvent)
    ]
    assert is_error
    assert "read-only" in text
    assert not (tmp_path / "made.txt").exists()


async def test_a_mode_switch_is_one_event_and_applies_from_the_next_run() -> None:
    # 73: the switch is recorded once; a run resolves its policy once, when it starts
    gates = Gates()
    children = "agent-1: [{calls: [{tool: hold, args: {label: h}}]}, {text: held}]"
    async with open_engine(children, tools=[gates.tool()], sandbox="read-only") as (
        rt,
        lead,
        engine,
        _,
    ):
        recorder = Recorder(engine)
        live = engine.start(request(lead, "return await agent('hold')"))
        await gates.started("h").wait()
        before = len(lead.session.records)
        rt.set_sandbox_mode(lead, "danger-full-access")
        switched = [r.event for r in list(lead.session.records)[before:]]
        assert switched == [SandboxModeSet(mode="danger-full-access", source="user")]
        gates.release("h")
        assert (await run_to_end(live)).value == "held"
        await run_to_end(engine.start(request(lead)))
    modes = [(e.mode, e.backend is None) for e in recorder.of(WorkflowProcessStarted)]
    assert modes == [("read-only", False), ("danger-full-access", True)]
