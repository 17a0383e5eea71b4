"""`Runtime`: the whole runtime users embed, delegation plus the `workflow` tool.

The delegation runtime (`subagents.delegation.DelegationRuntime`) sits a layer below workflows,
so the composition that offers both lives here and is what `subagents.Runtime` names.
"""

from __future__ import annotations

from typing import Self

from ..delegation import DelegationRuntime
from ._engine import WorkflowEngine, WorkflowOptions
from ._tool import WorkflowToolConfig, mount_workflow_tool

__all__ = ["Runtime"]


class Runtime(DelegationRuntime):
    """Agents that delegate to named children and orchestrate them with workflow scripts.

    ```python
    async with Runtime(model=ScriptedModel.from_file("demo.yaml"), store="state.db") as rt:
        result = await rt.run("Review app.py")
    ```

    Every agent gets `subagent` / `subagent_fork`, the task, control and team tools, the
    workspace tools (read_file, write_file, edit_file, glob, grep, bash) and `workflow`, each
    under the agent's sandbox mode. `workflow_options` and `workflow_tool` tune the engine
    (defaults: 16 children at once, 200 in all, 600 s per run).
    """

    workflow_options: WorkflowOptions | None = None
    workflow_tool: WorkflowToolConfig | None = None
    workflows: WorkflowEngine

    async def __aenter__(self) -> Self:
        await super().__aenter__()
        self.workflows = mount_workflow_tool(
            self,
            self.workflow_options,
            config=self.workflow_tool,
        )
        return self

    async def before_close(self) -> None:
        # Live runs are disposed (scripts killed, children released) before the agents go.
        engine = getattr(self, "workflows", None)
        if isinstance(engine, WorkflowEngine):
            await engine.aclose()
        await super().before_close()
