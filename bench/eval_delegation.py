"""An evaluation you can rerun: does a model delegate right the first time with our tools?

    .venv/bin/python -m bench.eval_delegation                          # the scripted model
    .venv/bin/python -m bench.eval_delegation --base-url URL [--model NAME]
    .venv/bin/python -m bench.eval_delegation --serve "llama-server -m M.gguf --jinja \\
        --port {port}" [--json]

Four fixed delegation tasks, each a fresh tree on the same runtime settings: `foreground`
(one named child, wait for its answer), `background` (a background child, then a second
turn for it with `send_message`), `schema` (a child started from a definition that answers
with a schema), `fan-out` (three named children in one response). For each task it reports:

- tool-call validity: the share of tool calls that were not refused for their form
  (`INVALID_ARGS`, `INVALID_NAME`, `UNKNOWN_TOOL`, `UNKNOWN_DEFINITION`, ...): what a model
  gets wrong when the schemas and descriptions do not guide it;
- delegation success: whether the tree ended as the task asks (the named children exist
  and completed, the follow-up reached the child, the structured answer validated);
- prompt tokens per call: what the server reported, or, on the scripted model, the request
  counted offline with `o200k_base`.

Without `--base-url` or `--serve` the scripted model plays a run that does each task right:
that is the harness checking itself (CI runs it; the exit status is 1 when a task fails).
With a server the script only reports, exit 0: a real model's figures are the result.
`--serve` starts the given command (`{port}` is replaced by a free port), waits until the
server answers, runs, and stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field

import msgspec

from subagents import Budget, DelegationOptions, Runtime
from subagents.definitions import AgentDefinition
from subagents.delegation import TreeMember
from subagents.models import (
    Model,
    ModelChunk,
    ModelRequest,
    OpenAICompatModel,
    ScriptedModel,
    UsageChunk,
)
from subagents.sessions import (
    AssistantMessageEvent,
    SubagentDescriptor,
    ToolCallEvent,
    ToolResultEvent,
)
from subagents.testing import InMemoryEventStore

from .tool_budget import tokens, tool_json

FORM_ERRORS = frozenset(
    {
        "INVALID_ARGS",
        "INVALID_NAME",
        "UNKNOWN_TOOL",
        "UNKNOWN_DEFINITION",
        "DUPLICATE_NAME",
        "USAGE",
        "BACKGROUND_DISABLED",
    }
)
"""Refusals of a call's form: what a model that read the schema right never gets."""

SCORER = AgentDefinition(
    name="scorer",
    description="Rates a text from 0 to 10 and answers with a JSON score.",
    body="You rate texts. Answer only through your structured output.",
    output_schema={
        "type": "object",
        "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 10}},
        "required": ["score"],
        "additionalProperties": False,
    },
)


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    prompt: str
    check: Callable[[list[TreeMember]], str | None]
    """None when the tree ended as the task asks, else what is wrong."""
    script: str
    """A scripted run that does the task right (YAML, by agent full name)."""


def _member(tree: list[TreeMember], name: str) -> TreeMember | None:
    return next((m for m in tree if m.row.name == name), None)


def _turns(member: TreeMember) -> int:
    return len({r.event.turn for r in member.records if isinstance(r.event, AssistantMessageEvent)})


def _completed(tree: list[TreeMember], *names: str) -> str | None:
    for name in names:
        member = _member(tree, name)
        if member is None:
            return f"no child named {name}"
        if str(member.row.status) in ("failed", "aborted", "crashed", "cut-off", "running"):
            return f"{name} ended {member.row.status}"
    return None


def _check_foreground(tree: list[TreeMember]) -> str | None:
    return _completed(tree, "counter")


def _check_background(tree: list[TreeMember]) -> str | None:
    problem = _completed(tree, "poet")
    if problem is not None:
        return problem
    poet = _member(tree, "poet")
    assert poet is not None
    if poet.row.mode != "continuable":
        return "poet was not started in the background"
    return None if _turns(poet) >= 2 else "poet never got the follow-up message"


def _check_schema(tree: list[TreeMember]) -> str | None:
    started = [
        m
        for m in tree[1:]
        if any(
            isinstance(r.event, SubagentDescriptor) and r.event.definition == SCORER.name
            for r in m.records
        )
    ]
    if not started:
        return "no child started from the scorer definition"
    for member in started:
        results = [r.event for r in member.records if isinstance(r.event, ToolResultEvent)]
        if any(e.message.name == "structured_output" and not e.message.is_error for e in results):
            return None
    return "the scorer gave no valid structured answer"


