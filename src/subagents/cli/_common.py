"""What every command shares: error reporting and exit codes, store and model resolution."""

from __future__ import annotations

import asyncio
import errno
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer

from ..core import default_store_path
from ..errors import ErrorCode, NotFoundError, StoreError, SubagentsError, UsageError
from ..ids import check_tenant_id
from ..models import Model
from ..models._spec import open_model, parse_model_spec
from ..sessions import EventStore
from ..sessions._sqlite import SqliteEventStore, parse_store_url

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "check_argv",
    "check_path",
    "check_tenant",
    "fail",
    "open_store",
    "resolve_model",
    "run_async",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

T = TypeVar("T")

_USAGE_STORE_CODES = frozenset(
    {
        ErrorCode.STORE_UNWRITABLE,
        ErrorCode.STORE_CORRUPT,
        ErrorCode.SCHEMA_VERSION,
        ErrorCode.EVENT_UNSUPPORTED,
        ErrorCode.CONFIG,
    }
)

MODEL_CHOICES = (
    "pass --model or set SUBAGENTS_MODEL to one of: scripted:PATH, openai:MODEL, "
    "deepseek:MODEL, openai-compatible:MODEL@BASE_URL"
)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print a one-line error on stderr and exit."""
    typer.echo(f"subagents: error: {message}", err=True)
    raise typer.Exit(code)


_USAGE_DELEGATION_CODES = frozenset(
    {
        ErrorCode.NOT_RESUMABLE,
        ErrorCode.NOT_FOUND,
        ErrorCode.INVALID_NAME,
        ErrorCode.UNAUTHORIZED,
        ErrorCode.LEASE_HELD,
    }
)


def exit_code_for(error: SubagentsError) -> int:
    if isinstance(error, UsageError | NotFoundError):
        return EXIT_USAGE
    if error.code in _USAGE_DELEGATION_CODES:
        return EXIT_USAGE
    if isinstance(error, StoreError) and error.code in _USAGE_STORE_CODES:
        return EXIT_USAGE
    return EXIT_FAILED


def run_async(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a command's coroutine; our errors become one line on stderr and an exit code."""
    try:
        return asyncio.run(main())
    except SubagentsError as exc:
        fail(f"{exc.message} [{exc.code}]", exit_code_for(exc))
    except KeyboardInterrupt:
        typer.echo("subagents: interrupted", err=True)
        raise typer.Exit(130) from None


def resolve_model(spec: str | None, *, recorded: str | None = None) -> tuple[Model, str]:
    """The model of `--model`, else the session's recorded one, else `$SUBAGENTS_MODEL`."""
    chosen = spec or recorded or os.environ.get("SUBAGENTS_MODEL")
    if not chosen:
        fail(f"no model given: {MODEL_CHOICES}")
    try:
        parsed = parse_model_spec(chosen)
        return open_model(parsed), str(parsed)
    except SubagentsError as exc:
        fail(f"{exc.message} [{exc.code}]", exit_code_for(exc))


def _shown(value: str, limit: int = 80) -> str:
    """`value` for an error line: at most `limit` characters, surrogates escaped."""
    text = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 3] + "..."


_NAME_MAX = 255
_PATH_MAX = 4096


def _limit(name: str, fallback: int) -> int:
    try:
        return os.pathconf("/", name)
    except (OSError, ValueError, AttributeError):
        return fallback


def check_path(path: Path, option: str) -> Path:
    """`path`, or exit 2 naming `option` when it exceeds the system's path limits.

    The limits are checked on the encoded path (each component against NAME_MAX, the whole
    against PATH_MAX), and a stat that fails with ENAMETOOLONG is refused the same way, so
    no command ever meets the error later with a traceback.
    """
    encoded = os.fsencode(path)
    name_max = _limit("PC_NAME_MAX", _NAME_MAX)
    path_max = _limit("PC_PATH_MAX", _PATH_MAX)
    too_long = len(encoded) >= path_max or any(len(part) > name_max for part in encoded.split(b"/"))
    if not too_long:
        try:
            path.stat()
        except OSError as exc:
            too_long = exc.errno == errno.ENAMETOOLONG
    if too_long:
        fail(
            f"{option} {_shown(str(path))}: the path is too long for this system "
            f"(at most {name_max} bytes a component, {path_max - 1} in all)"
        )
    return path


def store_path(store: str | None) -> Path:
    try:
        path = parse_store_url(store) if store else default_store_path()
    except SubagentsError as exc:
        fail(f"{exc.message} [{exc.code}]", exit_code_for(exc))
    return check_path(path, "--store" if store else "the store path")


def open_store(store: str | None) -> EventStore:
    """An unopened SQLite store for `--store` (or the default); the caller enters it."""
    return SqliteEventStore(store_path(store))


def require_existing_store(store: str | None) -> Path:
    """For read commands: a store that does not exist yet has no sessions (exit 2)."""
    path = store_path(store)
    if not path.exists():
        fail(f"no store at {path}: nothing has run yet; pass --store or run `subagents run`")
    return path


def check_tenant(tenant: str) -> str:
    """`tenant`, or exit 2 with one line when it is not a tenant id (`ids.TENANT_PATTERN`)."""
    try:
        return check_tenant_id(tenant)
    except SubagentsError as exc:
        fail(f"--tenant: {exc.message} [{exc.code}]", exit_code_for(exc))


def check_argv(argv: list[str]) -> None:
    """Exit 2 with one line when an argument is not valid UTF-8, before anything is written.

    Python decodes such bytes to lone surrogates (surrogateescape); they cannot be stored
    or printed as text, so the command is refused rather than failing half-way.
    """
    for position, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            fail(f"argument {position} ({_shown(arg)}) is not valid UTF-8 text")


def is_terminal() -> bool:
    return sys.stderr.isatty()
