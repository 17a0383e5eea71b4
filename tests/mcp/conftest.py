from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_support import SERVERS


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def http_server() -> Iterator[int]:
    """A streamable-HTTP MCP server on 127.0.0.1; yields its port once it listens."""
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / "http_server.py")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), line
        yield int(line.split()[1])
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
