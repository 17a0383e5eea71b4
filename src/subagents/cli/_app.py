"""The `subagents` command line: run, resume, send, interrupt, demo, sessions, tree, log, agents.

Defining the app imports no runtime, workflow engine, model SDK, MCP SDK, jsonschema or rich:
each command imports what it runs in its body, so that `--help`, `sessions` and `tree` start
fast (startup time; tests/cli/test_startup.py, bench/cli_startup.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..ids import SessionId
from ._agents import choose_definition, definitions_for, list_agents, model_for
from ._approvals import ApprovalNotices, approvals, approve, deny
from ._command import SessionCommand
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    NEWEST,
    SESSION_HELP,
    check_argv,
    check_path,
    check_tenant,
    fail,
    is_session_id,
    is_terminal,
    open_store,
    read_prompt,
    require_existing_store,
    resolve_model,
    resolve_root,
    run_async,
)
from ._mcp import mcp_app, mcp_options
from ._options import (
    ApproveOpt,
    BudgetCallsOpt,
    BudgetChildrenOpt,
    BudgetTokensOpt,
    JsonOpt,
    MaxTokensOpt,
    ModelOpt,
    SandboxOpt,
    StoreOpt,
    StreamOpt,
    TenantOpt,
)
from ._render import dumps, render_log, render_sessions, render_tree, result_json, tree_usage
from ._settings import config, settings_for
from ._watch import DEFAULT_INTERVAL, watch
from ._web import web

if TYPE_CHECKING:
    from ..core import RunResult
    from ..delegation import Placement, TreeJsonRow
    from ..sessions import SessionHeader
    from ..workflows import Runtime

__all__ = ["app"]

app = typer.Typer(
    name="subagents",
    help="Run LLM agents that delegate to named child agents, on a durable event log.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Plain help and errors: the entry point (`_main`) prints usage errors as one line.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version  # only `--version` pays for it (startup time)

        typer.echo(f"subagents {version('subagents')}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _check_arguments(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    # Before any command runs: an argument that is not UTF-8 is refused with one line.
    check_argv(sys.argv[1:])


_STOPPED_BECAUSE = {
    "max-tokens": "the model stopped at its output token limit (max-tokens); the answer is "
    "cut short",
    "refusal": "the model refused to answer (refusal)",
    "aborted": "the turn was stopped before it finished (aborted)",
    "interrupted": "the turn was cut off and then stopped (`subagents interrupt`); send a new "
    "message to continue",
}


def reason_line(result: RunResult) -> str | None:
    """The one stderr line that says why a run did not complete (None when it did)."""
    if result.ok:
        return None
    if result.stop_reason is None:
        return (
            "subagents: nothing ran: the session has no finished turn and no pending input; "
            "give a prompt to continue it"
        )
    if result.error_code:
        return f"subagents: {result.error_code}: {result.error_message}"
    because = _STOPPED_BECAUSE.get(result.stop_reason, f"the turn ended {result.stop_reason}")
    return f"subagents: {result.stop_reason}: {because}"


def _print_result(
    result: RunResult,
    *,
    as_json: bool,
    tree: list[TreeJsonRow] | None = None,
    streamed: bool = False,
) -> None:
    if streamed:
        pass  # the stream's last line was the result
    elif as_json:
        typer.echo(
            dumps(
                result_json(result, None if tree is None else tree_usage(tree, result.session_id))
            )
        )
    elif result.output:  # a failed turn with no text prints no empty line before its reason
        typer.echo(result.output)
    line = reason_line(result)
    if line is not None:
        typer.echo(line, err=True)


async def _tree_rows(runtime: Runtime, root: SessionId) -> list[TreeJsonRow]:
    """The rows of `root`'s tree (for usage), read by the live runtime that holds it."""
    from ..delegation import tree_json  # startup time: see the module's docstring

    return tree_json(await runtime.tree(root))


