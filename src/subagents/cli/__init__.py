"""The command line interface (the top layer: nothing imports it)."""

from ._app import app as app
from ._main import main as main

__all__ = ["app", "main"]
