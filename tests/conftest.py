from __future__ import annotations

from collections.abc import Iterator

import pytest
from blockbuster import blockbuster_ctx

from subagents.policy import confinement
from subagents.policy._confine import BACKEND_ENV
from subagents.testing import FakeClock


@pytest.fixture(autouse=True)
def no_blocking_calls_in_the_loop() -> Iterator[None]:
    """Fail any test in which subagents code makes a blocking call inside the event loop.

    Models are built once, before a run, so their constructors may read files: an
    `AsyncOpenAI` client reads CA certificates, `ScriptedModel.from_file` reads its script.
    """
    with blockbuster_ctx("subagents") as buster:
        for function in buster.functions.values():
            function.can_block_in("openai/_base_client.py", "__init__")
            function.can_block_in("anthropic/_base_client.py", "__init__")
            function.can_block_in("subagents/models/_scripted.py", "from_file")
        yield


@pytest.fixture(autouse=True)
def isolated_subagents_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A developer's own `~/.subagents` and `~/.claude` (agent definitions, settings, store)
    never leak into a test."""
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("SUBAGENTS_HOME", str(base / "subagents-home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(base / "claude-home"))
    for variable in ("SUBAGENTS_MODEL", "SUBAGENTS_SANDBOX"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def force_backend(monkeypatch: pytest.MonkeyPatch, name: str) -> str:
    """Make confined runs use backend `name`; skip (saying why) where its probe fails."""
    monkeypatch.setenv(BACKEND_ENV, name)
    verdict = confinement()
    if verdict.backend is None:
        pytest.skip(f"{name} is unusable on this machine: {verdict.detail}")
    return name


@pytest.fixture(params=["bwrap", "landlock"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each confinement backend in turn, forced; skipped only where its probe fails."""
    return force_backend(monkeypatch, str(request.param))


@pytest.fixture
def bwrap(monkeypatch: pytest.MonkeyPatch) -> str:
    return force_backend(monkeypatch, "bwrap")


@pytest.fixture
def landlock(monkeypatch: pytest.MonkeyPatch) -> str:
    return force_backend(monkeypatch, "landlock")
