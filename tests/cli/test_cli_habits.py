"""The command line's habits, run as real subprocesses: version, `-h`, completion, one-line usage
errors, `run -`, session references, the same JSON keys everywhere, reasons on stderr."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from importlib.metadata import version
from pathlib import Path

import pytest
from cli_support import Cli, write_script

from subagents.ids import SessionId
from subagents.sessions import SessionHeader, SqliteEventStore

COMMANDS = ("run", "resume", "send", "interrupt", "demo", "agents", "sessions", "tree", "log")


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_version_prints_the_package_version(cli: Cli) -> None:
    done = cli("--version")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"subagents {version('subagents')}\n",
        "",
    )


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_dash_h_is_help(cli: Cli, command: str) -> None:
    args = [command] if command else []
    short, long = cli(*args, "-h"), cli(*args, "--help")
    assert (short.returncode, long.returncode) == (0, 0)
    assert short.stdout == long.stdout
    assert short.stdout.startswith(f"Usage: subagents {command}".rstrip())
    assert "-h, --help" in short.stdout
    assert "╭" not in short.stdout  # plain text, no boxes


def test_shell_completion_is_offered(cli: Cli) -> None:
    assert "--install-completion" in cli("--help").stdout
    # Typer guesses the shell from the parent processes unless told not to; the test names it,
    # so the outcome does not depend on what launched pytest.
    done = cli(
        "--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    )
    assert done.returncode == 0, done.stderr
    assert "_SUBAGENTS_COMPLETE" in done.stdout


@pytest.mark.parametrize(
    ("args", "needle", "command"),
    [
        (("run", "hi", "--bogus"), "No such option: --bogus", "subagents run"),
        (("send",), "Missing argument", "subagents send"),
        (
            ("run", "hi", "--budget-tokens", "lots"),
            "Invalid value for '--budget-tokens'",
            "subagents run",
        ),
        (("frobnicate",), "No such command 'frobnicate'", "subagents"),
        (("tree", "a", "b"), "unexpected extra argument", "subagents tree"),
    ],
)
def test_usage_errors_are_one_line_with_a_hint(
    cli: Cli, home: Path, args: tuple[str, ...], needle: str, command: str
) -> None:
    done = cli(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    line = _one_line(done.stderr)
    assert line.startswith("subagents: error: ")
    assert needle in line
    assert line.endswith(f" [USAGE]; try '{command} --help'")
    assert not (home / "state.db").exists()


def _python(
    args: list[str], *, home: Path, cwd: Path, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SUBAGENTS_", "OPENAI_"))}
    env["SUBAGENTS_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "subagents", *args],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_run_dash_reads_the_prompt_from_stdin(cli: Cli, home: Path, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - text: read it\n")
    prompt = "Summarise this file:\nline one\nline two — ünïcode\n"
    done = _python(["run", "-", "--model", spec], home=home, cwd=tmp_path, stdin=prompt.encode())
    assert (done.returncode, done.stdout) == (0, b"read it\n"), done.stderr
    events = json.loads(cli("log", "lead", "--json").stdout)
    [user] = [
        e
        for e in events
        if e["kind"] == "user/message" and e["payload"]["message"]["source"]["kind"] == "user"
    ]
    assert user["payload"]["message"]["content"] == [{"kind": "text", "text": prompt}]

    bad = _python(["run", "-", "--model", spec], home=home, cwd=tmp_path, stdin=b"\xff\xfe")
    assert bad.returncode == 2
    assert "not valid UTF-8" in _one_line(bad.stderr.decode())
    assert len(json.loads(cli("sessions", "--json").stdout)) == 1  # nothing new was stored


def test_a_relative_script_path_is_recorded_absolute(cli: Cli, home: Path, tmp_path: Path) -> None:
    write_script(tmp_path / "s.yaml", "lead:\n  - text: first\n  - text: second\n")
    done = cli("run", "hi", "--model", "scripted:s.yaml", "--json")  # cli's cwd is tmp_path
    assert done.returncode == 0, done.stderr
    [row] = json.loads(cli("sessions", "--json").stdout)
    assert row["model"] == f"scripted:{tmp_path / 's.yaml'}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resumed = _python(["resume", "--last", "again"], home=home, cwd=elsewhere)
    assert (resumed.returncode, resumed.stdout) == (0, b"second\n"), resumed.stderr


TREE = """
lead:
  - calls:
      - tool: subagent
        args: {name: reviewer, description: Review, prompt: Review app.py, run_in_background: true}
    usage: {input_tokens: 10, output_tokens: 1}
  - text: Lead here.
    usage: {input_tokens: 20, output_tokens: 2}
  - text: Lead here.
    usage: {input_tokens: 20, output_tokens: 2}
  - text: Lead here.
    usage: {input_tokens: 20, output_tokens: 2}
reviewer:
  - text: first review
    usage: {input_tokens: 100, output_tokens: 7}
  - text: second review
    usage: {input_tokens: 100, output_tokens: 7}