def _check_fan_out(tree: list[TreeMember]) -> str | None:
    problem = _completed(tree, "one", "two", "three")
    if problem is not None:
        return problem
    lead = tree[0]
    steps = {
        (r.event.turn, r.event.step)
        for r in lead.records
        if isinstance(r.event, ToolCallEvent) and r.event.name == "subagent"
    }
    return None if len(steps) == 1 else "the three children were not started in one response"


TASKS = (
    Task(
        "foreground",
        "Delegate this to a subagent named `counter` and wait for its answer: count the words "
        "in the sentence 'the cat sat on the mat'. Then tell me the count.",
        _check_foreground,
        """
lead:
  - calls: [{tool: subagent, args: {name: counter, description: Count words,
             prompt: "Count the words in: the cat sat on the mat"}}]
  - text: The sentence has 6 words.
counter:
  - text: "6"
""",
    ),
    Task(
        "background",
        "Start a subagent named `poet` in the background to write a haiku about rain. When it "
        "has finished, send it a message asking for a second haiku, about snow.",
        _check_background,
        """
lead:
  - calls: [{tool: subagent, args: {name: poet, description: Write a haiku,
             prompt: Write a haiku about rain., run_in_background: true}}]
  - text: The poet is writing.
  - calls: [{tool: send_message, args: {agent: poet, message: Now write a haiku about snow.}}]
  - text: I asked for a second haiku.
  - text: Both haiku are done.
poet:
  - text: Rain taps the window
  - text: Snow settles softly
""",
    ),
    Task(
        "schema",
        "Use the `scorer` agent definition to rate the text 'hello world', then tell me the score.",
        _check_schema,
        """
lead:
  - calls: [{tool: subagent, args: {agent: scorer, description: Rate the text,
             prompt: "Rate this text from 0 to 10: hello world"}}]
  - text: The score is 4.
scorer:
  - calls: [{tool: structured_output, args: {score: 4}}]
""",
    ),
    Task(
        "fan-out",
        "In one message, start three subagents named `one`, `two` and `three`; each must reply "
        "with its own name. Then list their replies.",
        _check_fan_out,
        """
lead:
  - calls:
      - {tool: subagent, args: {name: one, description: Say one, prompt: "Reply with: one"}}
      - {tool: subagent, args: {name: two, description: Say two, prompt: "Reply with: two"}}
      - {tool: subagent, args: {name: three, description: Say three,
                                prompt: "Reply with: three"}}
  - text: one, two, three
one:
  - text: one
two:
  - text: two
three:
  - text: three
""",
    ),
)


@dataclass(slots=True)
class Call:
    agent: str
    prompt_tokens: int
    counted: bool
    """The tokens were counted here (the model reported no usage)."""


class MeasuringModel:
    """A `Model` that passes every request on and keeps its prompt tokens."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.calls: list[Call] = []

    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def name(self) -> str:
        return self.inner.name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        reported: int | None = None
        async for chunk in self.inner.stream(request):
            if isinstance(chunk, UsageChunk) and chunk.usage.input_tokens:
                reported = chunk.usage.input_tokens
            yield chunk
        if reported is None:
            self.calls.append(Call(request.agent_name, counted_tokens(request), counted=True))
        else:
            self.calls.append(Call(request.agent_name, reported, counted=False))

    async def aclose(self) -> None:
        await self.inner.aclose()


def counted_tokens(request: ModelRequest) -> int:
    """The request's system, tools and messages, counted with o200k_base (an estimate)."""
    tools = ",".join(
        tool_json({"name": t.name, "description": t.description, "parameters": t.parameters})
        for t in request.tools
    )
    messages = msgspec.json.encode(list(request.messages)).decode()
    return tokens(request.system + tools + messages)


@dataclass(slots=True)
class Outcome:
    task: str
    success: bool
    problem: str | None
    tool_calls: int
    valid_calls: int
    refused: list[str] = field(default_factory=list[str])
    prompt_tokens: list[int] = field(default_factory=list[int])

    @property
    def validity(self) -> float:
        """The share of calls not refused for their form (1.0 when there were none)."""
        return self.valid_calls / self.tool_calls if self.tool_calls else 1.0


