"""MCP server configuration in Claude Code's format (`.mcp.json`), parsed into frozen configs.

One parser serves every place servers are declared: a `.mcp.json` file, a definition's inline
`mcpServers`, a TOML config's `[mcp_servers.NAME]` tables. It is strict (an unknown key is an
error, so a typo never silently drops a setting) and every error is one line naming the file,
the line where it is known, and the server, with code `MCP_CONFIG_INVALID`.

`${VAR}` and `${VAR:-default}` are expanded at parse time in the command, args, env values, url
and header values, as Claude Code does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from ..errors import ConfigError, ErrorCode
from ._expand import expand

__all__ = [
    "MAX_MCP_JSON_BYTES",
    "SERVER_NAME",
    "McpServerConfig",
    "check_executable",
    "parse_mcp_json",
    "parse_servers",
    "read_mcp_json",
]

MAX_MCP_JSON_BYTES = 1 << 20
"""The largest `.mcp.json` read (1 MiB); a bigger file is refused, not truncated."""

SERVER_NAME = re.compile(r"^(?=.{1,32}$)[A-Za-z0-9](?:[A-Za-z0-9-]|_(?=[A-Za-z0-9-]))*$")
"""A server name: 1-32 letters, digits, `_` or `-`, starting with a letter or digit, with no
`__` and no trailing `_`: so `mcp__<server>__<tool>` is a valid tool name with room left for
the tool's own name (tool names stop at 64 characters), and its server part is never
ambiguous (`mcp__a__b__c` is tool `b__c` of server `a`)."""

Transport = Literal["stdio", "http"]
_STDIO_KEYS = frozenset({"type", "command", "args", "env"})
_HTTP_KEYS = frozenset({"type", "url", "headers"})


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerConfig:
    """One configured MCP server, with every `${VAR}` already expanded.

    `transport` is `stdio` (a `command` run with `args` and `env`) or `http` (streamable HTTP
    at `url`, sent `headers`). `source` is the file (or `definition`) that declared it.
    """

    name: str
    transport: Transport
    source: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


def _fail(source: str, message: str, *, server: str | None = None, line: int | None = None) -> Any:
    where = source if line is None else f"{source}:{line}"
    who = "" if server is None else f"MCP server {server!r}: "
    raise ConfigError(
        f"{where}: {who}{message}",
        code=ErrorCode.MCP_CONFIG_INVALID,
        source=source,
        server=server,
        line=line,
    )


def _string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else type(value).__name__


def _pairs(value: object, what: str, environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{what} must be an object of strings, got {_kind(value)}")
    pairs: list[tuple[str, str]] = []
    for key, item in cast("dict[object, object]", value).items():
        key = _string(key, f"a key of {what}")
        if not key or "=" in key or "\0" in key:
            raise ConfigError(f"{what} has an invalid name {key!r}")
        text = expand(_string(item, f"{what}.{key}"), environ)
        if "\0" in text:
            raise ConfigError(f"{what}.{key} contains a NUL character")
        pairs.append((key, text))
    return tuple(pairs)


def _no_nul(text: str, what: str) -> str:
    if "\0" in text:
        raise ConfigError(f"{what} contains a NUL character")
    return text


def _stdio(name: str, raw: dict[str, object], source: str, env: Mapping[str, str]) -> Any:
    command = _no_nul(expand(_string(raw.get("command"), "command"), env), "command")
    if not command.strip():
        raise ConfigError("command must not be empty")
    args_value = raw.get("args", [])
    if not isinstance(args_value, list):
        raise ConfigError(f"args must be an array of strings, got {_kind(args_value)}")
    args = tuple(
        _no_nul(expand(_string(a, f"args[{i}]"), env), f"args[{i}]")
        for i, a in enumerate(cast("list[object]", args_value))
    )
    pairs = _pairs(raw.get("env", {}), "env", env)
    return McpServerConfig(
        name=name, transport="stdio", source=source, command=command, args=args, env=pairs
    )


def _http(name: str, raw: dict[str, object], source: str, env: Mapping[str, str]) -> Any:
    url = expand(_string(raw.get("url"), "url"), env)
    if not re.match(r"^https?://[^\s/?#]+", url) or any(c.isspace() for c in url):
        raise ConfigError(f"url must be an http:// or https:// URL, got {url!r}")
    headers = _pairs(raw.get("headers", {}), "headers", env)
    for key, value in headers:
        if "\r" in value or "\n" in value or not re.match(r"^[!-9;-~]+$", key):
            raise ConfigError(f"headers.{key} is not a valid HTTP header")
    return McpServerConfig(name=name, transport="http", source=source, url=url, headers=headers)


def _server(name: str, raw: object, source: str, environ: Mapping[str, str]) -> McpServerConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"must be an object, got {_kind(raw)}")
    entry = cast("dict[object, object]", raw)
    if not all(isinstance(k, str) for k in entry):
        raise ConfigError("keys must be strings")
    fields = cast("dict[str, object]", entry)
    kind = fields.get("type", "stdio" if "url" not in fields else None)
    if kind == "sse":
        raise ConfigError(
            'transport "sse" is not supported (deprecated in MCP); use "type": "http" with the '
            "server's streamable HTTP endpoint"
        )
    if kind not in ("stdio", "http"):
        shown = "missing" if kind is None else repr(kind)
        raise ConfigError(f'type must be "stdio" or "http", got {shown}')
    allowed = _STDIO_KEYS if kind == "stdio" else _HTTP_KEYS
    unknown = sorted(set(fields) - allowed)
    if unknown:
        keys = ", ".join(sorted(allowed))
        raise ConfigError(f"unknown key {unknown[0]!r} for a {kind} server (allowed: {keys})")
    build = _stdio if kind == "stdio" else _http
    return cast("McpServerConfig", build(name, fields, source, environ))


def parse_servers(
    value: object, *, source: str, environ: Mapping[str, str] | None = None
) -> dict[str, McpServerConfig]:
    """The servers of an `mcpServers` mapping (name → server object), by name.

    `source` names where it came from in errors (a file path, or `definition`); `environ`
    (default: the process environment) supplies `${VAR}` expansion.

    Raises:
        ConfigError: (`MCP_CONFIG_INVALID`) one line naming the source and the server.
    """
    env = os.environ if environ is None else environ
    if not isinstance(value, dict):
        return _fail(source, f"mcpServers must be an object of servers, got {_kind(value)}")
    servers: dict[str, McpServerConfig] = {}
    for name, raw in cast("dict[object, object]", value).items():
        if not isinstance(name, str) or not SERVER_NAME.match(name):
            return _fail(
                source,
                f"invalid MCP server name {name!r}: use 1-32 letters, digits, '_' or '-', "
                "starting with a letter or digit, with no '__' and no trailing '_'",
            )
        try:
            servers[name] = _server(name, raw, source, env)
        except ConfigError as exc:
            return _fail(source, exc.message, server=name)
    return servers


def _server_line(text: str, name: str) -> int | None:
    """The line of `"name":` in the file's text, where the first such key appears."""
    match = re.search(r'"' + re.escape(json.dumps(name)[1:-1]) + r'"\s*:', text)
    return None if match is None else text.count("\n", 0, match.start()) + 1


