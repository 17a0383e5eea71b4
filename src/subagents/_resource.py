"""`AsyncResource`: the open/closed lifecycle of what is used inside `async with`.

The runtime, the event stores and a confined run share it: entering opens the resource once,
leaving closes it, `aclose` is safe to repeat, and use outside `async with` is refused with
`ClosedError`. A closed resource never reopens.
"""

from __future__ import annotations

from types import TracebackType
from typing import ClassVar, Literal, Self, TypeAlias

from .errors import ClosedError

__all__ = ["AsyncResource", "ResourceState"]

ResourceState: TypeAlias = Literal["unopened", "opened", "closed"]


class AsyncResource:
    """A resource opened by `async with` and closed once, by leaving it or by `aclose`.

    Subclasses name themselves in `noun` (for errors), set `reentrant` when entering an open
    resource again is harmless (a store shared by several users), and override `_open` and
    `_close`; `_check_open` guards every operation that needs the resource open.
    """

    noun: ClassVar[str] = "resource"
    reentrant: ClassVar[bool] = False
    _state: ResourceState = "unopened"

    async def __aenter__(self) -> Self:
        if self._state == "closed" or (self._state == "opened" and not self.reentrant):
            raise ClosedError(f"cannot reopen the {self.noun}: it is {self._state}")
        if self._state == "unopened":
            await self._open()
            self._state = "opened"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the resource; closing it again does nothing."""
        if self._state == "closed":
            return
        self._state = "closed"  # first: what `_close` waits on sees it closing
        await self._close()

    def _check_open(self) -> None:
        if self._state != "opened":
            raise ClosedError(f"the {self.noun} is {self._state}; use it inside `async with`")

    async def _open(self) -> None:
        """Acquire what the resource holds (extension hook)."""

    async def _close(self) -> None:
        """Release what the resource holds, once (extension hook)."""
