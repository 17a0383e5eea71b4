"""The `subagent` tool (and `subagent_fork`).

Delegate to a named child, in the foreground or as a background task, optionally started from
an agent definition (`agent`): its instructions, its tool scope (never wider than the
caller's), its depth cap; `context: fork` routes to the fork provider.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from ...core import Agent
from ...errors import ErrorCode, SubagentError, ToolError
from ...messages import JsonObject
from ...names import MAX_NAME_LENGTH, NAME_PATTERN
from ...sessions import KnownOutcome
from ...tools import ToolContext, ToolSpec
from .._results import SubagentResult
from .._scope import DELEGATION_TAG, pick_definition
from .._service import Admission, SubagentService
from .._wording import (
    AGENT_PARAMETER_TEXT,
    CANCELLED_TEXT,
    NO_OUTPUT_TEXT,
    continuable_started_text,
    definitions_description,
    diagnostic_line,
    failure_text,
    prompt_description,
    render_result,
    task_started_text,
    tool_description,
)

if TYPE_CHECKING:
    from ...definitions import AgentDefinition
    from .._background import TaskOutcome, TaskRegistry
    from .._continuable import ContinuableManager

__all__ = ["SubagentToolConfig", "mount_subagent_tool", "subagent_tool"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentToolConfig:
    """One instance of the delegation tool, bound to one provider."""

    provider: str = "spawn"
    tool_name: str = "subagent"
    background: bool = True
    background_mode: Literal["continuable", "one-shot"] = "continuable"
    """What `run_in_background: true` starts: a continuable child (addressable by name,
    settles with a notice) or a one-shot background task."""
    max_depth: int | None = 3


def calling_agent(service: SubagentService, ctx: ToolContext, tool_name: str) -> Agent:
    """The live agent whose tool call this is; `NO_CALLER` when it is not live here."""
    agent = service.runtime.get_agent(ctx.agent_id)
    if agent is None:
        raise SubagentError(
            f"{tool_name} requires a calling agent (no live agent {ctx.agent_id})",
            code=ErrorCode.NO_CALLER,
        )
    return agent


def _parameters(*, inherits: bool, background: bool, agents: Sequence[str] = ()) -> JsonObject:
    properties: dict[str, Any] = {
        "description": {
            "type": "string",
            "minLength": 1,
            "description": "3-5 words, for display.",
        },
        "prompt": {
            "type": "string",
            "minLength": 1,
            "description": prompt_description(inherits=inherits),
        },
        "name": {
            "type": "string",
            # The grammar of names.py, so a constrained decoder cannot produce another.
            "pattern": NAME_PATTERN,
            "maxLength": MAX_NAME_LENGTH,
            "description": "Unique among your children, not `lead` (default agent-N).",
        },
        "cwd": {
            "type": "string",
            "description": "Its working directory and workspace, inside yours (default: yours).",
        },
    }
    if agents:
        properties["agent"] = {
            "type": "string",
            "enum": list(agents),
            "description": AGENT_PARAMETER_TEXT,
        }
    if background:
        properties["run_in_background"] = {
            "type": "boolean",
            "description": "Return at once; you are notified when it settles (default false).",
        }
    return {"type": "object", "properties": properties, "required": ["description", "prompt"]}


def _without_rules_the_handler_checks(parameters: JsonObject) -> JsonObject:
    """`parameters` less the name grammar and the definitions' `enum`.

    Admission refuses those with their own codes and hints (`INVALID_NAME`,
    `UNKNOWN_DEFINITION`), which say more than a schema mismatch would.
    """
    properties = dict(cast("dict[str, Any]", parameters["properties"]))
    properties["name"] = {"type": "string"}
    if "agent" in properties:
        properties["agent"] = {"type": "string"}
    return {**parameters, "properties": properties}


def subagent_tool(
    service: SubagentService,
    config: SubagentToolConfig,
    *,
    inherits: bool,
    tasks: TaskRegistry | None,
    continuable: ContinuableManager | None = None,
) -> ToolSpec:
    """Build the tool for one provider instance."""
    name = config.tool_name
    usable = [d for d in service.definitions.values() if not (inherits and d.context == "spawn")]

    def handler(args: JsonObject, ctx: ToolContext) -> Awaitable[str]:
        """Check and admit the call, then hand back the coroutine that carries it out.

        A plain function, so a foreground child's run is the only frame left waiting (a
        fan-out waits on thousands of them). What it raises, it raises from the call, which
        the caller awaits at once: the tool's error either way.
        """
        parent = calling_agent(service, ctx, name)
        requested = args.get("run_in_background")
        background = requested is True
        if requested not in (None, False) and not config.background:
            # The schema omits the parameter, but undeclared keys pass validation: refuse loudly.
            raise SubagentError(
                f"run_in_background is disabled for this tool instance ({name}); call it "
                "without run_in_background to wait for the answer",
                code=ErrorCode.BACKGROUND_DISABLED,
            )
        for key in ("description", "prompt"):
            if not str(args[key]).strip():
                # The schema's minLength lets blank text through; a child cannot act on it.
                raise SubagentError(
                    f"invalid {key}: expected text that is not blank", code=ErrorCode.USAGE
                )
        provider, definition = _definition_for(
            service, config, args.get("agent"), inherits=inherits, background=background
        )
        admission = service.admit(
            provider,
            parent=parent,
            prompt=str(args["prompt"]),
            label=str(args["description"]),
            name=args.get("name"),
            cwd=args.get("cwd"),
            max_depth=config.max_depth,
            definition=definition,
            # The call that waits for (or collects) the child, recorded with it: after a
            # crash the child's answer finds its way back to this call.
            call_id=ctx.call_id,
        )
        if background and config.background_mode == "continuable" and continuable is not None:
            return _start_continuable(service, continuable, admission)
        if background:
            return _start_in_background(service, tasks, admission)
        return _run_foreground(service, admission)

    continuable_background = config.background_mode == "continuable" and continuable is not None
    listed = definitions_description(usable, inherits=inherits)

    def describe(offered: Set[str]) -> str:
        return (
            tool_description(
                inherits=inherits,
                background=config.background,
                continuable=continuable_background,
                offered=offered,
            )
            + listed
        )

    parameters = _parameters(
        inherits=inherits, background=config.background, agents=[d.name for d in usable]
    )
    return ToolSpec(
        name=name,
        description=describe(frozenset()),
        describe=describe,
        tags=frozenset({DELEGATION_TAG}),
        parameters=parameters,
        checked=_without_rules_the_handler_checks(parameters),
        handler=handler,
        parallel_safe=True,
        checkpoint=False,  # every effect is a write to our own, ordered log
        aborted_text=f"Error: {CANCELLED_TEXT}",  # a cancelled call cancels its child's run
    )


def _definition_for(
    service: SubagentService,
    config: SubagentToolConfig,
    agent: object,
    *,
    inherits: bool,
    background: bool,
) -> tuple[str, AgentDefinition | None]:
    """The provider and definition of a call (`agent` omitted: the tool's own provider)."""
    if agent is None:
        return config.provider, None
    definition = pick_definition(
        service.definitions,
        agent,
        tool_name=config.tool_name,
        inherits=inherits,
        background=background,
    )
    if definition.context != "fork" or inherits:
        return config.provider, definition
    if service.get_provider("fork") is None:
        raise SubagentError(
            f'agent definition "{definition.name}" declares `context: fork`, but this runtime '
            "offers no fork provider",
            code=ErrorCode.NO_PROVIDER,
        )
    return "fork", definition


async def _checked_cwd(service: SubagentService, admission: Admission) -> Admission:
    """The admission with its cwd checked; given back (`cancel`) when the check refuses it."""
    try:
        return await service.check_cwd(admission)
    except BaseException:
        service.cancel(admission)
        raise


async def _start_continuable(
    service: SubagentService, continuable: ContinuableManager, admission: Admission
) -> str:
    admission = await _checked_cwd(service, admission)
    act, _ = await continuable.start(admission)
    return continuable_started_text(act.full_name, admission.name)


async def _start_in_background(
    service: SubagentService, tasks: TaskRegistry | None, admission: Admission
) -> str:
    if tasks is None:
        service.cancel(admission)
        raise SubagentError(
            "background tasks are unavailable in this runtime", code=ErrorCode.USAGE
        )
    # Validate the start now, so a bad cwd is this call's error, not a failed task.
    admission = await _checked_cwd(service, admission)
    return _start_background(service, tasks, admission)


async def _run_foreground(service: SubagentService, admission: Admission) -> str:
    run = await service.launch(admission, here=True)
    del admission  # not kept through the child's run: a fan-out waits on thousands
    try:
        result = await run.wait()
    finally:
        await run.dispose()
    if result.stop_reason == "completed":
        rendered = render_result(result)
        if not rendered.strip():  # never a silently empty answer
            raise ToolError(NO_OUTPUT_TEXT, code=ErrorCode.TOOL_FAILED, child=run.name)
        return rendered
    text, code = _failure(result)
    raise ToolError(text, code=code, child=run.name)


def foreground_outcome(result: SubagentResult) -> KnownOutcome:
    """The result a foreground `subagent` call records for its child's `result`.

    The same text a live call returns, for a call a crash cut off whose child ran again.
    """
    if result.stop_reason == "completed":
        rendered = render_result(result)
        if not rendered.strip():
            return KnownOutcome(
                f"Error: {NO_OUTPUT_TEXT}", is_error=True, code=str(ErrorCode.TOOL_FAILED)
            )
        return KnownOutcome(rendered)
    text, code = _failure(result)
    return KnownOutcome(f"Error: {text}", is_error=True, code=str(code))


def _failure(result: SubagentResult) -> tuple[str, ErrorCode]:
    text = failure_text(result.stop_reason, result.diagnostic, result.output, result.retryable)
    code = ErrorCode.BUDGET_EXHAUSTED if result.stop_reason == "budget" else ErrorCode.TOOL_FAILED
    return text, code


def _start_background(service: SubagentService, tasks: TaskRegistry, admission: Admission) -> str:
    from .._background import TaskOutcome

    async def produce() -> TaskOutcome:
        run = await service.launch(admission)
        try:
            tasks.get(task_id, admission.parent.id).subject = run.id  # for read_transcript
            result = await run.wait()
        finally:
            await run.dispose()
        if result.stop_reason == "completed":
            return TaskOutcome(status="completed", output=render_result(result))
        if result.stop_reason == "aborted":
            return TaskOutcome(status="killed", detail="aborted")
        detail = result.stop_reason
        if result.diagnostic:  # why, in one line, so task_output and the notice say it
            detail += f"; {diagnostic_line(result.diagnostic, result.retryable)}"
        return TaskOutcome(status="failed", detail=detail, output=result.output)

    try:
        task_id = tasks.start(
            kind="subagent", label=admission.label, owner=admission.parent, run=produce
        )
    except BaseException:
        service.cancel(admission)
        raise
    return task_started_text(task_id, admission.full_name)


def mount_subagent_tool(
    service: SubagentService,
    config: SubagentToolConfig,
    *,
    tasks: TaskRegistry | None,
    continuable: ContinuableManager | None = None,
) -> Callable[[], None]:
    """Keep the tool registered exactly while its provider is.

    The tool mirrors the provider's lifecycle and takes its wording from the provider's
    context contract.
    """
    from .._service import DefinitionsChanged, ProviderAdded, ProviderRemoved

    registry = service.runtime.tools
    mounted = False

    def mount() -> None:
        nonlocal mounted
        provider = service.get_provider(config.provider)
        if provider is None or mounted:
            return
        registry.register(
            subagent_tool(
                service,
                config,
                inherits=provider.inherits_parent_context,
                tasks=tasks,
                continuable=continuable,
            )
        )
        mounted = True

    def unmount() -> None:
        nonlocal mounted
        if mounted:
            registry.unregister(config.tool_name)
            mounted = False

    def on_event(event: object) -> None:
        if isinstance(event, ProviderAdded) and event.name == config.provider:
            mount()
        elif isinstance(event, ProviderRemoved) and event.name == config.provider:
            unmount()
        elif isinstance(event, DefinitionsChanged) and mounted:
            unmount()  # the wording lists the definitions: derive it again
            mount()

    unsubscribe = service.runtime.subscribe(
        on_event, types=(ProviderAdded, ProviderRemoved, DefinitionsChanged)
    )
    mount()

    def dispose() -> None:
        unsubscribe()
        unmount()

    return dispose
