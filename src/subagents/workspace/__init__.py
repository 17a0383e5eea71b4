"""Built-in file and shell tools: read_file, write_file, edit_file, glob, grep and bash.

Each tool enforces the calling agent's sandbox mode itself (see `_paths` for the rules), and
`bash` also runs under the OS confinement of `subagents.policy`.
"""

from ._paths import denial_marker as denial_marker
from ._tools import workspace_tools as workspace_tools

__all__ = ["denial_marker", "workspace_tools"]
