"""Settings on the command line: reading them for a command, and `subagents config`.

The settings and definitions modules are imported by the functions that read them (startup
time: the app imports this module for every command; tests/cli/test_startup.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import SubagentsError
from ._common import check_path, check_tenant, fail
from ._options import JsonOpt, TenantOpt
from ._render import dumps

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["config", "settings_for"]


def settings_for(cwd: str | Path | None, tenant: str) -> Settings:
    """The tenant's merged settings for a command in `cwd`; a bad file exits 2 with one line."""
    from ..config import load_settings
    from ..definitions import subagents_home

    try:
        return load_settings(cwd or os.getcwd(), subagents_home(), tenant, environ=os.environ)
    except SubagentsError as exc:
        fail(f"{exc.message} [{exc.code}]")


def config(
    tenant: TenantOpt = "default",
    cwd: Annotated[
        Path | None, typer.Option("--cwd", help="Project directory (default: the current one).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the merged settings and where each value came from.

    Read from `$SUBAGENTS_HOME/config.toml` (user) and `.subagents/config.toml` (project,
    which wins), then `$SUBAGENTS_MODEL` and `$SUBAGENTS_SANDBOX`; a command's flags win over
    all of them.
    """
    from ..config import config_files
    from ..definitions import subagents_home

    check_tenant(tenant)
    if cwd is not None:
        check_path(cwd, "--cwd")
    settings = settings_for(cwd, tenant)
    searched = [str(path) for _, path in config_files(cwd or os.getcwd(), subagents_home(), tenant)]
    if as_json:
        document: dict[str, Any] = {
            "files": list(settings.files),
            "searched": searched,
            "values": [
                {"key": key, "value": value, "origin": origin}
                for key, value, origin in settings.rows()
            ],
        }
        typer.echo(dumps(document))
        return
    rows = settings.rows()
    width = max(len(key) for key, _, _ in rows)
    value_width = min(48, max(len(value) for _, value, _ in rows))
    lines = [f"{key:{width}}  {value:{value_width}}  {origin}" for key, value, origin in rows]
    read = ", ".join(settings.files) if settings.files else "none"
    lines.append(f"# settings files read: {read} (searched: {', '.join(searched)})")
    typer.echo("\n".join(lines))
