"""MCP servers on the command line: the configured servers for a run, `subagents mcp`.

`subagents.mcp` (and through it the MCP SDK) is imported by the functions that use it
(startup time: the app imports this module for every command; tests/cli/test_startup.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import SubagentsError
from ._common import check_path, check_tenant, fail, run_async
from ._options import JsonOpt, TenantOpt
from ._render import dumps
from ._settings import settings_for

if TYPE_CHECKING:
    from ..config import Settings
    from ..delegation import McpOptions
    from ..mcp import McpServerConfig

__all__ = ["mcp_app", "mcp_options"]

mcp_app = typer.Typer(
    name="mcp",
    help="The MCP servers agents may use: list them, or check that one starts.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

CwdOpt = Annotated[
    Path | None, typer.Option("--cwd", help="Project directory (default: the current one).")
]


def configured_servers(settings: Settings) -> dict[str, McpServerConfig]:
    """Every configured server by name.

    The project's win over the user's, and at one tier a `config.toml` entry over a
    `.mcp.json` one. A bad entry is a `ConfigError` naming it.
    """
    from ..mcp import parse_servers, read_mcp_json  # startup time: see the module's docstring

    found: dict[str, McpServerConfig] = {}
    for source in settings.mcp_sources:
        if source.servers is None:
            servers = read_mcp_json(source.path, environ=os.environ)
        else:
            servers: dict[str, McpServerConfig] = {}
            for name, entry in source.servers.items():
                servers.update(
                    parse_servers({name: entry.value}, source=entry.origin, environ=os.environ)
                )
        for name, config in servers.items():
            found.setdefault(name, config)
    return found


def mcp_options(settings: Settings) -> McpOptions:
    """The runtime's MCP options from the settings; a bad server exits 2 with one line."""
    from ..delegation import McpOptions  # startup time: see the module's docstring

    try:
        servers = configured_servers(settings)
    except SubagentsError as exc:
        fail(f"{exc.message} [{exc.code}]")
    knobs: dict[str, Any] = {}
    if "search_threshold" in settings.mcp:
        knobs["search_threshold"] = settings.mcp["search_threshold"].value
    if "tool_timeout" in settings.mcp:
        knobs["tool_timeout"] = float(settings.mcp["tool_timeout"].value)
    return McpOptions(servers=servers, environ=dict(os.environ), **knobs)


def _servers_for(cwd: Path | None, tenant: str) -> tuple[Settings, dict[str, McpServerConfig]]:
    check_tenant(tenant)
    if cwd is not None:
        check_path(cwd, "--cwd")
    settings = settings_for(cwd, tenant)
    return settings, dict(mcp_options(settings).servers)


def _describe(config: McpServerConfig) -> str:
    if config.transport == "http":
        return f"http {config.url}"
    return " ".join([config.command or "", *config.args])


@mcp_app.command("list")
def list_servers(
    tenant: TenantOpt = "default", cwd: CwdOpt = None, as_json: JsonOpt = False
) -> None:
    """List the configured servers and where each is configured (nothing is started)."""
    _, servers = _servers_for(cwd, tenant)
    rows = [
        {"name": c.name, "transport": c.transport, "target": _describe(c), "source": c.source}
        for c in servers.values()
    ]
    if as_json:
        typer.echo(dumps(rows))
        return
    if not rows:
        typer.echo("no MCP servers configured (.mcp.json or [mcp_servers] in config.toml)")
        return
    width = max(len(r["name"]) for r in rows)
    typer.echo("\n".join(f"{r['name']:{width}}  {r['target']}  ({r['source']})" for r in rows))


@mcp_app.command("check")
def check_server(
    name: Annotated[str, typer.Argument(help="The server to start and list.")],
    tenant: TenantOpt = "default",
    cwd: CwdOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start one server (confined as a run would be), list its tools, and stop it."""
    # Startup time: see the module's docstring.
    import asyncio

    from ..mcp import McpHub, check_executable
    from ..policy import resolve_policy

    settings, servers = _servers_for(cwd, tenant)
    config = servers.get(name)
    if config is None:
        known = ", ".join(servers) or "none are configured"
        fail(f"unknown MCP server {name!r}; the servers are: {known} [MCP_SERVER_UNKNOWN]")
    root = str(cwd) if cwd is not None else os.getcwd()

    async def main() -> list[dict[str, str]]:
        await asyncio.to_thread(check_executable, config, os.environ, cwd=root)
        policy = resolve_policy(cwd=root, mode=settings.sandbox_mode)
        async with McpHub({name: config}, policy=policy) as hub:
            specs = await hub.check(name)
            return [{"name": s.name, "description": s.description} for s in specs]

    tools = run_async(main)
    if as_json:
        typer.echo(dumps({"server": name, "tools": tools}))
        return
    typer.echo(f"{name}: {len(tools)} tools")
    typer.echo("\n".join(f"  {t['name']}  {_printable(t['description'])}" for t in tools))


def _printable(text: str, limit: int = 200) -> str:
    """A server's text on one terminal line: control characters escaped, cut at `limit`."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in " ".join(text.split()))
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
