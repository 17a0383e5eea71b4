"""`runtime_for`: the one place the command line builds a runtime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..core import Budget
from ..definitions import AgentDefinition
from ..delegation import DelegationOptions
from ..models import Model, ScriptedModel
from ..policy import SandboxMode
from ..tools import ToolSpec
from ..workflows import Runtime
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
) -> Runtime:
    """The one place the command line builds a runtime.

    Without a model nothing may run (an interrupt only closes what a crash left open), so a
    script with no responses stands in. Without definitions the runtime reads the tenant's
    files itself, off the event loop, as it enters.
    """
    return Runtime(
        model=model if model is not None else ScriptedModel({}),
        store=open_store(store),
        tools=tools,
        tenant=tenant,
        cwd=cwd,
        model_spec=model_spec,
        sandbox=sandbox,
        delegation=DelegationOptions(definitions=definitions, budget=budget, max_tokens=max_tokens),
        approval=approval,
    )
