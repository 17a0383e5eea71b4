"""Fuzzing the third file format: workflow scripts, as the model writes them.

Hypothesis builds scripts from hostile fragments (syntax errors, huge values, deep nesting,
runaway loops cut by the sync-slice limit, misused hooks, odd return values, raw text) and
runs each in a real confined guest process. Whatever the script does, the run ends
`completed` or `error` with a one-line reason, the host logs no traceback, and no guest
process is left behind; a script that cannot start is refused with one line and a code.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from workflow_support import FAST, guest_processes, open_engine, run_to_end

from subagents.errors import ErrorCode, WorkflowError
from subagents.workflows import WorkflowRequest, WorkflowResult

FUZZ = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,  # the same examples every run: a failure here is reproducible
)

_FRAGMENTS = [
    "return None",
    "return {'a': [1, 2, 3]}",
    "return float('nan')",
    "return 10 ** 5000",
    "return 'x' * 10_000_000",
    "return object()",
    "return {1: 2}",
    "x = " + "[" * 200 + "]" * 200,
    "def f(n):\n    return f(n + 1)\nf(0)",
    "while True:\n    pass",
    "raise ValueError('boom')",
    "import os",
    "open('/etc/passwd').read()",
    "return await agent()",
    "return await agent(prompt=123)",
    "return await agent(prompt='hi', name='../x')",
    "log(None)",
    "phase('')",
    "return args['missing']",
    "def (:",
    "\x00",
    "'\ud800'",
    "return [await agent(prompt='p') for _ in range(3)]",
]


def _script() -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=3).map("\n".join),
        st.text(max_size=80),
    )


async def _run(script: str) -> WorkflowResult | WorkflowError:
    """The run's result, or the refusal `start` raised before anything existed."""
    async with open_engine('"*": [{text: child answer}]', options=FAST) as (_, lead, engine, _):
        try:
            run = engine.start(
                WorkflowRequest(
                    script=script,
                    meta={"name": "fuzz", "description": "fuzzed script"},
                    parent=lead,
                )
            )
        except WorkflowError as refused:
            return refused
        result = await run_to_end(run)
        assert isinstance(result, WorkflowResult)
        return result


@FUZZ
@given(script=_script())
def test_any_workflow_script_ends_cleanly(script: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        result = asyncio.run(_run(script))
    if isinstance(result, WorkflowError):  # refused at start: one line with a stable code
        assert result.code in (ErrorCode.SCRIPT_PARSE, ErrorCode.INVALID_ARGUMENT), result
        assert "\n" not in result.message
        return
    assert result.stop_reason in ("completed", "error"), result
    if result.stop_reason == "error":
        assert result.error
        assert "Traceback" not in result.error, result.error
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info]
    assert tracebacks == [], tracebacks
    assert guest_processes() == []
