"""Children of a workflow, started through the subagent service (spec 3.4).

Each `agent()` call becomes one one-shot child of the workflow's parent agent, labelled
`<meta.name> child <callId>`, in the run's selected directory. Delivery is the caller's: the
engine awaits the result itself, so the parent gets no settlement notice. An output schema
makes the child answer through `structured_output`; a model override opens another model.
"""

from __future__ import annotations

from ..core import Agent
from ..delegation import ServiceRun, SubagentService
from ..errors import ErrorCode, WorkflowError
from ..models import parse_model_spec
from ._host import ChildOutcome, ChildRequest

__all__ = ["ServiceChild", "ServiceStarter", "model_override"]


class ServiceChild:
    """A launched child as the host sees it."""

    def __init__(self, run: ServiceRun) -> None:
        self._run = run

    @property
    def child_id(self) -> str:
        return str(self._run.id)

    async def wait(self) -> ChildOutcome:
        result = await self._run.wait()
        return ChildOutcome(
            output=result.output, stop_reason=result.stop_reason, structured=result.structured
        )

    async def dispose(self) -> None:
        await self._run.dispose()


def model_override(request: ChildRequest, *, parent_spec: str | None) -> str | None:
    """The model spec a child runs (None: the parent's model).

    `model` alone is a full spec (`openai:gpt-4o`); `provider` with `model` is
    `provider:model`; `provider` alone keeps the parent's model name under another provider.
    """
    if request.provider is None:
        return request.model
    model = request.model
    if model is None:
        if parent_spec is None:
            raise WorkflowError(
                f'agent() provider "{request.provider}" needs a model name, and the parent\'s '
                "model has no spec to take one from; pass model= too",
                code=ErrorCode.AGENT_START,
            )
        model = parse_model_spec(parent_spec).model
    return f"{request.provider}:{model}"


class ServiceStarter:
    """Starts the children of one run (the working directory is set once the run chose it)."""

    def __init__(
        self,
        service: SubagentService,
        *,
        parent: Agent,
        provider: str,
        label_prefix: str,
        max_depth: int | None,
    ) -> None:
        self._service = service
        self._parent = parent
        self._provider = provider
        self._label_prefix = label_prefix
        self._max_depth = max_depth
        self.cwd: str | None = None

    async def __call__(self, request: ChildRequest, *, call_id: int) -> ServiceChild:
        service, parent = self._service, self._parent
        spec = model_override(
            request,
            parent_spec=service.model_specs.get(parent.id) or service.runtime.model_spec,
        )
        admission = service.admit(
            self._provider,
            parent=parent,
            prompt=request.prompt,
            label=f"{self._label_prefix} child {call_id}",
            name=request.name,
            cwd=self.cwd,
            max_depth=self._max_depth,
            output_schema=request.schema,
            model_spec=spec,
        )
        return ServiceChild(await service.launch(admission))
