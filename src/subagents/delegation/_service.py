"""`SubagentService`: the provider registry and the one-shot start path.

Every start is validated in a fixed order before any child exists: the definition's tools,
provider, capabilities, depth (from the parent's persisted depth and its subtree's cap), name
(reserved synchronously), working directory (canonical, and inside the parent's workspace unless
the parent runs unconfined). Only then does the provider create the child; the creator's
catalog entry commits the name. `subagent/start` and `subagent/end` are emitted in
pairs, start first. The service also keeps each agent's profile (definition, tool scope, depth
cap), so a child never gets more than its parent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import os
from collections.abc import Callable, Mapping
from typing import Literal

import msgspec

from ..core import Agent, AgentConfig, AgentRuntime
from ..definitions import AgentDefinition
from ..errors import DuplicateError, ErrorCode, SubagentError, SubagentsError
from ..ids import SessionId
from ..messages import JsonObject, user_message
from ..models import Model
from ..names import NameBook, full_name, name_error
from ..sessions import SubagentCatalog, SubagentDescriptor
from ._budget_book import BudgetBook, with_budget
from ._catalog import catalog_entries
from ._lifecycle import (
    DefinitionsChanged as DefinitionsChanged,
    ProviderAdded as ProviderAdded,
    ProviderRemoved as ProviderRemoved,
    SubagentEnded as SubagentEnded,
    SubagentStarted as SubagentStarted,
)
from ._providers import (
    CAPABILITY_ORDER,
    Capability,
    StartRequest,
    SubagentChild,
    SubagentProvider,
    ToolFilter,
)
from ._results import SubagentResult, result_from_log
from ._scope import AgentProfile, check_definition_tools, child_profile, narrow
from ._structured import StructuredCapture, check_output_schema

__all__ = [
    "Admission",
    "DefinitionsChanged",
    "ProviderAdded",
    "ProviderRemoved",
    "ServiceRun",
    "SubagentEnded",
    "SubagentService",
    "SubagentStarted",
    "descriptor_for",
    "output_schema",
]

log = logging.getLogger("subagents.delegation")


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    """A validated start whose name is reserved; `launch` it or `cancel` it."""

    provider: SubagentProvider
    parent: Agent
    prompt: str
    label: str
    name: str
    full_name: str
    cwd: str
    """Where the child works: resolved against the parent's cwd, canonical once checked."""
    depth: int
    tool_filter: ToolFilter | None
    profile: AgentProfile | None = None
    """What narrows the child (its definition, tools, depth cap, budget); None when nothing
    does."""
    model_spec: str | None = None
    """The model its definition (or its caller) asks for (None: the parent's)."""
    counted: bool = False
    """Whether the child was counted against a children budget (given back if not launched)."""
    output_schema: JsonObject | None = None
    """The schema its caller asked it to answer with (beats its definition's)."""
    requested_cwd: str | None = None
    """The cwd as its caller spelled it (None: the parent's), for a refusal's message."""
    call_id: str | None = None
    """The parent's tool call that started it (None: not started by a delegation tool)."""


def output_schema(admission: Admission) -> JsonObject | None:
    """The output schema of an admitted child: its caller's, else its definition's, if any."""
    if admission.output_schema is not None:
        return admission.output_schema
    profile = admission.profile
    definition = profile.definition if profile is not None else None
    return definition.output_schema if definition is not None else None


