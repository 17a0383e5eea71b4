"""The model-facing delegation tools.

`subagent` (and `subagent_fork`), the control tools, the background-task tools,
`read_transcript` (one of the control tools), the team task tools and `approve_request`
(offered to the parent of a child that names it its approver); the delegation runtime
mounts them on every agent.
"""

from ._approve import approve_request_tool as approve_request_tool
from ._background_tasks import task_tools as task_tools
from ._control import control_tools as control_tools, report_tool as report_tool
from ._subagent import (
    SubagentToolConfig as SubagentToolConfig,
    calling_agent as calling_agent,
    foreground_outcome as foreground_outcome,
    mount_subagent_tool as mount_subagent_tool,
)
from ._team import team_tools as team_tools

__all__ = [
    "SubagentToolConfig",
    "approve_request_tool",
    "calling_agent",
    "control_tools",
    "foreground_outcome",
    "mount_subagent_tool",
    "report_tool",
    "task_tools",
    "team_tools",
]