def parse_mcp_json(
    text: str, *, source: str, environ: Mapping[str, str] | None = None
) -> dict[str, McpServerConfig]:
    """The servers of a whole `.mcp.json` document (`{"mcpServers": {...}}`).

    Raises:
        ConfigError: (`MCP_CONFIG_INVALID`) one line naming `source`, the line where it is
            known (always for a JSON syntax error) and the server.
    """
    try:
        document: object = json.loads(text)
    except json.JSONDecodeError as exc:
        return _fail(source, f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno)
    except RecursionError:
        return _fail(source, "invalid JSON: nested too deeply")
    except ValueError as exc:  # an integer too long to convert, a lone surrogate
        return _fail(source, f"invalid JSON: {exc}".splitlines()[0])
    if not isinstance(document, dict):
        return _fail(source, f'must be a JSON object with "mcpServers", got {_kind(document)}')
    fields = cast("dict[str, object]", document)
    if "mcpServers" not in fields:
        return {}  # a file without servers declares none (Claude Code keeps other keys here)
    try:
        return parse_servers(fields["mcpServers"], source=source, environ=environ)
    except ConfigError as exc:
        server = exc.fields.get("server")
        line = _server_line(text, server) if isinstance(server, str) else None
        if line is None:
            raise
        detail = exc.message.removeprefix(f"{source}: ")
        return _fail(source, detail.split(": ", 1)[1], server=server, line=line)


def read_mcp_json(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> dict[str, McpServerConfig]:
    """The servers of the `.mcp.json` at `path`; a missing file declares none.

    Blocking (it reads the file): call it off the event loop.

    Raises:
        ConfigError: (`MCP_CONFIG_INVALID`) the file is not a regular file, is larger than
            `MAX_MCP_JSON_BYTES`, is not UTF-8, or does not parse.
    """
    source = os.fspath(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        return _fail(source, f"cannot open: {exc.strerror}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _fail(source, "not a regular file")
        if info.st_size > MAX_MCP_JSON_BYTES:
            return _fail(source, f"larger than {MAX_MCP_JSON_BYTES} bytes")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_MCP_JSON_BYTES and (chunk := os.read(fd, 65536)):
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > MAX_MCP_JSON_BYTES:
        return _fail(source, f"larger than {MAX_MCP_JSON_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return _fail(source, "not valid UTF-8", line=line)
    return parse_mcp_json(text, source=source, environ=environ)


def check_executable(
    config: McpServerConfig, environ: Mapping[str, str] | None = None, *, cwd: str | None = None
) -> str | None:
    """The absolute path of a stdio server's command, found before anything starts.

    A bare name is looked up on `environ`'s PATH (default: the process environment); a name
    with a `/` is taken relative to `cwd`. Returns None for an HTTP server. Blocking (it looks
    at the file system): call it off the event loop.

    Raises:
        ConfigError: (`MCP_SERVER_NOT_EXECUTABLE`) the command is not found or not executable.
    """
    if config.transport != "stdio" or config.command is None:
        return None
    env = os.environ if environ is None else environ
    command = config.command
    if "/" in command:
        found = os.path.join(cwd or os.getcwd(), command)
        usable = os.path.isfile(found) and os.access(found, os.X_OK)
    else:
        located = shutil.which(command, path=env.get("PATH", os.defpath))
        found, usable = located or command, located is not None
    if not usable:
        where = "not executable" if os.path.exists(found) else "not found"
        if "/" not in command:
            where = "not found on PATH"
        raise ConfigError(
            f"{config.source}: MCP server {config.name!r}: command {command!r} is {where}",
            code=ErrorCode.MCP_SERVER_NOT_EXECUTABLE,
            server=config.name,
            command=command,
        )
    return os.path.abspath(found)
