"""Resource limits of a confined run, and the facts a run reports about its confinement."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError, ErrorCode
from ._modes import SandboxMode

__all__ = ["Limits", "ProcessBound", "SandboxFacts"]

ProcessBound = Literal["cgroup", "uid", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Limits applied to every process of a run (the launcher sets them before the exec).

    `wall_seconds` is enforced by `ConfinedProcess.wait` (None: no wall-clock limit); the
    others are rlimits (`cpu_seconds` RLIMIT_CPU, `address_space_mb` RLIMIT_AS, `open_files`
    RLIMIT_NOFILE, `file_size_mb` RLIMIT_FSIZE, and RLIMIT_CORE is always 0). `processes`
    bounds the number of processes of the run at once: the run's own cgroup `pids.max` where
    a pids controller is writable, else RLIMIT_NPROC under a dedicated uid (see `spawn`).
    `tmpfs_mb` caps each writable tmpfs bubblewrap mounts (`/tmp`, which holds `$TMPDIR`, and
    `/dev/shm`): tmpfs pages are memory that RLIMIT_AS does not count.
    """

    wall_seconds: float | None = 600.0
    cpu_seconds: int = 300
    address_space_mb: int = 1024
    open_files: int = 256
    file_size_mb: int = 64
    processes: int = 64
    tmpfs_mb: int = 256

    def __post_init__(self) -> None:
        for name in (
            "cpu_seconds",
            "address_space_mb",
            "open_files",
            "file_size_mb",
            "processes",
            "tmpfs_mb",
        ):
            value: object = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"Limits.{name} must be a whole number of at least 1, got {value!r}",
                    code=ErrorCode.USAGE,
                    field=name,
                )
        wall = self.wall_seconds
        if wall is not None and (isinstance(wall, bool) or not wall > 0):
            raise ConfigError(
                f"Limits.wall_seconds must be above 0 or None, got {wall!r}",
                code=ErrorCode.USAGE,
                field="wall_seconds",
            )

    def rlimits(self) -> dict[str, int]:
        """The rlimits the launcher sets, by `resource` constant name."""
        mb = 1024 * 1024
        return {
            "RLIMIT_CORE": 0,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_AS": self.address_space_mb * mb,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_FSIZE": self.file_size_mb * mb,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxFacts:
    """How a run was confined.

    `backend` and `enforcement` are None under `danger-full-access`. `enforcement` is
    `partial` when the backend governs only some of the promised effects (an old Landlock ABI,
    or a hidden path inside a root Landlock had to grant). `processes` says what bounds the
    process count: the run's cgroup, RLIMIT_NPROC under a dedicated uid, or nothing.
    """

    mode: SandboxMode
    backend: Literal["bwrap", "landlock"] | None
    enforcement: Literal["full", "partial"] | None
    processes: ProcessBound = "none"
