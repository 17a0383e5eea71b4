"""The workflow guest: runs one model-written script in its own (confined) process.

Started as `python -I -S -B _guest.py FD`, it speaks 4-byte length-prefixed JSON frames over
the socket FD: `call {id, fn, arg}` and one final `done {result}` out, `reply {id, value |
error}` in. It asks `begin` for the script and limits, compiles the script as the body of an
async function, runs it on its own event loop with the hooks (`agent`, `parallel`, `pipeline`,
`phase`, `log`, `args`, `WorkflowError`) and reports `{value, stopReason, agentsStarted,
error?}`. The script's first synchronous slice is limited by an interval timer.

Stdlib only and self-contained (it runs without site-packages). The host imports its pure
parts: `compile_script`, `materialize` and `schema_subset_problem`. The curated builtins shape
the API; they are not a security boundary (the OS confinement of the process is).
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import json
import math
import os
import select
import signal
import socket
import struct
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from types import CodeType, TracebackType
from typing import Any, NoReturn, TypeAlias, cast

__all__ = [
    "ENTRY",
    "META_HEADER_MESSAGE",
    "NotJson",
    "ScriptParseError",
    "compile_script",
    "materialize",
    "schema_subset_problem",
]

Json: TypeAlias = Any
"""A plain JSON value (the one place `Any` is allowed: the JSON boundary)."""

SCRIPT_FILE = "<workflow>"
ENTRY = "__workflow__"
META_HEADER_MESSAGE = (
    "workflow meta rides the `meta` request field, not the script: remove the "
    "`export const meta = {...}` statement from the body"
)
PARSE_PREFIX = "workflow script does not parse: "
SUPPORTED_OPTIONS = ("label", "phase", "schema", "provider", "model", "name")
DEFERRED_OPTIONS = ("effort", "isolation", "agentType", "agent_type")
SCHEMA_KEYWORDS = (
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "oneOf",
)
SCHEMA_ANNOTATIONS = ("description", "title")
JSON_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
MAX_DEPTH = 200
IMPORTABLE = frozenset(
    {
        "bisect",
        "collections",
        "copy",
        "dataclasses",
        "datetime",
        "decimal",
        "difflib",
        "enum",
        "fractions",
        "functools",
        "heapq",
        "itertools",
        "json",
        "math",
        "operator",
        "random",
        "re",
        "statistics",
        "string",
        "textwrap",
        "typing",
    }
)
WITHHELD_BUILTINS = frozenset(
    {
        "open",
        "__import__",
        "exec",
        "eval",
        "compile",
        "input",
        "breakpoint",
        "globals",
        "locals",
        "vars",
        "help",
        "exit",
        "quit",
        "copyright",
        "credits",
        "license",
        "memoryview",
        "__loader__",
        "__spec__",
        "__package__",
        "__name__",
        "__doc__",
    }
)


# -- compiling ----------------------------------------------------------------------------------


class ScriptParseError(Exception):
    """The script cannot run: the message is the model-facing text."""


def compile_script(body: str) -> CodeType:
    """Compile the script as the body of `async def __workflow__()`.

    Top-level `await` and `return` are allowed; a top-level `yield` is not (the body would
    become a generator). Line numbers are the body's own. Raises `ScriptParseError`.
    """
    if body.lstrip().startswith("export const meta"):
        raise ScriptParseError(META_HEADER_MESSAGE)
    try:
        tree = ast.parse(body, filename=SCRIPT_FILE, mode="exec")
        _reject_yield(tree.body)
        fields: dict[str, Any] = {
            "name": ENTRY,
            "args": ast.arguments(
                posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]
            ),
            "body": tree.body or [ast.Pass()],
            "decorator_list": [],
            "returns": None,
            "lineno": 1,
            "col_offset": 0,
        }
        if sys.version_info >= (3, 12):
            fields["type_params"] = []
        module = ast.Module(body=[ast.AsyncFunctionDef(**fields)], type_ignores=[])
        ast.fix_missing_locations(module)
        return compile(module, SCRIPT_FILE, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise ScriptParseError(PARSE_PREFIX + _syntax_text(exc)) from None
    except (ValueError, TypeError, RecursionError, MemoryError) as exc:
        raise ScriptParseError(PARSE_PREFIX + (str(exc) or type(exc).__name__)) from None


def _syntax_text(exc: SyntaxError) -> str:
    where = f"line {exc.lineno}" if exc.lineno else ""
    if where and exc.offset:
        where += f", column {exc.offset}"
    return f"{exc.msg} ({where})" if where else str(exc.msg)


def _reject_yield(body: list[ast.stmt]) -> None:
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Yield | ast.YieldFrom):
            raise SyntaxError(
                "'yield' is not allowed at the top level of a workflow script; return a value",
                (SCRIPT_FILE, node.lineno, node.col_offset + 1, None),
            )
        if not isinstance(node, scopes):
            stack.extend(ast.iter_child_nodes(node))


# -- plain JSON ---------------------------------------------------------------------------------


class NotJson(Exception):
    """A value is not plain JSON data; `str()` is `<path>: <reason>`."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def materialize(value: object, root: str) -> Json:
    """A deep copy of `value` if it is plain JSON data, else `NotJson` naming where and why.

    Plain data is exactly `dict` (str keys), `list`, `str`, `int`, finite `float`, `bool` and
    `None`: no tuples, sets, bytes, subclasses, non-string keys, NaN or infinities, cycles.
    """
    return _copy(value, root, set(), 0)


