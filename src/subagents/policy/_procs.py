"""Finding, killing and awaiting the processes of a run, from the host side (Linux `/proc`).

The synchronous functions read `/proc` and belong in a worker thread; `wait_exited` waits on
pidfds in the event loop, so nothing here sleeps or polls while a process is alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterable

__all__ = ["descendants", "kill_all", "owned_by", "wait_exited"]


def _table() -> dict[int, tuple[int, int]]:
    """Map each live pid to (parent pid, uid); zombies are dead and left out."""
    table: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
            uid = os.stat(f"/proc/{name}").st_uid
        except OSError:
            continue  # it exited meanwhile
        fields = data.rpartition(b")")[2].split()
        if len(fields) < 2 or fields[0] in (b"Z", b"X"):
            continue
        table[int(name)] = (int(fields[1]), uid)
    return table


def descendants(root: int) -> list[int]:
    """`root` (when alive) and every live process below it, parents first."""
    table = _table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _uid) in table.items():
        children.setdefault(ppid, []).append(pid)
    found = [root] if root in table else []
    queue = list(children.get(root, []))
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def owned_by(uid: int) -> list[int]:
    """Every live process of `uid`."""
    return [pid for pid, (_ppid, owner) in _table().items() if owner == uid]


def kill_all(pids: Iterable[int], *, group: int | None = None) -> None:
    """SIGKILL each of `pids` and, when given, the process group `group`; gone ones are fine."""
    if group is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


async def wait_exited(pids: Iterable[int]) -> None:
    """Return once every one of `pids` has exited (it may remain a zombie until reaped)."""
    loop = asyncio.get_running_loop()
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        except OSError:  # pragma: no cover (kernels before 5.3 have no pidfd)
            return
        try:
            exited: asyncio.Future[None] = loop.create_future()

            def _done(future: asyncio.Future[None] = exited) -> None:
                if not future.done():
                    future.set_result(None)

            loop.add_reader(fd, _done)
            try:
                await exited
            finally:
                loop.remove_reader(fd)
        finally:
            os.close(fd)
