"""Model aliases: short names (`sonnet`, `fast`) that stand for a model spec.

A model is named either by a spec (it has a `KIND:` prefix) or by an alias (it has none), so
the two can never be confused. Claude Code's agent files say `sonnet`, `opus` and `haiku`:
those three are built in and a settings file's `[aliases]` can point them elsewhere (at an
OpenAI model, for a user with only that key). An alias stands for a spec, never for another
alias, so resolving is one lookup.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..errors import ConfigError, ErrorCode
from ..models import parse_model_spec

__all__ = ["ALIAS_NAME", "BUILTIN_ALIASES", "check_alias", "resolve_model_name"]

BUILTIN_ALIASES: Mapping[str, str] = {
    "haiku": "anthropic:claude-haiku-4-5",
    "opus": "anthropic:claude-opus-4-5",
    "sonnet": "anthropic:claude-sonnet-4-5",
}
"""Claude Code's aliases, as they resolve when no settings file says otherwise."""

ALIAS_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,63}$")


def check_alias(name: str, spec: str) -> str:
    """The canonical spec of an alias definition, or a `ConfigError` saying what is wrong."""
    if not ALIAS_NAME.fullmatch(name):
        raise ConfigError(
            f"alias name {name!r} must start with a letter and hold only letters, digits, "
            "'.', '_' and '-' (at most 64)",
            code=ErrorCode.CONFIG_INVALID,
        )
    if name == "inherit":
        raise ConfigError(
            "`inherit` cannot be an alias: it means the model of the agent that starts it",
            code=ErrorCode.CONFIG_INVALID,
        )
    return str(parse_model_spec(spec))


def resolve_model_name(text: str, aliases: Mapping[str, str]) -> str:
    """The canonical spec `text` names: a spec itself, or an alias of `aliases`.

    Raises `ConfigError`: `MODEL_SPEC_INVALID` for a bad spec, `MODEL_ALIAS_UNKNOWN` for a
    name that is neither a spec nor an alias.
    """
    name = text.strip()
    if ":" in name:
        return str(parse_model_spec(name))
    target = aliases.get(name)
    if target is None:
        known = ", ".join(sorted(aliases)) or "none are defined"
        raise ConfigError(
            f"unknown model alias {name!r}: give a spec such as openai:MODEL, or an alias "
            f"([aliases] in config.toml; the aliases are: {known})",
            code=ErrorCode.MODEL_ALIAS_UNKNOWN,
            alias=name,
        )
    return str(parse_model_spec(target))
