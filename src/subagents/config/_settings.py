"""Settings: `config.toml` at the user and project tiers, merged, each value with its origin.

```toml
model = "sonnet"                 # the default model: a spec or an alias
sandbox = "workspace-write"
max_tokens = 8192

[aliases]
sonnet = "openai:gpt-5.1"        # Claude Code's alias, pointed at another provider

[budget]                         # for each run's whole tree
tokens = 2_000_000
model_calls = 400
children = 40

[concurrency]
background_tasks = 10            # background children one agent may run at once
workflow_agents = 16             # children a workflow script runs at once

[mcp]
search_threshold = 20            # a server with more tools is offered through mcp_search
tool_timeout = 60                # seconds one MCP tool call may take

[mcp_servers.files]              # as an entry of .mcp.json's mcpServers
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
```

Tenant `default` reads `<cwd>/.subagents/config.toml` (project) over
`$SUBAGENTS_HOME/config.toml` (user); any other tenant reads only
`$SUBAGENTS_HOME/tenants/<tenant>/config.toml`, as definitions are read. The project wins a
clash, key by key; environment variables (`SUBAGENTS_MODEL`, `SUBAGENTS_SANDBOX`) win over
both, and a command's flags over everything (`Settings.override`). Every value keeps where it
came from, so `subagents config` can say. A file that is not valid is one `ConfigError`
(`CONFIG_INVALID`) naming the file and line; nothing is half-applied.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast

from ..errors import ConfigError, ErrorCode, SubagentsError
from ..ids import check_tenant_id
from ..policy import SANDBOX_MODES, SandboxMode
from ._aliases import BUILTIN_ALIASES, check_alias, resolve_model_name
from ._file import invalid, key_lines, read_toml

__all__ = [
    "BUDGET_KEYS",
    "CONCURRENCY_KEYS",
    "McpSource",
    "Setting",
    "Settings",
    "config_files",
    "load_settings",
]

BUDGET_KEYS = ("tokens", "model_calls", "children")
CONCURRENCY_KEYS = ("background_tasks", "workflow_agents")
MCP_KEYS = ("search_threshold", "tool_timeout")
TOP_KEYS = (
    "model",
    "sandbox",
    "max_tokens",
    "aliases",
    "budget",
    "concurrency",
    "mcp",
    "mcp_servers",
)
TABLE_KEYS = ("aliases", "budget", "concurrency", "mcp", "mcp_servers")
TierName: TypeAlias = Literal["project", "user", "tenant"]


@dataclass(frozen=True, slots=True)
class Setting:
    """One value and where it came from (`path:line`, `$VARIABLE`, `--flag` or `built-in`)."""

    value: Any
    origin: str


@dataclass(frozen=True, slots=True)
class McpSource:
    """Where MCP servers may be configured, highest precedence first.

    `servers` holds a settings file's `[mcp_servers]` entries as written (the `mcp` package
    checks them); a `.mcp.json` is named by `path` and read by the `mcp` package.
    """

    tier: TierName
    path: Path
    servers: Mapping[str, Setting] | None = None
    """The `[mcp_servers]` entries of a `config.toml` (None: `path` is a `.mcp.json`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The merged settings: what is set, and where from."""

    model: Setting | None = None
    """The default model as a canonical spec (an alias already resolved)."""
    sandbox: Setting = Setting("workspace-write", "default")
    max_tokens: Setting | None = None
    aliases: Mapping[str, Setting] = field(
        default_factory=lambda: {k: Setting(v, "built-in") for k, v in BUILTIN_ALIASES.items()}
    )
    budget: Mapping[str, Setting] = field(default_factory=dict[str, Setting])
    concurrency: Mapping[str, Setting] = field(default_factory=dict[str, Setting])
    mcp: Mapping[str, Setting] = field(default_factory=dict[str, Setting])
    mcp_sources: tuple[McpSource, ...] = ()
    files: tuple[str, ...] = ()
    """The settings files that were read, highest precedence first."""

    @property
    def alias_map(self) -> dict[str, str]:
        """Alias -> canonical spec."""
        return {name: setting.value for name, setting in self.aliases.items()}

    @property
    def sandbox_mode(self) -> SandboxMode:
        return cast("SandboxMode", self.sandbox.value)

    def int_of(self, table: Literal["budget", "concurrency"], key: str) -> int | None:
        found = (self.budget if table == "budget" else self.concurrency).get(key)
        return None if found is None else int(found.value)

    def override(
        self, key: Literal["model", "sandbox"], value: str | None, origin: str
    ) -> Settings:
        """These settings with `key` set by `origin` (a flag); None leaves them as they are.

        A model is resolved through the aliases; a bad value is a `ConfigError` naming `origin`.
        """
        if value is None:
            return self
        if key == "model":
            return replace(self, model=Setting(_model(value, self.alias_map, origin), origin))
        return replace(self, sandbox=Setting(_sandbox(value, origin), origin))

    def rows(self) -> list[tuple[str, str, str]]:
        """(key, value, origin) for every value set, in the file's order of sections."""
        rows: list[tuple[str, str, str]] = []
        if self.model is not None:
            rows.append(("model", str(self.model.value), self.model.origin))
        rows.append(("sandbox", str(self.sandbox.value), self.sandbox.origin))
        if self.max_tokens is not None:
            rows.append(("max_tokens", str(self.max_tokens.value), self.max_tokens.origin))
        for table, values in (
            ("aliases", self.aliases),
            ("budget", self.budget),
            ("concurrency", self.concurrency),
            ("mcp", self.mcp),
        ):
            rows.extend(
                (f"{table}.{key}", str(values[key].value), values[key].origin)
                for key in sorted(values)
            )
        return rows


# -- checks -----------------------------------------------------------------------------------


def _model(value: object, aliases: Mapping[str, str], origin: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _bad(origin, f"model must be a spec or an alias, got {_shown(value)}")
    try:
        return resolve_model_name(value, aliases)
    except SubagentsError as exc:
        raise ConfigError(f"{origin}: {exc.message}", code=exc.code) from None


def _sandbox(value: object, origin: str) -> SandboxMode:
    if value not in SANDBOX_MODES:
        raise _bad(
            origin, f"sandbox must be one of {', '.join(SANDBOX_MODES)}, got {_shown(value)}"
        )
    return value  # narrowed by the `in` check


def _bad(origin: str, message: str) -> ConfigError:
    return ConfigError(f"{origin}: {message}", code=ErrorCode.CONFIG_INVALID)


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _count(value: object, where: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _bad(where, f"must be a whole number >= {minimum}, got {_shown(value)}")
    return value


def _seconds(value: object, where: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise _bad(where, f"must be a number of seconds > 0, got {_shown(value)}")
    return float(value)


class _File:
    """One parsed settings file, checked key by key; `origin(path)` is `file:line`."""

    def __init__(self, path: Path, table: dict[str, Any], text: str) -> None:
        self.path = path
        self.table = table
        self.lines = key_lines(text)

    def origin(self, *keys: str) -> str:
        line = self.lines.get(keys)
        return str(self.path) if line is None else f"{self.path}:{line}"

    def check(self) -> None:
        """Refuse what no settings file may hold: unknown keys, values of the wrong type."""
        self._check_top()
        self._check_aliases()
        for table, names in (("budget", BUDGET_KEYS), ("concurrency", CONCURRENCY_KEYS)):
            for key, value in self._table(table).items():
                self._known(table, key, names)
                _count(value, self.origin(table, key), minimum=0 if table == "budget" else 1)
        for key, value in self._table("mcp").items():
            self._known("mcp", key, MCP_KEYS)
            if key == "tool_timeout":
                _seconds(value, self.origin("mcp", key))
            else:
                _count(value, self.origin("mcp", key), minimum=0)
        for key, value in self._table("mcp_servers").items():
            if not isinstance(value, dict):
                raise _bad(self.origin("mcp_servers", key), f"server `{key}` must be a table")

    def _check_top(self) -> None:
        for key, value in self.table.items():
            if key not in TOP_KEYS:
                raise invalid(
                    str(self.path),
                    self.lines.get((key,)),
                    f"unknown key `{key}`; the keys are: {', '.join(TOP_KEYS)}",
                )
            if key in TABLE_KEYS and not isinstance(value, dict):
                raise _bad(self.origin(key), f"`{key}` must be a table ([{key}])")
        if "sandbox" in self.table:
            _sandbox(self.table["sandbox"], self.origin("sandbox"))
        if "max_tokens" in self.table:
            _count(self.table["max_tokens"], self.origin("max_tokens"), minimum=1)
        model = self.table.get("model")
        if "model" in self.table and not (isinstance(model, str) and model.strip()):
            raise _bad(self.origin("model"), "model must be a spec or an alias")

    def _check_aliases(self) -> None:
        for key, value in self._table("aliases").items():
            if not isinstance(value, str):
                raise _bad(self.origin("aliases", key), f"alias `{key}` must name a model spec")
            try:
                check_alias(key, value)
            except SubagentsError as exc:
                raise ConfigError(
                    f"{self.origin('aliases', key)}: {exc.message}", code=exc.code
                ) from None

    def _table(self, key: str) -> dict[str, Any]:
        value = self.table.get(key)
        return cast("dict[str, Any]", value) if isinstance(value, dict) else {}

    def _known(self, table: str, key: str, names: tuple[str, ...]) -> None:
        if key not in names:
            raise _bad(
                self.origin(table, key),
                f"unknown key `{table}.{key}`; the keys are: {', '.join(names)}",
            )

    def settings(self, table: str) -> dict[str, Setting]:
        return {k: Setting(v, self.origin(table, k)) for k, v in self._table(table).items()}


# -- loading ----------------------------------------------------------------------------------


def config_files(cwd: str | Path, home: str | Path, tenant: str) -> list[tuple[TierName, Path]]:
    """The settings files a tenant reads, highest precedence first."""
    if tenant == "default":
        return [
            ("project", Path(cwd) / ".subagents" / "config.toml"),
            ("user", Path(home) / "config.toml"),
        ]
    return [("tenant", Path(home) / "tenants" / tenant / "config.toml")]


def _mcp_json(tier: TierName, settings_file: Path, cwd: str | Path) -> Path:
    """The `.mcp.json` of a tier: Claude Code's project file, else beside `config.toml`."""
    if tier == "project":
        return Path(cwd) / ".mcp.json"
    return settings_file.parent / ".mcp.json"


def load_settings(
    cwd: str | Path,
    home: str | Path,
    tenant: str,
    *,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Read and merge a tenant's settings (blocking), then apply `environ`'s variables."""
    check_tenant_id(tenant)
    files: list[tuple[TierName, _File]] = []
    sources: list[McpSource] = []
    for tier, path in config_files(cwd, home, tenant):
        found = read_toml(path)
        if found is not None:
            parsed = _File(path, *found)
            parsed.check()
            files.append((tier, parsed))
            sources.append(McpSource(tier, path, parsed.settings("mcp_servers")))
        sources.append(McpSource(tier, _mcp_json(tier, path, cwd)))
    lowest_first = [parsed for _, parsed in reversed(files)]
    aliases = {k: Setting(v, "built-in") for k, v in BUILTIN_ALIASES.items()}
    merged: dict[str, dict[str, Setting]] = {"budget": {}, "concurrency": {}, "mcp": {}}
    top: dict[str, Setting] = {}
    for parsed in lowest_first:
        for name, setting in parsed.settings("aliases").items():
            aliases[name] = Setting(check_alias(name, setting.value), setting.origin)
        for table, values in merged.items():
            values.update(parsed.settings(table))
        for key in ("model", "sandbox", "max_tokens"):
            if key in parsed.table:
                top[key] = Setting(parsed.table[key], parsed.origin(key))
    alias_map = {name: setting.value for name, setting in aliases.items()}
    env: Mapping[str, str] = {} if environ is None else environ
    if env.get("SUBAGENTS_MODEL", "").strip():
        top["model"] = Setting(env["SUBAGENTS_MODEL"], "$SUBAGENTS_MODEL")
    if env.get("SUBAGENTS_SANDBOX", "").strip():
        top["sandbox"] = Setting(env["SUBAGENTS_SANDBOX"].strip(), "$SUBAGENTS_SANDBOX")
    model = top.get("model")
    sandbox = top.get("sandbox", Setting("workspace-write", "default"))
    return Settings(
        model=None
        if model is None
        else Setting(_model(model.value, alias_map, model.origin), model.origin),
        sandbox=Setting(_sandbox(sandbox.value, sandbox.origin), sandbox.origin),
        max_tokens=top.get("max_tokens"),
        aliases=aliases,
        budget=merged["budget"],
        concurrency=merged["concurrency"],
        mcp=merged["mcp"],
        mcp_sources=tuple(sources),
        files=tuple(str(parsed.path) for _, parsed in files),
    )
