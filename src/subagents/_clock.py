"""Time as an injected dependency: real time in the CLI and benchmarks, a fake clock in tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, Protocol

__all__ = ["Clock", "FakeClock", "GatedClock", "SystemClock"]


class Clock(Protocol):
    """The time source the runtime reads and sleeps on; pass a fake one to test without waiting.

    `SystemClock` is real time; `FakeClock` and `GatedClock` are for tests.
    """

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def sleep(self, seconds: float) -> Coroutine[Any, Any, None]:
        """Wait `seconds` of this clock's time (an `async def` is one)."""
        ...


class SystemClock:
    """Wall-clock time and real sleeps."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> Coroutine[Any, Any, None]:
        # asyncio's own sleep, not a coroutine around it: a frame fewer in every sleeping
        # model call (thousands at once in a fan-out).
        return asyncio.sleep(seconds)


class FakeClock:
    """A clock that jumps: `sleep` advances time at once, so timed scripts run in zero real time."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        self._now += max(0.0, seconds)
        await asyncio.sleep(0)


class GatedClock(FakeClock):
    """A fake clock whose `sleep` waits until the test opens that sleep's gate.

    It holds a model call (or any timed wait) open at a known point without real waiting.
    """

    def __init__(self) -> None:
        super().__init__()
        self._sleepers: asyncio.Queue[asyncio.Event] = asyncio.Queue()

    async def sleep(self, seconds: float) -> None:
        gate = asyncio.Event()
        self._sleepers.put_nowait(gate)
        await gate.wait()
        await super().sleep(seconds)

    async def next_sleeper(self) -> asyncio.Event:
        """Wait until something sleeps on this clock; returns the gate that releases it."""
        return await self._sleepers.get()
