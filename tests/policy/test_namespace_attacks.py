"""A confined run cannot make a user namespace of its own, nor slip past the filter by ABI.

Inside a new user namespace a run would hold every capability there and could mount a tmpfs
that no `Limits.tmpfs_mb` bounds, or a new network namespace; the seccomp filter refuses
`clone`/`unshare` with CLONE_NEWUSER (and `clone3`, whose flags it cannot read). A system
call made with x32 numbers would not match the filter's x86_64 numbers, so that ABI is
refused as a whole. `danger-full-access` is the control: the same calls succeed there.
"""

from __future__ import annotations

import platform
import shutil

import pytest
from sandbox_support import World, py

from subagents.policy import SandboxMode, run_command
from subagents.policy._seccomp import filter_program, native_arch

CONFINED: list[SandboxMode] = ["read-only", "workspace-write"]

USERNS = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER = 0x10000000
pid = os.fork()
if pid == 0:
    rc = libc.unshare(CLONE_NEWUSER)
    os._exit(0 if rc == 0 else 10 + ctypes.get_errno() % 100)
_, status = os.waitpid(pid, 0)
print("unshare", os.waitstatus_to_exitcode(status))
rc = libc.syscall(435, None, 0)  # clone3 with no arguments: EINVAL if it were reachable
print("clone3", errno.errorcode.get(ctypes.get_errno(), "?") if rc < 0 else "ran")
"""

X32_GETPID = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.syscall(0x40000000 | 39)  # getpid through the x32 ABI
print("x32", errno.errorcode.get(ctypes.get_errno(), "?") if rc < 0 else "ran")
"""


@pytest.mark.parametrize("mode", CONFINED)
async def test_no_user_namespace_from_a_confined_run(
    backend: str, world: World, mode: SandboxMode
) -> None:
    result = await run_command(py(USERNS), policy=world.policy(mode), cwd=str(world.workspace))
    lines = result.stdout.splitlines()
    assert lines[0] == "unshare 11", f"a user namespace was made (or not refused): {lines}"
    assert lines[1] == "clone3 ENOSYS", lines


async def test_the_unshare_tool_cannot_mount_an_uncapped_tmpfs(backend: str, world: World) -> None:
    tool = shutil.which("unshare")
    if tool is None:
        pytest.skip("util-linux unshare is not installed")
    command = [tool, "-Urm", "/bin/sh", "-c", "mount -t tmpfs none /tmp && echo mounted"]
    result = await run_command(
        command, policy=world.policy("workspace-write"), cwd=str(world.workspace)
    )
    assert "mounted" not in result.stdout
    assert result.exit_code != 0


async def test_unconfined_the_same_calls_succeed(world: World) -> None:
    result = await run_command(
        py(USERNS), policy=world.policy("danger-full-access"), cwd=str(world.workspace)
    )
    assert result.stdout.splitlines()[1] != "clone3 ENOSYS", result.stdout


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x32 numbers exist on x86_64 only")
@pytest.mark.parametrize("mode", CONFINED)
async def test_the_x32_abi_is_refused(backend: str, world: World, mode: SandboxMode) -> None:
    control = await run_command(
        py(X32_GETPID), policy=world.policy("danger-full-access"), cwd=str(world.workspace)
    )
    if control.stdout.strip() != "x32 ran":
        pytest.skip("this kernel has no x32 ABI: the filter's refusal cannot be told apart")
    result = await run_command(py(X32_GETPID), policy=world.policy(mode), cwd=str(world.workspace))
    assert result.stdout.strip() == "x32 ENOSYS", result.stdout


def test_the_filter_is_whole_instructions_for_this_machine() -> None:
    arch = native_arch()
    if arch is None:
        pytest.skip(f"no filter is written for {platform.machine()}")
    program = filter_program()
    assert program is not None
    assert len(program) % 8 == 0
    assert int.from_bytes(program[4:8], "little") == 4  # it starts by loading the arch
