"""What the command line imports before it does anything: only what the command needs.

Every command pays for the modules it imports before its first line runs, so the app is
defined without the runtime and each command imports its machinery in its body (see
`subagents/cli/_app.py`). These tests run each case in a fresh interpreter and check that the
heavy modules stay out of `sys.modules`. Nothing here is timed (the wall times are measured by
`bench/cli_startup.py`).

Kept out of `import subagents.cli`, `--help`, `sessions` and `tree` (`ALWAYS_OUT`):

- `openai`, `anthropic`: the model SDKs; only a command that calls a model opens an adapter.
- `mcp`, `subagents.mcp`: the MCP SDK and the hub; only a run with servers and `mcp check`.
- `rich`: the live tree on a terminal and `watch`.
- `yaml`: scripted models and definition files (`run`, `demo`, `agents`, `config`).
- `starlette`, `uvicorn`, `subagents.web`: the web console (`web`).
- `subagents.workflows`: the workflow engine and `Runtime`, for the commands that run a tree.
- `subagents.core._loop`, `subagents.delegation._runtime`: the agent loop and the delegation
  runtime, likewise.

Kept out of `import subagents.cli` and `--help` besides (`HELP_OUT`): `jsonschema` (tool and
definition schemas), `asyncio` (no event loop runs), `msgspec` and the store (not `sqlite3`
itself: under `make test` coverage imports it in every subprocess), `importlib.metadata`
(only `--version` reads the package's version).

Kept out of every command that does not call a model: `pydantic`. Typer 0.29 imports it to
coerce every parameter value (80 ms with the `importlib.metadata` its plugin loader imports),
so the project takes Typer below 0.29.

Kept out of `sessions` besides (`SESSIONS_OUT`): `jsonschema`, the runtime's modules and the
store's writer (the command reads the store; the default store path is the store's own,
`sessions.default_store_path`, so the default store needs no runtime either).

`tree` keeps the same out as `sessions`: it reads the stored tree (`delegation._tree`) and
runs nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.main
from cli_support import Cli, cli_runner
from typer.core import TyperGroup
from typer.testing import CliRunner

from subagents.cli._app import app
from subagents.cli._main import app_for
from subagents.core import default_store_path
from subagents.errors import SubagentsError
from subagents.sessions import default_store_path as cli_default_store_path

ALWAYS_OUT = (
    "anthropic",
    "mcp",
    "openai",
    "pydantic",
    "rich",
    "starlette",
    "subagents.core._loop",
    "subagents.delegation._runtime",
    "subagents.mcp",
    "subagents.web",
    "subagents.workflows",
    "uvicorn",
    "yaml",
)
HELP_OUT = (
    *ALWAYS_OUT,
    "asyncio",
    "importlib.metadata",
    "jsonschema",
    "msgspec",
    "subagents.sessions",
)
SESSIONS_OUT = (
    *ALWAYS_OUT,
    "jsonschema",
    "subagents.core._agent",
    "subagents.core._runtime",
    "subagents.sessions._sqlite_link",
    "subagents.sessions._sqlite_process",
    "subagents.tools._pipeline",
)

# Runs the app as the console script does (`subagents = "subagents.cli:main"`), then writes
# the exit status and the imported modules' names to the file named by its first argument.
PROBE = """
import json, sys
out, args = sys.argv[1], sys.argv[2:]
from subagents.cli import main
sys.argv = ["subagents", *args]
try:
    main()
except SystemExit as exc:
    status = exc.code
else:
    status = None
with open(out, "w", encoding="utf-8") as file:
    json.dump({"status": status, "modules": sorted(sys.modules)}, file)
"""
# Only imports the command line, as every command does first.
IMPORT_PROBE = """
import json, sys
import subagents.cli
with open(sys.argv[1], "w", encoding="utf-8") as file:
    json.dump({"status": None, "modules": sorted(sys.modules)}, file)
"""


def _environ(home: Path) -> dict[str, str]:
    """The test's environment without any `SUBAGENTS_*` variable, and `home` as the home."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SUBAGENTS_")}
    return {**base, "SUBAGENTS_HOME": str(home)}


