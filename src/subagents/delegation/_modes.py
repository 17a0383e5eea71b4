"""Each agent's sandbox mode: fixed from its own log, from its parent's, or the runtime's.

A mode is recorded (`sandbox/mode`) in the agent's own log, so a resume reads it back and a
later switch of the parent never changes a child that exists. A child can only narrow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ..core import Agent
from ..errors import ConfigError, ErrorCode
from ..ids import SessionId
from ..policy import SandboxMode, SandboxPolicy, narrower, parse_mode, store_paths
from ..sessions import EventStore, SandboxModeSet

__all__ = ["SandboxModes", "store_files"]


class SandboxModes:
    """The modes of one runtime's agents, by session id."""

    def __init__(self, default: SandboxMode) -> None:
        self.default: SandboxMode = parse_mode(default)
        """The mode of new roots (children take their parent's)."""
        self.hidden: tuple[str, ...] = ()
        """The store's files: hidden from every confined run and file tool."""
        self._modes: dict[SessionId, SandboxMode] = {}

    def of(self, agent_id: SessionId) -> SandboxMode:
        return self._modes.get(agent_id, self.default)

    def forget(self, agent_id: SessionId) -> None:
        """Drop a released agent's mode (`fix` reads it from its log again on a reload)."""
        self._modes.pop(agent_id, None)

    def fix(self, agent: Agent) -> None:
        """An agent's mode is the last `sandbox/mode` of its own log (after any fork seed).

        A new root records the runtime's mode; a new child records its parent's, so it can
        never be wider than its parent's and a later switch of the parent does not change it.
        """
        header = agent.session.header
        recorded: list[SandboxMode] = [
            r.event.mode
            for r in agent.session.records[header.seed_length :]
            if isinstance(r.event, SandboxModeSet)
        ]
        if recorded:
            self._modes[agent.id] = recorded[-1]
            return
        parent = self._modes.get(header.parent) if header.parent is not None else None
        mode = parent if parent is not None else self.default
        source: Literal["runtime", "delegation"] = "delegation" if parent else "runtime"
        agent.record(SandboxModeSet(mode=mode, source=source))
        self._modes[agent.id] = mode

    def policy(self, agent: Agent, *, grant: str | None = None) -> SandboxPolicy:
        """The file policy an agent's tools and scripts run under right now.

        `grant` is what a person approved beyond it for one call (a `sandbox:ask` escalation).
        """
        return SandboxPolicy(
            mode=self.of(agent.id),
            workspace_root=agent.session.header.cwd,
            session_id=agent.id,
            hidden=self.hidden,
            granted=(grant,) if grant is not None else (),
        )

    def switch(self, agent: Agent, mode: SandboxMode) -> None:
        """Switch a live agent's mode (recorded); a mode wider than its parent's is `USAGE`."""
        mode = parse_mode(mode)
        parent_id = agent.session.header.parent
        parent = self._modes.get(parent_id) if parent_id is not None else None
        if parent is not None and narrower(mode, parent) != mode:
            raise ConfigError(
                f"{agent.name} may not widen its sandbox mode to {mode}: its parent runs "
                f"{parent}, and a child can only narrow",
                code=ErrorCode.USAGE,
            )
        agent.record(SandboxModeSet(mode=mode, source="user"))
        self._modes[agent.id] = mode


def store_files(store: EventStore) -> tuple[str, ...]:
    """A SQLite store's directory and the files SQLite keeps there (see `store_paths`)."""
    path = getattr(store, "path", None)
    if not isinstance(path, Path):
        return ()
    return store_paths(str(path))
