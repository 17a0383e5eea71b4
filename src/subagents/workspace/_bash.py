"""The `bash` tool's work: one confined `/bin/bash -c` run, and how its outcome reads.

The command runs through `policy.run_command`, confined exactly like a workflow script: under
`read-only` and `workspace-write` it sees only the workspace and system directories, has no
network, an emptied environment, resource limits and a bounded number of processes; in every
mode it runs in its own process group and every process it started is killed when it ends or
times out, so nothing it leaves in the background survives the call.
"""

from __future__ import annotations

import asyncio
import re

from ..errors import ErrorCode, ToolError
from ..policy import CommandResult, run_command
from ..tools import ToolResult
from ._paths import Access, denial_marker, store_roots

__all__ = [
    "BASH_DEFAULT_TIMEOUT_MS",
    "BASH_MAX_OUTPUT_BYTES",
    "BASH_MAX_STREAM_CHARS",
    "BASH_MAX_TIMEOUT_MS",
    "render_command",
    "run_bash",
]

BASH_DEFAULT_TIMEOUT_MS = 120_000
BASH_MAX_TIMEOUT_MS = 600_000
BASH_MAX_OUTPUT_BYTES = 1_000_000
"""What `run_command` keeps of each stream; the rest is discarded."""
BASH_MAX_STREAM_CHARS = 30_000
"""What the model sees of each stream: its head and its tail, with the middle elided."""

# What a file access refused by the OS sandbox prints (bwrap's read-only binds, Landlock's EACCES);
# a refused connection (Landlock's TCP rule) is not a file access.
_DENIAL_SIGNS = re.compile(r"Read-only file system|Permission denied|Operation not permitted")
_NETWORK = re.compile(r"connect|socket|/dev/(?:tcp|udp)/")


def _file_denied(stderr: str) -> bool:
    return any(
        _DENIAL_SIGNS.search(line) and not _NETWORK.search(line) for line in stderr.splitlines()
    )


def _clip(text: str) -> str:
    if len(text) <= BASH_MAX_STREAM_CHARS:
        return text
    half = BASH_MAX_STREAM_CHARS // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n… [{omitted} characters omitted] …\n{text[-half:]}"


def render_command(result: CommandResult, *, mode: str, timeout_ms: int) -> ToolResult:
    """The model's view of a finished run: streams, exit code, timeout and sandbox notes."""
    parts: list[str] = []
    stdout, stderr = result.stdout.rstrip("\n"), result.stderr.rstrip("\n")
    if stdout:
        parts.append(_clip(stdout))
    if stderr:
        parts.append("[stderr]\n" + _clip(stderr))
    if result.truncated:
        parts.append(f"[output passed {BASH_MAX_OUTPUT_BYTES} bytes; the rest was discarded]")
    if mode != "danger-full-access" and _file_denied(result.stderr):
        parts.append(denial_marker(mode))
    if result.timed_out:
        parts.insert(
            0,
            f"Error: command timed out after {timeout_ms} ms; it and every process it started "
            "were killed (raise timeout_ms, up to 600000, or split the work)",
        )
        return ToolResult("\n".join(parts), is_error=True, code=ErrorCode.TIMEOUT)
    code = result.exit_code
    parts.append(f"[exit code {code}]" if code is not None else "[killed]")
    return ToolResult("\n".join(parts))


async def run_bash(access: Access, command: str, timeout_ms: int) -> ToolResult:
    """`bash`: run `command` with `/bin/bash -c` in the agent's cwd, confined by its policy."""
    if not command.strip():
        raise ToolError("command must not be empty", code=ErrorCode.INVALID_ARGS)
    if "\0" in command:
        raise ToolError("command contains a NUL character", code=ErrorCode.INVALID_ARGS)
    timeout_ms = int(timeout_ms)
    if not 1 <= timeout_ms <= BASH_MAX_TIMEOUT_MS:
        raise ToolError(
            f"timeout_ms must be between 1 and {BASH_MAX_TIMEOUT_MS}, got {timeout_ms}",
            code=ErrorCode.INVALID_ARGS,
        )
    # The OS sandbox hides $HOME and $SUBAGENTS_HOME itself; an explicit store path is added.
    hidden = await asyncio.to_thread(store_roots)
    result = await run_command(
        ["/bin/bash", "-c", command],
        policy=access.policy,
        cwd=access.cwd,
        timeout=timeout_ms / 1000,
        max_output=BASH_MAX_OUTPUT_BYTES,
        hidden=hidden,
    )
    return render_command(result, mode=access.mode, timeout_ms=timeout_ms)
