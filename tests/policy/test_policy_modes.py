"""Sandbox modes and policy resolution (docs/design.md §10; docs/sandbox.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagents.errors import ConfigError, ErrorCode
from subagents.policy import (
    SANDBOX_MODES,
    SandboxMode,
    SandboxPolicy,
    canonical_root,
    narrower,
    parse_mode,
    resolve_policy,
)


def test_there_are_exactly_three_modes_in_order() -> None:
    assert SANDBOX_MODES == ("read-only", "workspace-write", "danger-full-access")


def test_no_session_and_no_mode_gives_the_deployment_default(tmp_path: Path) -> None:
    # 70: the default mode, the canonical fallback root, no session id.
    assert resolve_policy(cwd=str(tmp_path)) == SandboxPolicy(
        mode="workspace-write", workspace_root=os.path.realpath(tmp_path)
    )
    configured = resolve_policy(cwd=str(tmp_path), default="read-only")
    assert (configured.mode, configured.session_id) == ("read-only", None)


def test_the_last_session_mode_wins_and_an_explicit_mode_beats_it(tmp_path: Path) -> None:
    # 71
    log = ["workspace-write", "read-only"]
    resolved = resolve_policy(cwd=str(tmp_path), session_modes=log, session_id="s-1")
    assert (resolved.mode, resolved.session_id) == ("read-only", "s-1")
    explicit = resolve_policy(cwd=str(tmp_path), session_modes=log, mode="danger-full-access")
    assert explicit.mode == "danger-full-access"
    unswitched = resolve_policy(cwd=str(tmp_path), session_modes=[], default="read-only")
    assert unswitched.mode == "read-only"


def test_a_symlink_then_dotdot_lands_where_chdir_would(tmp_path: Path) -> None:
    # 72: resolve the symlink first, then normalize.
    target = tmp_path / "real" / "deep"
    target.mkdir(parents=True)
    (tmp_path / "link").symlink_to(target)
    spelled = f"{tmp_path}/link/.."
    resolved = resolve_policy(cwd=spelled)
    assert resolved.workspace_root == os.path.realpath(tmp_path / "real")
    assert resolved.workspace_root != os.path.normpath(spelled)
    cwd = Path.cwd()
    try:
        os.chdir(spelled)
        assert os.getcwd() == resolved.workspace_root
    finally:
        os.chdir(cwd)


def test_a_path_that_does_not_exist_is_kept_as_spelled_but_normalized(tmp_path: Path) -> None:
    base = os.path.realpath(tmp_path)
    assert canonical_root(f"{tmp_path}/missing/./a/../b") == f"{base}/missing/b"


@pytest.mark.parametrize("text", ["", "READ-ONLY", "full", "read_only", " read-only"])
def test_parse_mode_rejects_anything_but_the_three_modes(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_mode(text)
    assert caught.value.code == ErrorCode.USAGE
    for mode in SANDBOX_MODES:
        assert mode in caught.value.message


def test_parse_mode_accepts_each_mode() -> None:
    assert [parse_mode(m) for m in SANDBOX_MODES] == list(SANDBOX_MODES)


def test_an_unknown_mode_in_the_session_log_never_widens(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown sandbox mode 'root'"):
        resolve_policy(cwd=str(tmp_path), session_modes=["read-only", "root"])


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("read-only", "read-only", "read-only"),
        ("read-only", "workspace-write", "read-only"),
        ("read-only", "danger-full-access", "read-only"),
        ("workspace-write", "read-only", "read-only"),
        ("workspace-write", "workspace-write", "workspace-write"),
        ("workspace-write", "danger-full-access", "workspace-write"),
        ("danger-full-access", "read-only", "read-only"),
        ("danger-full-access", "workspace-write", "workspace-write"),
        ("danger-full-access", "danger-full-access", "danger-full-access"),
    ],
)
def test_narrower_keeps_the_stricter_mode(
    a: SandboxMode, b: SandboxMode, expected: SandboxMode
) -> None:
    assert narrower(a, b) == expected
