"""Conformance tests for the provider registry and the tool that mirrors it (docs/design.md
§7.1 and §7.2: providers, and the validation order of a start).
"""

from __future__ import annotations

import pytest
from delegation_support import Gates, Lifecycle, ToolReply, make_runtime, replies, session_count

from subagents import DelegationOptions
from subagents.core import Agent
from subagents.delegation import (
    Capability,
    DelegationRuntime,
    InProcessProvider,
    ProviderAdded,
    ProviderRemoved,
    ResumeRequest,
    StartRequest,
    SubagentChild,
)
from subagents.delegation._wording import prompt_description, tool_description
from subagents.delegation.tools._subagent import SubagentToolConfig, mount_subagent_tool
from subagents.errors import DuplicateError, ErrorCode, SubagentError

STANDALONE = "The prompt must stand alone: the child does not see this conversation."
INHERITS = "a child agent that starts with this conversation's completed turns"


class TinyProvider:
    """A provider that can enforce nothing (no `depth_limit`); it runs in-process."""

    def __init__(self, runtime: DelegationRuntime, name: str = "tiny") -> None:
        self._inner = InProcessProvider(runtime, name=name, inherits_parent_context=False)
        self.starts: list[str] = []

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def capabilities(self) -> frozenset[Capability]:
        return frozenset()

    @property
    def inherits_parent_context(self) -> bool:
        return False

    async def start(self, request: StartRequest) -> SubagentChild:
        self.starts.append(request.name)
        return await self._inner.start(request)

    async def resume(self, request: ResumeRequest) -> SubagentChild:
        return await self._inner.resume(request)

    def list(self) -> list[SubagentChild]:
        return self._inner.list()


class ProviderEvents:
    def __init__(self, runtime: DelegationRuntime) -> None:
        self.seen: list[ProviderAdded | ProviderRemoved] = []
        runtime.subscribe(self._on_event)

    def _on_event(self, event: object) -> None:
        if isinstance(event, ProviderAdded | ProviderRemoved):
            self.seen.append(event)


def visible_tools(agent: Agent) -> list[str]:
    return [s.name for s in agent.tools.schemas()]


def description_of(runtime: DelegationRuntime, tool_name: str) -> tuple[str, str]:
    spec = runtime.tools.get(tool_name)
    assert spec is not None, f"{tool_name} is not registered"
    prompt = spec.parameters["properties"]["prompt"]["description"]
    assert isinstance(prompt, str)
    return spec.description, prompt


# -- the registry ----------------------------------------------------------------------------


async def test_a_duplicate_provider_is_refused_and_the_first_stays() -> None:
    rt, _ = make_runtime("{}")
    async with rt:
        seen = ProviderEvents(rt)
        first = rt.subagents.get_provider("spawn")
        assert first is not None
        with pytest.raises(DuplicateError) as caught:
            rt.subagents.register_provider(
                InProcessProvider(rt, name="spawn", inherits_parent_context=True)
            )
        assert caught.value.code == ErrorCode.DUPLICATE_PROVIDER
        assert caught.value.message == 'a subagent provider named "spawn" is already registered'
        assert rt.subagents.get_provider("spawn") is first
        assert rt.subagents.providers() == ["spawn", "fork"]
        assert seen.seen == []


async def test_providers_are_listed_in_order_with_live_added_and_removed_events() -> None:
    rt, _ = make_runtime("{}")
    seen = ProviderEvents(rt)  # subscribed before the runtime registers its own
    async with rt:
        assert rt.subagents.providers() == ["spawn", "fork"]
        remove = rt.subagents.register_provider(
            InProcessProvider(rt, name="custom", inherits_parent_context=False)
        )
        assert rt.subagents.providers() == ["spawn", "fork", "custom"]
        remove()
        remove()  # a disposer runs once
        assert rt.subagents.providers() == ["spawn", "fork"]
        assert rt.subagents.get_provider("custom") is None
        assert seen.seen == [
            ProviderAdded("spawn"),
            ProviderAdded("fork"),
            ProviderAdded("custom"),
            ProviderRemoved("custom"),
        ]


async def test_without_the_fork_tool_only_spawn_is_registered() -> None:
    rt, _ = make_runtime("{}", delegation=DelegationOptions(fork_tool=False))
    async with rt:
        assert rt.subagents.providers() == ["spawn"]
        assert rt.tools.get("subagent") is not None
        assert rt.tools.get("subagent_fork") is None


