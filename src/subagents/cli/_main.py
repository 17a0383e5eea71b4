"""The console entry point: Typer's usage errors become one line, as all our errors are."""

from __future__ import annotations

import copy
import sys

import typer
from typer.main import get_command_name, solve_typer_info_defaults

from ..errors import ErrorCode
from ._app import app
from ._common import EXIT_FAILED, EXIT_USAGE

__all__ = ["app_for", "main", "usage_line"]


def usage_line(message: str, command_path: str | None) -> str:
    """The one line a usage error prints: what is wrong, its code and where the help is."""
    text = " ".join(message.split()).rstrip(".")
    hint = f"; try '{command_path} --help'" if command_path else ""
    return f"subagents: error: {text} [{ErrorCode.USAGE}]{hint}"


def app_for(argv: list[str]) -> typer.Typer:
    """The app holding only the command `argv` names; the whole app when it names none.

    Typer turns every registered command's signature into Click parameters before it
    dispatches (about 20 ms for this app, a tenth of `subagents sessions`), though a command
    line runs one command. Help, options before the command and a mistyped name (which Typer
    answers with the names it knows) get the whole app.
    """
    if not argv or argv[0].startswith("-"):
        return app
    name = argv[0]
    commands = [
        info
        for info in app.registered_commands
        if info.callback is not None
        and (info.name or get_command_name(info.callback.__name__)) == name
    ]
    groups = [
        info for info in app.registered_groups if solve_typer_info_defaults(info).name == name
    ]
    if not commands and not groups:
        return app
    narrowed = copy.copy(app)
    narrowed.registered_commands = commands
    narrowed.registered_groups = groups
    return narrowed


def main(args: list[str] | None = None) -> None:
    """Run the app; a usage error prints one line (not Typer's box) and exits 2."""
    argv = sys.argv[1:] if args is None else args
    if not argv:  # a bare `subagents` shows the help, as `--help` does
        argv = ["--help"]
    try:
        code = app_for(argv)(args=argv, prog_name="subagents", standalone_mode=False)
    except typer.TyperException as exc:
        ctx = getattr(exc, "ctx", None)
        path = getattr(ctx, "command_path", None) if ctx is not None else None
        exit_code = getattr(exc, "exit_code", EXIT_FAILED)
        typer.echo(usage_line(exc.format_message(), path or "subagents"), err=True)
        sys.exit(exit_code if exit_code == EXIT_USAGE else EXIT_FAILED)
    except typer.Abort:  # end of input at a prompt
        typer.echo("subagents: error: aborted", err=True)
        sys.exit(EXIT_FAILED)
    sys.exit(code if isinstance(code, int) else 0)