async def run_task(task: Task, model: MeasuringModel, cwd: str, max_tokens: int | None) -> Outcome:
    first = len(model.calls)
    options = DelegationOptions(
        definitions={SCORER.name: SCORER},
        max_depth=1,
        budget=Budget(model_calls=40),
        max_tokens=max_tokens,
    )
    async with Runtime(model=model, store=InMemoryEventStore(), cwd=cwd, delegation=options) as rt:
        result = await rt.run(task.prompt)
        await rt.wait_quiescent()
        tree = await rt.tree(result.session_id)
    calls = valid = 0
    refused: list[str] = []
    for member in tree:
        for record in member.records:
            event = record.event
            if isinstance(event, ToolResultEvent):
                calls += 1
                if event.code in FORM_ERRORS:
                    refused.append(f"{member.row.name}: {event.message.name} {event.code}")
                else:
                    valid += 1
    problem = task.check(tree)
    return Outcome(
        task=task.name,
        success=problem is None,
        problem=problem,
        tool_calls=calls,
        valid_calls=valid,
        refused=refused,
        prompt_tokens=[c.prompt_tokens for c in model.calls[first:]],
    )


async def evaluate(
    model_for: Callable[[Task], Awaitable[Model]], max_tokens: int | None
) -> tuple[list[Outcome], bool]:
    outcomes: list[Outcome] = []
    counted = False
    with tempfile.TemporaryDirectory(prefix="eval-delegation-") as cwd:
        for task in TASKS:
            model = MeasuringModel(await model_for(task))
            try:
                outcomes.append(await run_task(task, model, cwd, max_tokens))
            finally:
                await model.aclose()
            counted = counted or any(c.counted for c in model.calls)
    return outcomes, counted


def report(outcomes: Sequence[Outcome], *, counted: bool) -> str:
    source = "counted offline (o200k_base)" if counted else "reported by the server"
    lines = [
        f"{'task':<11} {'success':<8} {'calls':>5} {'valid':>6} {'prompt tokens/call':>19}",
    ]
    for o in outcomes:
        mean = sum(o.prompt_tokens) / len(o.prompt_tokens) if o.prompt_tokens else 0
        tokens = f"{mean:.0f} (max {max(o.prompt_tokens, default=0)})"
        validity = f"{o.validity:.0%}" if o.tool_calls else "-"
        lines.append(
            f"{o.task:<11} {'yes' if o.success else 'no':<8} {o.tool_calls:>5} "
            f"{validity:>6} {tokens:>19}"
        )
        if o.problem:
            lines.append(f"  not done: {o.problem}")
        lines.extend(f"  refused: {r}" for r in o.refused)
    calls = sum(o.tool_calls for o in outcomes)
    valid = sum(o.valid_calls for o in outcomes)
    done = sum(o.success for o in outcomes)
    share = f" ({valid / calls:.0%})" if calls else ""
    lines.append(
        f"{done} of {len(outcomes)} tasks done; {valid} of {calls} tool calls valid{share}; "
        f"prompt tokens {source}"
    )
    return "\n".join(lines)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(command: str, timeout: float = 120.0) -> Generator[str]:
    """Start `command` with a free port for `{port}`; yield its base URL once it answers."""
    port = _free_port()
    argv = shlex.split(command.replace("{port}", str(port)))
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise SystemExit(f"the server exited with status {process.returncode}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise SystemExit(f"the server did not answer within {timeout:g}s") from None
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.eval_delegation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base-url", help="an OpenAI-compatible server's API root (…/v1)")
    parser.add_argument("--serve", help="a command that starts a server on {port}")
    parser.add_argument("--model", default="local", help="the model name sent to the server")
    parser.add_argument("--api-key", default="none", help="sent as the bearer token")
    parser.add_argument("--max-tokens", type=int, default=512, help="cap on each response")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.base_url and args.serve:
        parser.error("give --base-url or --serve, not both")

    def run(base_url: str | None) -> tuple[list[Outcome], bool]:
        async def model_for(task: Task) -> Model:
            if base_url is None:
                return ScriptedModel.from_yaml(task.script)
            return OpenAICompatModel(args.model, base_url=base_url, api_key=args.api_key)

        cap = args.max_tokens if base_url is not None else None
        return asyncio.run(evaluate(model_for, cap))

    if args.serve:
        with serving(args.serve) as base:
            outcomes, counted = run(base)
    else:
        outcomes, counted = run(args.base_url)
    if args.json:
        print(json.dumps([dataclasses.asdict(o) for o in outcomes], indent=2))
    else:
        print(report(outcomes, counted=counted))
    scripted = not (args.base_url or args.serve)
    return 1 if scripted and not all(o.success for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
