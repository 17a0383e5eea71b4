"""The console's routes: pages, the JSON API, the event streams and the controls (docs/web.md).

`create_app` builds a starlette app for one store and one tenant behind `ConsoleGuard`.
Every error is `{"error": {"code", "message"}}` with a stable code and the HTTP status of
`_STATUS`; nothing a client sends changes anything before it is checked.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, cast

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import ErrorCode, SubagentsError, UsageError
from ..ids import SessionId
from ..sessions import SqliteEventStore
from ._controls import Controls
from ._jobs import Job, Jobs
from ._live import sessions_stream, tree_stream
from ._security import ConsoleGuard, Door
from ._trees import MAX_RECORDS, Trees, row_json

__all__ = ["MAX_BODY_BYTES", "ConsoleConfig", "create_app"]

STATIC = Path(__file__).parent / "static"
MAX_BODY_BYTES = 256 * 1024
_PING_SECONDS = 15

_STATUS: dict[ErrorCode, int] = {
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.BAD_ORIGIN: 403,
    ErrorCode.BAD_HOST: 403,
    ErrorCode.NOT_RESUMABLE: 409,
    ErrorCode.ALREADY_DECIDED: 409,
    ErrorCode.NO_PENDING_REQUEST: 409,
}


@dataclass(frozen=True, slots=True)
class ConsoleConfig:
    """One console: its store file, its tenant, its door and what its runs default to."""

    store: Path
    tenant: str
    door: Door
    model: str | None = None
    interval: float = 0.1
    cwd: Path | None = None


@dataclass(slots=True)
class _State:
    config: ConsoleConfig
    trees: Trees
    jobs: Jobs
    controls: Controls


def _error(code: ErrorCode, message: str, status: int | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": str(code), "message": message}},
        status_code=status or _STATUS.get(code, 400),
    )


async def _json_body(request: Request, allowed: frozenset[str]) -> dict[str, Any]:
    """The request's JSON object, refused (one line, a stable code) unless well formed."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise _refused(415, "send the body as application/json")
    size = 0
    chunks: list[bytes] = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _refused(413, f"the body is larger than {MAX_BODY_BYTES // 1024} KiB")
        chunks.append(chunk)
    try:
        body: object = json.loads(b"".join(chunks) or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise _refused(400, "the body is not valid JSON") from None
    except RecursionError:
        raise _refused(400, "the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise _refused(400, "the body must be a JSON object")
    fields = cast("dict[str, Any]", body)
    unknown = sorted(set(fields) - allowed)
    if unknown:
        raise _refused(400, f"unknown field {unknown[0][:40]!r}; expected {sorted(allowed)}")
    return fields


def _refused(status: int, message: str) -> UsageError:
    """A malformed request: `BAD_REQUEST`, answered with `status`."""
    return UsageError(message, code=ErrorCode.BAD_REQUEST, http_status=status)


def _int_param(request: Request, name: str, default: int, *, maximum: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > 12:
        raise UsageError(f"{name} must be a whole number from 0, got {raw[:20]!r}")
    return min(int(raw), maximum)


Endpoint = Callable[[Request, _State], Awaitable[Response]]


def _endpoint(handler: Endpoint) -> Callable[[Request], Awaitable[Response]]:
    """A route that turns our errors into their JSON answer."""

    async def endpoint(request: Request) -> Response:
        state = cast("_State", request.app.state.console)
        try:
            return await handler(request, state)
        except SubagentsError as exc:
            status = exc.fields.get("http_status")
            return _error(exc.code, exc.message, status if isinstance(status, int) else None)

    return endpoint


def _accepted(job: Job) -> JSONResponse:
    return JSONResponse({"job": job.to_json()}, status_code=202)


def _package_version() -> str:
    try:
        return version("subagents")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "unknown"


_VERSION = _package_version()  # read once, at import: it reads files


async def _index(request: Request, state: _State) -> Response:
    return FileResponse(STATIC / "index.html", media_type="text/html")


async def _info(request: Request, state: _State) -> Response:
    config = state.config
    return JSONResponse(
        {
            "tenant": config.tenant,
            "store": str(config.store),
            "model": config.model,
            "interval": config.interval,
            "version": _VERSION,
        }
    )


async def _sessions(request: Request, state: _State) -> Response:
    return JSONResponse({"sessions": await state.trees.sessions(request.query_params.get("q"))})


async def _sessions_stream(request: Request, state: _State) -> Response:
    query = request.query_params.get("q")
    return _sse(
        sessions_stream(state.trees, state.jobs, query=query, interval=state.config.interval)
    )


async def _tree(request: Request, state: _State) -> Response:
    root = await state.trees.root(request.path_params["root"])
    watched = await state.trees.current(root)
    rows = watched.view.rows(held=watched.held, now=time.time())
    counts = state.trees.counts(watched, rows)
    return JSONResponse(
        {
            "root": root.id,
            "held": watched.held,
            "rows": [row_json(r, counts[r.session_id]) for r in rows],
        }
    )


async def _member(request: Request, state: _State) -> Response:
    root = await state.trees.root(request.path_params["root"])
    watched, session_id = await state.trees.member(root, request.path_params["member"])
    now = time.time()
    counts = state.trees.counts(watched, watched.view.rows(held=watched.held, now=now))
    row = watched.view.row(session_id, held=watched.held, now=now)
    shown = row_json(row, counts.get(session_id, (0, 0)))
    return JSONResponse(watched.view.details(session_id) | {"row": shown})


async def _approvals(request: Request, state: _State) -> Response:
    root = await state.trees.root(request.path_params["root"])
    found = await state.trees.approvals(root)
    return JSONResponse({"approvals": [a.to_json() for a in found]})


async def _all_approvals(request: Request, state: _State) -> Response:
    found = await state.trees.all_approvals()
    return JSONResponse({"approvals": [a.to_json() for a in found]})


async def _records(request: Request, state: _State) -> Response:
    root = await state.trees.root(request.path_params["root"])
    from_seq = _int_param(request, "from", 0, maximum=2**62)
    limit = _int_param(request, "limit", MAX_RECORDS, maximum=MAX_RECORDS)
    page = await state.trees.records(
        root, request.path_params["member"], from_seq=from_seq, limit=limit
    )
    return JSONResponse(page)


async def _timeline(request: Request, state: _State) -> Response:
    root = await state.trees.root(request.path_params["root"])
    watched = await state.trees.current(root)
    return JSONResponse(watched.view.timeline(held=watched.held, now=time.time()))


async def _tree_stream(request: Request, state: _State) -> Response:
    root = await state.trees.root(request.path_params["root"])
    selected = request.query_params.get("member")
    member: SessionId | None = None
    if selected is not None:
        _, member = await state.trees.member(root, selected)
    from_seq = _int_param(request, "from", 0, maximum=2**62)
    return _sse(
        tree_stream(
            state.trees,
            state.jobs,
            root,
            member=member,
            from_seq=from_seq,
            interval=state.config.interval,
        )
    )


async def _jobs(request: Request, state: _State) -> Response:
    return JSONResponse({"jobs": state.jobs.listing()})


async def _send(request: Request, state: _State) -> Response:
    body = await _json_body(request, frozenset({"name", "message"}))
    return _accepted(await state.controls.message("send", request.path_params["root"], body))


async def _steer(request: Request, state: _State) -> Response:
    body = await _json_body(request, frozenset({"name", "message"}))
    return _accepted(await state.controls.message("steer", request.path_params["root"], body))


async def _interrupt(request: Request, state: _State) -> Response:
    body = await _json_body(request, frozenset({"name"}))
    return _accepted(await state.controls.interrupt(request.path_params["root"], body))


async def _resume(request: Request, state: _State) -> Response:
    body = await _json_body(request, frozenset({"prompt"}))
    return _accepted(await state.controls.resume(request.path_params["root"], body))


async def _approve(request: Request, state: _State) -> Response:
    body = await _json_body(request, frozenset({"name", "call_id"}))
    return _accepted(await state.controls.decide("approve", request.path_params["root"], body))


async def _deny(request: Request, state: _State) -> Response:
    body = await _json_body(request, frozenset({"name", "call_id", "reason"}))
    return _accepted(await state.controls.decide("deny", request.path_params["root"], body))


async def _run(request: Request, state: _State) -> Response:
    body = await _json_body(request, frozenset({"prompt", "model"}))
    return _accepted(await state.controls.run(body))


def _get(path: str, handler: Endpoint) -> Route:
    return Route(path, _endpoint(handler), methods=["GET"])


def _post(path: str, handler: Endpoint) -> Route:
    return Route(path, _endpoint(handler), methods=["POST"])


ROUTES: list[Route | Mount] = [
    _get("/", _index),
    _get("/api/info", _info),
    _get("/api/sessions", _sessions),
    _get("/api/stream", _sessions_stream),
    _get("/api/jobs", _jobs),
    _get("/api/approvals", _all_approvals),
    _post("/api/runs", _run),
    _get("/api/sessions/{root}/tree", _tree),
    _get("/api/sessions/{root}/timeline", _timeline),
    _get("/api/sessions/{root}/stream", _tree_stream),
    _get("/api/sessions/{root}/approvals", _approvals),
    _get("/api/sessions/{root}/members/{member}", _member),
    _get("/api/sessions/{root}/members/{member}/records", _records),
    _post("/api/sessions/{root}/send", _send),
    _post("/api/sessions/{root}/steer", _steer),
    _post("/api/sessions/{root}/interrupt", _interrupt),
    _post("/api/sessions/{root}/resume", _resume),
    _post("/api/sessions/{root}/approve", _approve),
    _post("/api/sessions/{root}/deny", _deny),
    Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
]


def _sse(events: AsyncIterator[Any]) -> Response:
    return EventSourceResponse(events, ping=_PING_SECONDS, headers={"cache-control": "no-store"})


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    code = ErrorCode.NOT_FOUND if status == 404 else ErrorCode.BAD_REQUEST
    message = "no such page or API" if status == 404 else f"not allowed here (HTTP {status})"
    return _error(code, message, status)


async def _internal_error(request: Request, exc: Exception) -> Response:
    # Starlette re-raises after this answer, so the traceback still reaches the console's log.
    return _error(ErrorCode.INTERNAL, "the console failed on this request; see its log", 500)


def create_app(config: ConsoleConfig) -> ConsoleGuard:
    """The console for `config`, behind its guard (an ASGI app for uvicorn or a test client)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None]:
        async with SqliteEventStore(config.store) as store:
            trees = Trees(store, config.tenant)
            jobs = Jobs(store=config.store, tenant=config.tenant, cwd=config.cwd)
            controls = Controls(trees, jobs, model=config.model)
            app.state.console = _State(config, trees, jobs, controls)
            try:
                yield
            finally:
                await jobs.aclose()

    app = Starlette(
        routes=ROUTES,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
    )
    app.router.redirect_slashes = False  # `/api/info/` is not found, not a redirect
    return ConsoleGuard(app, config.door)