def _copy(value: object, path: str, active: set[int], depth: int) -> Json:
    kind = type(value)
    if value is None or kind is bool or kind is str or kind is int:
        return value
    if kind is float:
        if not math.isfinite(cast("float", value)):
            raise NotJson(path, f"{value!r} is not a finite number")
        return value
    if kind is list or kind is dict:
        if depth >= MAX_DEPTH:
            raise NotJson(path, f"the value nests deeper than {MAX_DEPTH} levels")
        if id(value) in active:
            raise NotJson(path, "the value contains a cycle (it contains itself)")
        active.add(id(value))
        try:
            if kind is list:
                items = cast("list[object]", value)
                return [_copy(v, f"{path}[{i}]", active, depth + 1) for i, v in enumerate(items)]
            out: dict[str, Json] = {}
            for key, item in cast("dict[object, object]", value).items():
                if type(key) is not str:
                    raise NotJson(path, f"key {key!r} is not a string (object keys must be str)")
                out[key] = _copy(item, _key_path(path, key), active, depth + 1)
            return out
        finally:
            active.discard(id(value))
    raise NotJson(path, _not_json_reason(value))


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"


def _not_json_reason(value: object) -> str:
    kind = type(value)
    for base, word in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")):
        if isinstance(value, base):
            return f"{kind.__name__} is a subclass of {word}; only exact JSON types are plain data"
    for base, word in ((dict, "dict"), (list, "list")):
        if isinstance(value, base):
            return f"{kind.__name__} is a subclass of {word}; only exact JSON types are plain data"
    if isinstance(value, tuple):
        return "a tuple is not plain JSON data (use a list)"
    if isinstance(value, set | frozenset):
        return "a set is not plain JSON data (use a list)"
    if isinstance(value, bytes | bytearray):
        return "bytes are not plain JSON data (decode them to a str)"
    if isinstance(value, asyncio.Future | Coroutine):
        return f"a {kind.__name__} is not plain JSON data (did you forget `await`?)"
    if callable(value):
        return f"a {kind.__name__} is not plain JSON data (functions cannot cross)"
    return f"a {kind.__name__} value is not plain JSON data"


# -- output schemas -----------------------------------------------------------------------------


