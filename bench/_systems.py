"""The systems a benchmark compares and how to start one worker process of each.

`subagents` and bare asyncio run in this interpreter's environment. Each peer framework runs
in its own virtual environment under `bench/.venvs/NAME` (git-ignored), created on demand with
exactly the versions docs/benchmarks.md names and reused while its requirements are unchanged.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BENCH_DIR", "PEERS", "REPO_ROOT", "System", "SystemUnavailable", "core_systems"]

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
VENVS_DIR = BENCH_DIR / ".venvs"
PEERS_DIR = BENCH_DIR / "peers"
MARKER = ".bench-requirements"
INSTALL_TIMEOUT_S = 900


class SystemUnavailable(Exception):
    """A system cannot be run here; the message says why (it is printed as `n/a`)."""


@dataclass(frozen=True, slots=True)
class System:
    key: str
    label: str
    module: str | None = None
    """For systems of this environment: the driver module, run with `python -m`."""
    requirements: tuple[str, ...] = ()
    """For peers: what `pip install` gets into the peer's own venv."""
    script: str | None = None
    """For peers: the driver script under bench/peers/."""
    stored_module: str | None = None
    """The driver of the stored-tree scenarios (S4, S5); None: the system keeps no durable
    tree to reopen, so those scenarios are `n/a` for it."""

    @property
    def is_peer(self) -> bool:
        return self.script is not None

    def command(self, *, log: bool = True) -> list[str]:
        """The command that starts one worker (creating a peer's venv first if needed)."""
        if self.module is not None:
            return [sys.executable, "-m", self.module]
        assert self.script is not None
        python = ensure_venv(self, log=log)
        return [str(python), str(PEERS_DIR / self.script)]

    def stored_command(self) -> list[str] | None:
        """The command of the stored-tree driver, or None when the system has none."""
        if self.stored_module is None:
            return None
        return [sys.executable, "-m", self.stored_module]


def core_systems() -> list[System]:
    return [
        System(
            "subagents",
            "subagents (SQLite, durable)",
            module="bench.drive_subagents",
            stored_module="bench.drive_stored",
        ),
        System("asyncio", "bare asyncio (floor)", module="bench.drive_asyncio"),
    ]


PEERS: list[System] = [
    System(
        "autogen",
        "autogen-agentchat 0.7.5",
        requirements=("autogen-agentchat==0.7.5", "autogen-ext==0.7.5"),
        script="drive_autogen.py",
    ),
    System(
        "langgraph",
        "langgraph 1.2.24",
        requirements=("langgraph==1.2.24",),
        script="drive_langgraph.py",
    ),
    System(
        "pydantic-ai",
        "pydantic-ai-slim 2.68.0",
        requirements=("pydantic-ai-slim==2.68.0",),
        script="drive_pydantic_ai.py",
    ),
    System(
        "openai-agents",
        "openai-agents 0.24.0 (as_tool)",
        requirements=("openai-agents==0.24.0",),
        script="drive_openai_agents.py",
    ),
]


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure_venv(system: System, *, log: bool = True) -> Path:
    """The peer's venv Python, creating or refreshing the venv when its requirements changed.

    Raises:
        SystemUnavailable: the venv cannot be created or the packages cannot be installed.
    """
    venv = VENVS_DIR / system.key
    python = _venv_python(venv)
    wanted = "\n".join(system.requirements) + "\n"
    marker = venv / MARKER
    if python.exists() and marker.exists() and marker.read_text(encoding="utf-8") == wanted:
        return python
    if log:
        print(f"creating {venv} with {' '.join(system.requirements)} ...", file=sys.stderr)
    started = time.perf_counter()
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    _check(
        [base, "-m", "venv", str(venv)],
        what=f"creating the virtual environment {venv}",
    )
    _check(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *system.requirements,
        ],
        what=f"pip install {' '.join(system.requirements)}",
    )
    marker.write_text(wanted, encoding="utf-8")
    if log:
        print(f"  ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return python


def _check(command: list[str], *, what: str) -> None:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SystemUnavailable(f"{what} failed: {exc}") from exc
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        detail = lines[-1].strip() if lines else f"exit status {done.returncode}"
        raise SystemUnavailable(f"{what} failed: {detail}")