def _flag_or(flag: int | None, configured: int | None) -> int | None:
    """A flag's value, else the settings' (flags win over settings files)."""
    return configured if flag is None else flag


def _exit_for(result: RunResult) -> None:
    raise typer.Exit(EXIT_OK if result.ok else EXIT_FAILED)


@app.command()
def run(
    prompt: Annotated[
        str | None, typer.Argument(help="The task for the lead agent (`-`: read it from stdin).")
    ] = None,
    model: ModelOpt = None,
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    cwd: Annotated[
        Path | None, typer.Option("--cwd", help="Working directory of the lead agent.")
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="Run this agent definition as the lead (see `agents`)."),
    ] = None,
    sandbox: SandboxOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    budget_model_calls: BudgetCallsOpt = None,
    budget_children: BudgetChildrenOpt = None,
    max_tokens: MaxTokensOpt = None,
    approve: ApproveOpt = None,
    as_json: JsonOpt = False,
    stream: StreamOpt = False,
) -> None:
    """Start a new root session, run it until quiescent and print the lead's answer.

    A budget (`--budget-*`) covers the whole tree and is kept across `resume`; a run that
    spends it ends with stop reason `budget` (exit 1).
    """
    # Startup time: see the module's docstring.
    from ..core import Budget
    from ..policy import SANDBOX_MODES, parse_mode
    from ._live import LiveTree
    from ._runtime import runtime_for
    from ._stream import StreamPrinter

    check_tenant(tenant)
    if as_json and stream:
        fail("give --stream or --json, not both")
    if prompt is not None:
        prompt = read_prompt(prompt)
    if prompt is None or not prompt.strip():
        fail("a prompt is required, for example: subagents run 'review app.py' --model ...")
    if cwd is not None and not check_path(cwd, "--cwd").is_dir():
        fail(f"--cwd {cwd} is not a directory")
    if sandbox is not None and sandbox not in SANDBOX_MODES:
        fail(f"--sandbox {sandbox!r} is not a mode; use one of {', '.join(SANDBOX_MODES)}")
    settings = settings_for(cwd, tenant).override("sandbox", sandbox, "--sandbox")
    definitions = definitions_for(cwd, tenant, using=agent, settings=settings)
    definition = None if agent is None else choose_definition(definitions, agent, tenant=tenant)
    chosen, spec = resolve_model(
        model_for(definition, model, settings.alias_map), settings=settings
    )
    text = prompt
    budget = Budget(
        tokens=_flag_or(budget_tokens, settings.int_of("budget", "tokens")),
        model_calls=_flag_or(budget_model_calls, settings.int_of("budget", "model_calls")),
        children=_flag_or(budget_children, settings.int_of("budget", "children")),
    )
    cap = _flag_or(max_tokens, None if settings.max_tokens is None else settings.max_tokens.value)
    mcp = mcp_options(settings)

    async def main() -> tuple[RunResult, list[TreeJsonRow]]:
        async with runtime_for(
            store,
            tenant=tenant,
            cwd=cwd,
            model=chosen,
            model_spec=spec,
            definitions=definitions,
            sandbox=parse_mode(settings.sandbox_mode),
            budget=budget,
            max_tokens=cap,
            approval=approve,
            settings=settings,
            mcp=mcp,
        ) as runtime:
            lead = None if definition is None else await runtime.create_agent_from(definition)
            printer = StreamPrinter(runtime, enabled=stream)
            with LiveTree(runtime, enabled=is_terminal()), printer, ApprovalNotices(runtime):
                result = await runtime.run(text, agent=lead)
            rows = await _tree_rows(runtime, result.session_id)
            await printer.finish(result_json(result, tree_usage(rows, result.session_id)))
            return result, rows

    result, rows = run_async(main)
    _print_result(result, as_json=as_json, tree=rows, streamed=stream)
    _exit_for(result)


