"""A guest that exits right after its `done` frame, without reading a reply, still gets its result.

The guest is a real process on a real socket pair. The order is forced, not timed: the host
answers a call only once the guest has sent `done` and exited, and it does so before its event
loop reads that frame, so the answer's write meets a closed peer (EPIPE) while `done` is still
unread in the socket.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from workflow_support import guest_processes

from subagents.messages import JsonValue
from subagents.policy import ConfinedProcess, Limits, SandboxPolicy
from subagents.workflows import AbortSignal, GuestProcessRuntime, RunOutcome, RunSpec

# The fake guest calls `begin` (held by the host), then `progress`; the reply to `progress`
# proves the host has read both calls and waits for more. Then it sends `done` and exits at
# once, never reading the reply to `begin`.
GUEST = """
import json, os, socket, struct, sys
channel = socket.socket(fileno=int(sys.argv[1]))
def send(message):
    data = json.dumps(message).encode()
    channel.sendall(struct.pack(">I", len(data)) + data)
def receive():
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = channel.recv(n - len(data))
            if not chunk:
                sys.exit("the host closed the channel")
            data += chunk
        return data
    (size,) = struct.unpack(">I", exactly(4))
    return json.loads(exactly(size))
send({"type": "call", "id": 1, "fn": "begin", "arg": {}})
send({"type": "call", "id": 2, "fn": "progress", "arg": []})
assert receive() == {"type": "reply", "id": 2, "value": None}
send({"type": "done", "result": {"value": "kept", "stopReason": "completed", "agentsStarted": 0}})
os._exit(0)
"""


async def test_done_is_delivered_when_the_guest_exits_before_a_reply(tmp_path: Path) -> None:
    guest = tmp_path / "exiting_guest.py"
    guest.write_text(GUEST, encoding="utf-8")
    launched: list[int] = []
    progressed = asyncio.Event()

    async def progress(arg: JsonValue) -> JsonValue:
        progressed.set()
        return None  # its reply is written as this returns, before `begin` resumes

    async def begin(arg: JsonValue) -> JsonValue:
        await progressed.wait()
        # Block the event loop (deliberately) until the guest has exited: its `done` then sits
        # unread in the socket, and the reply written next meets a closed peer.
        os.waitid(os.P_PID, launched[0], os.WEXITED | os.WNOWAIT)  # noqa: ASYNC222
        return {}

    def on_launch(pid: int, process: ConfinedProcess) -> None:
        launched.append(pid)

    spec = RunSpec(
        bindings={"begin": begin, "progress": progress},
        cwd=str(tmp_path),
        policy=SandboxPolicy(mode="danger-full-access", workspace_root=str(tmp_path)),
        limits=Limits(),
        abort=AbortSignal(),
        on_launch=on_launch,
    )
    outcome = await GuestProcessRuntime(guest=str(guest)).run(spec)
    assert outcome == RunOutcome(
        value={"value": "kept", "stopReason": "completed", "agentsStarted": 0}
    )
    assert guest_processes() == []
