"""The live tree is drawn on stderr only when stderr is a terminal."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from cli_support import write_script


def test_live_tree_on_a_terminal(home: Path, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - text: answered on a tty\n")
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUBAGENTS_")}
    env.update(SUBAGENTS_HOME=str(home), TERM="xterm-256color", COLUMNS="100")
    process = subprocess.Popen(
        [sys.executable, "-m", "subagents", "run", "hi", "--model", spec],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        text=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    stdout, _ = process.communicate(timeout=60)
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert process.returncode == 0
    assert stdout == "answered on a tty\n"
    assert "agents" in screen
    assert "lead" in screen
    assert "turn ended completed" in screen
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)  # without colours and cursor moves
    assert "lead completed" in plain  # the status words of `subagents tree`
