"""`DelegationRuntime`: the agent runtime with delegation (providers, tools and tasks)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Self, cast

from .._clock import Clock
from ..core import (
    Agent,
    AgentConfig,
    AgentRuntime,
    ApprovalPolicy,
    RunResult,
    lease_alive,
    run_result,
)
from ..definitions import (
    AgentDefinition,
    DefinitionProblem,
    aload_definitions,
    check_definitions_folder,
    load_definitions_folder,
    subagents_home,
)
from ..errors import (
    ErrorCode,
    LeaseHeld,
    NotFoundError,
    SubagentError,
    UsageError,
)
from ..ids import SessionId, check_session_id
from ..models import Model
from ..names import ROOT_NAME
from ..policy import SandboxMode, SandboxPolicy, parse_mode
from ..sessions import (
    DECISION_KINDS,
    DEFAULT_CRASH_RETRIES,
    MAX_COMMAND_TEXT,
    CommandKind,
    EventStore,
    KnownOutcome,
    SessionHeader,
    SubagentDescriptor,
    encode_decision,
)
from ..tools import ToolSpec
from ..workspace import workspace_tools
from ._approvals import (
    PendingApproval,
    WaitNotices,
    check_decision,
    decide_here,
    definition_gates,
    list_approvals,
    offer_approve_tool,
    stored_request,
)
from ._background import TaskRegistry
from ._budget_book import combined, with_budget
from ._commands import (
    COMMAND_TIMEOUT_SECONDS,
    CommandDesk,
    Placement,
    ask_holder,
    wait_for_answer,
)
from ._continuable import ContinuableManager
from ._mcp import McpOptions, McpTools
from ._modes import SandboxModes, store_files
from ._options import DelegationOptions
from ._providers import InProcessProvider, ToolFilter
from ._recovery import TreeRecovery
from ._scope import (
    DELEGATION_TAG,
    AgentProfile,
    check_definition_tools,
    child_profile,
    recorded_cap,
)
from ._service import Admission, SubagentService, output_schema
from ._team_board import TeamBoards
from ._tree import TreeMember, check_takes_messages, find_member, list_tree, load_tree
from ._wording import (
    CONTEXT_ORDER,
    DELEGATION,
    FILE_POLICY,
    IDENTITY,
    LIMITS,
    RUNTIME_GUIDANCE,
    STRUCTURED_OUTPUT,
    delegation_statement,
    file_policy_statement,
    identity_statement,
    limits_statement,
    structured_instruction,
    told,
)
from .tools import (
    SubagentToolConfig,
    approve_request_tool,
    control_tools,
    mount_subagent_tool,
    report_tool,
    task_tools,
    team_tools,
)

__all__ = ["DelegationRuntime"]

log = logging.getLogger("subagents.definitions")


class DelegationRuntime(AgentRuntime):
    """Agents that delegate to named children; `subagents.Runtime` adds workflow scripts.

    ```python
    model = ScriptedModel.from_file("demo.yaml")
    async with DelegationRuntime(model=model, store="state.db") as rt:
        result = await rt.run("Review app.py")
    ```

    Every agent gets `subagent` (fresh context) and `subagent_fork` (inherits the completed
    turns), and the task tools for background children. The runtime owns its store and model.
    """

    def __init__(
        self,
        *,
        model: Model,
        store: EventStore | str | Path | None = None,
        tools: Iterable[ToolSpec] = (),
        clock: Clock | None = None,
        tenant: str = "default",
        cwd: str | Path | None = None,
        model_spec: str | None = None,
        delegation: DelegationOptions | None = None,
        model_factory: Callable[[str], Model] | None = None,
        sandbox: SandboxMode = "workspace-write",
        workspace_tools: bool = True,
        crash_retries: int = DEFAULT_CRASH_RETRIES,
        approval: ApprovalPolicy | str | Iterable[str] | None = None,
        approval_timeout: float | None = None,
        mcp: McpOptions | None = None,
    ) -> None:
        super().__init__(
            model=model,
            store=store,
            tools=tools,
            clock=clock,
            tenant=tenant,
            cwd=cwd,
            model_spec=model_spec,
            model_factory=model_factory,
            crash_retries=crash_retries,
            approval=approval,
            approval_timeout=approval_timeout,
        )
        self.modes = SandboxModes(sandbox)
        self.mcp = McpTools(mcp, policy_of=self.modes.policy)
        """The MCP servers' tools: each agent's scope, and the servers shared behind them."""
        self._workspace_tools = workspace_tools
        self.delegation = delegation or DelegationOptions()
        self.subagents = SubagentService(
            self, config_for=self._child_config, delegated_work=self._delegated_work
        )
        self.tasks = TaskRegistry(
            self,
            capacity_per_owner=self.delegation.task_capacity,
            max_consecutive_wakes=self.delegation.max_consecutive_wakes,
        )
        self.continuable = ContinuableManager(
            self,
            self.subagents,
            config_for=self._resumed_config,
            setup=self._setup_continuable,
        )
        self.recovery = TreeRecovery(
            self,
            self.subagents,
            config_for=self._resumed_config,
            restore_scope=self._restore_scope,
            delegated_work=self._delegated_work,
        )
        self.teams = TeamBoards(self, self.subagents)
        self.commands = CommandDesk(self)
        self.command_patience = COMMAND_TIMEOUT_SECONDS
        """Seconds a command to a tree another live process holds may wait for it to take it
        (`HOLDER_UNREACHABLE` after that; the command stays pending)."""
        self._report = report_tool(self.continuable)
        self._approve = approve_request_tool(self)
        self.definition_problems: list[DefinitionProblem] = []
        """What was wrong with the definition files read on entry (each also logged)."""

    async def __aenter__(self) -> Self:
        folder = self.delegation.definitions_folder
        if folder is not None:
            await asyncio.to_thread(check_definitions_folder, folder)
        # Before the store opens: a server that cannot run leaves nothing behind.
        await self.mcp.check(str(self._cwd_arg) if self._cwd_arg is not None else None)
        await super().__aenter__()
        self.modes.hidden = await asyncio.to_thread(store_files, self.store)
        self._stack.push_async_callback(self.mcp.aclose)  # after the agents are released
        self._stack.push_async_callback(self.tasks.aclose)
        self._stack.push_async_callback(WaitNotices(self).aclose)
        options = self.delegation
        if options.definitions is None or options.definitions_folder is not None:
            await self.reload_definitions()
        elif isinstance(options.definitions, Mapping):
            self.subagents.set_definitions(options.definitions)
        self._register_tools(options)
        return self

    def _register_tools(self, options: DelegationOptions) -> None:
        """The built-in tools this runtime's options offer, and the delegation providers."""
        if self._workspace_tools:
            for spec in workspace_tools(
                lambda ctx: self.sandbox_policy(ctx.agent_id, grant=ctx.grant),
                cwd_for=lambda ctx: self.sandbox_policy(ctx.agent_id).workspace_root,
            ):
                self.tools.register(spec)
        if options.background and options.background_mode == "one-shot":
            # Only one-shot background children are tasks: elsewhere the tools could not
            # find anything, so they are not offered.
            for spec in task_tools(self.tasks):
                self.tools.register(spec)
        for spec in control_tools(self.continuable):
            self.tools.register(spec)
        if options.team_tools:
            for spec in team_tools(self.teams):
                self.tools.register(spec)
        instances = [("spawn", "subagent", False)]
        if options.fork_tool:
            instances.append(("fork", "subagent_fork", True))
        for provider, tool_name, inherits in instances:
            self.subagents.register_provider(
                InProcessProvider(self, name=provider, inherits_parent_context=inherits)
            )
            mount_subagent_tool(
                self.subagents,
                SubagentToolConfig(
                    provider=provider,
                    tool_name=tool_name,
                    background=options.background,
                    background_mode=options.background_mode,
                    max_depth=options.max_depth,
                ),
                tasks=self.tasks,
                continuable=self.continuable,
            )

    @property
    def definitions(self) -> Mapping[str, AgentDefinition]:
        """The agent definitions in use, by name."""
        return self.subagents.definitions

    async def reload_definitions(self) -> list[DefinitionProblem]:
        """Read the tenant's definition files again, off the event loop.

        With a folder in `DelegationOptions.definitions`, that folder is read instead. The
        delegation tools re-derive their wording. Returns (and logs) the problems found.
        """
        folder = self.delegation.definitions_folder
        if folder is not None:
            found, problems = await asyncio.to_thread(
                functools.partial(
                    load_definitions_folder, folder, aliases=self.delegation.model_aliases
                )
            )
        else:
            found, problems = await aload_definitions(
                self.cwd, subagents_home(), self.tenant, aliases=self.delegation.model_aliases
            )
        for problem in problems:
            log.warning("agent definition: %s", problem)
        self.definition_problems = problems
        self.subagents.set_definitions(found)
        return problems

    async def create_agent_from(self, definition: str | AgentDefinition) -> Agent:
        """Start a new root session (`lead`) running a definition.

        Its body is the lead's instructions, its tools scope the lead (never wider than the
        runtime's), its `max_depth` caps the tree. Nothing is created when it is refused.
        """
        if isinstance(definition, str):
            found = self.definitions.get(definition)
            if found is None:
                names = ", ".join(self.definitions) or "none are loaded"
                raise SubagentError(
                    f'unknown agent definition "{definition}"; the definitions are: {names}',
                    code=ErrorCode.UNKNOWN_DEFINITION,
                    definition=definition,
                )
            definition = found
        check_definition_tools(definition, set(self.tools.names()))
        own_model = None if definition.model in ("inherit", self.model_spec) else definition.model
        model = await self.model_for(own_model)
        profile = child_profile(None, definition, parent_tools=set(self.tools.names()), depth=0)
        agent = await super().create_agent(
            config=AgentConfig(
                instructions=definition.body,
                max_tokens=definition.max_tokens or self.delegation.max_tokens,
            )
        )
        agent.model = model
        if own_model is not None:
            self.subagents.model_specs[agent.id] = own_model
        tool_filter = profile.tool_filter if profile is not None else None
        budget = combined(self.delegation.budget, definition.budget)
        # Recorded in the root's own log, so a resumed root runs with the same scope.
        descriptor = SubagentDescriptor(
            mode="one-shot",
            provider="root",
            label=definition.name,
            agent_model=own_model,
            definition=definition.name,
            instructions=definition.body,
            max_tokens=definition.max_tokens,
            tools_allow=(
                tuple(sorted(tool_filter.allow))
                if tool_filter is not None and tool_filter.allow is not None
                else None
            ),
            depth_cap=profile.depth_cap if profile is not None else None,
        )
        agent.record(with_budget(descriptor, budget))
        self.add_gates(agent, definition.approval)
        if profile is not None:
            self.subagents.profiles[agent.id] = profile
            _apply(agent, profile.tool_filter)
        self.subagents.budgets.attach(agent, budget, parent=None)
        self.commands.ready.add(agent.id)
        return agent

    async def create_agent(self, *, config: AgentConfig | None = None) -> Agent:
        """Start a new root session (`lead`); the run's budget, if any, is recorded in it.

        Without a cap of its own in `config`, it takes the runtime's (`max_tokens`).
        """
        config = config or AgentConfig()
        if config.max_tokens is None:
            config = dataclasses.replace(config, max_tokens=self.delegation.max_tokens)
        agent = await super().create_agent(config=config)
        budget = combined(self.delegation.budget, None)
        if budget is not None:
            agent.record(
                with_budget(
                    SubagentDescriptor(mode="one-shot", provider="root", label="lead"), budget
                )
            )
        self.subagents.budgets.attach(agent, budget, parent=None)
        self.commands.ready.add(agent.id)
        return agent

    async def resume_agent(
        self,
        session_id: SessionId | str,
        *,
        config: AgentConfig | None = None,
        retry_cut_turn: bool = True,
    ) -> Agent:
        """Load a stored session; its budget continues from what its subtree's logs used."""
        existing = self.get_agent(session_id)
        agent = await super().resume_agent(session_id, config=config, retry_cut_turn=retry_cut_turn)
        if agent is not existing:
            await self._restore_model(agent)
            await self.subagents.budgets.restore(agent)
        return agent

    async def _restore_model(self, agent: Agent) -> None:
        """A resumed agent runs the model its descriptor recorded (a definition's, say)."""
        records = agent.session.records[agent.session.header.seed_length :]
        spec = next(
            (r.event.agent_model for r in records if isinstance(r.event, SubagentDescriptor)),
            None,
        )
        if spec is not None:
            agent.model = await self.model_for(spec)
            self.subagents.model_specs[agent.id] = spec

    def recovered_outcomes(self, session_id: SessionId) -> Mapping[str, KnownOutcome]:
        """The answers of foreground children re-run after a crash (see `resume_tree`)."""
        return self.recovery.outcomes_for(session_id)

    async def resume_tree(self, root_id: SessionId | str) -> Agent:
        """Resume a stored tree after a restart, so the work a crash cut off finishes.

        Child-first: its cut-off one-shot members run again and their answers reach their
        creators; then the root is resumed (its cut-off turn queued to run again, with its
        foreground children's real answers) and every continuable member left unsettled is
        reactivated. Returns the root's agent; `wake()` it (or give it a prompt) and wait
        for quiescence.
        """
        header = await self._root(root_id)
        await self.hold(header.id)
        self.commands.deciding.add(header.id)  # a recovered child may wait for a decision
        try:
            await self.recovery.recover(header)
            # What others asked of the tree while no one could take it: an interrupt first, so
            # the turn it stops is closed instead of run again; messages once members load.
            await self.control.serve_now(
                lambda: self.commands.serve([header.id], kinds={"interrupt"})
            )
            agent = await self.resume_agent(header.id)
            await self.continuable.resume_unsettled(header)
            self.commands.ready.add(header.id)
        finally:
            self.commands.deciding.discard(header.id)
        await self.control.serve_now()
        return agent

    takes_commands = True

    async def serve_commands(self) -> None:
        await self.commands.serve()

    # -- verbs on a stored tree --------------------------------------------------------------

    async def resume(self, root: SessionId | str, prompt: str | None = None) -> RunResult:
        """Resume a stored tree and run it until quiescent: the lead's result.

        The work a crash cut off finishes first (`resume_tree`); then the lead takes `prompt`,
        or runs the input already pending. When nothing ran, the result says where the lead
        stands (its last turn).
        """
        if prompt is not None and not prompt.strip():
            raise UsageError(
                "the prompt must not be empty; omit it to only run pending input",
                code=ErrorCode.USAGE,
            )
        header = await self._root(root)
        first = len(await self.store.read(header.id, tenant=self.tenant))
        lead = await self.resume_tree(header.id)
        if prompt is not None:
            await lead.followup(prompt)
        else:
            lead.wake()
        await self.wait_quiescent()
        records = await self.read_log(lead.id)
        result = run_result(lead.id, records[first:])
        return result if result.stop_reason is not None else run_result(lead.id, records)

    async def send(self, root: SessionId | str, name: str, message: str) -> RunResult:
        """Message any member of a stored tree by full name, as the user; run until quiescent.

        The whole tree resumes, so work a crash cut off finishes and every notice is taken
        in. Returns the member's result for the turns the message started. A one-shot child
        cannot take messages (`NOT_RESUMABLE`). A tree another live process holds takes the
        message there (see `steer`); this waits for the member's answer in the store.
        """
        header, target = await self._addressed(root, name, message)
        if header.id not in self.commands.ready and await self._held_elsewhere(header):
            outcome = await self._ask(header, target, "send", message)
            records = None
            if header.id not in self.commands.ready:  # else its holder died: it runs here
                records = await wait_for_answer(
                    self, header, target, outcome, name=name.strip("/"), take_over=self._take_over
                )
            if records is None:
                await self.wait_quiescent()
                records = await self.read_log(target.id)
            return run_result(target.id, records[int(outcome["first"]) :])
        if header.id in self.commands.ready:  # running here: deliver as the holder does
            await self.hold(header.id)
            lead = self.get_agent(header.id) or await self.resume_agent(header.id)
        else:
            lead = await self.resume_tree(header.id)
        if target.parent is None:
            first = lead.session.next_seq
            await lead.followup(message)
        else:
            lead.wake()  # loaded, so its child's settlement notice is taken in, not queued
            act, _, _ = await self.continuable.deliver_as_user(target.id, message)
            first = act.epoch_start
        await self.wait_quiescent()
        return run_result(target.id, (await self.read_log(target.id))[first:])

    async def steer(self, root: SessionId | str, name: str, message: str) -> Placement:
        """Enter `message` into a member's running turn at its next step, as the user.

        Returns `joined` when it joined the turn running now, `next-turn` when the member
        was not running (it starts a turn with it). Works the same on a tree this runtime
        works, one another live process holds (the command is written to the store and that
        process executes it, within milliseconds) and a stored one (this runtime resumes it,
        and runs it until quiescent).
        """
        header, target = await self._addressed(root, name, message)
        if header.id not in self.commands.ready and await self._held_elsewhere(header):
            outcome = await self._ask(header, target, "steer", message)
            if header.id in self.commands.ready:  # its holder had died: the tree runs here now
                await self.wait_quiescent()
            return cast("Placement", outcome["placement"])
        quiet = header.id not in self.commands.ready
        if quiet:
            await self.resume_tree(header.id)
        if target.parent is None:
            lead = self.get_agent(header.id) or await self.resume_agent(header.id)
            joined = lead.takes_steering
            await lead.steer(message)
        else:
            _, _, joined = await self.continuable.deliver_as_user(target.id, message, steer=True)
        if quiet:
            await self.wait_quiescent()
        return "joined" if joined else "next-turn"

    async def _addressed(
        self, root: SessionId | str, name: str, message: str
    ) -> tuple[SessionHeader, SessionHeader]:
        """The tree and the member a message is for; refused before anything is written."""
        given = cast("object", message)  # what callers pass is not type-checked
        if not isinstance(given, str) or not given.strip():
            raise UsageError("the message must not be empty", code=ErrorCode.USAGE)
        if len(given) > MAX_COMMAND_TEXT:
            raise UsageError(
                f"the message is longer than {MAX_COMMAND_TEXT} characters", code=ErrorCode.USAGE
            )
        header = await self._root(root)
        target = await find_member(self.store, header, name)
        check_takes_messages(await list_tree(self.store, header), target.id)
        return header, target

    async def _ask(
        self,
        header: SessionHeader,
        target: SessionHeader,
        kind: CommandKind,
        text: str | None,
        *,
        take_over: Callable[[SessionHeader], Awaitable[None]] | None = None,
        body: bytes | None = None,
    ) -> dict[str, Any]:
        """Have the live process holding the tree execute a command (see `ask_holder`)."""
        return await ask_holder(
            self,
            header,
            target,
            kind,
            text,
            take_over=take_over or self._take_over,
            patience=self.command_patience,
            body=body,
        )

    async def _held_elsewhere(self, header: SessionHeader) -> bool:
        """Whether another live process holds the tree and takes commands (else: held here).

        A holder that records no control address (an older build) cannot be reached: its
        `LeaseHeld` stands, and nothing is written.
        """
        lease = await self.store.get_lease(header.id)
        if (
            lease is not None
            and lease.holder != self.holder
            and lease.address is not None
            and lease_alive(lease, now=time.time())
        ):
            return True  # a read, not a write: taking the lease would only be refused
        try:
            await self.hold(header.id)
        except LeaseHeld:
            lease = await self.store.get_lease(header.id)
            if lease is None or lease.address is None:
                raise
            return True
        return False

    async def _take_over(self, header: SessionHeader) -> None:
        """The holder died: hold the tree here and run what it left, commands included."""
        if header.id not in self.commands.ready:
            lead = await self.resume_tree(header.id)
            lead.wake()

    async def _take_over_to_stop(self, header: SessionHeader) -> None:
        """The holder died: hold the tree here and stop what was asked, running nothing.

        Only interrupts run; messages left pending wait for the next process that runs the
        tree (an interrupt needs no model, and this process may have none).
        """
        await self.hold(header.id)
        await self.control.serve_now(lambda: self.commands.serve([header.id], kinds={"interrupt"}))

    # -- approvals ---------------------------------------------------------------------------

    async def approvals(self, root: SessionId | str | None = None) -> list[PendingApproval]:
        """The approval requests waiting in one tree (or in every tree of this tenant)."""
        roots = (
            [await self._root(root)]
            if root is not None
            else await self.store.list_headers(tenant=self.tenant, roots_only=True)
        )
        return await list_approvals(self, roots)

    async def approve(
        self, root: SessionId | str, name: str, call_id: str | None = None, *, by: str = "api"
    ) -> dict[str, Any]:
        """Approve a member's waiting call (its only one when `call_id` is None): it runs.

        Works on a tree held here, by another live process (through its control channel) or
        by none (recorded; the call runs when the tree is resumed). Raises `SubagentError`:
        `NOT_FOUND`, `ALREADY_DECIDED`, `NO_PENDING_REQUEST`, `AMBIGUOUS_REQUEST`.
        """
        return await self._decide(root, name, call_id, approved=True, by=by, reason=None)

    async def deny(
        self,
        root: SessionId | str,
        name: str,
        call_id: str | None = None,
        *,
        reason: str | None = None,
        by: str = "api",
    ) -> dict[str, Any]:
        """Deny a member's waiting call: its model reads `reason` as the call's error result."""
        return await self._decide(root, name, call_id, approved=False, by=by, reason=reason)

    async def _decide(
        self,
        root: SessionId | str,
        name: str,
        call_id: str | None,
        *,
        approved: bool,
        by: str,
        reason: str | None,
    ) -> dict[str, Any]:
        reason, by = check_decision(call_id, by, reason)
        header = await self._root(root)
        target = await find_member(self.store, header, name)
        if header.id not in self.commands.ready and await self._held_elsewhere(header):
            # Checked against the stored log first (a refusal leaves no command behind); the
            # command names its call.
            request = await stored_request(self.store, target, call_id, name=name.strip("/"))
            call_id = request.call_id
            body = encode_decision(call_id, by=by, reason=reason)
            kind: CommandKind = "approve" if approved else "deny"
            return await self._ask(
                header, target, kind, None, take_over=self._take_over_to_decide, body=body
            )
        return await decide_here(self, target, call_id, approved=approved, by=by, reason=reason)

    async def _take_over_to_decide(self, header: SessionHeader) -> None:
        """The holder died: hold the tree here and record the decisions asked, running nothing."""
        await self.hold(header.id)
        await self.control.serve_now(lambda: self.commands.serve([header.id], kinds=DECISION_KINDS))

    def own_gates(self, agent: Agent) -> ApprovalPolicy:
        return definition_gates(agent)

    async def interrupt(self, root: SessionId | str, name: str) -> bool:
        """Stop a member of a tree by full name; True when a turn was stopped.

        A member this runtime runs (an agent here, or a child a provider runs elsewhere) has
        its turn cancelled and keeps its queue; a stored one whose turn a crash left open has
        that turn closed as interrupted, not run again. In a tree another live process holds,
        that process stops it (the command goes through the store).
        """
        header = await self._root(root)
        target = await find_member(self.store, header, name)
        if header.id not in self.commands.ready and await self._held_elsewhere(header):
            outcome = await self._ask(
                header, target, "interrupt", None, take_over=self._take_over_to_stop
            )
            return bool(outcome["interrupted"])
        return await self.stop_member(target)

    async def stop_member(self, target: SessionHeader, *, command: int | None = None) -> bool:
        """Stop one member of a tree held here; True when a turn was stopped.

        `command` is the control command asking for it, recorded with the stopped turn's end
        where an agent of this process runs it.
        """
        act = self.continuable.get(target.id)
        if act is not None and act.closing:
            await act.released.wait()  # being released: what it leaves is stored
        elif act is not None:
            agent = act.child.local_agent
            running = act.child.running
            if agent is not None:
                await agent.cancel("user", keep_inbox=True, command=command)
            else:
                await self.continuable.interrupt_any(target.id)
            return running
        live = self.get_agent(target.id)
        if live is not None:
            running = live.status == "running"
            await live.cancel("user", keep_inbox=True, command=command)
            return running
        child = self.subagents.running_child(target.id)
        if child is not None:  # a one-shot child running elsewhere
            running = child.running
            await child.interrupt()
            return running
        before = len(await self.store.read(target.id, tenant=self.tenant))
        agent = await self.resume_agent(target.id, retry_cut_turn=False)
        closed = agent.session.next_seq > before
        await agent.dispose(keep_inbox=True)
        return closed

    async def tree(self, root: SessionId | str) -> list[TreeMember]:
        """The members of a tree in pre-order, as its log says now."""
        header = await self._root(root)  # which makes what this process wrote durable
        return await load_tree(self.store, header)

    async def _root(self, root: SessionId | str) -> SessionHeader:
        """The header of the root session `root` (a child's id is refused: `USAGE`).

        What this runtime wrote is durable first, so that the names and members the caller
        looks up next in the store include its own latest (a child it just started, say).
        """
        root = check_session_id(root)
        await self.store.flush()
        header = await self.store.get_header(root, tenant=self.tenant)
        if header.parent is not None:
            raise UsageError(
                f"{header.id} is a child session; give its tree's root {header.root_id}",
                code=ErrorCode.USAGE,
            )
        return header

    def release_agent(self, agent: Agent) -> None:
        """Forget a released agent's file policy and MCP scope: a reload reads them again."""
        self.modes.forget(agent.id)
        self.mcp.forget(agent.id)

    def setup_agent(self, agent: Agent) -> None:
        """Fix a new agent's file policy; give a resumed definition root its recorded scope."""
        agent.prepare = self._settle_in  # which also says its file policy
        self.modes.fix(agent)
        offer_approve_tool(self, agent, self._approve)
        header = agent.session.header
        if header.parent is not None or agent.id in self.subagents.profiles:
            return
        descriptor = next(
            (r.event for r in agent.session.records if isinstance(r.event, SubagentDescriptor)),
            None,
        )
        if descriptor is None:
            return
        allow = frozenset(descriptor.tools_allow) if descriptor.tools_allow is not None else None
        profile = AgentProfile(
            tool_filter=ToolFilter(allow=allow, deny=frozenset(descriptor.tools_deny)),
            depth_cap=descriptor.depth_cap,
            instructions=descriptor.instructions,
            max_tokens=descriptor.max_tokens,
        )
        self.subagents.profiles[agent.id] = profile
        if descriptor.instructions is not None:
            agent.config = dataclasses.replace(agent.config, instructions=descriptor.instructions)
        _apply(agent, profile.tool_filter)

    def set_max_tokens(self, agent: Agent, cap: int | None) -> None:
        """Cap each model response of `agent` from its next call on, and tell it so."""
        super().set_max_tokens(agent, cap)
        self._tell_limits(agent)

    def _tell_limits(self, agent: Agent) -> None:
        """Say the agent's limits (its subtree's budget, its response cap) in its context."""
        ledger = agent.ledger
        limits = ledger.limits.describe() if ledger is not None else None
        stated = limits_statement(limits or None, agent.config.max_tokens)
        context = agent.config.context
        if stated is not None:
            agent.config = told(agent.config, LIMITS, stated)
        elif any(topic == LIMITS for topic, _ in context):
            agent.config = dataclasses.replace(
                agent.config, context=tuple(c for c in context if c[0] != LIMITS)
            )

    def _tell_file_policy(self, agent: Agent) -> None:
        """Say the agent's current file policy in its instructions (spec: sandbox:policy).

        The paragraph is replaced in place on a switch, so the next request says the new mode.
        """
        statement = file_policy_statement(self.modes.of(agent.id), agent.session.header.cwd)
        agent.config = told(agent.config, FILE_POLICY, statement)

    def sandbox_policy(self, agent_id: str, *, grant: str | None = None) -> SandboxPolicy:
        """The file policy an agent's tools run under now (`grant`: a call's escalation)."""
        agent = self.get_agent(agent_id)
        if agent is None:
            raise NotFoundError(f"no live agent {agent_id}", code=ErrorCode.NOT_FOUND)
        return self.modes.policy(agent, grant=grant)

    def confines_children(self, parent: Agent) -> bool:
        """A child's cwd stays inside its parent's workspace unless the parent is unconfined.

        Under `danger-full-access` the parent itself may touch any path, so there is no
        boundary a child's workspace could widen.
        """
        return self.modes.of(parent.id) != "danger-full-access"

    def set_sandbox_mode(self, agent: Agent, mode: SandboxMode) -> None:
        """Switch a live agent's file policy (recorded; its next confined call uses it).

        A child can only narrow: a mode wider than its parent's is refused (`USAGE`).
        """
        self.modes.switch(agent, mode)
        self._tell_file_policy(agent)

    @property
    def sandbox(self) -> SandboxMode:
        """The file policy of new roots (children take their parent's)."""
        return self.modes.default

    @sandbox.setter
    def sandbox(self, mode: SandboxMode) -> None:
        self.modes.default = parse_mode(mode)

    async def before_close(self) -> None:
        # Continuable children are released child-first, without notices, keeping their
        # pending input: the tree stays resumable from the log.
        await self.continuable.aclose()

    def _setup_continuable(self, agent: Agent) -> None:
        header = agent.session.header
        profile = None
        if header.parent is not None:
            local = agent.name.rsplit("/", 1)[-1]
            profile = self.subagents.adopt(header.parent, local, agent.id)
            if profile is not None:  # a new child (a resumed one got its ledger on resume)
                self.subagents.budgets.attach(
                    agent, profile.budget, parent=self.get_agent(header.parent)
                )
        self._restore_scope(agent, profile)
        agent.tools.register(self._report)

    def _restore_scope(self, agent: Agent, profile: AgentProfile | None = None) -> None:
        """Give a child the instructions and tools of its profile (given, else recorded)."""
        profile = profile or self.subagents.profiles.get(agent.id)
        if profile is not None:
            # Before the child's first request: its instructions and scope come from its
            # profile (definition, inherited scope, depth cap), at start and on a resume.
            agent.config = self._compose(
                agent.config, base=agent.config.instructions, profile=profile
            )
            _apply(agent, profile.tool_filter)

    def _resumed_config(self, full_name: str, depth: int) -> AgentConfig:
        """A stored child's config before its profile is restored (`_restore_scope`)."""
        del depth  # where it stands is told before its first call (`_settle_in`)
        return AgentConfig(name=full_name)

    def _child_config(self, admission: Admission) -> AgentConfig:
        """A new one-shot child's config: its parent's own instructions and loop limits."""
        parent = admission.parent.config
        instructions, cap = _own(parent.instructions, parent.max_tokens, admission.profile)
        config = AgentConfig(
            name=admission.full_name,
            instructions=instructions,
            max_parallel_tools=parent.max_parallel_tools,
            max_tokens=cap,
        )
        if output_schema(admission) is not None:
            config = told(config, STRUCTURED_OUTPUT, structured_instruction())
        return config

    def _delegated_work(self, agent: Agent) -> bool:
        """Whether `agent` has children still working (background tasks or continuables)."""
        if any(not record.terminal for record in self.tasks.list(agent.id)):
            return True
        return any(
            act.parent_id == agent.id and (act.child.running or act.child.pending)
            for act in self.continuable.resident()
        )

    def _compose(
        self, config: AgentConfig, *, base: str, profile: AgentProfile | None
    ) -> AgentConfig:
        """`config` with a child's own instructions and response cap (see `_own`)."""
        instructions, cap = _own(base, config.max_tokens, profile)
        return dataclasses.replace(config, instructions=instructions, max_tokens=cap)

    def max_depth_of(self, agent: Agent) -> int | None:
        """The deepest `agent`'s subtree may reach: the runtime's cap, or its profile's."""
        max_depth = self.delegation.max_depth
        profile = self.subagents.profiles.get(agent.id)
        cap = profile.depth_cap if profile is not None else None
        if cap is not None and (max_depth is None or cap < max_depth):
            max_depth = cap
        return max_depth

    def _settle_in(self, agent: Agent) -> None:
        """Before an agent's first call: what it is told of where it stands, what it is offered.

        Its profile, budget and tools are bound by then, whichever way it started (a root, a
        one-shot or continuable child, a resume, a recovery). The runtime context says who it
        is, where it works, its file policy, how deep it may delegate and its limits; an agent
        that may not delegate any deeper is not offered the delegation tools at all.
        """
        header = agent.session.header
        profile = self.subagents.profiles.get(agent.id)
        max_depth = self.max_depth_of(agent)
        parent = None
        if header.parent is not None:
            parent = agent.name.rpartition("/")[0] or ROOT_NAME
        identity = identity_statement(full_name=agent.name, parent=parent)
        statement = delegation_statement(
            child=parent is not None, depth=header.depth, max_depth=max_depth, cwd=header.cwd
        )
        policy = file_policy_statement(self.modes.of(agent.id), header.cwd)
        config = agent.config
        changes: dict[str, Any] = {
            "context": config.context_saying(
                ((IDENTITY, identity), (DELEGATION, statement), (FILE_POLICY, policy)),
                order=CONTEXT_ORDER,
            ),
            "preamble": RUNTIME_GUIDANCE,
        }
        if config.max_tokens is None:  # a resumed agent: the cap it recorded, else ours
            changes["max_tokens"] = recorded_cap(profile) or self.delegation.max_tokens
        agent.config = dataclasses.replace(config, **changes)  # one new config, not three
        self._tell_limits(agent)
        self.mcp.settle(agent, profile.definition if profile is not None else None)
        if max_depth is not None and header.depth >= max_depth:
            agent.tools.hide({DELEGATION_TAG})


def _own(base: str, cap: int | None, profile: AgentProfile | None) -> tuple[str, int | None]:
    """A child's own instructions and response cap.

    Its definition's body (else the instructions it was started with, else `base`), and its
    definition's cap (else `cap`, the one it inherited).
    """
    if profile is not None:
        if profile.definition is not None:
            return profile.definition.body, profile.definition.max_tokens or cap
        if profile.instructions is not None:
            return profile.instructions, cap
    return base, cap


def _apply(agent: Agent, tool_filter: ToolFilter | None) -> None:
    if tool_filter is not None:
        agent.tools.restrict(allow=tool_filter.allow, deny=tool_filter.deny)
