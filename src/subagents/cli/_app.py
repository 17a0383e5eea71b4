"""The `subagents` command line: run, resume, send, interrupt, demo, sessions, tree, log, agents."""

from __future__ import annotations

import importlib.util
import re
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ..core import Agent, Budget, RunResult, run_result
from ..core._inspect import is_held, list_sessions
from ..errors import NotFoundError
from ..ids import SessionId
from ..models._scripted import ScriptedModel
from ..policy import SANDBOX_MODES, parse_mode
from ..sessions import EventStore, SessionHeader
from ..subagents import DelegationOptions
from ..subagents._tree import find_member, load_tree, tree_json
from ..tools import ToolSpec
from ..workflows import Runtime
from ._agents import choose_definition, definitions_for, list_agents, model_for
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    check_argv,
    check_path,
    check_tenant,
    fail,
    is_terminal,
    open_store,
    require_existing_store,
    resolve_model,
    run_async,
)
from ._live import LiveTree
from ._render import dumps, event_json, render_log, render_sessions, render_tree

__all__ = ["app"]

app = typer.Typer(
    name="subagents",
    help="Run LLM agents that delegate to named child agents, on a durable event log.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _check_arguments() -> None:
    # Before any command runs: an argument that is not UTF-8 is refused with one line.
    check_argv(sys.argv[1:])


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store path or sqlite:/// URL "
        "(default: $SUBAGENTS_STORE or $SUBAGENTS_HOME/state.db).",
    ),
]
TenantOpt = Annotated[str, typer.Option("--tenant", help="Tenant whose sessions to use.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
SandboxOpt = Annotated[
    str,
    typer.Option(
        "--sandbox",
        help="File policy of the lead and its tree: read-only, workspace-write or "
        "danger-full-access (kept across resume; children inherit it).",
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
        help="scripted:PATH, openai:MODEL, deepseek:MODEL or openai-compatible:MODEL@BASE_URL "
        "(default: $SUBAGENTS_MODEL).",
    ),
]


def _print_result(result: RunResult, *, as_json: bool) -> None:
    if as_json:
        payload: dict[str, Any] = {
            "session_id": result.session_id,
            "stop_reason": result.stop_reason,
            "output": result.output,
            "usage": {
                "input_tokens": result.usage.input_tokens,
                "output_tokens": result.usage.output_tokens,
            },
        }
        if result.error_code:
            payload["error"] = {"code": result.error_code, "message": result.error_message}
        typer.echo(dumps(payload))
    else:
        typer.echo(result.output)
    if result.stop_reason in ("error", "budget"):
        typer.echo(f"subagents: {result.error_code}: {result.error_message}", err=True)


def _exit_for(result: RunResult) -> None:
    raise typer.Exit(EXIT_OK if result.ok else EXIT_FAILED)


async def _run_until_quiet(runtime: Runtime, agent: Agent, first_seq: int) -> RunResult:
    """Wait for quiescence and fold the turns since `first_seq` into a result.

    When nothing ran (resuming a session with no pending work), the whole log's result
    reports where the session stands.
    """
    await runtime.wait_quiescent()
    await runtime.store.flush()
    result = run_result(agent.id, agent.session.records[first_seq:])
    if result.stop_reason is None:
        result = run_result(agent.id, agent.session.records)
    return result


@app.command()
def run(
    prompt: Annotated[str | None, typer.Argument(help="The task for the lead agent.")] = None,
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
    sandbox: SandboxOpt = "workspace-write",
    budget_tokens: BudgetTokensOpt = None,
    budget_model_calls: BudgetCallsOpt = None,
    budget_children: BudgetChildrenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start a new root session, run it until quiescent and print the lead's answer.

    A budget (`--budget-*`) covers the whole tree and is kept across `resume`; a run that
    spends it ends with stop reason `budget` (exit 1).
    """
    check_tenant(tenant)
    if prompt is None or not prompt.strip():
        fail("a prompt is required, for example: subagents run 'review app.py' --model ...")
    if cwd is not None and not check_path(cwd, "--cwd").is_dir():
        fail(f"--cwd {cwd} is not a directory")
    if sandbox not in SANDBOX_MODES:
        fail(f"--sandbox {sandbox!r} is not a mode; use one of {', '.join(SANDBOX_MODES)}")
    definitions = definitions_for(cwd, tenant)
    definition = None if agent is None else choose_definition(definitions, agent, tenant=tenant)
    chosen, spec = resolve_model(model_for(definition, model))

    async def main() -> RunResult:
        async with Runtime(
            model=chosen,
            store=open_store(store),
            tenant=tenant,
            cwd=cwd,
            model_spec=spec,
            sandbox=parse_mode(sandbox),
            delegation=DelegationOptions(
                definitions=definitions,
                budget=Budget(
                    tokens=budget_tokens,
                    model_calls=budget_model_calls,
                    children=budget_children,
                ),
            ),
        ) as runtime:
            lead = None if definition is None else await runtime.create_agent_from(definition)
            with LiveTree(runtime, enabled=is_terminal()):
                return await runtime.run(prompt, agent=lead)

    result = run_async(main)
    _print_result(result, as_json=as_json)
    _exit_for(result)


@app.command()
def resume(
    session: Annotated[str, typer.Argument(help="Root session id to continue.")],
    prompt: Annotated[str | None, typer.Argument(help="A new prompt for the lead.")] = None,
    model: ModelOpt = None,
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Continue a stored session after a restart: repair, run pending input and PROMPT."""
    check_tenant(tenant)
    if prompt is not None and not prompt.strip():
        fail("the prompt must not be empty; omit it to only run pending input")
    require_existing_store(store)
    header = run_async(lambda: _header(store, tenant, session))
    chosen, spec = resolve_model(model, recorded=header.model_spec)

    async def main() -> RunResult:
        async with Runtime(
            model=chosen,
            store=open_store(store),
            tenant=tenant,
            cwd=header.cwd,
            model_spec=spec,
            delegation=DelegationOptions(definitions=definitions_for(header.cwd, tenant)),
        ) as runtime:
            with LiveTree(runtime, enabled=is_terminal()):
                agent = await runtime.resume_agent(header.id)
                first = agent.session.next_seq
                # Members a crash left unsettled finish now and notify their parents.
                await runtime.continuable.resume_unsettled(header)
                if prompt is not None:
                    await agent.followup(prompt)
                else:
                    agent.wake()
                return await _run_until_quiet(runtime, agent, first)

    result = run_async(main)
    _print_result(result, as_json=as_json)
    _exit_for(result)


@app.command()
def send(
    session: Annotated[str, typer.Argument(help="Root session id of the tree.")],
    name: Annotated[
        str, typer.Argument(help="Full name of the agent (`lead`, `reviewer/checker`).")
    ],
    message: Annotated[str, typer.Argument(help="What to tell it.")],
    model: ModelOpt = None,
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Message any agent of a stored tree by name, as the user.

    The tree then runs until it is quiescent again and the agent's answer is printed.
    """
    check_tenant(tenant)
    if not message.strip():
        fail("the message must not be empty")
    require_existing_store(store)
    header = run_async(lambda: _header(store, tenant, session))
    chosen, spec = resolve_model(model, recorded=header.model_spec)

    async def main() -> RunResult:
        async with Runtime(
            model=chosen,
            store=open_store(store),
            tenant=tenant,
            cwd=header.cwd,
            model_spec=spec,
            delegation=DelegationOptions(definitions=definitions_for(header.cwd, tenant)),
        ) as runtime:
            await runtime.hold(header.id)
            target = await find_member(runtime.store, header, name)
            with LiveTree(runtime, enabled=is_terminal()):
                if target.parent is None:
                    agent = await runtime.resume_agent(target.id)
                    first = agent.session.next_seq
                    await agent.followup(message)
                else:
                    act, _ = await runtime.continuable.deliver_as_user(target.id, message)
                    agent = act.agent
                    first = act.epoch_start
                await runtime.wait_quiescent()
                await runtime.store.flush()
                return run_result(agent.id, agent.session.records[first:])

    result = run_async(main)
    _print_result(result, as_json=as_json)
    _exit_for(result)


@app.command()
def interrupt(
    session: Annotated[str, typer.Argument(help="Root session id of the tree.")],
    name: Annotated[str, typer.Argument(help="Full name of the agent to stop.")],
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
) -> None:
    """Stop an agent of a stored tree.

    A turn a crash left open is closed as interrupted; queued messages stay for a resume.
    """
    check_tenant(tenant)
    require_existing_store(store)
    header = run_async(lambda: _header(store, tenant, session))

    async def main() -> str:
        async with Runtime(
            model=ScriptedModel({}),
            store=open_store(store),
            tenant=tenant,
            cwd=header.cwd,
            delegation=DelegationOptions(definitions={}),  # nothing runs
        ) as runtime:
            await runtime.hold(header.id)
            target = await find_member(runtime.store, header, name)
            before = len(await runtime.store.read(target.id, tenant=tenant))
            agent = await runtime.resume_agent(target.id)
            closed = agent.session.next_seq > before
        return (
            f"interrupted {name}: its cut-off turn is closed; resume the tree to continue it"
            if closed
            else f"{name} was not running; nothing to interrupt"
        )

    typer.echo(run_async(main))


async def _header(store: str | None, tenant: str, session: str) -> SessionHeader:
    if not _UUID.match(session):
        raise NotFoundError(f"{session!r} is not a session id; list them with `subagents sessions`")
    async with open_store(store) as opened:
        header = await opened.get_header(SessionId(session), tenant=tenant)
    if header.parent is not None:
        raise NotFoundError(f"session {session} is not a root session; give the tree's root id")
    return header


def _examples_dir() -> Path:
    return Path(__file__).resolve().parents[3] / "examples"


def _load_demo_tools(path: Path) -> list[ToolSpec]:
    spec = importlib.util.spec_from_file_location("subagents_demo_tools", path)
    if spec is None or spec.loader is None:
        fail(f"cannot load the demo tools from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tools: list[ToolSpec] = list(module.TOOLS)
    return tools


@app.command()
def demo(
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Run the bundled scripted scenario in examples/ and show the tree."""
    check_tenant(tenant)
    examples = _examples_dir()
    script = examples / "demo.yaml"
    if not script.exists():
        fail(f"the demo files are missing: {script} (run from a clone of the repository)")
    tools = _load_demo_tools(examples / "demo_tools.py")
    model = ScriptedModel.from_file(script)

    async def main() -> tuple[RunResult, list[dict[str, Any]]]:
        async with Runtime(
            model=model,
            store=open_store(store),
            tools=tools,
            tenant=tenant,
            cwd=examples,
            model_spec=f"scripted:{script}",
        ) as runtime:
            with LiveTree(runtime, enabled=is_terminal()):
                result = await runtime.run(
                    "How many words are in the project motto, which word is longest, and is "
                    "its wording sound?"
                )
            header = await runtime.store.get_header(result.session_id, tenant=tenant)
            return result, tree_json(await load_tree(runtime.store, header))

    result, rows = run_async(main)
    if as_json:
        typer.echo(dumps({"result": result.output, "session_id": result.session_id, "tree": rows}))
    else:
        typer.echo(result.output)
        typer.echo("")
        typer.echo(render_tree(rows))
        typer.echo(f"\ninspect it with: subagents log {result.session_id}")
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
    list_agents(cwd, tenant, as_json=as_json)


@app.command()
def sessions(
    store: StoreOpt = None, tenant: TenantOpt = "default", as_json: JsonOpt = False
) -> None:
    """List root sessions, newest first."""
    check_tenant(tenant)
    require_existing_store(store)

    async def main() -> list[dict[str, Any]]:
        async with open_store(store) as opened:
            return [
                row.to_json() for row in await list_sessions(opened, tenant=tenant, now=time.time())
            ]

    rows = run_async(main)
    if as_json:
        typer.echo(dumps(rows))
        return

    async def text() -> str:
        async with open_store(store) as opened:
            return render_sessions(await list_sessions(opened, tenant=tenant, now=time.time()))

    typer.echo(run_async(text))


async def _resolve_root(opened: EventStore, tenant: str, target: str) -> SessionHeader:
    """A root session id, or the tenant's newest root session for anything else."""
    if _UUID.match(target):
        header = await opened.get_header(SessionId(target), tenant=tenant)
        if header.parent is not None:
            raise NotFoundError(f"session {target} is not a root session")
        return header
    roots = await opened.list_headers(tenant=tenant, roots_only=True)
    if not roots:
        raise NotFoundError(f"tenant {tenant!r} has no sessions yet")
    return roots[0]


@app.command()
def tree(
    session: Annotated[str, typer.Argument(help="Root session id (or `lead` for the newest).")],
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Print the agent tree of a root session, with status and usage."""
    check_tenant(tenant)
    require_existing_store(store)

    async def main() -> list[dict[str, Any]]:
        async with open_store(store) as opened:
            if not _UUID.match(session) and session != "lead":
                raise NotFoundError(f"{session!r} is not a session id or `lead`")
            header = await _resolve_root(opened, tenant, session)
            held = await is_held(opened, header.id, now=time.time())
            return tree_json(await load_tree(opened, header, held=held))

    rows = run_async(main)
    typer.echo(dumps(rows) if as_json else render_tree(rows))


@app.command()
def log(
    target: Annotated[
        str, typer.Argument(help="Session id, or an agent's full name such as `reviewer/checker`.")
    ],
    root: Annotated[
        str | None, typer.Option("--session", help="Root session in which NAME is looked up.")
    ] = None,
    store: StoreOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Print one agent's transcript (with --json: its events)."""
    check_tenant(tenant)
    require_existing_store(store)

    async def main() -> str:
        async with open_store(store) as opened:
            if _UUID.match(target):
                header = await opened.get_header(SessionId(target), tenant=tenant)
            else:
                if root is not None and not _UUID.match(root):
                    raise NotFoundError(f"--session {root!r} is not a session id")
                base = await _resolve_root(opened, tenant, root or "newest")
                header = await find_member(opened, base, target)
            records = await opened.read(header.id, tenant=tenant)
        return dumps([event_json(r) for r in records]) if as_json else render_log(records)

    typer.echo(run_async(main))
