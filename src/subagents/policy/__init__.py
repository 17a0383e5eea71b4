"""Sandbox policy: modes, their resolution, and confined process launch (docs/sandbox.md).

Under `read-only` and `workspace-write` a run is confined by bubblewrap, or by Landlock where
bubblewrap cannot run, and sees only the system directories (less the /etc entries strangers
cannot read), the Python installation and venv, this package, the workspace (writable under
`workspace-write`), its cwd, its private directory and the caller's `readable` paths: $HOME,
$SUBAGENTS_HOME (every tenant's log) and the store are not visible. A seccomp filter leaves it
no socket to anything outside. When neither backend works, or the one that does cannot keep a
hidden path hidden, `spawn` refuses with `SandboxUnavailable` ("cannot enforce the <mode>
file policy"); it never runs unconfined or weaker. In every mode, `danger-full-access`
included: an emptied environment, rlimits, a bounded number of processes, its own session and
process group, and `kill()` ends every process of the run. `danger-full-access` keeps the
host's file system and network.

Each name is imported from its module on first use (PEP 562), so that a CLI command pays only
for the modules it touches (startup time; see tests/cli/test_startup.py).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._confine import Confinement as Confinement, confinement as confinement
    from ._confined_run import (
        CommandResult as CommandResult,
        ConfinedProcess as ConfinedProcess,
        run_command as run_command,
        spawn as spawn,
    )
    from ._limits import Limits as Limits, SandboxFacts as SandboxFacts
    from ._modes import (
        SANDBOX_MODES as SANDBOX_MODES,
        SandboxMode as SandboxMode,
        SandboxPolicy as SandboxPolicy,
        canonical_root as canonical_root,
        narrower as narrower,
        parse_mode as parse_mode,
        resolve_policy as resolve_policy,
        store_paths as store_paths,
        within as within,
    )

__all__ = [
    "CommandResult",
    "ConfinedProcess",
    "Confinement",
    "Limits",
    "SANDBOX_MODES",
    "SandboxFacts",
    "SandboxMode",
    "SandboxPolicy",
    "canonical_root",
    "confinement",
    "narrower",
    "parse_mode",
    "resolve_policy",
    "run_command",
    "spawn",
    "store_paths",
    "within",
]

# The module of each name (the imports above say the same for pyright).
_SOURCES = {
    "._confine": ("Confinement", "confinement"),
    "._confined_run": ("CommandResult", "ConfinedProcess", "run_command", "spawn"),
    "._limits": ("Limits", "SandboxFacts"),
    "._modes": (
        "SANDBOX_MODES",
        "SandboxMode",
        "SandboxPolicy",
        "canonical_root",
        "narrower",
        "parse_mode",
        "resolve_policy",
        "store_paths",
        "within",
    ),
}
__getattr__, __dir__ = lazy_names(__name__, globals(), _SOURCES)
