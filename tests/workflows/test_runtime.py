"""`subagents.Runtime`: the workflow engine is configured through the constructor."""

from __future__ import annotations

import pytest

import subagents
from subagents.errors import ClosedError
from subagents.testing import InMemoryEventStore, ScriptedModel
from subagents.workflows import WorkflowOptions, WorkflowToolConfig


def make(**options: object) -> subagents.Runtime:
    return subagents.Runtime(
        model=ScriptedModel.from_yaml('"*": [{text: done}]'),
        store=InMemoryEventStore(),
        delegation=subagents.DelegationOptions(definitions={}),
        **options,  # pyright: ignore[reportArgumentType]
    )


async def test_the_engine_takes_the_options_and_tool_config_given_to_the_constructor() -> None:
    options = WorkflowOptions(max_concurrent_agents=3, max_total_agents=7)
    runtime = make(workflow_options=options, workflow_tool=WorkflowToolConfig(tool_name="flow"))
    async with runtime:
        assert runtime.workflows.options is options
        names = set(runtime.tools.names())
        assert "flow" in names
        assert "workflow" not in names


async def test_the_engine_exists_only_inside_the_runtime() -> None:
    runtime = make()
    with pytest.raises(ClosedError, match="only inside"):
        _ = runtime.workflows
    async with runtime:
        assert runtime.workflows.options == WorkflowOptions()
