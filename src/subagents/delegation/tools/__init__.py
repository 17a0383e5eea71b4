"""The model-facing delegation tools.

`subagent` (and `subagent_fork`), the control tools, the background-task tools,
`read_transcript` (one of the control tools) and the team task tools; the delegation runtime
mounts them on every agent.
"""

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
    "calling_agent",
    "control_tools",
    "foreground_outcome",
    "mount_subagent_tool",
    "report_tool",
    "task_tools",
    "team_tools",
]