async def test_a_throwing_removed_listener_does_not_break_removal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rt, _ = make_runtime("{}")
    async with rt:
        remove = rt.subagents.register_provider(
            InProcessProvider(rt, name="custom", inherits_parent_context=False)
        )

        def explode(event: object) -> None:
            if isinstance(event, ProviderRemoved):
                raise RuntimeError("listener bug")

        rt.subscribe(explode)
        seen = ProviderEvents(rt)
        remove()
        assert rt.subagents.get_provider("custom") is None
        assert seen.seen == [ProviderRemoved("custom")]
        assert "live event listener failed on ProviderRemoved" in caplog.text


# -- the tool mirrors its provider -----------------------------------------------------------


async def test_the_built_in_tools_take_their_wording_from_their_providers() -> None:
    rt, _ = make_runtime("{}")
    async with rt:
        spawn, spawn_prompt = description_of(rt, "subagent")
        fork, fork_prompt = description_of(rt, "subagent_fork")
        assert STANDALONE in spawn
        assert INHERITS not in spawn
        assert "the child sees nothing else" in spawn_prompt
        assert INHERITS in fork
        assert STANDALONE not in fork
        assert "the child already sees this conversation's completed turns" in fork_prompt


async def test_the_tool_appears_and_disappears_with_its_provider() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent_custom, args: {name: helper, description: Help, prompt: Help}}
  - text: It is gone.
"""
    )
    async with rt:
        dispose_tool = mount_subagent_tool(
            rt.subagents,
            SubagentToolConfig(provider="custom", tool_name="subagent_custom"),
            tasks=rt.tasks,
        )
        lead = await rt.create_agent()
        assert "subagent_custom" not in visible_tools(lead)

        remove = rt.subagents.register_provider(
            InProcessProvider(rt, name="custom", inherits_parent_context=False)
        )
        assert "subagent_custom" in visible_tools(lead)
        description, prompt = description_of(rt, "subagent_custom")
        assert description == tool_description(inherits=False, background=True)
        assert prompt == prompt_description(inherits=False)
        assert STANDALONE in description

        remove()
        assert "subagent_custom" not in visible_tools(lead)
        assert rt.tools.get("subagent_custom") is None

        # Back with another context contract: the wording is derived again.
        remove = rt.subagents.register_provider(
            InProcessProvider(rt, name="custom", inherits_parent_context=True)
        )
        description, prompt = description_of(rt, "subagent_custom")
        assert description == tool_description(inherits=True, background=True)
        assert prompt == prompt_description(inherits=True)
        assert INHERITS in description

        remove()
        await rt.run("use it", agent=lead)
        assert replies(lead)[0] == ToolReply(
            "subagent_custom",
            'Error: unknown tool "subagent_custom"',
            True,
            ErrorCode.UNKNOWN_TOOL,
        )
        assert await session_count(rt) == 1

        dispose_tool()
        rt.subagents.register_provider(
            InProcessProvider(rt, name="custom", inherits_parent_context=False)
        )
        assert rt.tools.get("subagent_custom") is None  # unmounted for good
    model.assert_complete()


# -- validation order ------------------------------------------------------------------------


async def test_start_validation_runs_in_the_fixed_order() -> None:
    rt, _ = make_runtime("{}")
    async with rt:
        tiny = TinyProvider(rt)
        rt.subagents.register_provider(tiny)
        lead = await rt.create_agent()

        def refusal(provider: str, **kwargs: object) -> tuple[ErrorCode, str]:
            with pytest.raises(SubagentError) as caught:
                rt.subagents.admit(
                    provider,
                    parent=lead,
                    prompt="p",
                    label="l",
                    **kwargs,  # pyright: ignore[reportArgumentType]
                )
            return caught.value.code, caught.value.message

        everything_wrong: dict[str, object] = {
            "name": "Not A Name",
            "cwd": "/no/such/dir",
            "max_depth": -1,
        }
        # The provider comes first ...
        assert refusal("nope", **everything_wrong) == (
            ErrorCode.NO_PROVIDER,
            'no subagent provider registered for "nope"',
        )
        # ... then its capabilities, before the value of max_depth is even looked at ...
        assert refusal("tiny", **everything_wrong) == (
            ErrorCode.UNSUPPORTED_CAPABILITY,
            'subagent provider "tiny" does not support the "depth_limit" capability',
        )
        # ... then max_depth, the depth, the name; the cwd is checked at launch.
        assert refusal("spawn", **everything_wrong) == (
            ErrorCode.USAGE,
            "subagent maxDepth must be a non-negative safe integer",
        )
        assert refusal("spawn", name="Not A Name", cwd="/no/such/dir", max_depth=0) == (
            ErrorCode.DEPTH_EXCEEDED,
            "subagent depth 1 exceeds maxDepth 0; carry out the work directly instead of "
            "delegating",
        )
        assert refusal("spawn", name="Not A Name", cwd="/no/such/dir", max_depth=1)[0] == (
            ErrorCode.INVALID_NAME
        )
        admission = rt.subagents.admit(
            "spawn", parent=lead, prompt="p", label="l", name="fine", cwd="/no/such/dir"
        )
        with pytest.raises(SubagentError) as caught:
            await rt.subagents.launch(admission)
        # /no/such/dir lies outside the lead's workspace, which is decided before existence.
        assert caught.value.code == ErrorCode.CWD_OUTSIDE_WORKSPACE
        assert tiny.starts == []
        assert await session_count(rt) == 1
        # A refused launch gave its name back.
        rt.subagents.cancel(
            rt.subagents.admit("spawn", parent=lead, prompt="p", label="l", name="fine")
        )


async def test_a_provider_without_depth_limit_refuses_a_max_depth_through_the_tool() -> None:
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent_tiny, args: {name: helper, description: Help, prompt: Help}}
  - calls:
      - {tool: subagent_managed, args: {name: helper, description: Help, prompt: Help}}
  - text: done
helper:
  - text: helped
"""
    )
    async with rt:
        tiny = TinyProvider(rt)
        rt.subagents.register_provider(tiny)
        mount_subagent_tool(
            rt.subagents,
            SubagentToolConfig(provider="tiny", tool_name="subagent_tiny", max_depth=3),
            tasks=rt.tasks,
        )
        mount_subagent_tool(
            rt.subagents,
            SubagentToolConfig(provider="tiny", tool_name="subagent_managed", max_depth=None),
            tasks=rt.tasks,
        )
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [
            ToolReply(
                "subagent_tiny",
                'Error: subagent provider "tiny" does not support the "depth_limit" capability',
                True,
                ErrorCode.UNSUPPORTED_CAPABILITY,
            ),
            # Without a cap (the provider manages depth) the same provider is used.
            ToolReply("subagent_managed", "helped", False, None),
        ]
        assert tiny.starts == ["helper"]
    model.assert_complete()


