"""Workflows: model-written Python scripts that orchestrate many children, run confined.

`mount_workflow_tool(runtime)` gives a runtime's agents the `workflow` tool and returns its
`WorkflowEngine`; `WorkflowEngine.start` runs a script directly.

Each name is imported from its module on first use (PEP 562), so that a CLI command pays only
for the modules it touches (startup time; see tests/cli/test_startup.py).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
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

# The module of each name (the imports above say the same for pyright).
_SOURCES = {
    "._engine": ("WorkflowEngine", "WorkflowOptions", "WorkflowRequest", "WorkflowRun"),
    "._meta": ("PhaseMeta", "WorkflowMeta"),
    "._records": ("validate_workflow_records",),
    "._reports": (
        "AbortSignal",
        "AgentInfo",
        "WorkflowAgentEnded",
        "WorkflowAgentStarted",
        "WorkflowEnded",
        "WorkflowEvent",
        "WorkflowLogged",
        "WorkflowPhaseStarted",
        "WorkflowProcessStarted",
        "WorkflowResult",
        "WorkflowRunInfo",
        "WorkflowStarted",
    ),
    "._runtime": ("Runtime",),
    "._script_runtime": (
        "GuestProcessRuntime",
        "RunFailure",
        "RunOutcome",
        "RunSpec",
        "ScriptRuntime",
    ),
    "._tool": ("WorkflowToolConfig", "mount_workflow_tool", "workflow_tool"),
}
__getattr__, __dir__ = lazy_names(__name__, globals(), _SOURCES)
