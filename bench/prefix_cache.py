"""How much of each agent's first request a server's prompt-prefix cache serves.

When a lead delegates, every child's first request starts a new conversation. Whether the
server can reuse the lead's already-computed prompt (system text, tool list) for it depends
on what the runtime puts at the front of each request: a shared prefix is served from the
server's KV cache, a different one is evaluated again from scratch.

The run follows a fixed script, whatever the model says: a probe model sends every request
the runtime makes to a real OpenAI-compatible server with `max_tokens=1`, records the usage
it reports (prompt tokens, and cached tokens, `usage.prompt_tokens_details.cached_tokens`),
throws the answer away and plays the `ScriptedModel` answer for that request instead.
Requests reach the server one at a time, in the order the runtime makes them.

Scenarios:

* `foreground`: the lead starts two children, `alpha` and `beta`, in one response; each
  answers once, then the lead answers.
* `background`: the lead starts `worker` in the background, ends its turn, and once told the
  worker finished, sends it a second message with `send_message`.

Any server that reports cached tokens works. The numbers only mean something for one slot
and a fresh server (so no other client shares the cache). With llama.cpp, any GGUF with a
chat template will do (the weights need not be any good, as the answers are discarded):

    llama-server -m MODEL.gguf --jinja -np 1 -c 32768 --port 8080
    .venv/bin/python -m bench.prefix_cache --base-url http://127.0.0.1:8080/v1 [--json]

The summary gives the mean cached share of the children's first calls, and the prompt tokens
cached and evaluated over all calls (later calls can lose cached tokens when a child's request
displaces the lead's from the one slot). Note that a second scenario's lead starts with the same
prompt as the first's, so its first call is served from the cache the first scenario left.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

import msgspec

from subagents import Runtime
from subagents.models import (
    ModelChunk,
    ModelRequest,
    OpenAICompatModel,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    UsageChunk,
)
from subagents.testing import InMemoryEventStore

LEAD = "lead"


@dataclass(frozen=True, slots=True)
class Sample:
    """What the server reported for one request the runtime made."""

    scenario: str
    agent: str
    call_index: int
    prompt_tokens: int
    cached_tokens: int

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class ProbeModel:
    """A `Model` that measures each request on a real server and answers from a script."""

    provider = "probe"

    def __init__(self, server: OpenAICompatModel) -> None:
        self._server = server
        self._lock = asyncio.Lock()
        self._script = ScriptedModel({})
        self.scenario = ""
        self.samples: list[Sample] = []

    @property
    def name(self) -> str:
        return f"probe({self._server.name})"

    def play(self, scenario: str, script: Mapping[str, Sequence[ScriptedResponse]]) -> None:
        """Answer from `script` from now on, recording samples under `scenario`."""
        self.scenario = scenario
        self._script = ScriptedModel(script, source=f"<{scenario} script>")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        scenario, script = self.scenario, self._script
        async with self._lock:  # one request at a time, in the order they were made
            usage = None
            async for chunk in self._server.stream(msgspec.structs.replace(request, max_tokens=1)):
                if isinstance(chunk, UsageChunk):
                    usage = chunk.usage
        if usage is None:
            raise RuntimeError(f"the server reported no usage for {request.agent_name}")
        self.samples.append(
            Sample(
                scenario=scenario,
                agent=request.agent_name,
                call_index=request.call_index,
                prompt_tokens=usage.input_tokens,
                cached_tokens=usage.cache_read_tokens,
            )
        )
        async for chunk in script.stream(request):
            yield chunk

    def assert_complete(self) -> None:
        self._script.assert_complete()

    async def aclose(self) -> None:
        await self._server.aclose()


def _text(text: str) -> ScriptedResponse:
    return ScriptedResponse(text=text)


def _call(tool: str, **args: str | bool) -> ScriptedResponse:
    return ScriptedResponse(calls=(ScriptedCall(tool=tool, args=dict(args)),))


FOREGROUND: dict[str, list[ScriptedResponse]] = {
    LEAD: [
        ScriptedResponse(
            calls=(
                ScriptedCall(
                    tool="subagent",
                    args={
                        "name": "alpha",
                        "description": "Review the code",
                        "prompt": "Review the code in src/ and list the three biggest risks.",
                    },
                ),
                ScriptedCall(
                    tool="subagent",
                    args={
                        "name": "beta",
                        "description": "Review the tests",
                        "prompt": "Review the tests in tests/ and list what they miss.",
                    },
                ),
            )
        ),
        _text("Both reviews are in: the code has three risks and the tests miss two cases."),
    ],
    "alpha": [_text("Three risks: unchecked input, a global cache, and silent retries.")],
    "beta": [_text("The tests miss the empty input and the timeout path.")],
}

BACKGROUND: dict[str, list[ScriptedResponse]] = {
    LEAD: [
        _call(
            "subagent",
            name="worker",
            description="Review the code",
            prompt="Review the code in src/ and list the three biggest risks.",
            run_in_background=True,
        ),
        _text("The worker is reviewing the code in the background."),
        _call("send_message", agent="worker", message="Now check the tests in tests/ as well."),
        _text("I asked the worker to check the tests too."),
        _text("The worker reviewed both the code and the tests."),
    ],
    "worker": [
        # The sleep lets the lead end its turn first, so the notice gets a turn of its own.
        ScriptedResponse(text="Three risks: unchecked input, a global cache.", sleep=0.5),
        ScriptedResponse(text="The tests miss the empty input.", sleep=0.5),
    ],
}


async def measure(base_url: str, api_key: str, model: str) -> list[Sample]:
    server = OpenAICompatModel(model, base_url=base_url, api_key=api_key, max_retries=0)
    probe = ProbeModel(server)
    scenarios = (("foreground", FOREGROUND), ("background", BACKGROUND))
    with tempfile.TemporaryDirectory(prefix="prefix-cache-") as cwd:
        async with Runtime(model=probe, store=InMemoryEventStore(), cwd=cwd) as rt:
            for scenario, script in scenarios:
                probe.play(scenario, script)
                await rt.run("Review the project")
                await rt.wait_quiescent()
                probe.assert_complete()
    return probe.samples


def _first_calls(samples: Sequence[Sample]) -> list[Sample]:
    return [s for s in samples if s.agent != LEAD and s.call_index == 0]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def report(samples: Sequence[Sample]) -> str:
    lines = [f"{'scenario':<11} {'agent':<8} {'call':>4} {'prompt':>7} {'cached':>7} {'share':>7}"]
    lines += [
        f"{s.scenario:<11} {s.agent:<8} {s.call_index:>4} {s.prompt_tokens:>7} "
        f"{s.cached_tokens:>7} {s.cached_share:>6.1%}"
        for s in samples
    ]
    firsts = _first_calls(samples)
    lines.append(
        f"children's first calls: mean cached share {_mean([s.cached_share for s in firsts]):.1%} "
        f"over {len(firsts)} ({sum(s.cached_tokens for s in firsts)} of "
        f"{sum(s.prompt_tokens for s in firsts)} prompt tokens cached)"
    )
    prompt = sum(s.prompt_tokens for s in samples)
    cached = sum(s.cached_tokens for s in samples)
    lines.append(
        f"all {len(samples)} calls: {cached} of {prompt} prompt tokens cached "
        f"({cached / prompt if prompt else 0.0:.1%}), {prompt - cached} evaluated"
    )
    return "\n".join(lines)


def as_json(samples: Sequence[Sample]) -> str:
    firsts = _first_calls(samples)
    return json.dumps(
        {
            "requests": [
                {**dataclasses.asdict(s), "cached_share": round(s.cached_share, 4)} for s in samples
            ],
            "children_first_calls": {
                "count": len(firsts),
                "mean_cached_share": round(_mean([s.cached_share for s in firsts]), 4),
                "prompt_tokens": sum(s.prompt_tokens for s in firsts),
                "cached_tokens": sum(s.cached_tokens for s in firsts),
            },
            "all_calls": {
                "count": len(samples),
                "prompt_tokens": sum(s.prompt_tokens for s in samples),
                "cached_tokens": sum(s.cached_tokens for s in samples),
            },
        },
        indent=2,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.prefix_cache", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--base-url", required=True, help="API root, e.g. http://HOST:PORT/v1")
    parser.add_argument("--api-key", default="none", help="sent as the bearer token")
    parser.add_argument("--model", default="local", help="the model name sent to the server")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    samples = asyncio.run(measure(args.base_url, args.api_key, args.model))
    print(as_json(samples) if args.json else report(samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