def schema_subset_problem(schema: object) -> str | None:
    """Why `schema` is outside the supported subset, or None when it is inside.

    The subset: an object-rooted JSON Schema using only type, properties, required,
    additionalProperties, items, enum, const and oneOf (plus description/title annotations).
    """
    if not isinstance(schema, dict) or cast("dict[str, object]", schema).get("type") != "object":
        return "schema: the root must be an object schema ({'type': 'object', ...})"
    return _schema_problem(cast("dict[str, object]", schema), "schema")


def _schema_problem(node: object, path: str) -> str | None:  # noqa: C901
    if not isinstance(node, dict):
        return f"{path}: a schema must be an object"
    schema = cast("dict[str, object]", node)
    for key in schema:
        if key not in SCHEMA_KEYWORDS and key not in SCHEMA_ANNOTATIONS:
            return (
                f'{path}: keyword "{key}" is not supported (supported: '
                f"{', '.join(SCHEMA_KEYWORDS)})"
            )
    problem: str | None = None
    kind = schema.get("type")
    if kind is not None:
        kinds = cast("list[object]", kind) if isinstance(kind, list) else [kind]
        if not kinds or any(k not in JSON_TYPES for k in kinds):
            return f"{path}.type: must be one of {', '.join(JSON_TYPES)} (or a list of them)"
    properties = schema.get("properties")
    if properties is not None:
        if not isinstance(properties, dict):
            return f"{path}.properties: must be an object of schemas"
        for name, sub in cast("dict[str, object]", properties).items():
            if (problem := _schema_problem(sub, _key_path(f"{path}.properties", name))) is not None:
                return problem
    required = schema.get("required")
    if required is not None and (
        not isinstance(required, list)
        or not all(isinstance(r, str) for r in cast("list[object]", required))
    ):
        return f"{path}.required: must be a list of property names"
    extra = schema.get("additionalProperties")
    if extra is not None and not isinstance(extra, bool):
        problem = _schema_problem(extra, f"{path}.additionalProperties")
    if problem is None and "items" in schema:
        problem = _schema_problem(schema["items"], f"{path}.items")
    enum = schema.get("enum")
    if problem is None and enum is not None and (not isinstance(enum, list) or not enum):
        problem = f"{path}.enum: must be a non-empty list"
    one_of = schema.get("oneOf")
    if problem is None and one_of is not None:
        if not isinstance(one_of, list) or not one_of:
            return f"{path}.oneOf: must be a non-empty list of schemas"
        for index, sub in enumerate(cast("list[object]", one_of)):
            if (problem := _schema_problem(sub, f"{path}.oneOf[{index}]")) is not None:
                return problem
    for key in SCHEMA_ANNOTATIONS:
        if problem is None and key in schema and not isinstance(schema[key], str):
            problem = f"{path}.{key}: must be a string"
    return problem


# -- the script's world -------------------------------------------------------------------------


class WorkflowError(Exception):
    """A misused hook or a tripped cap; `code` names which. Fatal ones end the whole script."""

    def __init__(self, message: str, code: str = "INVALID_ARGUMENT", *, fatal: bool = True):
        super().__init__(message)
        self.message = message
        self.code = code
        self.fatal = fatal


class HostError(Exception):
    """The host refused or failed a call; `str()` is its message."""


def render_error(exc: BaseException) -> str:
    """`Type: message (line N of the script)`, or `[unrenderable thrown value]`."""
    try:
        text = str(exc)
        head = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        line = None
        tb: TracebackType | None = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == SCRIPT_FILE:
                line = tb.tb_lineno
            tb = tb.tb_next
        return f"{head} (line {line} of the script)" if line is not None else head
    except BaseException:
        return "[unrenderable thrown value]"


def _restricted_import(
    name: str,
    globals: object = None,
    locals: object = None,
    fromlist: object = (),
    level: int = 0,
) -> object:
    top = name.partition(".")[0]
    if level != 0 or top not in IMPORTABLE:
        raise ImportError(
            f"module {name!r} is not available in a workflow script (available: "
            f"{', '.join(sorted(IMPORTABLE))}); the agents do the work, the script coordinates"
        )
    return __import__(name, globals, locals, fromlist, level)  # pyright: ignore[reportArgumentType]


