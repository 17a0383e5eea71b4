"""The options the commands share (their names, checks and help texts in one place)."""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import SubagentsError
from ._common import store_path

__all__ = [
    "ApproveOpt",
    "BudgetCallsOpt",
    "BudgetChildrenOpt",
    "BudgetTokensOpt",
    "JsonOpt",
    "MaxTokensOpt",
    "ModelOpt",
    "SandboxOpt",
    "StoreOpt",
    "StreamOpt",
    "TenantOpt",
]


def _checked_store(store: str | None) -> str | None:
    """Check the store's path while parsing, before any event loop runs (it stats)."""
    store_path(store)
    return store


StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store path or sqlite:/// URL "
        "(default: $SUBAGENTS_STORE or $SUBAGENTS_HOME/state.db).",
        callback=_checked_store,
    ),
]
TenantOpt = Annotated[str, typer.Option("--tenant", help="Tenant whose sessions to use.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
StreamOpt = Annotated[
    bool,
    typer.Option(
        "--stream",
        help="Print every event as it commits and the model's output as it arrives, one JSON "
        "object a line (docs/streaming.md); the last line is the result --json prints.",
    ),
]
SandboxOpt = Annotated[
    str | None,
    typer.Option(
        "--sandbox",
        help="File policy of the lead and its tree: read-only, workspace-write (the default) "
        "or danger-full-access (kept across resume; children inherit it; default: "
        "$SUBAGENTS_SANDBOX, else `sandbox` in config.toml).",
    ),
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tokens", min=1, help="Cap each model response at this many tokens (every agent)."
    ),
]
BudgetTokensOpt = Annotated[
    int | None,
    typer.Option("--budget-tokens", min=0, help="Tokens (input + output) the whole tree may use."),
]
BudgetCallsOpt = Annotated[
    int | None,
    typer.Option("--budget-model-calls", min=0, help="Model calls the whole tree may make."),
]
BudgetChildrenOpt = Annotated[
    int | None,
    typer.Option("--budget-children", min=0, help="Agents that may be started in the tree."),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="A model alias (`sonnet`, or one of config.toml's [aliases]) or a spec: "
        "scripted:PATH, openai:MODEL, deepseek:MODEL, openai-compatible:MODEL@BASE_URL or "
        "anthropic:MODEL (default: $SUBAGENTS_MODEL, else `model` in config.toml).",
    ),
]


def _checked_gates(value: str | None) -> str | None:
    """`--approve bash,write_file` (or `all`): checked while parsing, before anything runs."""
    if value is not None:
        from ..core import ApprovalPolicy  # here, not at the top: startup time

        try:
            ApprovalPolicy.parse(value, what="--approve")
        except SubagentsError as exc:
            raise typer.BadParameter(exc.message) from None
    return value


ApproveOpt = Annotated[
    str | None,
    typer.Option(
        "--approve",
        help="Tools whose calls wait for a person's decision, anywhere in the tree "
        "(comma-separated names or patterns, or `all`); decide with `subagents approve`/`deny`.",
        callback=_checked_gates,
    ),
]
