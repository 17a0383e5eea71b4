"""`${VAR}` and `${VAR:-default}` expansion in MCP server settings, as Claude Code does it.

Expansion happens once, when the configuration is parsed, against an environ mapping the caller
passes (the process environment by default): a server never sees the unexpanded text, and an
unset variable without a default is an error naming it, never an empty string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..errors import ConfigError, ErrorCode

__all__ = ["expand"]

_REFERENCE = re.compile(r"\$\{([^}:]*)(?::-([^}]*))?\}")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def expand(text: str, environ: Mapping[str, str]) -> str:
    """`text` with every `${VAR}` / `${VAR:-default}` replaced from `environ`.

    Raises:
        ConfigError: (`MCP_CONFIG_INVALID`) a referenced variable is unset and has no default,
            or a reference does not name a variable (`${}`, `${1X}`); the message says which,
            and the parser prefixes the file and server.
    """

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if not _VARIABLE.match(name):
            raise ConfigError(
                f"${{{name}}} is not a variable reference", code=ErrorCode.MCP_CONFIG_INVALID
            )
        value = environ.get(name)
        if value is not None and (value or default is None):
            return value
        if default is not None:
            return default  # `:-` also covers a variable set to the empty string, as in sh
        raise ConfigError(
            f"environment variable {name} is not set and has no default",
            code=ErrorCode.MCP_CONFIG_INVALID,
            variable=name,
        )

    return _REFERENCE.sub(replace, text)
