"""Shared helpers for the workspace tool tests: a box of directories and a call helper."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from subagents.messages import JsonObject, ToolCallBlock
from subagents.policy import SandboxMode, SandboxPolicy, canonical_root
from subagents.testing import ToolCallContext
from subagents.tools import ToolContext, ToolOutcome, ToolRegistry, ToolScope, execute_tool
from subagents.workspace import workspace_tools

Snapshot = dict[str, tuple[str, bytes | str | None]]


@dataclass
class Box:
    """A workspace, a fake $HOME, a fake store and a plain outside directory, all in tmp_path.

    `mode` and `cwd` may be changed between calls: the tools ask for them on every call.
    """

    root: Path
    mode: SandboxMode = "workspace-write"
    cwd: Path | None = None
    scope: ToolScope = field(init=False)
    workspace_root: str = field(init=False)

    def __post_init__(self) -> None:
        for path in (self.ws, self.home, self.store, self.outside):
            path.mkdir()
        self.workspace_root = canonical_root(str(self.ws))
        tools = workspace_tools(self.policy_for, cwd_for=self.cwd_for)
        self.scope = ToolRegistry(tools).scope()

    @property
    def ws(self) -> Path:
        return self.root / "ws"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    def policy_for(self, ctx: ToolContext) -> SandboxPolicy:
        return SandboxPolicy(mode=self.mode, workspace_root=self.workspace_root)

    def cwd_for(self, ctx: ToolContext) -> str:
        return str(self.cwd or self.ws)

    async def call(self, name: str, args: JsonObject | str) -> ToolOutcome:
        raw = args if isinstance(args, str) else json.dumps(args)
        ctx = ToolCallContext(name)
        block = ToolCallBlock(id="call-1", name=name, arguments=raw)
        return await execute_tool(self.scope, block, ctx, concluded=ctx.concluded)

    async def ok(self, name: str, args: JsonObject) -> str:
        outcome = await self.call(name, args)
        assert not outcome.is_error, outcome.content
        return outcome.content

    def snapshot(self) -> Snapshot:
        """Every entry under tmp_path: kind and content (files), target (links)."""
        found: Snapshot = {}
        for directory, dirnames, filenames in os.walk(self.root):
            for name in dirnames + filenames:
                path = Path(directory, name)
                rel = str(path.relative_to(self.root))
                if path.is_symlink():
                    found[rel] = ("link", os.readlink(path))
                elif path.is_dir():
                    found[rel] = ("dir", None)
                else:
                    found[rel] = ("file", path.read_bytes())
        return found
