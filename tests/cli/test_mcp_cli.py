"""MCP servers from `.mcp.json` through the command line, as real subprocesses.

The `cli` fixture runs in `tmp_path` (the project directory) with SUBAGENTS_HOME=`home`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from cli_support import Cli, write_script
from live_support import environment
from process_support import exited, processes_with, zombie

SERVERS = Path(__file__).parents[1] / "mcp" / "servers"


def mcp_json(folder: Path, servers: dict[str, object]) -> Path:
    path = folder / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def server(script: str = "stdio_server.py") -> dict[str, object]:
    return {"command": sys.executable, "args": [str(SERVERS / script)]}


def test_a_run_uses_a_project_server_and_mcp_lists_and_checks_it(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    path = mcp_json(tmp_path, {"tools": server()})
    script = write_script(
        tmp_path / "lead.yaml",
        "lead:\n  - calls: [{tool: mcp__tools__echo, args: {text: through mcp}}]\n  - text: done\n",
    )
    done = cli("run", "go", "--model", script, "--json")
    assert done.returncode == 0, done.stderr
    log = cli("log", "lead")
    assert "mcp__tools__echo: through mcp" in log.stdout

    listed = cli("mcp", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [
        {
            "name": "tools",
            "transport": "stdio",
            "target": f"{sys.executable} {SERVERS / 'stdio_server.py'}",
            "source": str(path),
        }
    ]
    checked = cli("mcp", "check", "tools", "--json")
    assert checked.returncode == 0, checked.stderr
    names = {t["name"] for t in json.loads(checked.stdout)["tools"]}
    assert {"mcp__tools__echo", "mcp__tools__pid"} <= names


def test_bad_servers_are_one_line_with_a_code_and_nothing_is_written(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    script = write_script(tmp_path / "lead.yaml", "lead:\n  - text: never\n")
    cases = [
        ('{"mcpServers": {"x": {"command": 3}}', "MCP_CONFIG_INVALID"),
        ('{"mcpServers": {"x": {"type": "sse", "url": "http://127.0.0.1:1/"}}}', "sse"),
        (json.dumps({"mcpServers": {"x": {"command": str(tmp_path / "nope")}}}), "NOT_EXECUTABLE"),
        (json.dumps({"mcpServers": {"x": {"command": "${NO_SUCH_VARIABLE}"}}}), "NO_SUCH_VARIABLE"),
    ]
    for text, needle in cases:
        (tmp_path / ".mcp.json").write_text(text, encoding="utf-8")
        done = cli("run", "go", "--model", script)
        assert done.returncode == 2, (text, done.stdout, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith("subagents: error: "), lines
        assert needle in lines[0], lines
        assert "[MCP_" in lines[0], lines
    assert not (home / "state.db").exists()


def test_check_of_a_server_that_speaks_garbage_is_a_protocol_error(
    cli: Cli, tmp_path: Path
) -> None:
    mcp_json(tmp_path, {"junk": server("garbage_server.py")})
    done = cli("mcp", "check", "junk")
    assert done.returncode == 1, (done.stdout, done.stderr)
    (line,) = done.stderr.splitlines()
    assert line.startswith("subagents: error: "), line
    assert line.endswith("[MCP_PROTOCOL]"), line
    unknown = cli("mcp", "check", "nobody")
    assert unknown.returncode == 2
    assert unknown.stderr.rstrip().endswith("[MCP_SERVER_UNKNOWN]")


async def test_no_server_survives_a_sigkill_of_the_runtime(tmp_path: Path, home: Path) -> None:
    copy = tmp_path / "servers"
    copy.mkdir()
    unique = copy / "survivor_check_server.py"
    unique.write_text((SERVERS / "stdio_server.py").read_text(encoding="utf-8"), encoding="utf-8")
    mcp_json(tmp_path, {"tools": {"command": sys.executable, "args": [str(unique)]}})
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    script = write_script(
        tmp_path / "lead.yaml",
        f"lead:\n  - calls: [{{tool: mcp__tools__slow, args: {{fifo: {fifo}}}}}]\n"
        "  - text: never\n",
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "subagents",
        "run",
        "go",
        "--model",
        script,
        cwd=tmp_path,
        env=environment(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        started = await asyncio.to_thread(fifo.read_text)
        assert started.strip() == "started"
        servers = [p for p in processes_with(unique.name) if _is_server(p)]
        assert servers, "the server is running"
        process.send_signal(signal.SIGKILL)
        await process.wait()
        for pid in servers:
            await exited(pid)
        assert all(zombie(p) for p in processes_with(unique.name))
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def _is_server(pid: int) -> bool:
    """The server itself, not the launcher or bubblewrap that started it."""
    try:
        return b"_launcher" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
