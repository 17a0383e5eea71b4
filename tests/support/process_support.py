"""Processes as tests see them: which run with a marker, waiting for one to end."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


def processes_with(marker: str) -> list[int]:
    """The pids whose command line contains `marker`."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path("/proc", entry, "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


async def exited(pid: int) -> None:
    """Return once process `pid` has exited (a pidfd readiness wait, no polling)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, lambda: done.done() or done.set_result(None))
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def zombie(pid: int) -> bool:
    """Whether `pid` has ended (gone, or a zombie its parent has not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True
