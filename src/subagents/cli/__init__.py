"""The command line interface (the top layer: nothing imports it)."""

from ._app import app as app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `subagents` console script."""
    app()
