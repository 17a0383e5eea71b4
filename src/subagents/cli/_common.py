"""What every command shares: error reporting and exit codes, store and model resolution.

The settings, models and store are imported by the functions that use them, not here: every
command imports this module, `--help` included (startup time; tests/cli/test_startup.py).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import re
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

from ..errors import ErrorCode, NotFoundError, StoreError, SubagentsError, UsageError
from ..ids import SessionId, check_tenant_id

if TYPE_CHECKING:
    from ..config import Settings
    from ..models import Model
    from ..sessions import EventStore, SessionHeader

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "check_argv",
    "check_path",
    "check_tenant",
    "fail",
    "is_session_id",
    "open_store",
    "read_prompt",
    "resolve_model",
    "resolve_root",
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
    "pass --model, set SUBAGENTS_MODEL or `model` in config.toml to an alias or one of: "
    "scripted:PATH, openai:MODEL, deepseek:MODEL, openai-compatible:MODEL@BASE_URL, "
    "anthropic:MODEL"
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
        ErrorCode.ALREADY_DECIDED,
        ErrorCode.NO_PENDING_REQUEST,
        ErrorCode.AMBIGUOUS_REQUEST,
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
    import asyncio  # here, not at the top: `--help` needs no event loop (startup time)

    try:
        return asyncio.run(main())
    except SubagentsError as exc:
        fail(f"{exc.message} [{exc.code}]", exit_code_for(exc))
    except KeyboardInterrupt:
        typer.echo("subagents: interrupted", err=True)
        raise typer.Exit(130) from None


def resolve_model(
    spec: str | None, *, recorded: str | None = None, settings: Settings | None = None
) -> tuple[Model, str]:
    """The model to run, opened.

    `--model` (a spec or an alias), else the session's recorded one, else the settings'
    default (`$SUBAGENTS_MODEL`, then the settings files).
    """
    # Here, not at the top: the model adapters are for the commands that run (startup time).
    from ..config import BUILTIN_ALIASES, resolve_model_name
    from ..models import open_model, parse_model_spec

    aliases = settings.alias_map if settings is not None else dict(BUILTIN_ALIASES)
    default = settings.model.value if settings is not None and settings.model else None
    try:
        chosen = resolve_model_name(spec, aliases) if spec else recorded or default
        if not chosen:
            fail(f"no model given: {MODEL_CHOICES}")
        parsed = parse_model_spec(chosen)
        if parsed.kind == "scripted":
            # Recorded absolute, so that `resume` and `send` from another directory find it.
            parsed = dataclasses.replace(parsed, model=os.path.abspath(parsed.model))
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


_CHECKED: set[Path] = set()
"""Paths `check_path` accepted: a length limit does not change, and the option callback checks
the store before any event loop runs, so the store's opening inside one never blocks on it."""


def check_path(path: Path, option: str) -> Path:
    """`path`, or exit 2 naming `option` when it exceeds the system's path limits.

    The limits are checked on the encoded path (each component against NAME_MAX, the whole
    against PATH_MAX), and a stat that fails with ENAMETOOLONG is refused the same way, so
    no command ever meets the error later with a traceback.
    """
    if path in _CHECKED:
        return path
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
    _CHECKED.add(path)
    return path


def store_path(store: str | None) -> Path:
    # Here, not at the top: the store is for the commands that open one (startup time).
    from ..sessions import default_store_path, parse_store_url

    try:
        path = parse_store_url(store) if store else default_store_path()
    except SubagentsError as exc:
        fail(f"{exc.message} [{exc.code}]", exit_code_for(exc))
    return check_path(path, "--store" if store else "the store path")


def open_store(store: str | None) -> EventStore:
    """An unopened SQLite store for `--store` (or the default); the caller enters it."""
    from ..sessions import SqliteEventStore  # startup time: see store_path

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


def read_prompt(prompt: str) -> str:
    """`prompt`, or for `-` the text on stdin (decoded as UTF-8, exit 2 when it is not)."""
    if prompt != "-":
        return prompt
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        fail("the prompt on stdin is not valid UTF-8 text")


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_PREFIX = re.compile(r"^[0-9a-f-]{1,36}$")
NEWEST = "lead"
"""The session reference that stands for the tenant's newest root session (also `--last`)."""


def is_session_id(text: str) -> bool:
    """Whether `text` is a whole session id (a UUID, any case)."""
    return _UUID.match(text.strip().lower()) is not None


SESSION_HELP = (
    "Root session: its id, a unique prefix of the id, or `lead` (or --last) for the tenant's "
    "newest."
)


async def resolve_root(opened: EventStore, tenant: str, reference: str) -> SessionHeader:
    """The root session a reference names: an id, a unique id prefix, or `lead` (the newest).

    Raises `NotFoundError` naming what was wrong: not a reference, no such session, an ambiguous
    prefix (with the candidates), or a child session's id.
    """
    reference = reference.strip().lower()
    if _UUID.match(reference):
        header = await opened.get_header(SessionId(reference), tenant=tenant)
        if header.parent is not None:
            raise NotFoundError(
                f"session {reference} is not a root session; give the tree's root id "
                f"({header.root})"
            )
        return header
    roots = await opened.list_headers(tenant=tenant, roots_only=True)
    if reference == NEWEST:
        if not roots:
            raise NotFoundError(f"tenant {tenant!r} has no sessions yet")
        return roots[0]
    if not _PREFIX.match(reference):
        raise NotFoundError(
            f"{_shown(reference)!r} is not a session id, a prefix of one, or `lead`; list them "
            "with `subagents sessions`"
        )
    matches = [h for h in roots if h.id.startswith(reference)]
    if not matches:
        raise NotFoundError(
            f"no root session of tenant {tenant!r} starts with {reference!r}; list them with "
            "`subagents sessions`"
        )
    if len(matches) > 1:
        shown = ", ".join(h.id[:13] for h in matches[:3]) + (", ..." if len(matches) > 3 else "")
        raise UsageError(
            f"session prefix {reference!r} is ambiguous: {len(matches)} sessions start with it "
            f"({shown}); give more of the id",
            code=ErrorCode.AMBIGUOUS_MATCH,
        )
    return matches[0]
