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
    Status,
    live_status,
)
from ..sessions import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageEvent,
    StopReason,
    SubagentDescriptor,
    ToolCallEvent,
    TurnEnd,
)

__all__ = ["LiveTree"]


class LiveTree:
    """Subscribes to a runtime's live events and redraws the tree of agents."""

    def __init__(self, runtime: AgentRuntime, *, enabled: bool) -> None:
        self._runtime = runtime
        self._enabled = enabled
        self._agents: dict[str, tuple[str, str | None]] = {}
        self._status: dict[str, Status] = {}
        self._last_stop: dict[str, StopReason] = {}
        self._continuable: set[str] = set()
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
                self._status[agent_id] = Status.IDLE
            case AgentStatusChanged(agent_id=agent_id, status=status):
                self._status[agent_id] = live_status(
                    status,
                    self._last_stop.get(agent_id),
                    continuable=agent_id in self._continuable,
                )
            case AgentFailed(agent_id=agent_id, code=code):
                self._activity[agent_id] = f"error {code}"
            case AgentDisposed(agent_id=agent_id):
                # Unloaded, not gone: the same words as `subagents tree` from now on.
                if agent_id in self._continuable and self._status.get(agent_id) is Status.IDLE:
                    self._status[agent_id] = Status.READY
            case SessionEventPosted(agent_id=agent_id, record=record):
                self._note(agent_id, record.event)
                activity = _activity(record.event)
                if activity is None:
                    return
                self._activity[agent_id] = activity
            case _:
                return
        if self._live is not None:
            self._live.update(self._render())

    def _note(self, agent_id: str, event: object) -> None:
        """Remember what the status words need: the last turn's ending and the mode."""
        match event:
            case TurnEnd(reason=reason):
                self._last_stop[agent_id] = reason
                if self._status.get(agent_id) is not Status.RUNNING:  # it went idle first
                    self._status[agent_id] = live_status(
                        "idle", reason, continuable=agent_id in self._continuable
                    )
            case SubagentDescriptor(mode="continuable"):
                self._continuable.add(agent_id)
            case ApprovalRequested():
                self._status[agent_id] = Status.WAITING
            case ApprovalDecided() if self._status.get(agent_id) is Status.WAITING:
                self._status[agent_id] = Status.RUNNING
            case _:
                pass

    def _render(self) -> Tree:
        root = Tree("[bold]agents[/bold]")
        nodes: dict[str, Tree] = {}
        for agent_id, (name, parent) in self._agents.items():
            label = f"{name} [dim]{self._status.get(agent_id, Status.IDLE)}[/dim]"
            if agent_id in self._activity:
                label += f"  {self._activity[agent_id]}"
            parent_node = nodes.get(parent or "", root)
            nodes[agent_id] = parent_node.add(label)
        return root


def _activity(event: object) -> str | None:
    match event:
        case ToolCallEvent(name=name):
            return f"→ {name}"
        case ApprovalRequested(name=name, call_id=call_id):
            return f"⏸ {name} waits for approval ({call_id})"
        case AssistantMessageEvent(message=message) if message.text:
            text = " ".join(message.text.split())
            return text[:60] + ("…" if len(text) > 60 else "")
        case TurnEnd(reason=reason):
            return f"turn ended {reason}"
        case _:
            return None
