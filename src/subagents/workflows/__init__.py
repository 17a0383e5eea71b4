"""Workflows: model-written Python scripts that orchestrate many children, run confined.

`mount_workflow_tool(runtime)` gives a runtime's agents the `workflow` tool and returns its
`WorkflowEngine`; `WorkflowEngine.start` runs a script directly.
"""

from ._engine import (
    WorkflowEngine as WorkflowEngine,
    WorkflowOptions as WorkflowOptions,
    WorkflowRequest as WorkflowRequest,
    WorkflowRun as WorkflowRun,
)
from ._meta import PhaseMeta as PhaseMeta, WorkflowMeta as WorkflowMeta
from ._records import validate_workflow_records as validate_workflow_records
from ._reports import (
    AbortSignal as AbortSignal,
    AgentInfo as AgentInfo,
    WorkflowAgentEnded as WorkflowAgentEnded,
    WorkflowAgentStarted as WorkflowAgentStarted,
    WorkflowEnded as WorkflowEnded,
    WorkflowEvent as WorkflowEvent,
    WorkflowLogged as WorkflowLogged,
    WorkflowPhaseStarted as WorkflowPhaseStarted,
    WorkflowProcessStarted as WorkflowProcessStarted,
    WorkflowResult as WorkflowResult,
    WorkflowRunInfo as WorkflowRunInfo,
    WorkflowStarted as WorkflowStarted,
)
from ._runtime import Runtime as Runtime
from ._script_runtime import (
    GuestProcessRuntime as GuestProcessRuntime,
    RunFailure as RunFailure,
    RunOutcome as RunOutcome,
    RunSpec as RunSpec,
    ScriptRuntime as ScriptRuntime,
)
from ._tool import (
    WorkflowToolConfig as WorkflowToolConfig,
    mount_workflow_tool as mount_workflow_tool,
    workflow_tool as workflow_tool,
)

__all__ = [
    "AbortSignal",
    "AgentInfo",
    "GuestProcessRuntime",
    "PhaseMeta",
    "RunFailure",
    "RunOutcome",
    "RunSpec",
    "Runtime",
    "ScriptRuntime",
    "WorkflowAgentEnded",
    "WorkflowAgentStarted",
    "WorkflowEnded",
    "WorkflowEngine",
    "WorkflowEvent",
    "WorkflowLogged",
    "WorkflowMeta",
    "WorkflowOptions",
    "WorkflowPhaseStarted",
    "WorkflowProcessStarted",
    "WorkflowRequest",
    "WorkflowResult",
    "WorkflowRun",
    "WorkflowRunInfo",
    "WorkflowStarted",
    "WorkflowToolConfig",
    "mount_workflow_tool",
    "validate_workflow_records",
    "workflow_tool",
]