def descriptor_for(
    admission: Admission, mode: Literal["one-shot", "continuable"] = "continuable"
) -> SubagentDescriptor:
    """A child's descriptor, with the scope, schema, model and budget a resume must restore."""
    profile = admission.profile
    tool_filter = profile.tool_filter if profile is not None else None
    definition = profile.definition if profile is not None else None
    budget = profile.budget if profile is not None else None
    descriptor = SubagentDescriptor(
        mode=mode,
        provider=admission.provider.name,
        label=admission.label,
        definition=definition.name if definition is not None else None,
        # What it starts with, so a resume needs neither the definition nor the parent.
        instructions=(
            definition.body if definition is not None else admission.parent.config.instructions
        ),
        max_tokens=(definition.max_tokens if definition is not None else None)
        or admission.parent.config.max_tokens,
        tools_allow=(
            tuple(sorted(tool_filter.allow))
            if tool_filter is not None and tool_filter.allow is not None
            else None
        ),
        tools_deny=tuple(sorted(tool_filter.deny)) if tool_filter is not None else (),
        depth_cap=profile.depth_cap if profile is not None else None,
        output_schema=output_schema(admission),
        agent_model=admission.model_spec,
        approval=tuple(sorted(definition.approval.tools)) if definition is not None else (),
        approval_timeout=definition.approval.timeout if definition is not None else None,
        approver=definition.approver if definition is not None else "person",
    )
    return with_budget(descriptor, budget)


def _own_model(definition: AgentDefinition | None) -> str | None:
    if definition is None or definition.model == "inherit":
        return None
    return definition.model


class ServiceRun:
    """A one-shot child's run as the service hands it out.

    `wait` returns its result (for every child-level ending); `dispose` stops what remains
    and waits until the child is released; both are idempotent. It settles once, emitting
    `subagent/end` once.
    """

    # One per running child: no dict each (a fan-out holds thousands).
    __slots__ = (
        "_child",
        "_dispose_lock",
        "_disposed",
        "_ended",
        "_host",
        "_result",
        "_schema",
        "_service",
        "_structured",
        "started",
    )

    def __init__(
        self,
        service: SubagentService,
        child: SubagentChild,
        started: SubagentStarted,
        schema: JsonObject | None = None,
        structured: StructuredCapture | None = None,
        *,
        host: Agent | None = None,
    ) -> None:
        self._service = service
        self._child = child
        self._host = host
        """The child's agent when its turns run in the task that waits (`launch(here=True)`)."""
        self.started = started
        self._schema = schema
        self._structured = structured
        self._result: SubagentResult | None = None
        self._disposed = False
        self._dispose_lock: asyncio.Lock | None = None
        """Made by the first `dispose`: not held through the child's whole run."""
        self._ended = False

    @property
    def id(self) -> SessionId:
        return self._child.id

    @property
    def name(self) -> str:
        return self.started.name

    @property
    def local_agent(self) -> Agent | None:
        return self._child.local_agent

    async def _settle(self) -> SubagentResult:
        if self._result is None:
            records = (await self._child.records())[self._child.seed_length :]
            result = result_from_log(records)
            capture = self._structured
            if capture is None and self._schema is not None:
                # A child run elsewhere answers through its own log: read the answer there.
                capture = StructuredCapture(self._schema)
                capture.restore(records)
            if capture is not None:
                result = capture.settle(result, records)
            self._result = result
            self._end(result)
        return self._result

    async def wait(self) -> SubagentResult:
        if self._result is None and not self._disposed:
            try:
                await (self._child.wait() if self._host is None else self._host.run_here())
            except Exception:
                self._end(None)
                raise
        return await self._settle()

    async def dispose(self) -> None:
        if self._dispose_lock is None:
            self._dispose_lock = asyncio.Lock()
        async with self._dispose_lock:
            if self._disposed:
                return
            self._disposed = True
            try:
                await self._child.kill()
            finally:
                try:
                    await self._settle()
                except Exception:
                    self._end(None)

    def _end(self, result: SubagentResult | None) -> None:
        if self._ended:
            return
        self._ended = True
        result = result or SubagentResult(output="", stop_reason="error")
        self._service.emit(self.started.ended(result.stop_reason, result.output or None))


