"""A guest that breaks the protocol fails its run with a clear result and no logged traceback.

The failure is an expected outcome (the guest is untrusted), so it is reported in the tool
result and at most as one warning line, never as a task failure with `exc_info`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_protocol import GUEST_PRELUDE
from workflow_support import guest_processes, open_engine, request, run_to_end

from subagents.workflows import GuestProcessRuntime, WorkflowResult


async def _run(tmp_path: Path, body: str) -> WorkflowResult:
    guest = tmp_path / "fake_guest.py"
    guest.write_text(GUEST_PRELUDE + body)
    async with open_engine(runtime=GuestProcessRuntime(guest=str(guest))) as (_, lead, engine, _):
        result = await run_to_end(engine.start(request(lead)))
    assert guest_processes() == []
    return result


@pytest.mark.parametrize(
    ("body", "error"),
    [
        pytest.param(
            "send(struct.pack('>I', 1 << 30))\nos.read(fd, 1)",
            "workflow execution failed (protocol): workflow guest frame of 1073741824 bytes "
            "exceeds the limit of 8388608 bytes",
            id="oversize",
        ),
        pytest.param(
            "send(struct.pack('>I', 3) + b'abc')\nos.read(fd, 1)",
            "workflow execution failed (protocol): workflow guest sent a frame that is not JSON",
            id="not-json",
        ),
    ],
)
async def test_a_protocol_failure_logs_no_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, body: str, error: str
) -> None:
    caplog.set_level(logging.DEBUG)
    result = await _run(tmp_path, body)
    assert result.stop_reason == "error"
    assert result.error is not None
    assert result.error.startswith(error), result.error
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        assert "Traceback" not in caplog.text
        assert "\n" not in record.getMessage(), record.getMessage()