# -- removal does not revoke accepted runs ---------------------------------------------------


async def test_an_accepted_run_settles_after_its_provider_is_removed() -> None:
    gates = Gates()
    rt, model = make_runtime(
        """
lead:
  - calls:
      - {tool: subagent_custom, args: {name: worker, description: Work, prompt: Work}}
  - text: The worker finished.
worker:
  - calls: [{tool: hold, args: {label: worker}}]
  - text: work done
""",
        tools=[gates.tool()],
    )
    async with rt:
        lifecycle = Lifecycle(rt)
        seen = ProviderEvents(rt)
        mount_subagent_tool(
            rt.subagents,
            SubagentToolConfig(provider="custom", tool_name="subagent_custom"),
            tasks=rt.tasks,
        )
        remove = rt.subagents.register_provider(
            InProcessProvider(rt, name="custom", inherits_parent_context=False)
        )
        lead = await rt.create_agent()
        await lead.followup("go")
        await gates.started("worker").wait()

        remove()
        assert seen.seen[-1] == ProviderRemoved("custom")
        assert rt.tools.get("subagent_custom") is None
        with pytest.raises(SubagentError) as caught:
            rt.subagents.admit("custom", parent=lead, prompt="p", label="l")
        assert caught.value.code == ErrorCode.NO_PROVIDER

        gates.release("worker")
        await rt.wait_quiescent()
        assert replies(lead) == [ToolReply("subagent_custom", "work done", False, None)]
        (started,) = lifecycle.started
        (ended,) = lifecycle.ended
        assert (started.provider, ended.provider) == ("custom", "custom")
        assert ended.stop_reason == "completed"
    model.assert_complete()
