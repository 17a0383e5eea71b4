"""Delegation: providers, named children, catalogs, the `subagent` tools and background tasks."""

from ._catalog import (
    catalog_entries as catalog_entries,
    child_names as child_names,
    resolve_name as resolve_name,
)
from ._definitions import (
    AgentDefinition as AgentDefinition,
    DefinitionProblem as DefinitionProblem,
    aload_definitions as aload_definitions,
    load_definitions as load_definitions,
    parse_definition as parse_definition,
)
from ._naming import NameBook as NameBook, full_name as full_name, name_error as name_error
from ._providers import (
    InProcessProvider as InProcessProvider,
    StartRequest as StartRequest,
    SubagentProvider as SubagentProvider,
    SubagentRun as SubagentRun,
    ToolFilter as ToolFilter,
)
from ._results import SubagentResult as SubagentResult
from ._runtime import DelegationOptions as DelegationOptions, Runtime as Runtime
from ._scope import AgentProfile as AgentProfile, resolve_tools as resolve_tools
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
from ._tasks import TaskOutcome as TaskOutcome, TaskRegistry as TaskRegistry

__all__ = [
    "Admission",
    "AgentDefinition",
    "AgentProfile",
    "DefinitionProblem",
    "DefinitionsChanged",
    "DelegationOptions",
    "InProcessProvider",
    "NameBook",
    "ProviderAdded",
    "ProviderRemoved",
    "Runtime",
    "ServiceRun",
    "StartRequest",
    "SubagentEnded",
    "SubagentProvider",
    "SubagentResult",
    "SubagentRun",
    "SubagentService",
    "SubagentStarted",
    "TaskOutcome",
    "TaskRegistry",
    "ToolFilter",
    "aload_definitions",
    "catalog_entries",
    "child_names",
    "full_name",
    "load_definitions",
    "name_error",
    "parse_definition",
    "resolve_name",
    "resolve_tools",
]
