"""The console entry point: Typer's usage errors become one line, as all our errors are."""

from __future__ import annotations

import sys

import typer

from ..errors import ErrorCode
from ._app import app
from ._common import EXIT_FAILED, EXIT_USAGE

__all__ = ["main", "usage_line"]


def usage_line(message: str, command_path: str | None) -> str:
    """The one line a usage error prints: what is wrong, its code and where the help is."""
    text = " ".join(message.split()).rstrip(".")
    hint = f"; try '{command_path} --help'" if command_path else ""
    return f"subagents: error: {text} [{ErrorCode.USAGE}]{hint}"


def main(args: list[str] | None = None) -> None:
    """Run the app; a usage error prints one line (not Typer's box) and exits 2."""
    argv = sys.argv[1:] if args is None else args
    if not argv:  # a bare `subagents` shows the help, as `--help` does
        argv = ["--help"]
    try:
        code = app(args=argv, prog_name="subagents", standalone_mode=False)
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
