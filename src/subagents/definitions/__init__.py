"""Agent definitions: Markdown with YAML frontmatter fixing a child's tools, model and limits.

They are read from the project, user and tenant tiers, or from a folder the caller names.

Each name is imported from its module on first use (PEP 562), so that a CLI command pays only
for the modules it touches (startup time; see tests/cli/test_startup.py).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
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

# The module of each name (the imports above say the same for pyright).
_SOURCES = {
    "._load": (
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
    ),
}
__getattr__, __dir__ = lazy_names(__name__, globals(), _SOURCES)
