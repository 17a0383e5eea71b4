"""The console's buttons: checked here against the store, then run as a CLI process (`Jobs`).

What can be known before a process starts is refused at once, with the code the CLI command
would give: the session is not the tenant's, the name is no member, the message is empty or
too long, a one-shot child cannot take messages, the member has no such request waiting.
What only the process learns (the holder refused, the model failed) is in the job's outcome.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from ..core import check_reason
from ..delegation import find_member, refuse_one_shot, stored_request
from ..errors import ErrorCode, UsageError
from ..models import parse_model_spec
from ..sessions import MAX_CALL_ID, MAX_COMMAND_TEXT
from ._jobs import Job, Jobs
from ._trees import Trees

__all__ = ["Controls", "check_text"]


def check_text(value: object, what: str, *, required: bool = True) -> str | None:
    """`value` when it is text a command can carry; `USAGE` or `BAD_REQUEST` otherwise."""
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise UsageError(f"{what} must be a string", code=ErrorCode.BAD_REQUEST)
    if required and not value.strip():
        raise UsageError(f"{what} must not be empty", code=ErrorCode.USAGE)
    if len(value) > MAX_COMMAND_TEXT:
        raise UsageError(
            f"{what} is longer than {MAX_COMMAND_TEXT} characters", code=ErrorCode.USAGE
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{what} is not valid Unicode text", code=ErrorCode.BAD_REQUEST) from None
    if "\x00" in value:
        raise UsageError(f"{what} contains a NUL character", code=ErrorCode.BAD_REQUEST)
    return value


def check_call_id(value: object) -> str | None:
    """A decision's call id: None (the member's only pending one) or a bounded, non-empty text."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise UsageError("the call id must be a string", code=ErrorCode.BAD_REQUEST)
    if not value.strip() or len(value) > MAX_CALL_ID:
        raise UsageError(
            f"a call id is a non-empty text of at most {MAX_CALL_ID} characters",
            code=ErrorCode.USAGE,
        )
    return check_text(value, "the call id")


class Controls:
    """Send, steer, interrupt, resume, run, approve and deny, for one tenant's console."""

    def __init__(self, trees: Trees, jobs: Jobs, *, model: str | None) -> None:
        self._trees = trees
        self._jobs = jobs
        self._model = model

    async def message(self, kind: str, root_id: str, body: dict[str, Any]) -> Job:
        """`send` or `steer` `body["message"]` to member `body["name"]`."""
        assert kind in ("send", "steer")
        root = await self._trees.root(root_id)
        name = check_text(body.get("name"), "name")
        message = check_text(body.get("message"), "the message")
        assert name is not None
        assert message is not None
        target = await find_member(self._trees.store, root, name)
        # The followed tree knows every member's mode: no need to read the whole tree again.
        watched = await self._trees.current(root)
        if target.id in watched.view:
            row = watched.view.row(target.id, held=watched.held, now=time.time())
            refuse_one_shot(row.mode, row.name, str(row.status), row.parent, root.id)
        return await self._jobs.start(
            "send" if kind == "send" else "steer",
            [root.id, name, message],
            root=root.id,
            name=name,
        )

    async def interrupt(self, root_id: str, body: dict[str, Any]) -> Job:
        root = await self._trees.root(root_id)
        name = check_text(body.get("name"), "name")
        assert name is not None
        await find_member(self._trees.store, root, name)
        return await self._jobs.start("interrupt", [root.id, name], root=root.id, name=name)

    async def decide(
        self, kind: Literal["approve", "deny"], root_id: str, body: dict[str, Any]
    ) -> Job:
        """Decide member `body["name"]`'s waiting call (`body["call_id"]`, or its only one).

        The request is found in the member's stored log first, so a call that is not waiting
        is refused with the code `subagents approve` would give, and no process starts. The
        process is given the call id found, so it decides the request that was checked.
        """
        root = await self._trees.root(root_id)
        name = check_text(body.get("name"), "name")
        assert name is not None
        call_id = check_call_id(body.get("call_id"))
        options: tuple[str, ...] = ()
        if kind == "deny":
            reason = check_reason(check_text(body.get("reason"), "the reason", required=False))
            if reason is not None:
                options = (f"--reason={reason}",)
        target = await find_member(self._trees.store, root, name)
        request = await stored_request(
            self._trees.store, target, call_id, name=name.strip("/") or name
        )
        return await self._jobs.start(
            kind, [root.id, name, request.call_id], options=options, root=root.id, name=name
        )

    async def resume(self, root_id: str, body: dict[str, Any]) -> Job:
        root = await self._trees.root(root_id)
        prompt = check_text(body.get("prompt"), "the prompt", required=False)
        arguments = [root.id] if not prompt else [root.id, prompt]
        return await self._jobs.start("resume", arguments, root=root.id, name=None)

    async def run(self, body: dict[str, Any]) -> Job:
        prompt = check_text(body.get("prompt"), "the prompt")
        model = check_text(body.get("model"), "the model", required=False) or self._model
        assert prompt is not None
        if model is None:
            raise UsageError(
                "no model: give one in the form, or start the console with --model",
                code=ErrorCode.MODEL_MISSING,
            )
        parse_model_spec(model)  # `MODEL_SPEC_INVALID` now, not as the job's failure
        if prompt == "-":
            raise UsageError("the prompt `-` means stdin to the CLI: give the task itself")
        return await self._jobs.start(
            "run", [prompt], options=("--model", model), root=None, name=None
        )
