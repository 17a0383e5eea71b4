"""Settings files (`config.toml` at the user and project tiers) and model aliases.

Each value keeps where it came from, so `subagents config` can print the merged settings
with their origins; flags and environment variables override the files.

Each name is imported from its module on first use (PEP 562), so that a CLI command pays only
for the modules it touches (startup time; see tests/cli/test_startup.py).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._aliases import (
        BUILTIN_ALIASES as BUILTIN_ALIASES,
        check_alias as check_alias,
        resolve_model_name as resolve_model_name,
    )
    from ._settings import (
        BUDGET_KEYS as BUDGET_KEYS,
        CONCURRENCY_KEYS as CONCURRENCY_KEYS,
        McpSource as McpSource,
        Setting as Setting,
        Settings as Settings,
        config_files as config_files,
        load_settings as load_settings,
    )

__all__ = [
    "BUDGET_KEYS",
    "BUILTIN_ALIASES",
    "CONCURRENCY_KEYS",
    "McpSource",
    "Setting",
    "Settings",
    "check_alias",
    "config_files",
    "load_settings",
    "resolve_model_name",
]

# The module of each name (the imports above say the same for pyright).
_SOURCES = {
    "._aliases": ("BUILTIN_ALIASES", "check_alias", "resolve_model_name"),
    "._settings": (
        "BUDGET_KEYS",
        "CONCURRENCY_KEYS",
        "McpSource",
        "Setting",
        "Settings",
        "config_files",
        "load_settings",
    ),
}
__getattr__, __dir__ = lazy_names(__name__, globals(), _SOURCES)
