"""`run --sandbox MODE`: the lead's file policy, recorded in its log and enforced by its tools."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import Cli, write_script

WRITE = "  - calls: [{tool: write_file, args: {path: note.txt, content: hello}}]\n  - text: done\n"


def test_read_only_refuses_a_write_and_records_the_mode(cli: Cli, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    spec = write_script(tmp_path / "s.yaml", "lead:\n" + WRITE)
    done = cli("run", "go", "--model", spec, "--cwd", str(work), "--sandbox", "read-only")
    assert (done.returncode, done.stdout) == (0, "done\n")
    assert not (work / "note.txt").exists()
    events = json.loads(cli("log", "lead", "--json").stdout)
    assert events[0]["kind"] == "sandbox/mode"
    assert events[0]["payload"]["mode"] == "read-only"
    [result] = [e for e in events if e["kind"] == "tool/result"]
    assert result["payload"]["message"]["is_error"] is True
    assert (
        "[sandbox: file access denied under read-only mode]"
        in (result["payload"]["message"]["content"])
    )


def test_workspace_write_writes_in_the_workspace(cli: Cli, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    spec = write_script(tmp_path / "s.yaml", "lead:\n" + WRITE)
    done = cli("run", "go", "--model", spec, "--cwd", str(work))
    assert (done.returncode, done.stdout) == (0, "done\n")
    assert (work / "note.txt").read_text(encoding="utf-8") == "hello"


def test_an_unknown_mode_exits_2_and_writes_nothing(cli: Cli, tmp_path: Path, home: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - text: never\n")
    done = cli("run", "go", "--model", spec, "--sandbox", "yolo")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "subagents: error: --sandbox 'yolo' is not a mode; use one of read-only, "
        "workspace-write, danger-full-access"
    )
    assert not (home / "state.db").exists()


def test_the_store_is_hidden_even_inside_the_workspace(cli: Cli, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    store = work / "state.db"
    spec = write_script(
        tmp_path / "s.yaml",
        "lead:\n"
        "  - calls: [{tool: read_file, args: {path: state.db}}]\n"
        "  - calls: [{tool: bash, args: {command: 'wc -c < state.db; ls'}}]\n"
        "  - text: done\n",
    )
    done = cli("run", "go", "--model", spec, "--cwd", str(work), "--store", str(store))
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
    assert store.stat().st_size > 0
    events = json.loads(cli("log", "lead", "--json", "--store", str(store)).stdout)
    read, shell = [e["payload"]["message"] for e in events if e["kind"] == "tool/result"]
    assert read["is_error"] is True
    assert "the subagents store is hidden from agents" in read["content"]
    # Inside the sandbox the database cannot be opened, though the directory is listed.
    assert "state.db: Permission denied" in shell["content"], shell["content"]
    assert "[sandbox: file access denied under workspace-write mode]" in shell["content"]
