from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import Cli, cli_runner, write_script

# A lead that starts a one-shot child (which answers) and a background (continuable) one, then
# answers; the texts carry markup a console must show as text. The keeper's notice may start
# a lead turn of its own, so every lead answer is the same.
TREE_SCRIPT = """
lead:
  - calls:
      - {tool: subagent, args: {name: scout, description: Scout it, prompt: Look around}}
      - {tool: subagent, args: {name: keeper, description: Keep notes, prompt: Take notes,
          run_in_background: true}}
  - text: &answer
      "lead answer <script>window.__pwned = 1</script><img src=x onerror=window.__pwned=2>"
  - text: *answer
  - text: *answer
  - text: *answer
  - text: *answer
scout:
  - text: scout found <b>bold</b> things
keeper:
  - text: keeper ready
  - text: keeper noted it
  - text: keeper noted it
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def cli(home: Path, tmp_path: Path) -> Cli:
    """Run `python -m subagents ...` in a real subprocess with an isolated SUBAGENTS_HOME."""
    return cli_runner(home, tmp_path)


@pytest.fixture
def store(home: Path) -> Path:
    return home / "state.db"


@pytest.fixture
def tree_spec(tmp_path: Path) -> str:
    return write_script(tmp_path / "tree.yaml", TREE_SCRIPT)


@pytest.fixture
def stored_tree(cli: Cli, tree_spec: str) -> str:
    """A settled tree in the store (lead, scout, keeper); its root's session id."""
    done = cli("run", "Survey <the> repo", "--model", tree_spec, "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["session_id"])
