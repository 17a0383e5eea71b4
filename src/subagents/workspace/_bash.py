"""The `bash` tool's work: one confined `/bin/bash -c` run, and how its outcome reads.

The command runs through `policy.run_command`, confined exactly like a workflow script: under
`read-only` and `workspace-write` it sees only the workspace and system directories, has no
network, an emptied environment, resource limits and a bounded number of processes; in every
mode it runs in its own process group and every process it started is killed when it ends or
times out, so nothing it leaves in the background survives the call.

The command's text does not travel in argv, where Linux caps one argument at 128 KiB: it is
written to a memfd passed to bash as an extra fd. A fixed `-c` script reads it from that fd
into a variable with the `read` builtin, closes the fd and `eval`s the text, so `$0`, the `-c`
mode and its options, the exit status and an empty stdin are those of `bash -c COMMAND`; only
the prefix of bash's own error messages reads `eval:` instead of `-c:`.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence

from ..errors import ErrorCode, ToolError
from ..policy import CommandResult, run_command
from ..tools import ToolResult
from ._paths import Access, denial_marker, require_text, store_roots

__all__ = [
    "BASH_DEFAULT_TIMEOUT_MS",
    "BASH_MAX_COMMAND_BYTES",
    "BASH_MAX_OUTPUT_BYTES",
    "BASH_MAX_STREAM_CHARS",
    "BASH_MAX_TIMEOUT_MS",
    "render_command",
    "run_bash",
]

BASH_DEFAULT_TIMEOUT_MS = 120_000
BASH_MAX_TIMEOUT_MS = 600_000
BASH_MAX_OUTPUT_BYTES = 1_000_000
"""What a run keeps of each stream; the rest is discarded."""
BASH_MAX_COMMAND_BYTES = 1 << 20
"""The longest command accepted, in UTF-8 bytes (1 MiB); a longer one is refused unrun."""

# Run as `bash -c`: read the command from fd {fd} (the whole fd: no NUL can end it early, since
# commands with NUL are refused), close that fd, then drop the variable inside the `eval`d text
# itself, on its first line, so the command sees neither and its line numbers stay its own.
_RUNNER = (
    'IFS= read -r -d "" -u {fd} __subagents_command; exec {fd}<&-; '
    'eval "unset -v __subagents_command; $__subagents_command"'
)
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
    """`bash`: run `command` as `/bin/bash -c` would, in the agent's cwd, confined by its policy."""
    if not command.strip():
        raise ToolError("command must not be empty", code=ErrorCode.INVALID_ARGS)
    if "\0" in command:
        raise ToolError("command contains a NUL character", code=ErrorCode.INVALID_ARGS)
    require_text("command", command)
    text = command.encode("utf-8")
    if len(text) > BASH_MAX_COMMAND_BYTES:
        raise ToolError(
            f"command is {len(text)} bytes, more than the {BASH_MAX_COMMAND_BYTES} allowed; write "
            "a long script to a file with write_file and run that file instead",
            code=ErrorCode.INVALID_ARGS,
        )
    timeout_ms = int(timeout_ms)
    if not 1 <= timeout_ms <= BASH_MAX_TIMEOUT_MS:
        raise ToolError(
            f"timeout_ms must be between 1 and {BASH_MAX_TIMEOUT_MS}, got {timeout_ms}",
            code=ErrorCode.INVALID_ARGS,
        )
    # The OS sandbox hides $HOME and $SUBAGENTS_HOME itself; an explicit store path is added.
    hidden = await asyncio.to_thread(store_roots)
    result = await _run(access, text, seconds=timeout_ms / 1000, hidden=hidden)
    return render_command(result, mode=access.mode, timeout_ms=timeout_ms)


def _command_fd(text: bytes) -> int:
    """A memfd holding `text`, positioned at its start (close-on-exec; `pass_fds` clears that)."""
    fd = os.memfd_create("bash-command", os.MFD_CLOEXEC)
    try:
        view = memoryview(text)
        done = 0
        while done < len(view):
            done += os.write(fd, view[done:])
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


async def _run(
    access: Access, text: bytes, *, seconds: float, hidden: Sequence[str]
) -> CommandResult:
    """Run the runner script confined, with the command's memfd passed to it."""
    fd = await asyncio.to_thread(_command_fd, text)
    try:
        return await run_command(
            ["/bin/bash", "-c", _RUNNER.format(fd=fd)],
            policy=access.policy,
            cwd=access.cwd,
            timeout=seconds,
            max_output=BASH_MAX_OUTPUT_BYTES,
            hidden=hidden,
            pass_fds=(fd,),
        )
    finally:
        os.close(fd)  # the run holds its own copy, which the runner closes before the command