@app.command(cls=SessionCommand)
def resume(
    session: Annotated[str, typer.Argument(help=SESSION_HELP)],
    prompt: Annotated[str | None, typer.Argument(help="A new prompt for the lead.")] = None,
    model: ModelOpt = None,
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    max_tokens: MaxTokensOpt = None,
    as_json: JsonOpt = False,
    stream: StreamOpt = False,
) -> None:
    """Continue a stored session after a restart: repair, run pending input and PROMPT."""
    check_tenant(tenant)
    if prompt is not None and not prompt.strip():
        fail("the prompt must not be empty; omit it to only run pending input")
    # Child-first: work a crash cut off runs again and reaches whoever waited.
    _on_stored_tree(
        store,
        tenant,
        session,
        model,
        lambda rt, root: rt.resume(root, prompt),
        as_json=as_json,
        stream=stream,
        max_tokens=max_tokens,
    )


@app.command(cls=SessionCommand)
def send(
    session: Annotated[str, typer.Argument(help=SESSION_HELP)],
    name: Annotated[
        str, typer.Argument(help="Full name of the agent (`lead`, `reviewer/checker`).")
    ],
    message: Annotated[str, typer.Argument(help="What to tell it.")],
    model: ModelOpt = None,
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
    stream: StreamOpt = False,
) -> None:
    """Message any agent of a stored tree by name, as the user.

    The tree then runs until it is quiescent again and the agent's answer is printed.
    """
    check_tenant(tenant)
    if not message.strip():
        fail("the message must not be empty")
    _on_stored_tree(
        store,
        tenant,
        session,
        model,
        lambda rt, root: rt.send(root, name, message),
        as_json=as_json,
        stream=stream,
    )


def _on_stored_tree(
    store: str | None,
    tenant: str,
    session: str,
    model: str | None,
    verb: Callable[[Runtime, SessionId], Awaitable[RunResult]],
    *,
    as_json: bool,
    stream: bool = False,
    max_tokens: int | None = None,
) -> None:
    """Run `verb` on a stored tree with the model it recorded, then print its result."""
    # Startup time: see the module's docstring.
    from ._live import LiveTree
    from ._runtime import runtime_for
    from ._stream import StreamPrinter

    if as_json and stream:
        fail("give --stream or --json, not both")
    require_existing_store(store)
    header = run_async(lambda: _header(store, tenant, session))
    settings = settings_for(header.cwd, tenant)
    chosen, spec = resolve_model(model, recorded=header.model_spec, settings=settings)
    definitions = definitions_for(header.cwd, tenant, settings=settings)
    mcp = mcp_options(settings)

    async def main() -> tuple[RunResult, list[TreeJsonRow]]:
        async with runtime_for(
            store,
            tenant=tenant,
            cwd=header.cwd,
            model=chosen,
            model_spec=spec,
            definitions=definitions,
            max_tokens=max_tokens,
            settings=settings,
            mcp=mcp,
        ) as runtime:
            printer = StreamPrinter(runtime, enabled=stream)
            with LiveTree(runtime, enabled=is_terminal()), printer, ApprovalNotices(runtime):
                result = await verb(runtime, header.id)
            rows = await _tree_rows(runtime, header.id)
            await printer.finish(result_json(result, tree_usage(rows, result.session_id)))
            return result, rows

    result, rows = run_async(main)
    _print_result(result, as_json=as_json, tree=rows, streamed=stream)
    _exit_for(result)


