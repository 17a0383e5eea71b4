"""Agent definitions on the command line: `subagents agents` and `run --agent`.

The settings and definitions modules are imported by the functions that read them (startup
time: the app imports this module for every command; tests/cli/test_startup.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..errors import SubagentsError
from ._common import fail
from ._render import dumps

if TYPE_CHECKING:
    from ..config import Settings
    from ..definitions import AgentDefinition, DefinitionProblem

__all__ = ["choose_definition", "definitions_for", "list_agents", "model_for"]


def definitions_for(
    cwd: str | Path | None,
    tenant: str,
    *,
    using: str | None = None,
    every_problem: bool = False,
    settings: Settings | None = None,
) -> dict[str, AgentDefinition]:
    """The tenant's definitions; problems are warning lines on stderr.

    Only the problems of the definition a command uses (`using`, as `run --agent NAME`) are
    shown, so a broken file nobody asked for does not warn on every run; `subagents agents`
    (`every_problem`) lists them all.
    """
    from ..config import BUILTIN_ALIASES
    from ..definitions import load_definitions, subagents_home

    aliases = settings.alias_map if settings is not None else dict(BUILTIN_ALIASES)
    found, problems = load_definitions(
        cwd or os.getcwd(), subagents_home(), tenant, aliases=aliases
    )
    for problem in problems:
        if every_problem or (using is not None and _concerns(problem, using, found)):
            typer.echo(f"subagents: warning: {problem}", err=True)
    return found


def _concerns(problem: DefinitionProblem, name: str, found: dict[str, AgentDefinition]) -> bool:
    """Whether `problem` is about the definition `name`: its file, or a file named after it."""
    chosen = found.get(name)
    if chosen is not None and problem.path == chosen.source:
        return True
    return Path(problem.path).stem == name


def choose_definition(
    definitions: dict[str, AgentDefinition], name: str, *, tenant: str
) -> AgentDefinition:
    """The definition `--agent NAME` names, else exit 2 listing the names (nothing written)."""
    found = definitions.get(name)
    if found is None:
        names = ", ".join(definitions) if definitions else "none are defined"
        fail(
            f"unknown agent {name!r} for tenant {tenant!r}; the definitions are: {names} "
            "(see `subagents agents`)"
        )
    return found


def model_for(
    definition: AgentDefinition | None, model: str | None, aliases: Mapping[str, str]
) -> str | None:
    """`--model`, else the definition's model; a definition never silently loses its model."""
    if definition is None or definition.model == "inherit":
        return model
    if model is None:
        return definition.model
    from ..config import resolve_model_name

    try:
        given = resolve_model_name(model, aliases)
    except SubagentsError:  # an invalid --model is reported by resolve_model
        return model
    if given != definition.model:
        fail(
            f"agent {definition.name!r} asks for model {definition.model!r} but --model is "
            f"{given!r}; drop --model or set `model: inherit` in {definition.source}"
        )
    return model


def list_agents(cwd: Path | None, tenant: str, *, as_json: bool, settings: Settings) -> None:
    """Print the definitions (problems go to stderr as warnings)."""
    definitions = definitions_for(cwd, tenant, every_problem=True, settings=settings)
    rows: list[dict[str, Any]] = [
        {"name": d.name, "description": d.description, "source": d.source, "tier": d.tier}
        for d in definitions.values()
    ]
    if as_json:
        typer.echo(dumps(rows))
        return
    if not rows:
        from ..definitions import definition_dirs, subagents_home

        dirs = definition_dirs(cwd or os.getcwd(), subagents_home(), tenant)
        typer.echo("no agent definitions in " + ", ".join(str(d) for _, d in dirs))
        return
    width = max(len(r["name"]) for r in rows)
    tiers = max(7, *(len(r["tier"]) for r in rows))
    lines = [f"{'NAME':{width}}  {'TIER':{tiers}}  DESCRIPTION"]
    for row in rows:
        lines.append(f"{row['name']:{width}}  {row['tier']:{tiers}}  {row['description']}")
        lines.append(f"{'':{width}}  {'':{tiers}}  {row['source']}")
    typer.echo("\n".join(lines))