def _modules_after(code: str, *args: str, home: Path, out: Path) -> set[str]:
    """The modules a fresh interpreter holds after running `code` with `out` and `args`."""
    done = subprocess.run(
        [sys.executable, "-c", code, str(out), *args],
        capture_output=True,
        text=True,
        env=_environ(home),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["status"] in (0, None), done.stderr
    return set(report["modules"])


def _command_modules(*args: str, home: Path, out: Path) -> set[str]:
    return _modules_after(PROBE, *args, home=home, out=out)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A home, a store holding the demo's tree, and the tree's root id."""
    base = tmp_path_factory.mktemp("startup")
    home = base / "home"
    home.mkdir()
    cli: Cli = cli_runner(home, base)
    store = base / "store.db"
    done = cli("demo", "--store", str(store), "--json")
    assert done.returncode == 0, done.stderr
    return home, store, json.loads(done.stdout)["session_id"]


def test_importing_the_cli_imports_no_command_machinery(tmp_path: Path) -> None:
    modules = _modules_after(IMPORT_PROBE, home=tmp_path, out=tmp_path / "modules.json")
    assert "subagents.cli._app" in modules  # the probe sees what it should
    assert sorted(modules & set(HELP_OUT)) == []


def test_help_imports_no_command_machinery(tmp_path: Path) -> None:
    modules = _command_modules("--help", home=tmp_path, out=tmp_path / "modules.json")
    assert "typer" in modules
    assert sorted(modules & set(HELP_OUT)) == []


def test_sessions_reads_the_store_without_the_runtime(
    stored: tuple[Path, Path, str], tmp_path: Path
) -> None:
    home, store, _ = stored
    out = tmp_path / "modules.json"
    modules = _command_modules("sessions", "--store", str(store), home=home, out=out)
    assert "subagents.sessions._sqlite" in modules
    assert sorted(modules & set(SESSIONS_OUT)) == []


def test_sessions_on_the_default_store_needs_no_runtime_either(
    stored: tuple[Path, Path, str], tmp_path: Path
) -> None:
    home, store, _ = stored
    (home / "state.db").write_bytes(store.read_bytes())
    modules = _command_modules("sessions", home=home, out=tmp_path / "modules.json")
    assert sorted(modules & set(SESSIONS_OUT)) == []


def test_tree_imports_no_runtime_it_does_not_run(
    stored: tuple[Path, Path, str], tmp_path: Path
) -> None:
    home, store, root = stored
    out = tmp_path / "modules.json"
    modules = _command_modules("tree", root, "--store", str(store), home=home, out=out)
    assert "subagents.delegation._tree" in modules
    assert sorted(modules & set(SESSIONS_OUT)) == []


@pytest.mark.parametrize(
    "environ",
    [
        {"SUBAGENTS_HOME": "/srv/agents"},
        {"SUBAGENTS_HOME": ""},
        {},
        {"SUBAGENTS_STORE": "/data/other.db", "SUBAGENTS_HOME": "/srv/agents"},
        {"SUBAGENTS_STORE": "sqlite:////data/url.db"},
        {"SUBAGENTS_STORE": "relative/state.db"},
        {"SUBAGENTS_STORE": ""},
    ],
)
def test_the_cli_default_store_is_the_runtime_default_store(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("SUBAGENTS_HOME", "SUBAGENTS_STORE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert cli_default_store_path() == default_store_path()


def test_the_cli_default_store_refuses_what_the_runtime_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SUBAGENTS_STORE", "postgres://db/x")
    with pytest.raises(SubagentsError) as runtime:
        default_store_path()
    with pytest.raises(SubagentsError) as cli:
        cli_default_store_path()
    assert (cli.value.code, cli.value.message) == (runtime.value.code, runtime.value.message)


def _help_of(command_line: list[str], *, narrowed: bool) -> str:
    runner = CliRunner()
    chosen = app_for(command_line) if narrowed else app
    done = runner.invoke(chosen, command_line, prog_name="subagents")
    assert done.exit_code == 0, done.output
    return done.output


def test_a_command_line_builds_only_the_command_it_names() -> None:
    whole = typer.main.get_command(app)
    assert isinstance(whole, TyperGroup)
    names = sorted(whole.commands)
    assert {"run", "sessions", "tree", "mcp"} <= set(names)
    for name in names:
        narrowed = typer.main.get_command(app_for([name]))
        assert isinstance(narrowed, TyperGroup)
        assert list(narrowed.commands) == [name]
        # The narrowed app answers as the whole one does, down to its help.
        assert _help_of([name, "--help"], narrowed=True) == _help_of(
            [name, "--help"], narrowed=False
        )


@pytest.mark.parametrize(
    "command_line", [[], ["--help"], ["-h"], ["--version"], ["sesions"], ["--store", "x", "tree"]]
)
def test_help_options_and_unknown_names_get_the_whole_app(command_line: list[str]) -> None:
    assert app_for(command_line) is app