"""


def test_session_references_and_json_keys(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", TREE)
    ran = json.loads(cli("run", "Review app.py", "--model", spec, "--json").stdout)
    root = ran["session_id"]
    tree = json.loads(cli("tree", root, "--json").stdout)
    # `run --json` reports the lead's own usage and the whole tree's, as `tree --json` does.
    assert ran["usage"] == tree[0]["usage"]
    assert ran["total_usage"] == tree[0]["total_usage"]
    assert ran["total_usage"]["input_tokens"] == sum(r["usage"]["input_tokens"] for r in tree)
    assert ran["total_usage"]["input_tokens"] > ran["usage"]["input_tokens"]

    for reference in (root[:8], root.upper(), "lead"):
        assert json.loads(cli("tree", reference, "--json").stdout) == tree, reference
    assert json.loads(cli("tree", "--last", "--json").stdout) == tree
    assert cli("log", "reviewer", "--session", root[:6]).stdout == cli("log", "reviewer").stdout

    sent = cli("send", "--last", "reviewer", "Once more", "--json")
    assert sent.returncode == 0, sent.stderr
    answer = json.loads(sent.stdout)
    assert answer["output"] == "second review"
    assert (
        set(answer) == set(ran) == {"session_id", "stop_reason", "output", "usage", "total_usage"}
    )

    stopped = cli("interrupt", "--json", "--last", "reviewer")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {
        "session_id": tree[1]["session_id"],
        "name": "reviewer",
        "interrupted": False,
    }


def test_demo_json_has_the_keys_of_run(cli: Cli) -> None:
    done = cli("demo", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert set(shown) == {"session_id", "stop_reason", "output", "usage", "total_usage", "tree"}
    assert "13 words" in shown["output"]
    assert shown["total_usage"] == shown["tree"][0]["total_usage"]


def _header(session: str, created_at: float, *, parent: str | None = None) -> SessionHeader:
    return SessionHeader(
        id=SessionId(session),
        tenant="default",
        created_at=created_at,
        cwd="/",
        parent=SessionId(parent) if parent else None,
        root=SessionId(parent) if parent else None,
        origin="subagent" if parent else "user",
        depth=1 if parent else 0,
        model_spec="scripted:/nowhere.yaml",
    )


async def _store_roots(path: Path, *ids: str) -> None:
    async with SqliteEventStore(path) as store:
        for n, session in enumerate(ids):
            await store.create(_header(session, 1_700_000_000.0 + n))
        await store.flush()


def test_an_ambiguous_prefix_is_refused_with_a_code(cli: Cli, home: Path) -> None:
    first, second = "abcd0000-0000-4000-8000-000000000001", "abcd0000-0000-4000-8000-000000000002"
    asyncio.run(_store_roots(home / "state.db", first, second))
    done = cli("tree", "abcd")
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert "ambiguous" in line
    assert "[AMBIGUOUS_MATCH]" in line
    assert json.loads(cli("tree", first[:-1] + "1", "--json").stdout)[0]["session_id"] == first
    for reference, needle in (("zz", "not a session id"), ("ffff", "no root session")):
        refused = cli("tree", reference)
        assert refused.returncode == 2
        assert needle in _one_line(refused.stderr)


def test_a_failed_turn_prints_no_empty_line_and_max_tokens_says_why(
    cli: Cli, tmp_path: Path
) -> None:
    failed = cli(
        "run", "hi", "--model", write_script(tmp_path / "e.yaml", "lead:\n  - error: boom\n")
    )
    assert (failed.returncode, failed.stdout) == (1, "")
    assert "boom" in _one_line(failed.stderr)
    cut = cli(
        "run", "hi", "--model", write_script(tmp_path / "m.yaml", "lead:\n  - stop: max-tokens\n")
    )
    assert cut.returncode == 1
    assert cut.stdout == ""
    assert _one_line(cut.stderr).startswith(
        "subagents: max-tokens: the model stopped at its output"
    )


FOREGROUND_FAILS = """
lead:
  - calls:
      - tool: subagent
        args: {name: researcher, description: Research, prompt: Find it}
  - text: The researcher failed.
researcher:
  - error: upstream exploded
"""


def test_send_to_a_one_shot_child_says_what_to_do(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", FOREGROUND_FAILS)
    ran = json.loads(cli("run", "go", "--model", spec, "--json").stdout)
    before = json.loads(cli("log", "researcher", "--json").stdout)
    done = cli("send", "--last", "researcher", "try again")
    assert done.returncode == 2
    assert done.stdout == ""
    line = _one_line(done.stderr)
    assert line.startswith(
        "subagents: error: researcher is a one-shot child that ran once and is failed"
    )
    assert "send to its parent (lead)" in line
    assert f"subagents send {ran['session_id']} lead" in line
    assert "[NOT_RESUMABLE]" in line
    assert "send_message" not in line  # the model-facing wording is not for a person
    assert json.loads(cli("log", "researcher", "--json").stdout) == before


def test_the_demo_ships_as_package_data() -> None:
    """`subagents demo` after a non-editable install needs its script in the wheel: it must sit
    in the package and match pyproject's package-data patterns."""
    from subagents.cli._demo import demo_dir

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["subagents"]
    package = root / "src" / "subagents"
    assert demo_dir().resolve() == (package / "cli" / "_demo").resolve()
    data = [p for p in demo_dir().iterdir() if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert [p.name for p in data] == ["demo.yaml"]
    for path in data:
        relative = path.resolve().relative_to(package.resolve()).as_posix()
        assert any(fnmatch(relative, pattern) for pattern in patterns), relative


def test_the_readme_documents_every_status() -> None:
    from subagents.core._status import Status

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    for status in Status:
        assert f"| `{status}` | {status.meaning} |" in readme, status