class SubagentService:
    """Providers, name books and one-shot starts for one runtime."""

    def __init__(
        self,
        runtime: AgentRuntime,
        *,
        config_for: Callable[[Admission], AgentConfig],
        delegated_work: Callable[[Agent], bool] | None = None,
    ) -> None:
        self.runtime = runtime
        self.delegated_work = delegated_work
        """Whether an agent still has children at work (its structured answer waits)."""
        self._providers: dict[str, SubagentProvider] = {}
        self._names: dict[SessionId, NameBook] = {}
        self._run_ids = itertools.count(1)
        self._config_for = config_for
        self.definitions: Mapping[str, AgentDefinition] = {}
        """The agent definitions `subagent(agent=...)` may name (set by the runtime)."""
        self.profiles: dict[SessionId, AgentProfile] = {}
        """Agents narrowed by a definition or an ancestor's scope, by session id."""
        self._pending: dict[tuple[SessionId, str], AgentProfile] = {}
        self.budgets = BudgetBook(runtime)
        self.model_specs: dict[SessionId, str] = {}
        """Agents running a model other than the runtime's (a definition's, or inherited)."""

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

    def set_definitions(self, definitions: Mapping[str, AgentDefinition]) -> None:
        """Replace the agent definitions; the delegation tools re-derive their wording."""
        self.definitions = dict(definitions)
        self.emit(DefinitionsChanged(tuple(self.definitions)))

    # -- profiles -----------------------------------------------------------------------------

    def adopt(self, parent_id: SessionId, name: str, child_id: SessionId) -> AgentProfile | None:
        """Bind the profile admitted for `parent_id`'s child `name` to the child's id.

        Called once the child exists and before it runs; names are unique per parent while
        reserved, so the key is unambiguous. Later lookups use `profiles`.
        """
        profile = self._pending.pop((parent_id, name), None)
        if profile is not None:
            self.profiles[child_id] = profile
        return profile

    def providers(self) -> list[str]:
        return list(self._providers)

    def running_child(self, child_id: SessionId) -> SubagentChild | None:
        """The child with `child_id` that one of the providers runs now, if any."""
        for provider in self._providers.values():
            for child in provider.list():
                if child.id == child_id:
                    return child
        return None

    # -- names --------------------------------------------------------------------------------

    def name_book(self, creator: Agent) -> NameBook:
        book = self._names.get(creator.id)
        if book is None:
            committed = [e.name for e in catalog_entries(creator.session.records) if e.name]
            book = self._names[creator.id] = NameBook(committed)
            creator_id = creator.id

            async def forget(_: Agent) -> None:
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
        definition: AgentDefinition | None = None,
        output_schema: JsonObject | None = None,
        model_spec: str | None = None,
        call_id: str | None = None,
    ) -> Admission:
        """Validate a start in the fixed order and reserve its name (synchronously).

        With `definition`, the child runs it: its tools resolve against the parent's (never
        wider), its `max_depth` narrows the subtree's cap, and the name defaults to its name.
        `output_schema` (checked by the caller) and `model_spec` override the definition's.
        """
        depth = parent.session.header.depth + 1
        profile = self._narrowing(parent, definition, depth)
        requested_filter = tool_filter
        if profile is not None:
            tool_filter = narrow(tool_filter, profile.tool_filter)
        schema = definition.output_schema if definition is not None else None
        if definition is not None and schema is not None:
            check_output_schema(schema, definition=definition.name)
        schema = output_schema if output_schema is not None else schema
        provider = self._provider_for(
            provider_name,
            max_depth=max_depth,
            tool_filter=tool_filter,
            output_schema=schema is not None,
        )
        if max_depth is not None and (isinstance(max_depth, bool) or max_depth < 0):
            raise SubagentError(
                "subagent maxDepth must be a non-negative safe integer", code=ErrorCode.USAGE
            )
        self._check_depth(parent, depth, max_depth)
        limits = self.budgets.limits_for_child(
            parent, definition.budget if definition is not None else None
        )
        if limits is not None:
            profile = dataclasses.replace(profile or AgentProfile(), budget=limits)
        if requested_filter is not None:
            self._check_filter(parent, requested_filter)
        parent_cwd = parent.session.header.cwd
        resolved_cwd = os.path.normpath(os.path.join(parent_cwd, cwd)) if cwd else parent_cwd
        book = self.name_book(parent)
        if name is None and definition is not None and not book.taken(definition.name):
            name = definition.name if name_error(definition.name) is None else None
        counted = self.budgets.reserve_child(parent)
        try:
            chosen = book.reserve(name)
        except BaseException:
            if counted:
                self.budgets.release_child(parent)
            raise
        if profile is not None:
            self._pending[(parent.id, chosen)] = profile
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
            profile=profile,
            model_spec=model_spec or _own_model(definition) or self.model_specs.get(parent.id),
            counted=counted,
            output_schema=output_schema,
            requested_cwd=cwd or None,
            call_id=call_id,
        )

    def _check_depth(self, parent: Agent, depth: int, max_depth: int | None) -> None:
        """Refuse a child deeper than the call's or the subtree's cap (`DEPTH_EXCEEDED`)."""
        parent_profile = self.profiles.get(parent.id)
        cap = parent_profile.depth_cap if parent_profile is not None else None
        if cap is not None and (max_depth is None or cap < max_depth):
            max_depth = cap
        if max_depth is not None and depth > max_depth:
            raise SubagentError(
                f"subagent depth {depth} exceeds maxDepth {max_depth}; carry out the work "
                "directly instead of delegating",
                code=ErrorCode.DEPTH_EXCEEDED,
                depth=depth,
                max_depth=max_depth,
            )

    def _check_filter(self, parent: Agent, requested_filter: ToolFilter) -> None:
        """Refuse a tool filter naming tools neither the runtime nor the parent has."""
        named = sorted((requested_filter.allow or frozenset()) | requested_filter.deny)
        missing = [
            t for t in named if self.runtime.tools.get(t) is None and parent.tools.get(t) is None
        ]
        if missing:
            raise SubagentError(
                f"tool filter names unknown tools: {', '.join(missing)}",
                code=ErrorCode.USAGE,
            )

    def _narrowing(
        self, parent: Agent, definition: AgentDefinition | None, depth: int
    ) -> AgentProfile | None:
        """The child's profile: its definition's scope, else the parent's; its depth cap."""
        inheritable: set[str] = set()
        if definition is not None:
            shared = set(self.runtime.tools.names())
            own = {spec.name for spec in parent.tools.visible()}
            check_definition_tools(definition, shared | own)
            inheritable = shared & own  # what a child can inherit from this parent
        parent_profile = self.profiles.get(parent.id)
        return child_profile(parent_profile, definition, parent_tools=inheritable, depth=depth)

    def _provider_for(
        self,
        name: str,
        *,
        max_depth: int | None,
        tool_filter: ToolFilter | None,
        output_schema: bool = False,
    ) -> SubagentProvider:
        """The provider, if it can enforce what this start needs."""
        provider = self._providers.get(name)
        if provider is None:
            raise SubagentError(
                f'no subagent provider registered for "{name}"', code=ErrorCode.NO_PROVIDER
            )
        requested: list[Capability] = []
        if output_schema:
            requested.append("output_schema")
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
        return provider

    def cancel(self, admission: Admission) -> None:
        """Give back what `admit` reserved (name, pending profile, budget count)."""
        self._pending.pop((admission.parent.id, admission.name), None)
        self.name_book(admission.parent).release(admission.name)
        if admission.counted:
            self.budgets.release_child(admission.parent)

    async def check_cwd(self, admission: Admission) -> Admission:
        """The admission with its cwd canonical (its workspace root; symlinks resolved).

        A cwd outside the parent's workspace is refused (`CWD_OUTSIDE_WORKSPACE`) unless the
        parent runs under `danger-full-access`; one that is not an accessible directory is
        refused (`INVALID_CWD`). The caller gives the admission back (`cancel`) on a refusal.
        """
        parent = admission.parent
        if admission.cwd == parent.session.header.cwd:
            return admission
        # The runtime decides (it knows the parent's file policy), off the event loop.
        canonical = await self.runtime.child_cwd(
            parent, admission.cwd, asked=admission.requested_cwd
        )
        return msgspec.structs.replace(admission, cwd=canonical)

    async def open_model(self, admission: Admission) -> Model:
        """The child's model: its definition's (opened once per runtime), else its parent's."""
        if admission.model_spec is None:
            return admission.parent.model
        try:
            return await self.runtime.model_for(admission.model_spec)
        except SubagentsError as exc:
            definition = admission.profile.definition if admission.profile else None
            asker = f'agent definition "{definition.name}"' if definition else "the caller"
            raise SubagentError(
                f'{asker} asks for model "{admission.model_spec}", which cannot be opened: '
                f"{exc.message}",
                code=exc.code,
            ) from exc

    async def launch(self, admission: Admission, *, here: bool = False) -> ServiceRun:
        """Start an admitted one-shot child and give it its prompt.

        The name is released if anything fails before the child exists; a child that exists
        but cannot take its prompt is killed. `here`: the task that will `wait` runs the
        child's turns itself (when it is an agent of this runtime), for a caller that does
        nothing but wait for it.
        """
        book = self.name_book(admission.parent)
        parent = admission.parent
        try:
            # Most children work where their parent does, on its model: no await for those.
            if admission.cwd != parent.session.header.cwd:
                admission = await self.check_cwd(admission)
            model = (
                parent.model if admission.model_spec is None else await self.open_model(admission)
            )
            child = await admission.provider.start(
                StartRequest(
                    parent=parent,
                    cwd=admission.cwd,
                    config=self._config_for(admission),
                    descriptor=descriptor_for(admission, mode="one-shot"),
                    tool_filter=admission.tool_filter,
                )
            )
        except BaseException:
            self.cancel(admission)
            raise
        schema = output_schema(admission)
        try:
            structured = self._establish(admission, child, model, schema)
            host = child.local_agent if here else None
            if host is None:
                await child.send(user_message(admission.prompt), durable=False)
            else:  # its turn starts when `wait` runs it
                await host.send(user_message(admission.prompt), durable=False, wake=False)
        except BaseException:
            try:
                await child.kill()
            finally:
                if not book.committed(admission.name):
                    self.cancel(admission)
            raise
        started = SubagentStarted(
            run_id=self.next_run_id(),
            provider=admission.provider.name,
            child_id=child.id,
            name=admission.full_name,
            parent_id=parent.id,
            local=child.local_agent is not None,
        )
        self.emit(started)
        return ServiceRun(self, child, started, schema, structured, host=host)

    def _establish(
        self,
        admission: Admission,
        child: SubagentChild,
        model: Model,
        schema: JsonObject | None,
    ) -> StructuredCapture | None:
        """Record a new one-shot child in its creator's catalog and ready it for its prompt.

        The catalog entry commits the name. A child of this runtime gets its model, budget
        and structured-output tool here, before its first call.
        """
        parent = admission.parent
        parent.record(
            SubagentCatalog(
                child_id=child.id,
                name=admission.name,
                mode="one-shot",
                provider=admission.provider.name,
                label=admission.label,
                created_at=self.runtime.clock.now(),
                call_id=admission.call_id,
            )
        )
        self.name_book(parent).commit(admission.name)
        profile = self.adopt(parent.id, admission.name, child.id)
        if admission.model_spec is not None:
            self.model_specs[child.id] = admission.model_spec
        agent = child.local_agent
        if agent is None:
            return None
        agent.model = model
        self.budgets.attach(agent, profile.budget if profile is not None else None, parent=parent)
        if schema is None:
            return None
        structured = StructuredCapture(schema, delegated_work=self.delegated_work)
        structured.install(agent)
        return structured
