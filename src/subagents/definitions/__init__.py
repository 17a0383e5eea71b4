"""Agent definitions: Markdown with YAML frontmatter fixing a child's tools, model and limits.

They are read from the project, user and tenant tiers, or from a folder the caller names.
"""

from ._load import (
    AgentDefinition as AgentDefinition,
    DefinitionProblem as DefinitionProblem,
    Tier as Tier,
    aload_definitions as aload_definitions,
    check_definitions_folder as check_definitions_folder,
    claude_home as claude_home,
    definition_dirs as definition_dirs,
    load_definitions as load_definitions,
    load_definitions_folder as load_definitions_folder,
    parse_definition as parse_definition,
    subagents_home as subagents_home,
)

__all__ = [
    "AgentDefinition",
    "DefinitionProblem",
    "Tier",
    "aload_definitions",
    "check_definitions_folder",
    "claude_home",
    "definition_dirs",
    "load_definitions",
    "load_definitions_folder",
    "parse_definition",
    "subagents_home",
]
