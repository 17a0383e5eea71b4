"""Delegation: agents that start, message and settle named children.

The provider registry, named children and their catalogs, continuable and background children,
tree state and crash recovery, and the runtime that mounts the delegation tools.

Each name is imported from its module on first use (PEP 562), so that a CLI command pays only
for the modules it touches (startup time; see tests/cli/test_startup.py).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._approvals import PendingApproval as PendingApproval, stored_request as stored_request
    from ._background import TaskOutcome as TaskOutcome, TaskRegistry as TaskRegistry
    from ._catalog import (
        catalog_entries as catalog_entries,
        child_names as child_names,
        resolve_name as resolve_name,
    )
    from ._commands import (
        COMMAND_TIMEOUT_SECONDS as COMMAND_TIMEOUT_SECONDS,
        CommandDesk as CommandDesk,
        Placement as Placement,
    )
    from ._mcp import McpOptions as McpOptions, McpScope as McpScope
    from ._options import DelegationOptions as DelegationOptions, RuntimeOptions as RuntimeOptions
    from ._providers import (
        Capability as Capability,
        InProcessChild as InProcessChild,
        InProcessProvider as InProcessProvider,
        ResumeRequest as ResumeRequest,
        StartRequest as StartRequest,
        SubagentChild as SubagentChild,
        SubagentProvider as SubagentProvider,
        ToolFilter as ToolFilter,
    )
    from ._results import SubagentResult as SubagentResult
    from ._runtime import DelegationRuntime as DelegationRuntime
    from ._scope import (
        DELEGATION_TAG as DELEGATION_TAG,
        AgentProfile as AgentProfile,
        resolve_tools as resolve_tools,
    )
    from ._service import (
        Admission as Admission,
        DefinitionsChanged as DefinitionsChanged,
        ProviderAdded as ProviderAdded,
        ProviderRemoved as ProviderRemoved,
        ServiceRun as ServiceRun,
        SubagentEnded as SubagentEnded,
        SubagentService as SubagentService,
        SubagentStarted as SubagentStarted,
    )
    from ._tree import (
        ListedMember as ListedMember,
        TreeJsonRow as TreeJsonRow,
        TreeMember as TreeMember,
        approvals_below as approvals_below,
        check_takes_messages as check_takes_messages,
        find_member as find_member,
        list_tree as list_tree,
        load_tree as load_tree,
        refuse_one_shot as refuse_one_shot,
        tree_json as tree_json,
        tree_rows as tree_rows,
    )
    from ._tree_view import (
        MemberRow as MemberRow,
        TreeView as TreeView,
        WatchedTree as WatchedTree,
        duration as duration,
    )

__all__ = [
    "Admission",
    "AgentProfile",
    "COMMAND_TIMEOUT_SECONDS",
    "Capability",
    "CommandDesk",
    "DELEGATION_TAG",
    "DefinitionsChanged",
    "DelegationOptions",
    "DelegationRuntime",
    "InProcessChild",
    "InProcessProvider",
    "ListedMember",
    "McpOptions",
    "McpScope",
    "MemberRow",
    "PendingApproval",
    "Placement",
    "ProviderAdded",
    "ProviderRemoved",
    "ResumeRequest",
    "RuntimeOptions",
    "ServiceRun",
    "StartRequest",
    "SubagentChild",
    "SubagentEnded",
    "SubagentProvider",
    "SubagentResult",
    "SubagentService",
    "SubagentStarted",
    "TaskOutcome",
    "TaskRegistry",
    "ToolFilter",
    "TreeJsonRow",
    "TreeMember",
    "TreeView",
    "WatchedTree",
    "approvals_below",
    "catalog_entries",
    "check_takes_messages",
    "child_names",
    "duration",
    "find_member",
    "list_tree",
    "load_tree",
    "refuse_one_shot",
    "resolve_name",
    "resolve_tools",
    "stored_request",
    "tree_json",
    "tree_rows",
]

# The module of each name (the imports above say the same for pyright).
_SOURCES = {
    "._approvals": ("PendingApproval", "stored_request"),
    "._background": ("TaskOutcome", "TaskRegistry"),
    "._catalog": ("catalog_entries", "child_names", "resolve_name"),
    "._commands": ("COMMAND_TIMEOUT_SECONDS", "CommandDesk", "Placement"),
    "._mcp": ("McpOptions", "McpScope"),
    "._options": ("DelegationOptions", "RuntimeOptions"),
    "._providers": (
        "Capability",
        "InProcessChild",
        "InProcessProvider",
        "ResumeRequest",
        "StartRequest",
        "SubagentChild",
        "SubagentProvider",
        "ToolFilter",
    ),
    "._results": ("SubagentResult",),
    "._runtime": ("DelegationRuntime",),
    "._scope": ("DELEGATION_TAG", "AgentProfile", "resolve_tools"),
    "._service": (
        "Admission",
        "DefinitionsChanged",
        "ProviderAdded",
        "ProviderRemoved",
        "ServiceRun",
        "SubagentEnded",
        "SubagentService",
        "SubagentStarted",
    ),
    "._tree": (
        "ListedMember",
        "TreeJsonRow",
        "TreeMember",
        "approvals_below",
        "check_takes_messages",
        "find_member",
        "list_tree",
        "load_tree",
        "refuse_one_shot",
        "tree_json",
        "tree_rows",
    ),
    "._tree_view": ("MemberRow", "TreeView", "WatchedTree", "duration"),
}
__getattr__, __dir__ = lazy_names(__name__, globals(), _SOURCES)
