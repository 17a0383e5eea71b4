"""Settings files (`config.toml` at the user and project tiers) and model aliases.

Each value keeps where it came from, so `subagents config` can print the merged settings
with their origins; flags and environment variables override the files.
"""

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
