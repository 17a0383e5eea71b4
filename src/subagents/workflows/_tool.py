"""The model-facing `workflow` tool (spec 1.2-1.4): meta, a Python script, args.

The description is the whole authoring contract (the model never sees engine docs). A run is
started in the foreground and always disposed before the tool returns; only its return value
reaches the model, as `workflow "<name>" completed (<n> agents).` and pretty JSON (truncated
at `max_result_chars`). A run that did not complete is an error with the spec's texts. The
run's `tool-workflow/*` records (spec 1.6, `_records.py`) go to the calling agent's log.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core import Agent
from ..delegation import DELEGATION_TAG
from ..errors import ErrorCode, WorkflowError
from ..messages import JsonObject, JsonValue
from ..tools import ToolContext, ToolSpec, tool
from ._engine import WorkflowEngine, WorkflowOptions, WorkflowRequest
from ._guide import GUIDE_TOOL, description, guide_text
from ._records import RunRecorder
from ._reports import WorkflowResult

if TYPE_CHECKING:
    from .._clock import Clock
    from ..delegation import DelegationRuntime
    from ..policy import SandboxPolicy
    from ._script_runtime import ScriptRuntime

__all__ = [
    "WorkflowToolConfig",
    "mount_workflow_tool",
    "render_success",
    "result_text",
    "workflow_tool",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowToolConfig:
    tool_name: str = "workflow"
    max_result_chars: int = 50_000
    """Longer return values are cut in the model's view (the run's value stays whole)."""


def render_success(name: str, *, agents: int, value: JsonValue, max_chars: int) -> str:
    """`workflow "<name>" completed (<n> agent(s)).`, then the value as pretty JSON."""
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    if len(pretty) > max_chars:  # counted in code points
        omitted = len(pretty) - max_chars
        pretty = f"{pretty[:max_chars]}\n… [truncated: {omitted} more characters]"
    noun = "agent" if agents == 1 else "agents"
    return f'workflow "{name}" completed ({agents} {noun}).\nReturn value:\n{pretty}'


def result_text(name: str, result: WorkflowResult, *, max_chars: int) -> str:
    """The model's view of a settled run; a run that did not complete raises `WorkflowError`."""
    match result.stop_reason:
        case "completed":
            return render_success(
                name, agents=result.agents_started, value=result.value, max_chars=max_chars
            )
        case "cancelled":
            suffix = f" ({result.error})" if result.error else ""
            raise WorkflowError(f"workflow run was cancelled{suffix}", code=ErrorCode.CANCELLED)
        case "error":
            raise WorkflowError(f"workflow run failed: {result.error or 'unknown error'}")
        case _:
            raise WorkflowError(f"workflow run ended abnormally ({result.stop_reason})")


def _parameters() -> JsonObject:
    return {
        "type": "object",
        "properties": {
            "meta": {
                "type": "object",
                "description": "name (short kebab-case), description (one line); whenToUse and "
                "phases optional.",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "whenToUse": {"type": "string"},
                    "phases": {"type": "array", "items": {"type": "object"}},
                },
                "required": ["name", "description"],
            },
            "script": {
                "type": "string",
                "description": "The script body: top-level await and return.",
            },
            "args": {
                "type": "object",
                "description": "A JSON object the script reads as `args`.",
            },
        },
        "required": ["meta", "script"],
    }


def _request(args: JsonObject, parent: Agent) -> WorkflowRequest:
    """The engine request of a call: the engine checks meta itself, listing every problem."""
    script = args.get("script")
    if not isinstance(script, str):
        raise WorkflowError(
            "invalid arguments: script must be a string (the Python script body)",
            code=ErrorCode.INVALID_ARGS,
        )
    call_args = args.get("args")
    if call_args is not None and not isinstance(call_args, dict):
        raise WorkflowError(
            "invalid arguments: args must be a JSON object; wrap a list in a field, e.g. "
            '{"files": [...]}',
            code=ErrorCode.INVALID_ARGS,
        )
    return WorkflowRequest(script=script, meta=args.get("meta"), args=call_args, parent=parent)


def workflow_tool(engine: WorkflowEngine, config: WorkflowToolConfig | None = None) -> ToolSpec:
    """The `workflow` tool bound to `engine`."""
    config = config or WorkflowToolConfig()
    runtime = engine.service.runtime

    async def handler(args: JsonObject, ctx: ToolContext) -> str:
        parent = runtime.get_agent(ctx.agent_id)
        if parent is None:
            raise WorkflowError(
                f"{config.tool_name} tool requires a calling agent (no live agent {ctx.agent_id})",
                code=ErrorCode.NO_CALLER,
            )
        run = engine.start(_request(args, parent))
        recorder = RunRecorder(parent, run_id=run.id, name=run.meta.name)
        recorder.start()
        unsubscribe = engine.subscribe(recorder.on_event)  # before the run's first tick

        def quiescent(_: object) -> None:
            unsubscribe()
            recorder.finish()

        try:
            result = await run.result
        except asyncio.CancelledError:
            run.cancel("parent step aborted")
            raise
        finally:
            # run-end waits for quiescence even if this call is cancelled again meanwhile:
            # the watched future is not the awaited one, so a cancel cannot resolve it early.
            run.dispose().add_done_callback(quiescent)
            await run.dispose()
            quiescent(None)
        return result_text(run.meta.name, result, max_chars=config.max_result_chars)

    return ToolSpec(
        name=config.tool_name,
        description=description(frozenset()),
        describe=description,
        tags=frozenset({DELEGATION_TAG}),
        parameters=_parameters(),
        handler=handler,
        validate=False,  # meta is checked by the engine, which names every problem at once
        parallel_safe=True,
        checkpoint=False,  # its effects are its children's, each written to our own log
    )


def mount_workflow_tool(
    runtime: DelegationRuntime,
    options: WorkflowOptions | None = None,
    *,
    config: WorkflowToolConfig | None = None,
    script_runtime: ScriptRuntime | None = None,
    policy_for: Callable[[Agent], SandboxPolicy] | None = None,
    clock: Clock | None = None,
) -> WorkflowEngine:
    """Create a runtime's workflow engine and register its `workflow` tool.

    Call it inside the runtime (after `__aenter__` registered the providers) and close the
    returned engine with the runtime (`await engine.aclose()`), which disposes live runs.
    `options` defaults to docs/design.md §9 (16 children at once, 200 in all) with the runtime's
    delegation depth; `policy_for` resolves a parent's file policy (default: the runtime's
    `sandbox_policy`, which also hides its store); `clock` measures each run's
    wall-clock limit (default: real time).
    """
    if options is None:
        options = WorkflowOptions(max_depth=runtime.delegation.max_depth)
    engine = WorkflowEngine(
        runtime.subagents,
        options,
        runtime=script_runtime,
        policy_for=policy_for or (lambda agent: runtime.sandbox_policy(agent.id)),
        clock=clock,
    )
    runtime.tools.register(workflow_tool(engine, config))
    runtime.tools.register(guide_tool(engine.options))
    return engine


def guide_tool(options: WorkflowOptions) -> ToolSpec:
    """`workflow_guide`: the whole contract of a workflow script, asked for when needed."""
    text = guide_text(options)

    @tool(name=GUIDE_TOOL, parallel_safe=True, checkpoint=False, tags={DELEGATION_TAG})
    async def workflow_guide() -> str:
        """How to write a workflow script: every hook, option and limit, and an example."""
        return text

    return workflow_guide