def curated_builtins() -> dict[str, object]:
    """The script's builtins: no files, no imports beyond pure modules, no exec or eval."""
    found = {k: v for k, v in vars(builtins).items() if k not in WITHHELD_BUILTINS}
    found["__import__"] = _restricted_import
    return found


class Slots:
    """Concurrency slots handed out in FIFO order."""

    def __init__(self, count: int) -> None:
        self._free = count
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class Channel:
    """The framed socket to the host.

    Writes are synchronous and whole frames (so the sync-slice alarm can send its own frame
    between two of them); reads come through the event loop.
    """

    def __init__(self, fd: int) -> None:
        self._sock = socket.socket(fileno=fd)
        self._sock.setblocking(False)
        self._buffer = bytearray()
        self._replies: dict[int, asyncio.Future[Json]] = {}
        self._ids = 0
        self.writing = False
        self.deferred: Callable[[], None] | None = None
        """Signal work that arrived in the middle of a write (run right after it)."""

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.add_reader(self._sock.fileno(), self._on_readable)

    def send(self, message: dict[str, Json]) -> None:
        data = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        frame = memoryview(struct.pack(">I", len(data.encode())) + data.encode())
        self.writing = True
        try:
            while frame:
                try:
                    frame = frame[self._sock.send(frame) :]
                except BlockingIOError:
                    select.select([], [self._sock], [])
        except OSError:
            os._exit(1)  # the host is gone: nobody is left to report to
        finally:
            self.writing = False
        deferred, self.deferred = self.deferred, None
        if deferred is not None:
            deferred()

    def call(self, fn: str, arg: Json) -> asyncio.Future[Json]:
        self._ids += 1
        future: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        self._replies[self._ids] = future
        self.send({"type": "call", "id": self._ids, "fn": fn, "arg": arg})
        return future

    def _on_readable(self) -> None:
        try:
            data = self._sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            os._exit(1)  # the host closed the channel: the run is over
        self._buffer += data
        while len(self._buffer) >= 4:
            (size,) = struct.unpack(">I", self._buffer[:4])
            if len(self._buffer) < 4 + size:
                return
            frame = json.loads(bytes(self._buffer[4 : 4 + size]))
            del self._buffer[: 4 + size]
            self._reply(frame)

    def _reply(self, frame: Json) -> None:
        if not isinstance(frame, dict):
            return
        fields = cast("dict[str, Json]", frame)
        call_id = fields.get("id")
        if fields.get("type") != "reply" or type(call_id) is not int:
            return
        future = self._replies.pop(call_id, None)
        if future is None or future.done():
            return
        error: Json = fields.get("error")
        if isinstance(error, dict):
            future.set_exception(HostError(str(cast("dict[str, Json]", error).get("message"))))
        else:
            future.set_result(fields.get("value"))


def _contain(task: asyncio.Future[Any]) -> None:
    """Retrieve a dropped task's failure so it never surfaces as an unhandled error."""
    if not task.cancelled():
        task.exception()


def _first_line_label(prompt: str) -> str:
    line = prompt.strip().split("\n", 1)[0].strip()
    return line if len(line) <= 48 else line[:47] + "…"


