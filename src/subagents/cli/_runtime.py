"""`runtime_for`: the one place the command line builds a runtime."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..config import Settings
from ..core import Budget
from ..definitions import AgentDefinition
from ..delegation import DelegationOptions, McpOptions
from ..models import Model, ScriptedModel
from ..policy import SandboxMode
from ..tools import ToolSpec
from ..workflows import Runtime, WorkflowOptions
from ._common import open_store

__all__ = ["runtime_for"]


def runtime_for(
    store: str | None,
    *,
    tenant: str,
    cwd: str | Path | None,
    model: Model | None = None,
    model_spec: str | None = None,
    definitions: Mapping[str, AgentDefinition] | None = None,
    sandbox: SandboxMode = "workspace-write",
    budget: Budget | None = None,
    tools: Sequence[ToolSpec] = (),
    max_tokens: int | None = None,
    approval: str | None = None,
    settings: Settings | None = None,
    mcp: McpOptions | None = None,
) -> Runtime:
    """The one place the command line builds a runtime.

    Without a model nothing may run (an interrupt only closes what a crash left open), so a
    script with no responses stands in. Without definitions the runtime reads the tenant's
    files itself, off the event loop, as it enters. `settings` give the aliases and the
    concurrency limits.
    """
    delegation = DelegationOptions(definitions=definitions, budget=budget, max_tokens=max_tokens)
    workflows = WorkflowOptions()
    if settings is not None:
        tasks = settings.int_of("concurrency", "background_tasks")
        agents = settings.int_of("concurrency", "workflow_agents")
        delegation = dataclasses.replace(
            delegation,
            model_aliases=settings.alias_map,
            task_capacity=delegation.task_capacity if tasks is None else tasks,
        )
        if agents is not None:
            workflows = dataclasses.replace(workflows, max_concurrent_agents=agents)
    return Runtime(
        model=model if model is not None else ScriptedModel({}),
        store=open_store(store),
        tools=tools,
        tenant=tenant,
        cwd=cwd,
        model_spec=model_spec,
        sandbox=sandbox,
        delegation=delegation,
        workflow_options=workflows,
        approval=approval,
        mcp=mcp,
    )
