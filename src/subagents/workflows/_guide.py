"""The texts of the `workflow` tool: its short description and the guide it points to.

The whole contract of a script (every hook, option and limit, an example) costs a model
about a thousand tokens, so it is not in every request: the description says enough to know
when to use the tool, and `workflow_guide` answers with the rest, once, when it is needed.
"""

from __future__ import annotations

from collections.abc import Set

from ._engine import WorkflowOptions

__all__ = [
    "GUIDE_TOOL",
    "description",
    "guide_text",
]

GUIDE_TOOL = "workflow_guide"


def description(offered: Set[str]) -> str:
    """The `workflow` tool's description, naming only the tools the agent is offered."""
    instead = "; for one or two delegations use subagent" if "subagent" in offered else ""
    guide = (
        f" Call {GUIDE_TOOL} once before your first script: it has every hook, option and "
        "limit, and an example."
        if GUIDE_TOOL in offered
        else ""
    )
    return (
        "Run a workflow script: Python that orchestrates many subagents (fan-out, phases, "
        "pipelines) and returns one JSON value, the only thing that comes back to you. Use it "
        f"when asked for a workflow or for large orchestration{instead}. `script` is the body "
        "of an async function: `await agent(prompt, schema=None, label=None, name=None)` runs "
        "a child and returns its answer (the dict `schema` describes; None if it failed), "
        "`await parallel([lambda: agent(...), ...])` runs many at once; end with "
        f"`return <JSON value>`.{guide}"
    )


def guide_text(options: WorkflowOptions) -> str:
    """What `workflow_guide` answers: the whole contract of a script, with an example."""
    wall = f"{options.wall_seconds:g} s" if options.wall_seconds is not None else "unlimited"
    concurrent = options.max_concurrent_agents or "a few"
    return f"""\
How to write a workflow script.

Parameters:
- meta: {{"name": short kebab-case name, "description": one line, "whenToUse"?: text, \
"phases"?: [{{"title", "detail"?, "provider"?, "model"?}}]}}. Plain JSON, no other keys.
- script: the BODY of an async Python function (not a module; no `export const meta`). \
Top-level `await` and `return` work; end with `return <JSON value>` (dicts, lists, str, int, \
float, bool, None; no tuples or sets).
- args: optional JSON object, visible to the script as `args` ({{}} when omitted). Wrap a \
list in a field: {{"files": [...]}}.

The script's hooks:
- `await agent(prompt, *, schema=None, label=None, phase=None, model=None, provider=None, \
name=None)` runs one subagent to completion (it works in your directory with your tools) and \
returns its final text; with `schema` (a JSON Schema with "type": "object", using only type, \
properties, required, additionalProperties, items, enum, const, oneOf: no pattern, format or \
numeric bounds) it returns the validated dict. It returns None when the child does not \
complete, so filter falsy results. `label` is its display text, `phase` its progress group, \
`model` a model spec ("openai:gpt-4o"), `provider` a model provider (alone: your model \
name under that provider; with `model`: "provider:model"), `name` the child's name. Options \
may also come as one dict. Any other option (effort, isolation, agent_type, ...) is an error.
- `await parallel(items)` runs zero-argument functions (or awaitables) at once, waits for all \
and returns their results in order; one that raises becomes None.
- `await pipeline(items, *stages)` runs every item through the stages independently, with no \
barrier between stages: each stage is called as `stage(prev, item, index)` (sync or async; \
the first gets prev = item); a stage that raises makes that item None and skips its remaining \
stages. Prefer it for multi-stage work.
- `phase(title)` starts a progress phase; `log(message)` narrates progress.
- `WorkflowError` is what misuse raises; branch on `e.code`, not identity.
Misused hooks (bad arguments, unknown options, unsupported schemas, tripped caps) raise \
WorkflowError and end the whole script, even inside parallel() or pipeline(). At most \
{concurrent} children run at once and {options.max_total_agents} in all; parallel() and \
pipeline() take at most {options.max_items_per_call} items. The script only coordinates: it has \
no files, network, subprocesses or timers, and imports only pure modules (json, re, math, \
itertools, collections, functools, statistics, textwrap, ...); the agents do the work. Its \
first stretch before it first awaits may take {options.sync_timeout_ms} ms, the whole run \
{wall}. It runs in the foreground: you get its value when it ends.

Example:
    files = args["files"]
    phase("review")
    reviews = await parallel([
        lambda f=f: agent(f"Review {{f}} for bugs; list each one.", label=f, schema={{
            "type": "object",
            "properties": {{"bugs": {{"type": "array", "items": {{"type": "string"}}}}}},
            "required": ["bugs"],
        }})
        for f in files
    ])
    phase("summary")
    found = {{f: r["bugs"] for f, r in zip(files, reviews) if r}}
    summary = await agent(f"Summarize these bug reports by severity: {{found}}")
    return {{"bugs": found, "summary": summary}}
"""
