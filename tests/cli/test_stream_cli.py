"""`--stream` on `run`, `resume` and `send`, run as real subprocesses (docs/streaming.md).

Every stdout line is one JSON object of schema version 1: `event` lines are the records of
every member as `subagents log --json` prints them, `delta` lines the model's output as it
arrived, and the last line is the `result` `--json` prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_support import Cli, write_script

TREE = """
lead:
  - text: Asking the helper.
    calls:
      - tool: subagent
        args: {name: helper, description: Help, prompt: Count the words}
  - text: The helper counted 13 words.
  - text: Still 13.
helper:
  - text: 13 words
"""

# A continuable reviewer that can be messaged later; every later lead answer is the same text
# (its settlement notice may reach the lead within its first turn or start a second one).
CHANNEL = """
lead:
  - calls:
      - tool: subagent
        args: {name: reviewer, description: Review the code, prompt: Review app.py,
               run_in_background: true}
  - text: Lead here.
  - text: Lead here.
  - text: Lead here.
  - text: Lead here.
reviewer:
  - text: first review
  - text: second review
"""

Line = dict[str, Any]


def stream_lines(stdout: str) -> list[Line]:
    lines: list[Line] = []
    for text in stdout.splitlines():
        line: Line = json.loads(text)
        assert line["v"] == 1, text
        assert line["type"] in ("event", "delta", "result"), text
        lines.append(line)
    return lines


def log_json(cli: Cli, name: str, root: str) -> list[Line]:
    done = cli("log", name, "--session", root, "--json")
    assert done.returncode == 0, done.stderr
    events: list[Line] = json.loads(done.stdout)
    return events


def events_by_member(lines: list[Line]) -> dict[str, list[Line]]:
    """The `event` lines per member name, as `log --json` prints events (seq, kind, payload)."""
    found: dict[str, list[Line]] = {}
    for line in lines:
        if line["type"] == "event":
            found.setdefault(line["name"], []).append(
                {key: line[key] for key in ("seq", "kind", "time", "payload")}
            )
    return found


def check_deltas(lines: list[Line]) -> dict[tuple[str, int, int], str]:
    """Each delta line falls inside its step; returns the text joined per (session, turn, step)."""
    started: set[tuple[str, int, int]] = set()
    answered: set[tuple[str, int, int]] = set()
    joined: dict[tuple[str, int, int], str] = {}
    for line in lines:
        if line["type"] == "event" and line["kind"] in ("step/start", "assistant/message"):
            key = (line["session_id"], line["payload"]["turn"], line["payload"]["step"])
            (started if line["kind"] == "step/start" else answered).add(key)
        elif line["type"] == "delta":
            key = (line["session_id"], line["turn"], line["step"])
            assert key in started, line
            assert key not in answered, line
            assert set(line) == {"v", "type", "name", "session_id", "turn", "step", "kind", "text"}
            if line["kind"] == "text":
                joined[key] = joined.get(key, "") + line["text"]
    return joined


def answers(lines: list[Line]) -> dict[tuple[str, int, int], str]:
    """The text of each streamed `assistant/message`, per (session, turn, step)."""
    return {
        (line["session_id"], line["payload"]["turn"], line["payload"]["step"]): "".join(
            block["text"]
            for block in line["payload"]["message"]["content"]
            if block["kind"] == "text"
        )
        for line in lines
        if line["type"] == "event" and line["kind"] == "assistant/message"
    }


def result_of(lines: list[Line]) -> Line:
    last = lines[-1]
    assert last["type"] == "result"
    assert [line["type"] for line in lines].count("result") == 1
    return {key: value for key, value in last.items() if key not in ("v", "type")}


def without_session(result: Line) -> Line:
    return {key: value for key, value in result.items() if key != "session_id"}


def test_run_streams_every_record_and_ends_with_the_json_result(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "tree.yaml", TREE)
    done = cli("run", "How many words?", "--model", spec, "--stream")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no terminal: no live tree, and the run completed
    lines = stream_lines(done.stdout)
    result = result_of(lines)
    root = result["session_id"]

    streamed = events_by_member(lines)
    assert sorted(streamed) == ["helper", "lead"]
    for name, events in streamed.items():
        assert events == log_json(cli, name, root), name
    sessions = {line["name"]: line["session_id"] for line in lines if line["type"] == "event"}
    assert sessions["lead"] == root

    joined = check_deltas(lines)
    assert joined == answers(lines)
    assert sorted(joined.values()) == [
        "13 words",
        "Asking the helper.",
        "The helper counted 13 words.",
    ]

    # The last line is what `--json` prints for the same run, on one line.
    again = cli("run", "How many words?", "--model", spec, "--json")
    assert again.returncode == 0, again.stderr
    printed = json.loads(again.stdout)
    assert without_session(result) == without_session(printed)
    assert set(result) == set(printed)
    assert done.stdout.splitlines()[-1] == json.dumps(
        {"v": 1, "type": "result", **result}, ensure_ascii=False, separators=(",", ":")
    )


def test_resume_streams_what_it_runs(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "tree.yaml", TREE)
    roots: list[str] = []
    for _ in range(2):
        first = cli("run", "How many words?", "--model", spec, "--json")
        assert first.returncode == 0, first.stderr
        roots.append(json.loads(first.stdout)["session_id"])
    before = {name: len(log_json(cli, name, roots[0])) for name in ("lead", "helper")}

    done = cli("resume", roots[0], "And now?", "--stream")
    assert done.returncode == 0, done.stderr
    lines = stream_lines(done.stdout)
    streamed = events_by_member(lines)
    # Only the lead ran: its new records, exactly the tail the log holds now.
    assert list(streamed) == ["lead"]
    assert streamed["lead"] == log_json(cli, "lead", roots[0])[before["lead"] :]
    assert len(log_json(cli, "helper", roots[0])) == before["helper"]
    assert check_deltas(lines) == answers(lines)

    printed = cli("resume", roots[1], "And now?", "--json")
    assert printed.returncode == 0, printed.stderr
    result = result_of(lines)
    assert result["session_id"] == roots[0]
    assert result["output"] == "Still 13."
    assert without_session(result) == without_session(json.loads(printed.stdout))


def test_send_streams_the_tree_it_resumes(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "channel.yaml", CHANNEL)
    roots: list[str] = []
    for _ in range(2):
        first = cli("run", "Review app.py", "--model", spec, "--json")
        assert first.returncode == 0, first.stderr
        roots.append(json.loads(first.stdout)["session_id"])
    before = {name: len(log_json(cli, name, roots[0])) for name in ("lead", "reviewer")}

    done = cli("send", roots[0], "reviewer", "Check it again", "--stream")
    assert done.returncode == 0, done.stderr
    lines = stream_lines(done.stdout)
    streamed = events_by_member(lines)
    assert set(streamed) == {"lead", "reviewer"}
    for name, events in streamed.items():
        assert events == log_json(cli, name, roots[0])[before[name] :], name
    assert check_deltas(lines) == answers(lines)

    printed = cli("send", roots[1], "reviewer", "Check it again", "--json")
    assert printed.returncode == 0, printed.stderr
    result, expected = result_of(lines), json.loads(printed.stdout)
    assert set(result) == set(expected)
    assert (result["output"], result["stop_reason"]) == ("second review", "completed")
    assert (expected["output"], expected["stop_reason"]) == ("second review", "completed")


def one_line_usage_error(done: Any) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return str(lines[0])


def test_stream_and_json_together_are_refused_and_change_nothing(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "tree.yaml", TREE)
    first = cli("run", "How many words?", "--model", spec, "--json")
    assert first.returncode == 0, first.stderr
    root = json.loads(first.stdout)["session_id"]
    sessions = cli("sessions", "--json").stdout
    logs = {name: log_json(cli, name, root) for name in ("lead", "helper")}

    for argv in (
        ("run", "How many words?", "--model", spec),
        ("resume", root, "And now?"),
        ("send", root, "lead", "And now?"),
    ):
        line = one_line_usage_error(cli(*argv, "--stream", "--json"))
        assert line == "subagents: error: give --stream or --json, not both", argv

    assert cli("sessions", "--json").stdout == sessions
    assert {name: log_json(cli, name, root) for name in ("lead", "helper")} == logs


def test_a_run_that_fails_streams_its_result_and_says_why_on_stderr(
    cli: Cli, tmp_path: Path
) -> None:
    spec = write_script(tmp_path / "short.yaml", "lead:\n  - {text: cut, stop: max-tokens}\n")
    done = cli("run", "Go", "--model", spec, "--stream")
    assert done.returncode == 1
    lines = stream_lines(done.stdout)
    assert result_of(lines)["stop_reason"] == "max-tokens"
    assert done.stderr.splitlines() == [
        "subagents: max-tokens: the model stopped at its output token limit (max-tokens); the "
        "answer is cut short"
    ]