@app.command(cls=SessionCommand)
def interrupt(
    session: Annotated[str, typer.Argument(help=SESSION_HELP)],
    name: Annotated[str, typer.Argument(help="Full name of the agent to stop.")],
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Stop an agent of a stored tree.

    A turn a crash left open is closed as interrupted; queued messages stay for a resume.
    """
    # Startup time: see the module's docstring.
    from ..delegation import find_member
    from ._runtime import runtime_for

    check_tenant(tenant)
    require_existing_store(store)
    header = run_async(lambda: _header(store, tenant, session))

    async def main() -> tuple[SessionId, bool]:
        # No model: nothing runs; the user stops it, so its cut-off turn is closed, not re-run.
        async with runtime_for(store, tenant=tenant, cwd=header.cwd, definitions={}) as runtime:
            closed = await runtime.interrupt(header.id, name)
            return (await find_member(runtime.store, header, name)).id, closed

    member, closed = run_async(main)
    if as_json:
        typer.echo(dumps({"session_id": member, "name": name, "interrupted": closed}))
    elif closed:
        typer.echo(
            f"interrupted {name}: its turn is stopped and its queued messages stay; "
            "send it a message (or resume the tree) to continue"
        )
    else:
        typer.echo(f"{name} was not running; nothing to interrupt")


@app.command(cls=SessionCommand)
def steer(
    session: Annotated[str, typer.Argument(help=SESSION_HELP)],
    name: Annotated[
        str, typer.Argument(help="Full name of the agent (`lead`, `reviewer/checker`).")
    ],
    message: Annotated[str, typer.Argument(help="What to tell it now.")],
    model: ModelOpt = None,
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Tell an agent something in the middle of its turn, as the user.

    The message joins its running turn at the next step (the tree may be running in another
    process); an agent that is not running starts its next turn with it. Prints which
    happened. A stored tree nobody runs is resumed and run until it is quiescent.
    """
    # Startup time: see the module's docstring.
    from ..delegation import find_member
    from ._live import LiveTree
    from ._runtime import runtime_for

    check_tenant(tenant)
    if not message.strip():
        fail("the message must not be empty")
    require_existing_store(store)
    header = run_async(lambda: _header(store, tenant, session))
    settings = settings_for(header.cwd, tenant)
    chosen, spec = resolve_model(model, recorded=header.model_spec, settings=settings)
    definitions = definitions_for(header.cwd, tenant, settings=settings)
    mcp = mcp_options(settings)

    async def main() -> tuple[SessionId, Placement]:
        async with runtime_for(
            store,
            tenant=tenant,
            cwd=header.cwd,
            model=chosen,
            model_spec=spec,
            definitions=definitions,
            settings=settings,
            mcp=mcp,
        ) as runtime:
            with LiveTree(runtime, enabled=is_terminal()):
                placement = await runtime.steer(header.id, name, message)
            return (await find_member(runtime.store, header, name)).id, placement

    member, placement = run_async(main)
    if as_json:
        typer.echo(dumps({"session_id": member, "name": name, "placement": placement}))
    elif placement == "joined":
        typer.echo(f"steered {name}: the message joined its running turn")
    else:
        typer.echo(f"steered {name}: it was not running, so the message began its next turn")


async def _header(store: str | None, tenant: str, session: str) -> SessionHeader:
    """The root session `session` refers to (an id, a unique prefix, or `lead`)."""
    async with open_store(store) as opened:
        return await resolve_root(opened, tenant, session)


@app.command()
def demo(
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Run the bundled scripted scenario (no model API needed) and show the tree."""
    # Startup time: see the module's docstring.
    from ..models import ScriptedModel
    from ._demo import TOOLS as DEMO_TOOLS, demo_dir
    from ._live import LiveTree
    from ._runtime import runtime_for

    check_tenant(tenant)
    examples = demo_dir()
    script = examples / "demo.yaml"
    if not script.is_file():
        fail(f"the demo's script is missing from the installed package: {script}")
    tools = list(DEMO_TOOLS)
    model = ScriptedModel.from_file(script)

    async def main() -> tuple[RunResult, list[TreeJsonRow]]:
        async with runtime_for(
            store,
            tenant=tenant,
            cwd=examples,
            model=model,
            model_spec=f"scripted:{script}",
            tools=tools,
        ) as runtime:
            with LiveTree(runtime, enabled=is_terminal()):
                result = await runtime.run(
                    "How many words are in the project motto, which word is longest, and is "
                    "its wording sound?"
                )
            return result, await _tree_rows(runtime, result.session_id)

    result, rows = run_async(main)
    if as_json:
        typer.echo(
            dumps({**result_json(result, tree_usage(rows, result.session_id)), "tree": rows})
        )
    else:
        if result.output:
            typer.echo(result.output + "\n")
        typer.echo(render_tree(rows))
        typer.echo(f"\ninspect it with: subagents log {result.session_id}")
    line = reason_line(result)
    if line is not None:
        typer.echo(line, err=True)
    _exit_for(result)


@app.command()
def agents(
    tenant: TenantOpt = "default",
    cwd: Annotated[
        Path | None, typer.Option("--cwd", help="Project directory (default: the current one).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the agent definitions; malformed files are reported on stderr."""
    check_tenant(tenant)
    if cwd is not None:
        check_path(cwd, "--cwd")
    list_agents(cwd, tenant, as_json=as_json, settings=settings_for(cwd, tenant))


@app.command()
def sessions(
    store: StoreOpt = None, tenant: TenantOpt = "default", as_json: JsonOpt = False
) -> None:
    """List root sessions, newest first."""
    from ..core import list_sessions  # startup time: see the module's docstring

    check_tenant(tenant)
    require_existing_store(store)

    async def main() -> str:
        # One opening of the store for either rendering (each costs an event loop too).
        async with open_store(store) as opened:
            rows = await list_sessions(opened, tenant=tenant, now=time.time())
        return dumps([row.to_json() for row in rows]) if as_json else render_sessions(rows)

    typer.echo(run_async(main))


@app.command(cls=SessionCommand)
def tree(
    session: Annotated[str, typer.Argument(help=SESSION_HELP)],
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
    follow: Annotated[
        bool,
        typer.Option("--follow", help="Keep following it until it is quiescent: `watch`."),
    ] = False,
) -> None:
    """Print the agent tree of a root session, with status and usage."""
    if follow:
        watch(session, store=store, tenant=tenant, as_json=as_json, interval=DEFAULT_INTERVAL)
        return
    # Startup time: see the module's docstring.
    from ..core import is_held
    from ..delegation import tree_rows

    check_tenant(tenant)
    require_existing_store(store)

    async def main() -> list[TreeJsonRow]:
        async with open_store(store) as opened:
            header = await resolve_root(opened, tenant, session)
            held = await is_held(opened, header.id, now=time.time())
            return await tree_rows(opened, header, held=held)

    rows = run_async(main)
    typer.echo(dumps(rows) if as_json else render_tree(rows))


@app.command()
def log(
    target: Annotated[
        str, typer.Argument(help="Session id, or an agent's full name such as `reviewer/checker`.")
    ],
    root: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Root session in which NAME is looked up: an id, a unique prefix, or `lead` "
            "(the default: the newest).",
        ),
    ] = None,
    last: Annotated[
        bool, typer.Option("--last", help="Look NAME up in the newest root session (default).")
    ] = False,
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Print one agent's transcript (with --json: its events)."""
    # Startup time: see the module's docstring.
    from ..core import event_json
    from ..delegation import find_member

    check_tenant(tenant)
    if last and root is not None:
        fail("give --session or --last, not both")
    require_existing_store(store)

    async def main() -> str:
        async with open_store(store) as opened:
            if is_session_id(target):
                header = await opened.get_header(SessionId(target.lower()), tenant=tenant)
            else:
                base = await resolve_root(opened, tenant, root or NEWEST)
                header = await find_member(opened, base, target)
            records = await opened.read(header.id, tenant=tenant)
        return dumps([event_json(r) for r in records]) if as_json else render_log(records)

    typer.echo(run_async(main))


app.command(cls=SessionCommand)(watch)
app.command()(web)
app.command()(config)
app.add_typer(mcp_app)
app.command()(approvals)
app.command(cls=SessionCommand)(approve)
app.command(cls=SessionCommand)(deny)
