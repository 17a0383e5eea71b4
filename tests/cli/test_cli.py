"""The command line, run as a real subprocess: outputs, JSON shapes and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from chat_server import ChatServer, finish_chunk, stream_reply, text_chunk, usage_chunk
from cli_support import Cli, write_script


def test_demo_runs_a_scripted_tree(cli: Cli, home: Path) -> None:
    done = cli("demo")
    assert done.returncode == 0, done.stderr
    assert "13 words" in done.stdout
    assert "lead  [completed]  root" in done.stdout
    assert "    reviewer/checker  [completed]  one-shot" in done.stdout
    assert "  reviewer  [ready]  continuable" in done.stdout
    assert done.stderr == ""  # quiet when stderr is not a terminal
    assert (home / "state.db").exists()

    listed = json.loads(cli("sessions", "--json").stdout)
    assert len(listed) == 1
    row = listed[0]
    assert row["status"] == "completed"
    assert row["tenant"] == "default"
    assert row["created_at"].endswith("Z")

    tree = json.loads(cli("tree", row["session_id"], "--json").stdout)
    assert [(r["name"], r["parent"], r["mode"], r["status"], r["depth"]) for r in tree] == [
        ("lead", None, "root", "completed", 0),
        ("researcher", "lead", "one-shot", "completed", 1),
        ("measure-orphan", "lead", "one-shot", "completed", 1),
        ("measure-message", "lead", "one-shot", "completed", 1),
        ("reviewer", "lead", "continuable", "ready", 1),
        ("reviewer/checker", "reviewer", "one-shot", "completed", 2),
    ]
    assert [r["usage"]["model_calls"] for r in tree] == [5, 2, 1, 1, 2, 1]
    assert tree[0]["total_usage"]["model_calls"] == 12
    assert tree[1]["label"] == "Measure the motto"
    # The workflow's children, started from its sandboxed script, are labelled by the run.
    assert [r["label"] for r in tree[2:4]] == ["word-lengths child 1", "word-lengths child 2"]

    events = json.loads(cli("log", "lead", "--json").stdout)
    kinds = [e["kind"] for e in events]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert kinds[:3] == ["sandbox/mode", "agent/inbox/spliced", "turn/start"]
    assert events[0]["payload"]["mode"] == "workspace-write"
    assert kinds.count("tool/call") == kinds.count("tool/result") == 4
    assert kinds.count("subagent/catalog") == 4
    assert kinds[-1] == "turn/end"
    assert events[-1]["payload"]["reason"] == "completed"

    text = cli("log", "reviewer/checker").stdout
    assert "assistant  No spelling mistakes." in text
    by_path = cli("log", "/reviewer/checker", "--session", row["session_id"]).stdout
    assert by_path == text
    researcher = cli("log", "researcher").stdout
    assert "tool call  text_stats" in researcher
    assert "turn 1 ended completed" in researcher


def test_run_prints_the_answer_and_json(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - text: All good.\n")
    done = cli("run", "check it", "--model", spec)
    assert (done.returncode, done.stdout, done.stderr) == (0, "All good.\n", "")
    as_json = json.loads(cli("run", "check it", "--model", spec, "--json").stdout)
    assert as_json["stop_reason"] == "completed"
    assert as_json["output"] == "All good."
    assert len(as_json["session_id"]) == 36


def test_model_from_environment(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "'*':\n  - text: from env\n")
    done = cli("run", "hi", env={"SUBAGENTS_MODEL": spec})
    assert (done.returncode, done.stdout) == (0, "from env\n")


def test_a_failed_turn_exits_1_with_the_code_on_stderr(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - error: upstream exploded\n")
    done = cli("run", "go", "--model", spec)
    assert done.returncode == 1
    assert done.stderr.strip() == "subagents: MODEL_ERROR: upstream exploded"


def test_max_tokens_and_refusal_exit_1(cli: Cli, tmp_path: Path) -> None:
    for stop in ("max-tokens", "refusal"):
        spec = write_script(
            tmp_path / f"{stop}.yaml", f"lead:\n  - text: partial\n    stop: {stop}\n"
        )
        done = cli("run", "go", "--model", spec, "--json")
        assert done.returncode == 1
        assert json.loads(done.stdout)["stop_reason"] == stop


def test_exhausted_script_names_agent_and_file(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "short.yaml", "lead:\n  - calls: [{tool: nothing}]\n")
    done = cli("run", "go", "--model", spec)
    assert done.returncode == 1
    assert "SCRIPT_EXHAUSTED" in done.stderr
    assert "'lead'" in done.stderr
    assert "short.yaml" in done.stderr


def test_resume_reuses_the_recorded_model(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - error: flaky\n  - text: recovered\n")
    first = cli("run", "go", "--model", spec, "--json")
    assert first.returncode == 1
    session = json.loads(first.stdout)["session_id"]
    resumed = cli("resume", session, "try again")
    assert (resumed.returncode, resumed.stdout) == (0, "recovered\n")
    nothing = cli("resume", session)  # nothing pending: reports where the session stands
    assert (nothing.returncode, nothing.stdout) == (0, "recovered\n")
    tree = json.loads(cli("tree", session, "--json").stdout)
    assert tree[0]["status"] == "completed"
    assert tree[0]["usage"]["model_calls"] == 2


def test_openai_compatible_model_end_to_end(cli: Cli) -> None:
    with ChatServer() as server:
        server.enqueue(
            stream_reply(
                text_chunk("Hello from "),
                text_chunk("loopback."),
                finish_chunk("stop"),
                usage_chunk(11, 4),
            )
        )
        done = cli(
            "run", "say hi", "--model", f"openai-compatible:test-model@{server.base_url}", "--json"
        )
        assert done.returncode == 0, done.stderr
        body = server.bodies[0]
    result = json.loads(done.stdout)
    assert result["output"] == "Hello from loopback."
    assert result["usage"] == {"input_tokens": 11, "output_tokens": 4, "model_calls": 1}
    assert result["total_usage"] == result["usage"]  # a tree of one
    assert body["model"] == "test-model"
    assert body["messages"][-1] == {"role": "user", "content": "say hi"}


def test_tenants_do_not_see_each_other(cli: Cli, tmp_path: Path) -> None:
    spec = write_script(tmp_path / "s.yaml", "lead:\n  - text: mine\n")
    done = cli("run", "go", "--model", spec, "--tenant", "acme", "--json")
    session = json.loads(done.stdout)["session_id"]
    assert json.loads(cli("sessions", "--json", "--tenant", "acme").stdout)[0]["tenant"] == "acme"
    assert json.loads(cli("sessions", "--json").stdout) == []
    other = cli("tree", session)
    assert other.returncode == 2
    assert "not found" in other.stderr
