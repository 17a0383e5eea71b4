"""Bad input on the command line: exit 2, one line on stderr, and nothing written."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest
from cli_support import Cli, write_script


def _one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("subagents: error: ")
    return lines[0]


def _assert_usage_error(done: subprocess.CompletedProcess[str], home: Path, *needles: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    line = _one_line_error(done.stderr)
    for needle in needles:
        assert needle in line
    assert done.stdout == ""
    assert not (home / "state.db").exists(), "a usage error must not create the store"


def test_missing_model_lists_the_choices(cli: Cli, home: Path) -> None:
    _assert_usage_error(cli("run", "hi"), home, "no model given", "scripted:PATH", "openai:MODEL")


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("gpt-4", "MODEL_ALIAS_UNKNOWN"),
        ("unknown:thing", "MODEL_SPEC_INVALID"),
        ("openai:", "MODEL_SPEC_INVALID"),
        ("openai-compatible:m@ftp://host", "MODEL_SPEC_INVALID"),
        ("openai:gpt-4o", "OPENAI_API_KEY"),
        ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY"),
    ],
)
def test_bad_model_specs(cli: Cli, home: Path, spec: str, needle: str) -> None:
    _assert_usage_error(cli("run", "hi", "--model", spec), home, needle)


def test_unreadable_script(cli: Cli, home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    _assert_usage_error(
        cli("run", "hi", "--model", f"scripted:{missing}"), home, "SCRIPT_UNREADABLE", "nope.yaml"
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("lead: [", "not valid YAML"),
        ("- just a list\n", "top level"),
        ("lead:\n  - txt: typo\n", "lead[0]: unknown key 'txt'"),
        ("lead:\n  - calls: [{args: {}}]\n", "lead[0].calls[0].tool"),
        ("lead:\n  - text: x\n    sleep: -1\n", "lead[0].sleep"),
        ("lead:\n  - stop: later\n", "lead[0].stop"),
    ],
)
def test_malformed_scripts(cli: Cli, home: Path, tmp_path: Path, text: str, needle: str) -> None:
    spec = write_script(tmp_path / "bad.yaml", text)
    _assert_usage_error(
        cli("run", "hi", "--model", spec), home, "SCRIPT_INVALID", needle, "bad.yaml"
    )


def test_prompt_is_required(cli: Cli, home: Path, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead: [{text: x}]\n")
    _assert_usage_error(cli("run", "--model", spec), home, "a prompt is required")
    _assert_usage_error(cli("run", "   ", "--model", spec), home, "a prompt is required")


def test_bad_flags(cli: Cli, home: Path, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead: [{text: x}]\n")
    _assert_usage_error(
        cli("run", "hi", "--model", spec, "--cwd", str(tmp_path / "no")), home, "--cwd"
    )
    _assert_usage_error(cli("run", "hi", "--model", spec, "--tenant", ""), home, "--tenant")
    unknown = cli("run", "hi", "--model", spec, "--frobnicate")
    assert unknown.returncode == 2
    assert "No such option" in unknown.stderr
    assert not (home / "state.db").exists()


def test_unwritable_store(cli: Cli, home: Path, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead: [{text: x}]\n")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = blocker / "state.db"
    done = cli("run", "hi", "--model", spec, "--store", str(store))
    _assert_usage_error(done, home, "STORE_UNWRITABLE", str(store))
    assert blocker.read_text() == "not a directory"


def test_bad_store_url(cli: Cli, home: Path, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead: [{text: x}]\n")
    _assert_usage_error(
        cli("run", "hi", "--model", spec, "--store", "postgres://db/x"), home, "CONFIG"
    )


def test_store_from_a_newer_version_is_refused(cli: Cli, home: Path, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead: [{text: x}]\n")
    store = tmp_path / "future.db"
    assert cli("run", "hi", "--model", spec, "--store", str(store)).returncode == 0
    with sqlite3.connect(store) as conn:
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)"
        )
    conn.close()
    before = store.read_bytes()
    done = cli("run", "hi", "--model", spec, "--store", str(store))
    _assert_usage_error(done, home, "SCHEMA_VERSION", "99")
    assert store.read_bytes() == before


def test_read_commands_without_a_store(cli: Cli, home: Path) -> None:
    for args in (("sessions",), ("tree", "lead"), ("log", "lead")):
        _assert_usage_error(cli(*args), home, "no store at")


def test_unknown_sessions_and_names(cli: Cli, home: Path, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead: [{text: x}]\n")
    assert cli("run", "hi", "--model", spec).returncode == 0
    before = (home / "state.db").read_bytes()
    for args in (
        ("tree", "00000000-0000-4000-8000-000000000000"),
        ("log", "00000000-0000-4000-8000-000000000000"),
        ("log", "reviewer"),
        ("resume", "not-a-session"),
        ("resume", "00000000-0000-4000-8000-000000000000", "go"),
    ):
        done = cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        _one_line_error(done.stderr)
    assert (home / "state.db").read_bytes() == before
