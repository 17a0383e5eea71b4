"""Hostile command lines: exit 2, one `subagents: error:` line, no traceback, nothing written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import Cli, write_script
from hypothesis import given, settings, strategies as st

from subagents.errors import ConfigError, ErrorCode
from subagents.ids import TENANT_PATTERN, check_tenant_id

TOO_LONG = "a" * 5000
"""Longer than any NAME_MAX and PATH_MAX."""
DEEP = "---\nname: deep\ndescription: " + "[" * 1000 + "]" * 1000 + "\n---\nBody.\n"
GOOD = "---\nname: good\ndescription: A fine agent.\n---\nDo the work.\n"


def _one_line(stderr: str, prefix: str = "subagents: error: ") -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(prefix), stderr
    return lines[0]


def _refused(done: subprocess.CompletedProcess[str], home: Path, *needles: str) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    line = _one_line(done.stderr)
    for needle in needles:
        assert needle in line, line
    assert done.stdout == ""
    assert not (home / "state.db").exists(), "a refused command must not create the store"
    assert not (home / "tenants").exists(), "a refused command must not create a tenant folder"
    return line


@pytest.fixture
def spec(tmp_path: Path) -> str:
    return write_script(tmp_path / "s.yaml", "lead: [{text: done}]\n")


# -- item 1: definition files ----------------------------------------------------------------


def _project(tmp_path: Path) -> Path:
    agents = tmp_path / ".subagents" / "agents"
    agents.mkdir(parents=True)
    (agents / "good.md").write_text(GOOD, encoding="utf-8")
    return agents


def test_a_deeply_nested_definition_is_one_warning(cli: Cli, tmp_path: Path) -> None:
    agents = _project(tmp_path)
    (agents / "deep.md").write_text(DEEP, encoding="utf-8")
    done = cli("agents", "--json")
    assert done.returncode == 0, done.stderr
    line = _one_line(done.stderr, "subagents: warning: ")
    assert str(agents / "deep.md") in line
    assert "levels deep" in line
    assert '"good"' in done.stdout


def test_run_still_works_next_to_a_deep_definition(
    cli: Cli, home: Path, tmp_path: Path, spec: str
) -> None:
    agents = _project(tmp_path)
    (agents / "deep.md").write_text(DEEP, encoding="utf-8")
    done = cli("run", "hi", "--model", spec, "--agent", "good")
    assert done.returncode == 0, done.stderr
    assert "done" in done.stdout
    assert done.stderr == ""  # the run does not use deep.md: no warning about it
    assert (home / "state.db").exists()
    # Asking for the broken definition by its file's name shows why it is not there.
    asked = cli("run", "hi", "--model", spec, "--agent", "deep")
    assert asked.returncode == 2
    warning, error = asked.stderr.strip().splitlines()
    assert warning.startswith("subagents: warning: ")
    assert str(agents / "deep.md") in warning
    assert error.startswith("subagents: error: unknown agent 'deep'")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_the_agents_folder_does_not_hang(cli: Cli, tmp_path: Path) -> None:
    agents = _project(tmp_path)
    os.mkfifo(agents / "x.md")
    done = cli("agents", "--json")  # the fixture's 60 s timeout fails a hang
    assert done.returncode == 0, done.stderr
    line = _one_line(done.stderr, "subagents: warning: ")
    assert str(agents / "x.md") in line
    assert "not a regular file" in line
    assert '"good"' in done.stdout


# -- item 2: tenant ids ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "tenant", ["", " ", ".", "..", "a/b", "../x", "a\\b", ".hidden", "-x", "a b", "é", "x" * 65]
)
def test_a_tenant_that_is_not_an_identifier_is_refused(
    cli: Cli, home: Path, spec: str, tenant: str
) -> None:
    _refused(cli("run", "hi", "--model", spec, "--tenant", tenant), home, "--tenant", "CONFIG")


@pytest.mark.parametrize("command", [("agents",), ("sessions",), ("tree", "x"), ("log", "x")])
def test_every_command_checks_the_tenant(cli: Cli, home: Path, command: tuple[str, ...]) -> None:
    _refused(cli(*command, "--tenant", ".."), home, "--tenant", "CONFIG")


def test_a_tenant_of_64_characters_is_accepted(cli: Cli, home: Path, spec: str) -> None:
    done = cli("run", "hi", "--model", spec, "--tenant", "t" * 64)
    assert done.returncode == 0, done.stderr
    assert "done" in done.stdout


def test_the_runtime_applies_the_same_rule() -> None:
    from subagents.models._scripted import ScriptedModel
    from subagents.sessions import InMemoryEventStore
    from subagents.workflows import Runtime

    for tenant in ("..", "a/b", ""):
        with pytest.raises(ConfigError) as raised:
            Runtime(model=ScriptedModel({}), store=InMemoryEventStore(), tenant=tenant)
        assert raised.value.code == ErrorCode.CONFIG


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_a_tenant_is_accepted_exactly_when_it_matches_the_pattern(tenant: str) -> None:
    if re.fullmatch(TENANT_PATTERN, tenant) is not None:
        assert check_tenant_id(tenant) == tenant
        assert tenant not in {".", ".."}
        assert "/" not in tenant
        assert len(tenant) <= 64
        return
    with pytest.raises(ConfigError) as raised:  # any other exception fails the test
        check_tenant_id(tenant)
    assert raised.value.code == ErrorCode.CONFIG
    assert "\n" not in raised.value.message


# -- item 3: paths too long ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("run", "hi", "--store", TOO_LONG),
        ("run", "hi", "--store", f"sqlite:///tmp/{TOO_LONG}"),
        ("run", "hi", "--cwd", TOO_LONG),
        ("run", "hi", "--cwd", "/".join(["d" * 200] * 30)),
        ("agents", "--cwd", TOO_LONG),
        ("sessions", "--store", TOO_LONG),
        ("tree", "x", "--store", TOO_LONG),
        ("log", "x", "--store", TOO_LONG),
        ("resume", "x", "--store", TOO_LONG),
        ("send", "x", "lead", "hi", "--store", TOO_LONG),
        ("interrupt", "x", "lead", "--store", TOO_LONG),
        ("demo", "--store", TOO_LONG),
    ],
)
def test_a_path_too_long_names_its_option(
    cli: Cli, home: Path, spec: str, args: tuple[str, ...]
) -> None:
    option = "--store" if "--store" in args else "--cwd"
    extra = ("--model", spec) if args[0] == "run" else ()
    _refused(cli(*args, *extra), home, option, "too long")


def test_a_tenant_too_long_for_a_path_is_refused(cli: Cli, home: Path, spec: str) -> None:
    _refused(cli("run", "hi", "--model", spec, "--tenant", TOO_LONG), home, "--tenant")


# -- item 4: argv that is not UTF-8 ----------------------------------------------------------


def _run_bytes(home: Path, tmp_path: Path, *args: bytes) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SUBAGENTS_", "OPENAI_"))}
    env["SUBAGENTS_HOME"] = str(home)
    return subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"subagents", *args],
        capture_output=True,
        text=True,
        errors="backslashreplace",
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX argv is bytes")
@pytest.mark.parametrize(
    "args",
    [
        (b"run", b"\xff\xfe", b"--model", b"SPEC"),
        (b"run", b"ok", b"--model", b"SPEC", b"--tenant", b"t\xff"),
        (b"run", b"ok", b"--model", b"SPEC", b"--agent", b"\xc3"),
        (b"agents", b"--cwd", b"\xff"),
        (b"sessions", b"--store", b"\xfe.db"),
    ],
)
def test_an_argument_that_is_not_utf8_is_refused(
    home: Path, tmp_path: Path, spec: str, args: tuple[bytes, ...]
) -> None:
    given_args = [os.fsencode(spec) if a == b"SPEC" else a for a in args]
    done = _run_bytes(home, tmp_path, *given_args)
    _refused(done, home, "not valid UTF-8")
