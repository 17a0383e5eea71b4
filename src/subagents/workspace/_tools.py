"""`workspace_tools`: the built-in file and shell tools, bound to the caller's policy and cwd.

The runtime supplies two functions of the call's `ToolContext`: the calling agent's
`SandboxPolicy` and its working directory. Both are asked on every call, so a mode switch takes
effect on the next call. File work runs in a worker thread; `bash` runs in a confined process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..policy import SandboxPolicy
from ..tools import ToolContext, ToolResult, ToolSpec, tool
from ._bash import BASH_DEFAULT_TIMEOUT_MS, BASH_MAX_COMMAND_BYTES, BASH_MAX_TIMEOUT_MS, run_bash
from ._files import READ_DEFAULT_LIMIT, edit_text, read_text, write_text
from ._paths import Access, require_text
from ._search import glob_paths, grep_files

__all__ = ["workspace_tools"]

_PATHS = (
    "Relative paths start at your working directory. Under the read-only mode nothing can be "
    "written; under workspace-write only files inside the workspace; a refused call changes "
    "nothing and says `[sandbox: file access denied under <mode> mode]`. Your home directory "
    "(outside the workspace), /proc and the subagents store cannot be read. Arguments must be "
    "valid Unicode text (no lone surrogates)."
)

READ_FILE = (
    "Read a text file; lines come numbered like `cat -n` (number, tab, text). Reads at most "
    f"`limit` lines (default {READ_DEFAULT_LIMIT}) from line `offset` (1-based); lines longer "
    "than 2000 characters are cut and the output stops before 100000 characters, with a note "
    "giving the offset to continue from. Binary files (containing NUL bytes) are refused. " + _PATHS
)
WRITE_FILE = (
    "Create a file, or overwrite it entirely, with `content` (UTF-8); missing parent "
    "directories are created. To change part of a file, use edit_file. " + _PATHS
)
EDIT_FILE = (
    "Replace exact text in a file: `old_string` must occur exactly once (include enough "
    "surrounding lines to make it unique) unless `replace_all` is true, and must match the file "
    "exactly, including indentation; copy it from read_file's output without the line-number "
    "prefix. `old_string` and `new_string` must differ. Text files up to 10 MB. " + _PATHS
)
GLOB = (
    "List files and directories under `path` (default: your working directory) whose relative "
    "path matches a glob `pattern`: `*` and `?` match within one path segment, `[abc]` a set, "
    "`**` any number of directories (`src/**/*.py`). Wildcards do not match names starting "
    "with '.'; `.git` directories and symlinked directories are not entered. Results are sorted, "
    "directories end in '/', paths are relative to your working directory (absolute outside "
    "it); at most 1000 are listed. " + _PATHS
)
GREP = (
    "Search file contents with a regular expression in RE2 syntax (matched per line, in time "
    "linear in the line; like Python `re` but without backreferences, lookaround, atomic groups "
    "or possessive repetition, which are refused; write `\\z`, not `\\Z`); prints "
    "`file:line: text` for each matching line. `path` is a file or a directory "
    "(default: your working directory); `glob` keeps only files whose name (or, with a '/', "
    "relative path) matches it, for example `*.py`. Binary files, files over 10 MB, `.git` "
    "directories and hidden places are skipped; lines are cut at 300 characters; it stops at "
    "500 matches. " + _PATHS
)
BASH = (
    "Run a shell command with `/bin/bash -c` in your working directory and return its stdout, "
    "stderr and exit code. Under read-only and workspace-write it runs in the same sandbox as "
    "workflow scripts: only the workspace (writable under workspace-write), the Python "
    "installation and system directories are visible, there is no network, the environment is "
    "emptied (PATH=/usr/bin:/bin) and the number of processes is bounded. A file access the "
    "sandbox refused is marked `[sandbox: file access denied under <mode> mode]`. The command "
    f"is killed after `timeout_ms` (default {BASH_DEFAULT_TIMEOUT_MS}, at most "
    f"{BASH_MAX_TIMEOUT_MS}), and every process it started, background ones included, is "
    "killed when it ends, so nothing keeps running after the call. Each stream shows at most "
    f"30000 characters (head and tail). Commands up to {BASH_MAX_COMMAND_BYTES} bytes (UTF-8); "
    "stdin is empty."
)


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
        ctx: ToolContext, path: str, offset: int = 1, limit: int = READ_DEFAULT_LIMIT
    ) -> str:
        """Read a file.

        Args:
            ctx: The call.
            path: The file to read.
            offset: The first line to read, 1-based (0 also means the start).
            limit: How many lines to read at most.
        """
        return await asyncio.to_thread(
            read_text, access(ctx, path=path), path, offset=offset, limit=limit
        )

    @tool(name="write_file", description=WRITE_FILE)
    async def write_file(ctx: ToolContext, path: str, content: str) -> str:
        """Write a file.

        Args:
            ctx: The call.
            path: The file to create or overwrite.
            content: The complete new content of the file.
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
            path: The file to edit.
            old_string: The exact text to replace.
            new_string: The text to put in its place.
            replace_all: Replace every occurrence instead of exactly one.
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
            pattern: A relative glob such as `**/*.py` or `docs/*.md`.
            path: The directory to search under (default: your working directory).
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
            pattern: A regular expression (RE2 syntax), matched against each line.
            path: The file or directory to search (default: your working directory).
            glob: Only search files matching this glob, such as `*.py`.
        """
        return await asyncio.to_thread(
            grep_files, access(ctx, pattern=pattern, path=path, glob=glob), pattern, path, glob
        )

    @tool(name="bash", description=BASH)
    async def bash(
        ctx: ToolContext, command: str, timeout_ms: int = BASH_DEFAULT_TIMEOUT_MS
    ) -> ToolResult:
        """Run a shell command.

        Args:
            ctx: The call.
            command: The command line, run with `/bin/bash -c`.
            timeout_ms: Kill the command after this many milliseconds.
        """
        return await run_bash(access(ctx, command=command), command, timeout_ms)

    return [read_file, write_file, edit_file, glob, grep, bash]
