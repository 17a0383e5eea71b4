"""The live agent tree on stderr, shown only when stderr is a terminal."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from rich.console import Console
from rich.live import Live
from rich.tree import Tree

from ..core import (
    AgentCreated,
    AgentDisposed,
    AgentFailed,
    AgentRuntime,
    AgentStatusChanged,
    SessionEventPosted,
)
from ..sessions import AssistantMessageEvent, ToolCallEvent, TurnEnd

__all__ = ["LiveTree"]


class LiveTree:
    """Subscribes to a runtime's live events and redraws the tree of agents."""

    def __init__(self, runtime: AgentRuntime, *, enabled: bool) -> None:
        self._runtime = runtime
        self._enabled = enabled
        self._agents: dict[str, tuple[str, str | None]] = {}
        self._status: dict[str, str] = {}
        self._activity: dict[str, str] = {}
        self._live: Live | None = None
        self._unsubscribe = None

    def __enter__(self) -> Self:
        if self._enabled:
            self._live = Live(self._render(), console=Console(stderr=True), transient=False)
            self._live.__enter__()
            self._unsubscribe = self._runtime.subscribe(self._on_event)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(exc_type, exc, tb)

    def _on_event(self, event: object) -> None:
        match event:
            case AgentCreated(agent_id=agent_id, name=name, parent_id=parent):
                self._agents[agent_id] = (name, parent)
                self._status[agent_id] = "idle"
            case AgentStatusChanged(agent_id=agent_id, status=status):
                self._status[agent_id] = status
            case AgentFailed(agent_id=agent_id, code=code):
                self._activity[agent_id] = f"error {code}"
            case AgentDisposed(agent_id=agent_id):
                self._status[agent_id] = "released"
            case SessionEventPosted(agent_id=agent_id, record=record):
                activity = _activity(record.event)
                if activity is None:
                    return
                self._activity[agent_id] = activity
            case _:
                return
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Tree:
        root = Tree("[bold]agents[/bold]")
        nodes: dict[str, Tree] = {}
        for agent_id, (name, parent) in self._agents.items():
            label = f"{name} [dim]{self._status.get(agent_id, '')}[/dim]"
            if agent_id in self._activity:
                label += f"  {self._activity[agent_id]}"
            parent_node = nodes.get(parent or "", root)
            nodes[agent_id] = parent_node.add(label)
        return root


def _activity(event: object) -> str | None:
    match event:
        case ToolCallEvent(name=name):
            return f"→ {name}"
        case AssistantMessageEvent(message=message) if message.text:
            text = " ".join(message.text.split())
            return text[:60] + ("…" if len(text) > 60 else "")
        case TurnEnd(reason=reason):
            return f"turn ended {reason}"
        case _:
            return None
