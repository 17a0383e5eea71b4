"""`SubagentService`: the provider registry and the one-shot start path.

Every start is validated in a fixed order before any child exists: provider, capabilities,
depth (from the parent's persisted depth), name (reserved synchronously), working directory.
Only then does the provider create the child; the creator's catalog entry commits the name.
`subagent/start` and `subagent/end` are emitted in pairs, start first.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from ..core import Agent, AgentRuntime
from ..errors import DuplicateError, ErrorCode, SubagentError
from ..ids import SessionId
from ..sessions import SubagentCatalog
from ._catalog import catalog_entries
from ._naming import NameBook, full_name
from ._providers import (
    CAPABILITY_ORDER,
    Capability,
    StartRequest,
    SubagentProvider,
    SubagentRun,
    ToolFilter,
)
from ._results import SubagentResult

__all__ = [
    "Admission",
    "ProviderAdded",
    "ProviderRemoved",
    "ServiceRun",
    "SubagentEnded",
    "SubagentService",
    "SubagentStarted",
]

log = logging.getLogger("subagents.delegation")


@dataclass(frozen=True, slots=True)
class ProviderAdded:
    name: str


@dataclass(frozen=True, slots=True)
class ProviderRemoved:
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentStarted:
    run_id: str
    provider: str
    child_id: str
    name: str
    parent_id: str
    local: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentEnded:
    run_id: str
    provider: str
    child_id: str
    name: str
    parent_id: str
    local: bool
    stop_reason: str
    last_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Admission:
    """A validated start whose name is reserved; `launch` it or `cancel` it."""

    provider: SubagentProvider
    parent: Agent
    prompt: str
    label: str
    name: str
    full_name: str
    cwd: str
    depth: int
    tool_filter: ToolFilter | None


class ServiceRun:
    """A run as the service hands it out: settles once, emitting `subagent/end` once."""

    def __init__(self, service: SubagentService, run: SubagentRun, started: SubagentStarted):
        self._service = service
        self._run = run
        self.started = started
        self._result: SubagentResult | None = None

    @property
    def id(self) -> SessionId:
        return self._run.id

    @property
    def name(self) -> str:
        return self.started.name

    @property
    def local_agent(self) -> Agent | None:
        return self._run.local_agent

    async def wait(self) -> SubagentResult:
        try:
            result = await self._run.wait()
        except Exception:
            self._end(None)
            raise
        self._end(result)
        return result

    async def dispose(self) -> None:
        try:
            await self._run.dispose()
        finally:
            if self._result is None:
                try:
                    self._end(await self._run.wait())
                except Exception:
                    self._end(None)

    def _end(self, result: SubagentResult | None) -> None:
        if self._result is not None:
            return
        self._result = result or SubagentResult(output="", stop_reason="error")
        s = self.started
        self._service.emit(
            SubagentEnded(
                run_id=s.run_id,
                provider=s.provider,
                child_id=s.child_id,
                name=s.name,
                parent_id=s.parent_id,
                local=s.local,
                stop_reason=self._result.stop_reason,
                last_message=self._result.output or None,
            )
        )


class SubagentService:
    """Providers, name books and one-shot starts for one runtime."""

    def __init__(self, runtime: AgentRuntime, *, instructions: Callable[[Admission], str]):
        self.runtime = runtime
        self._providers: dict[str, SubagentProvider] = {}
        self._names: dict[SessionId, NameBook] = {}
        self._run_ids = itertools.count(1)
        self._instructions = instructions

    # -- events -------------------------------------------------------------------------------

    def next_run_id(self) -> str:
        """A fresh id pairing one `subagent/start` with its `subagent/end`."""
        return f"run-{next(self._run_ids)}"

    def emit(self, event: object) -> None:
        self.runtime.bus.emit(event)

    # -- providers ----------------------------------------------------------------------------

    def register_provider(self, provider: SubagentProvider) -> Callable[[], None]:
        """Add a provider; returns its disposer. A duplicate name is refused."""
        if provider.name in self._providers:
            raise DuplicateError(
                f'a subagent provider named "{provider.name}" is already registered',
                code=ErrorCode.DUPLICATE_PROVIDER,
            )
        self._providers[provider.name] = provider
        self.emit(ProviderAdded(provider.name))

        def remove() -> None:
            if self._providers.get(provider.name) is provider:
                del self._providers[provider.name]
                self.emit(ProviderRemoved(provider.name))

        return remove

    def get_provider(self, name: str) -> SubagentProvider | None:
        return self._providers.get(name)

    def providers(self) -> list[str]:
        return list(self._providers)

    # -- names --------------------------------------------------------------------------------

    def name_book(self, creator: Agent) -> NameBook:
        book = self._names.get(creator.id)
        if book is None:
            committed = [e.name for e in catalog_entries(creator.session.records) if e.name]
            book = self._names[creator.id] = NameBook(committed)
            creator_id = creator.id

            async def forget() -> None:
                self._names.pop(creator_id, None)

            creator.add_disposer(forget)
        return book

    # -- starts -------------------------------------------------------------------------------

    def admit(
        self,
        provider_name: str,
        *,
        parent: Agent,
        prompt: str,
        label: str,
        name: str | None = None,
        cwd: str | None = None,
        max_depth: int | None = None,
        tool_filter: ToolFilter | None = None,
    ) -> Admission:
        """Validate a start in the fixed order and reserve its name (synchronously)."""
        provider = self._providers.get(provider_name)
        if provider is None:
            raise SubagentError(
                f'no subagent provider registered for "{provider_name}"',
                code=ErrorCode.NO_PROVIDER,
            )
        requested: list[Capability] = []
        if max_depth is not None:
            requested.append("depth_limit")
        if tool_filter is not None:
            requested.append("tool_filter")
        for capability in CAPABILITY_ORDER:
            if capability in requested and capability not in provider.capabilities:
                raise SubagentError(
                    f'subagent provider "{provider.name}" does not support the '
                    f'"{capability}" capability',
                    code=ErrorCode.UNSUPPORTED_CAPABILITY,
                )
        if max_depth is not None and (isinstance(max_depth, bool) or max_depth < 0):
            raise SubagentError(
                "subagent maxDepth must be a non-negative safe integer", code=ErrorCode.USAGE
            )
        depth = parent.session.header.depth + 1
        if max_depth is not None and depth > max_depth:
            raise SubagentError(
                f"subagent depth {depth} exceeds maxDepth {max_depth}; carry out the work "
                "directly instead of delegating",
                code=ErrorCode.DEPTH_EXCEEDED,
                depth=depth,
                max_depth=max_depth,
            )
        if tool_filter is not None:
            named = sorted((tool_filter.allow or frozenset()) | tool_filter.deny)
            missing = [
                t
                for t in named
                if self.runtime.tools.get(t) is None and parent.tools.get(t) is None
            ]
            if missing:
                raise SubagentError(
                    f"tool filter names unknown tools: {', '.join(missing)}",
                    code=ErrorCode.USAGE,
                )
        parent_cwd = parent.session.header.cwd
        resolved_cwd = os.path.normpath(os.path.join(parent_cwd, cwd)) if cwd else parent_cwd
        chosen = self.name_book(parent).reserve(name)
        return Admission(
            provider=provider,
            parent=parent,
            prompt=prompt,
            label=label,
            name=chosen,
            full_name=full_name(parent.name, chosen),
            cwd=resolved_cwd,
            depth=depth,
            tool_filter=tool_filter,
        )

    def cancel(self, admission: Admission) -> None:
        """Give back an admission that will not be launched."""
        self.name_book(admission.parent).release(admission.name)

    async def check_cwd(self, admission: Admission) -> None:
        """Refuse a working directory that is not an accessible directory (`INVALID_CWD`)."""
        if admission.cwd != admission.parent.session.header.cwd and not await asyncio.to_thread(
            os.path.isdir, admission.cwd
        ):
            raise SubagentError(
                f"cwd {admission.cwd} is not an accessible directory; give an existing "
                "directory or omit cwd to use yours",
                code=ErrorCode.INVALID_CWD,
            )

    async def launch(self, admission: Admission) -> ServiceRun:
        """Start an admitted child; the name is released if anything fails before it exists."""
        book = self.name_book(admission.parent)
        parent = admission.parent
        try:
            await self.check_cwd(admission)

            async def establish(child_id: SessionId) -> None:
                parent.record(
                    SubagentCatalog(
                        child_id=child_id,
                        name=admission.name,
                        mode="one-shot",
                        provider=admission.provider.name,
                        label=admission.label,
                        created_at=self.runtime.clock.now(),
                    )
                )
                book.commit(admission.name)

            run = await admission.provider.start(
                StartRequest(
                    parent=parent,
                    prompt=admission.prompt,
                    label=admission.label,
                    name=admission.name,
                    full_name=admission.full_name,
                    cwd=admission.cwd,
                    instructions=self._instructions(admission),
                    tool_filter=admission.tool_filter,
                    establish=establish,
                )
            )
        finally:
            book.release(admission.name)  # a no-op once the catalog entry committed it
        started = SubagentStarted(
            run_id=self.next_run_id(),
            provider=admission.provider.name,
            child_id=run.id,
            name=admission.full_name,
            parent_id=parent.id,
            local=run.local_agent is not None,
        )
        self.emit(started)
        return ServiceRun(self, run, started)

    async def start(
        self,
        provider_name: str,
        *,
        parent: Agent,
        prompt: str,
        label: str,
        name: str | None = None,
        cwd: str | None = None,
        max_depth: int | None = None,
    ) -> ServiceRun:
        """Admit and launch in one call."""
        admission = self.admit(
            provider_name,
            parent=parent,
            prompt=prompt,
            label=label,
            name=name,
            cwd=cwd,
            max_depth=max_depth,
        )
        return await self.launch(admission)
