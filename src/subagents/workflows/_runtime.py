"""`Runtime`: the whole runtime users embed, delegation plus the `workflow` tool.

The delegation runtime (`subagents.delegation.DelegationRuntime`) sits a layer below workflows,
so the composition that offers both lives here and is what `subagents.Runtime` names.
"""

from __future__ import annotations

from typing import Self, Unpack

from ..delegation import DelegationRuntime, RuntimeOptions
from ..errors import ClosedError
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
    (defaults: 16 children at once, 200 in all, 600 s per run); the other options are
    `DelegationRuntime`'s.
    """

    def __init__(
        self,
        *,
        workflow_options: WorkflowOptions | None = None,
        workflow_tool: WorkflowToolConfig | None = None,
        **options: Unpack[RuntimeOptions],
    ) -> None:
        super().__init__(**options)
        self._workflow_options = workflow_options
        self._workflow_tool = workflow_tool
        self._engine: WorkflowEngine | None = None

    @property
    def workflows(self) -> WorkflowEngine:
        """The workflow engine (live runs, their events); there once the runtime is entered."""
        if self._engine is None:
            raise ClosedError("the workflow engine exists only inside `async with Runtime(...)`")
        return self._engine

    async def __aenter__(self) -> Self:
        await super().__aenter__()
        self._engine = mount_workflow_tool(self, self._workflow_options, config=self._workflow_tool)
        return self

    async def before_close(self) -> None:
        # Live runs are disposed (scripts killed, children released) before the agents go.
        if self._engine is not None:
            await self._engine.aclose()
        await super().before_close()
