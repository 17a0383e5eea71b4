"""`python -m subagents`: the `subagents` command."""

from .cli import main

main()