class Guest:
    """The hooks of one run and their bookkeeping."""

    def __init__(self, channel: Channel, limits: dict[str, int]) -> None:
        self.channel = channel
        self.max_total = limits["maxTotalAgents"]
        self.max_items = limits["maxItemsPerCall"]
        self.sync_timeout_ms = limits["syncTimeoutMs"]
        self.slots = Slots(limits["maxConcurrentAgents"])
        self.count = 0
        self.phase_title: str | None = None
        self._queue: list[dict[str, Json]] = []
        self._in_flight = False
        self._idle = asyncio.Event()
        self._idle.set()
        self.progress_failure: str | None = None

    # -- progress ---------------------------------------------------------------------------

    def progress(self, event: dict[str, Json]) -> None:
        if self.progress_failure is not None:
            return
        self._queue.append(event)
        self._idle.clear()
        if not self._in_flight:
            self._flush()

    def _flush(self) -> None:
        batch, self._queue = self._queue, []
        self._in_flight = True
        self.channel.call("progress", batch).add_done_callback(self._flushed)

    def _flushed(self, future: asyncio.Future[Json]) -> None:
        self._in_flight = False
        failure = future.exception() if not future.cancelled() else HostError("cancelled")
        if failure is not None:
            self.progress_failure = str(failure)
            self._queue.clear()
        if self._queue:
            self._flush()
        else:
            self._idle.set()

    async def drain(self) -> None:
        await self._idle.wait()

    # -- hooks ------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Json]) -> asyncio.Task[Json]:
        task = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(_contain)
        return task

    def agent(self, prompt: object = None, options: object = None, /, **kwargs: object) -> Any:
        """Start one child; the task resolves to its text, its value, or None."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise WorkflowError("agent() requires a non-empty prompt string")
        opts = self._options(options, kwargs)
        if self.count >= self.max_total:
            raise WorkflowError(
                f"this run reached its total agent cap ({self.max_total}) — a runaway-loop "
                "backstop; raise the applicable maxTotalAgents limit if the scale is intentional",
                "AGENT_CAP",
            )
        self.count += 1
        label = opts.get("label")
        phase = opts.get("phase", self.phase_title)
        return self.spawn(
            self._run_agent(
                self.count,
                prompt,
                label if label is not None else _first_line_label(prompt),
                phase,
                opts,
            )
        )

    def _options(self, options: object, kwargs: dict[str, object]) -> dict[str, Json]:
        if options is not None and kwargs:
            raise WorkflowError("agent() takes its options as keywords or as one dict, not both")
        raw = kwargs if options is None else options
        try:
            opts = materialize(raw, "options")
        except NotJson as exc:
            raise WorkflowError(f"agent() options must be plain JSON data — {exc}") from None
        if not isinstance(opts, dict):
            raise WorkflowError("agent() options must be an object")
        supported = ", ".join(SUPPORTED_OPTIONS)
        found = {k: v for k, v in cast("dict[str, Json]", opts).items() if v is not None}
        for key, value in found.items():
            if key in DEFERRED_OPTIONS:
                raise WorkflowError(
                    f'agent() option "{key}" is deferred and not supported by this engine '
                    f"(supported: {supported})",
                    "UNSUPPORTED_OPTION",
                )
            if key not in SUPPORTED_OPTIONS:
                raise WorkflowError(
                    f'agent() option "{key}" is not recognized (supported: {supported})',
                    "UNSUPPORTED_OPTION",
                )
            if key != "schema" and not isinstance(value, str):
                raise WorkflowError(f'agent() option "{key}" must be a string')
        if "schema" in found and (problem := schema_subset_problem(found["schema"])):
            raise WorkflowError(
                f"agent() schema is outside the supported subset — {problem}", "UNSUPPORTED_SCHEMA"
            )
        return found

    async def _run_agent(
        self, seq: int, prompt: str, label: str, phase: str | None, opts: dict[str, Json]
    ) -> Json:
        await self.slots.acquire()
        try:
            request: dict[str, Json] = {"prompt": prompt}
            request.update(
                {k: opts[k] for k in ("schema", "provider", "model", "name") if k in opts}
            )
            try:
                started = await self.channel.call("startChild", request)
            except HostError as exc:
                raise WorkflowError(
                    f"agent() could not start a child: {exc}", "AGENT_START"
                ) from None
            call_id = started["callId"]
            info: dict[str, Json] = {"seq": seq, "label": label, "childId": started["childId"]}
            if phase is not None:
                info["phase"] = phase
            self.progress({"type": "agent-start", "info": info})
            try:
                return await self._collect(call_id, info, "schema" in opts)
            finally:
                await self.drain()
                with contextlib.suppress(HostError):
                    await self.channel.call("disposeChild", {"callId": call_id})
        finally:
            self.slots.release()

    async def _collect(self, call_id: Json, info: dict[str, Json], structured: bool) -> Json:
        try:
            result = await self.channel.call("childResult", {"callId": call_id})
        except HostError as exc:
            self.progress({"type": "agent-end", "info": {**info, "outcome": "failed"}})
            raise WorkflowError(f"child agent run failed: {exc}", "AGENT_RESULT") from None
        value: Json = None
        outcome = "failed"
        if result.get("stopReason") == "completed":
            if not structured:
                blocks: list[Json] = result.get("output") or []
                value = "".join(str(b["text"]) for b in blocks if b.get("type") == "text")
                outcome = "completed"
            elif result.get("structured") is not None:
                value, outcome = result["structured"], "completed"
        self.progress({"type": "agent-end", "info": {**info, "outcome": outcome}})
        return value

    def parallel(self, items: object = None) -> asyncio.Task[Json]:
        """Run zero-argument callables (or awaitables) at once; a failing one becomes None."""
        thunks = self._items("parallel()", items, "a list of zero-argument functions or awaitables")
        for index, item in enumerate(thunks):
            if not callable(item) and not isinstance(item, Awaitable):
                raise WorkflowError(f"parallel() item {index} is not a function or an awaitable")
        return self.spawn(self._all([self._guarded(item) for item in thunks]))

    def pipeline(self, items: object = None, *stages: object) -> asyncio.Task[Json]:
        """Run each item through the stages on its own; a failing stage makes it None."""
        values = self._items("pipeline()", items, "an items list")
        if not stages:
            raise WorkflowError("pipeline() requires at least one stage function")
        for index, stage in enumerate(stages):
            if not callable(stage):
                raise WorkflowError(f"pipeline() stage {index} is not a function")
        chain = cast("tuple[Callable[..., object], ...]", stages)
        return self.spawn(self._all([self._stages(v, i, chain) for i, v in enumerate(values)]))

    def _items(self, hook: str, items: object, wanted: str) -> list[object]:
        if not isinstance(items, list | tuple):
            raise WorkflowError(f"{hook} requires {wanted}")
        found = list(cast("list[object] | tuple[object, ...]", items))
        if len(found) > self.max_items:
            for item in found:
                if isinstance(item, Coroutine):
                    cast("Coroutine[Any, Any, Any]", item).close()
            raise WorkflowError(
                f"{hook} received {len(found)} items — over the per-call cap ({self.max_items}); "
                "split the work or raise maxItemsPerCall in the engine config",
                "ITEM_CAP",
            )
        return found

    async def _all(self, coros: list[Coroutine[Any, Any, Json]]) -> list[Json]:
        if not coros:
            return []
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(c) for c in coros]
        for task in tasks:
            task.add_done_callback(_contain)
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise cast("BaseException", task.exception())
        return [task.result() for task in tasks]

    async def _guarded(self, item: object) -> Json:
        try:
            value = item() if callable(item) else item
            if isinstance(value, Awaitable):
                value = await cast("Awaitable[object]", value)
            return value
        except WorkflowError as exc:
            if exc.fatal:
                raise
            return None
        except Exception:
            return None

    async def _stages(
        self, item: object, index: int, stages: tuple[Callable[..., object], ...]
    ) -> Json:
        value: object = item
        try:
            for stage in stages:
                value = stage(value, item, index)
                if isinstance(value, Awaitable):
                    value = await cast("Awaitable[object]", value)
            return value
        except WorkflowError as exc:
            if exc.fatal:
                raise
            return None
        except Exception:
            return None

    def phase(self, title: object = None) -> None:
        """Start a progress phase; later agents belong to it."""
        if not isinstance(title, str) or not title.strip():
            raise WorkflowError("phase() requires a non-empty title string")
        self.phase_title = title
        self.progress({"type": "phase", "title": title})

    def log(self, message: object = None) -> None:
        """Narrate progress."""
        if not isinstance(message, str):
            raise WorkflowError("log() requires a message string")
        self.progress({"type": "log", "message": message})

    def namespace(self, args: Json) -> dict[str, object]:
        return {
            "__builtins__": curated_builtins(),
            "__name__": "__workflow__",
            "args": args,
            "agent": self.agent,
            "parallel": self.parallel,
            "pipeline": self.pipeline,
            "phase": self.phase,
            "log": self.log,
            "WorkflowError": WorkflowError,
        }


# -- the run ------------------------------------------------------------------------------------


def _finish(channel: Channel, result: dict[str, Json]) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    channel.send({"type": "done", "result": result})
    os._exit(0)


def _error_result(guest: Guest | None, message: str) -> dict[str, Json]:
    return {
        "value": None,
        "stopReason": "error",
        "agentsStarted": guest.count if guest is not None else 0,
        "error": message,
    }


def _arm_sync_limit(channel: Channel, guest: Guest) -> Callable[[], None]:
    """Limit the script's first synchronous slice; returns the disarming function."""

    def expire() -> None:
        message = (
            f"the workflow script ran longer than its synchronous slice limit (syncTimeoutMs "
            f"{guest.sync_timeout_ms} ms) before its first await; await agent(), parallel() "
            "or pipeline() instead of computing in a loop"
        )
        _finish(channel, _error_result(guest, message))

    def on_alarm(signum: int, frame: object) -> None:
        if channel.writing:
            channel.deferred = expire  # finish the frame being written first
        else:
            expire()

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, guest.sync_timeout_ms / 1000)

    def disarm() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_IGN)

    return disarm


