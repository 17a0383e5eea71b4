"""`workspace_tools`: the built-in file and shell tools, bound to the caller's policy and cwd.

The runtime supplies two functions of the call's `ToolContext`: the calling agent's
`SandboxPolicy` and its working directory. Both are asked on every call, so a mode switch takes
effect on the next call. File work runs in a worker thread; `bash` runs in a confined process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Annotated, Literal

from msgspec import Meta

from ..messages import JsonObject
from ..policy import SandboxPolicy
from ..tools import Escalation, EscalationCheck, ToolContext, ToolResult, ToolSpec, tool
from ._bash import BASH_DEFAULT_TIMEOUT_MS, BASH_MAX_TIMEOUT_MS, run_bash
from ._files import READ_DEFAULT_LIMIT, edit_text, read_text, write_text
from ._paths import Access, require_text
from ._search import glob_paths, grep_files

__all__ = ["workspace_tools"]

# What every file tool shares (relative paths, the sandbox's refusal marker, what is never
# readable) is said once, in the runtime's guidance before each agent's instructions.

READ_FILE = (
    "Read a text file, numbered like `cat -n`: at most `limit` lines from line `offset`. "
    "Lines over 2000 characters are cut; output stops at 100000 characters with the offset "
    "to continue from. Binary files are refused."
)
WRITE_FILE = "Create or overwrite a file with `content` (UTF-8), creating parent directories."
EDIT_FILE = (
    "Replace `old_string` with `new_string` in a file. `old_string` must match exactly, "
    "indentation included (copy it without read_file's line-number prefix), and occur once "
    "unless `replace_all`. Text files up to 10 MB."
)
GLOB = (
    "List paths under `path` matching a glob: `*` and `?` within a path segment, `**` across "
    "directories, `[abc]` a set. Hidden names, `.git` and symlinked directories are skipped; "
    "sorted, directories end in '/', at most 1000."
)
GREP = (
    "Search files for a regular expression in RE2 syntax (no backreferences or lookaround), "
    "line by line; prints `file:line: text`. Skips binary, hidden and over-10 MB files; "
    "stops at 500 matches."
)
BASH = (
    "Run a command with `/bin/bash -c` in your working directory; returns stdout, stderr and "
    "exit code. Unless your file policy is danger-full-access it runs confined: no network, "
    "PATH=/usr/bin:/bin, few processes. Every process it started is killed when it ends or "
    "after `timeout_ms`; each stream keeps at most 30000 characters."
)

_Offset = Annotated[int, Meta(ge=0, description="The first line, 1-based.")]
_Limit = Annotated[int, Meta(ge=1, description="Lines to read at most.")]
_Timeout = Annotated[int, Meta(ge=1, le=BASH_MAX_TIMEOUT_MS)]


def _escalation_check(
    op: Literal["read", "write"],
    policy_for: Callable[[ToolContext], SandboxPolicy],
    cwd_for: Callable[[ToolContext], str],
) -> EscalationCheck:
    """What a file tool's call on its `path` would need granted (see `Access.escalation`)."""

    async def check(ctx: ToolContext, arguments: JsonObject) -> Escalation | None:
        path = arguments.get("path", ".")
        if not isinstance(path, str):
            return None  # refused as bad arguments when it runs
        access = Access(policy_for(ctx), cwd_for(ctx))
        return await asyncio.to_thread(access.escalation, op, path)

    return check


def workspace_tools(
    policy_for: Callable[[ToolContext], SandboxPolicy],
    *,
    cwd_for: Callable[[ToolContext], str],
) -> list[ToolSpec]:
    """The tools read_file, write_file, edit_file, glob, grep and bash.

    Args:
        policy_for: The calling agent's sandbox policy (asked on every call).
        cwd_for: The calling agent's working directory (asked on every call).
    """

    def access(ctx: ToolContext, **text: str | None) -> Access:
        """The call's `Access`, once its string arguments are known to be encodable text."""
        for what, value in text.items():
            if value is not None:
                require_text(what, value)
        return Access(policy_for(ctx), cwd_for(ctx))

    @tool(name="read_file", description=READ_FILE, parallel_safe=True)
    async def read_file(
        ctx: ToolContext, path: str, offset: _Offset = 1, limit: _Limit = READ_DEFAULT_LIMIT
    ) -> str:
        """Read a file."""
        return await asyncio.to_thread(
            read_text, access(ctx, path=path), path, offset=offset, limit=limit
        )

    @tool(name="write_file", description=WRITE_FILE)
    async def write_file(ctx: ToolContext, path: str, content: str) -> str:
        """Write a file.

        Args:
            ctx: The call.
            path: The file.
            content: Its whole new content.
        """
        return await asyncio.to_thread(
            write_text, access(ctx, path=path, content=content), path, content
        )

    @tool(name="edit_file", description=EDIT_FILE)
    async def edit_file(
        ctx: ToolContext, path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> str:
        """Edit a file.

        Args:
            ctx: The call.
            path: The file.
            old_string: The exact text to replace.
            new_string: The text to put there.
            replace_all: Replace every occurrence.
        """
        return await asyncio.to_thread(
            edit_text,
            access(ctx, path=path, old_string=old_string, new_string=new_string),
            path,
            old_string,
            new_string,
            replace_all=replace_all,
        )

    @tool(name="glob", description=GLOB, parallel_safe=True)
    async def glob(ctx: ToolContext, pattern: str, path: str | None = None) -> str:
        """Find paths by name.

        Args:
            ctx: The call.
            pattern: A relative glob, such as `src/**/*.py`.
            path: The directory to search (default: your working directory).
        """
        return await asyncio.to_thread(
            glob_paths, access(ctx, pattern=pattern, path=path), pattern, path
        )

    @tool(name="grep", description=GREP, parallel_safe=True)
    async def grep(
        ctx: ToolContext, pattern: str, path: str | None = None, glob: str | None = None
    ) -> str:
        """Search file contents.

        Args:
            ctx: The call.
            pattern: The regular expression.
            path: A file or directory (default: your working directory).
            glob: Only files whose name matches, such as `*.py`.
        """
        return await asyncio.to_thread(
            grep_files, access(ctx, pattern=pattern, path=path, glob=glob), pattern, path, glob
        )

    @tool(name="bash", description=BASH)
    async def bash(
        ctx: ToolContext, command: str, timeout_ms: _Timeout = BASH_DEFAULT_TIMEOUT_MS
    ) -> ToolResult:
        """Run a shell command.

        Args:
            ctx: The call.
            command: The command line.
            timeout_ms: Kill it after this many milliseconds.
        """
        return await run_bash(access(ctx, command=command), command, timeout_ms)

    reads = _escalation_check("read", policy_for, cwd_for)
    writes = _escalation_check("write", policy_for, cwd_for)
    # `bash` cannot ask: what its confinement refuses is only known inside the process.
    return [
        replace(read_file, escalation=reads),
        replace(write_file, escalation=writes),
        replace(edit_file, escalation=writes),
        replace(glob, escalation=reads),
        replace(grep, escalation=reads),
        bash,
    ]
