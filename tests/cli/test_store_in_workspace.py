"""A real runtime store inside the workspace, attacked by the lead's own `bash` call.

`subagents run --store <ws>/db/state.db --cwd <ws>`: the scripted lead tries to move the store
directory away, read the store's files and plant a journal beside them. Under bubblewrap the
store is hidden (nothing read, nothing moved or planted); under Landlock the call is refused
(it cannot hide a path inside the workspace it grants). Either way the store stays where it
was and `tree` and `log` read it afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import Cli, write_script

from subagents.policy import confinement
from subagents.policy._confine import BACKEND_ENV

ATTACK = "mv db db-moved; cat db/state.db* | wc -c; touch db/state.db-journal"
SCRIPT = f"lead:\n  - calls: [{{tool: bash, args: {{command: '{ATTACK}'}}}}]\n  - text: done\n"


@pytest.mark.parametrize("backend", ["bwrap", "landlock"])
def test_a_hostile_bash_call_leaves_a_store_in_the_workspace_alone(
    cli: Cli, tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BACKEND_ENV, backend)
    verdict = confinement()
    if verdict.backend is None:
        pytest.skip(f"{backend} is unusable on this machine: {verdict.detail}")
    work = tmp_path / "ws"
    (work / "db").mkdir(parents=True)
    (work / "notes.txt").write_text("the workspace's own file")
    store = work / "db" / "state.db"
    spec = write_script(tmp_path / "s.yaml", SCRIPT)
    env = {BACKEND_ENV: backend}
    done = cli("run", "go", "--model", spec, "--cwd", str(work), "--store", str(store), env=env)
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
    # the store is where it was, nothing was planted beside it
    assert not (work / "db-moved").exists(), "the bash call moved the store directory away"
    assert store.is_file()
    assert not (work / "db" / "state.db-journal").exists(), "a journal was planted"
    assert store.read_bytes().startswith(b"SQLite format 3\x00")
    # and the runtime still reads it
    tree = cli("tree", "lead", "--json", "--store", str(store), env=env)
    assert tree.returncode == 0, tree.stderr
    rows = json.loads(tree.stdout)
    assert [(r["name"], r["status"]) for r in rows] == [("lead", "completed")]
    log = cli("log", "lead", "--json", "--store", str(store), env=env)
    assert log.returncode == 0, log.stderr
    events = json.loads(log.stdout)
    [result] = [e["payload"]["message"] for e in events if e["kind"] == "tool/result"]
    content: str = result["content"]
    if backend == "bwrap":  # hidden: `wc -c` counted no byte of the store
        assert content.splitlines()[0] == "0", content
        assert result["is_error"] is False, content
    else:  # Landlock cannot hide inside the workspace: the call is refused
        assert result["is_error"] is True, content
        assert "cannot enforce" in content, content