async def _run(channel: Channel) -> NoReturn:
    loop = asyncio.get_running_loop()
    channel.attach(loop)
    guest: Guest | None = None
    try:
        init = await channel.call("begin", {})
        guest = Guest(channel, cast("dict[str, int]", init["limits"]))
        code = compile_script(str(init["body"]))
    except ScriptParseError as exc:
        _finish(channel, _error_result(guest, str(exc)))
    except HostError as exc:
        _finish(channel, _error_result(guest, f"workflow begin failed: {exc}"))
    args = init.get("args")
    namespace = guest.namespace({} if args is None else args)
    exec(code, namespace)
    entry = cast("Callable[[], Coroutine[Any, Any, object]]", namespace[ENTRY])

    async def guarded() -> tuple[bool, object]:
        try:
            return True, await entry()
        except BaseException as exc:  # the script's failure is the run's result
            return False, exc

    disarm = _arm_sync_limit(channel, guest)
    task = loop.create_task(guarded())
    loop.call_soon(disarm)  # runs right after the script's first step: its first suspension
    ok, value = await task
    disarm()
    if ok:
        try:
            result: dict[str, Json] = {
                "value": materialize(value, "workflow result"),
                "stopReason": "completed",
                "agentsStarted": guest.count,
            }
        except NotJson as exc:
            result = _error_result(
                guest,
                f"the workflow's return value is not plain JSON data — {exc}. Return only "
                "JSON-serializable objects/arrays/scalars.",
            )
    else:
        result = _error_result(guest, render_error(cast("BaseException", value)))
    await guest.drain()
    if guest.progress_failure is not None:
        result = _error_result(guest, guest.progress_failure)
    _finish(channel, result)


def main(argv: list[str]) -> NoReturn:
    channel = Channel(int(argv[1]) if len(argv) > 1 else 3)
    try:
        asyncio.run(_run(channel))
    except BaseException as exc:  # a guest bug: report it rather than dying silently
        _finish(channel, _error_result(None, f"workflow guest failed: {render_error(exc)}"))
    os._exit(1)


if __name__ == "__main__":
    main(sys.argv)
