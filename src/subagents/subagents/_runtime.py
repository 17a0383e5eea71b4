"""`Runtime`: the agent runtime with delegation: providers, the `subagent` tools and tasks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Self

from .._clock import Clock
from ..core import Agent, AgentConfig, AgentRuntime
from ..models import Model
from ..sessions import EventStore
from ..tools import ToolSpec
from ._continuable import ContinuableManager
from ._providers import InProcessProvider
from ._service import Admission, SubagentService
from ._tasks import TaskRegistry
from ._team import TeamBoards, team_tools
from ._tool_control import control_tools, report_tool
from ._tool_subagent import SubagentToolConfig, mount_subagent_tool
from ._tool_tasks import task_tools
from ._wording import delegation_statement

__all__ = ["DelegationOptions", "Runtime"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationOptions:
    """How agents of a runtime may delegate."""

    max_depth: int | None = 3
    """The deepest a child may be (the root is depth 0); None leaves it to the provider."""
    background: bool = True
    """Whether `run_in_background` is offered."""
    task_capacity: int = 10
    """Background tasks one agent may have running at once."""
    max_consecutive_wakes: int = 3
    """Task notices that may wake an idle agent in a row before they wait for its next turn."""
    fork_tool: bool = True
    """Offer `subagent_fork` beside `subagent`."""
    background_mode: Literal["continuable", "one-shot"] = "continuable"
    """What `run_in_background: true` starts: a continuable child (the default) or a
    one-shot background task collected with `task_output`."""
    team_tools: bool = True
    """Offer the shared team task board."""


class Runtime(AgentRuntime):
    """The runtime users embed: agents that delegate to named children.

    ```python
    async with Runtime(model=ScriptedModel.from_file("demo.yaml"), store="state.db") as rt:
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
    ) -> None:
        super().__init__(
            model=model,
            store=store,
            tools=tools,
            clock=clock,
            tenant=tenant,
            cwd=cwd,
            model_spec=model_spec,
        )
        self.delegation = delegation or DelegationOptions()
        self.subagents = SubagentService(self, instructions=self._child_instructions)
        self.tasks = TaskRegistry(
            self,
            capacity_per_owner=self.delegation.task_capacity,
            max_consecutive_wakes=self.delegation.max_consecutive_wakes,
        )
        self.continuable = ContinuableManager(
            self,
            self.subagents,
            instructions=self._resumed_instructions,
            setup=self._setup_continuable,
        )
        self.teams = TeamBoards(self, self.subagents)
        self._report = report_tool(self.continuable)

    async def __aenter__(self) -> Self:
        await super().__aenter__()
        self._stack.push_async_callback(self.tasks.aclose)
        options = self.delegation
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
        return self

    async def before_close(self) -> None:
        # Continuable children are released child-first, without notices, keeping their
        # pending input: the tree stays resumable from the log.
        await self.continuable.aclose()

    def _setup_continuable(self, agent: Agent) -> None:
        agent.tools.register(self._report)

    def _resumed_instructions(self, full_name: str, depth: int) -> str:
        statement = delegation_statement(
            full_name=full_name, depth=depth, max_depth=self.delegation.max_depth
        )
        return f"{AgentConfig().instructions}\n\n{statement}"

    def _child_instructions(self, admission: Admission) -> str:
        base = admission.parent.config.instructions.split("\n\nYou are the delegated subagent")[0]
        statement = delegation_statement(
            full_name=admission.full_name,
            depth=admission.depth,
            max_depth=self.delegation.max_depth,
        )
        return f"{base}\n\n{statement}"
