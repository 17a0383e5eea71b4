"""The console follows a tree another process runs, and its controls reach that process.

Three kinds of real process: the holder (`subagents run`), the console (`subagents web` on
loopback), and the command processes the console starts for its buttons. Members are kept
busy by a `bash` call waiting for a gate file, so every wait is on an event, never a sleep.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cli_support import write_script
from live_support import StoreView, finished, gate_call, started, wait_until
from web_support import ConsoleProcess, console_process, sse_events

LIVE_SCRIPT = f"""
lead:
  - calls:
      - {{tool: subagent, args: {{name: worker, description: Work, prompt: Work on it,
          run_in_background: true}}}}
      - {gate_call("lead-go")}
  - text: lead done
  - text: lead done
  - text: lead done
  - text: lead done
worker:
  - calls:
      - {gate_call("worker-go")}
  - text: "worker answer: <i>noted</i>"
  - text: "worker answer: <i>noted</i>"
  - text: "worker answer: <i>noted</i>"
"""


class TreeStream:
    """The rows of one tree's SSE stream, folded as the page folds them."""

    def __init__(self, events: Iterator[tuple[str, dict[str, Any]]]) -> None:
        self.events = events
        self.rows: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.records: list[dict[str, Any]] = []
        self.jobs: list[dict[str, Any]] = []
        self.batches = 0

    def by_name(self) -> dict[str, dict[str, Any]]:
        return {row["name"]: row for row in self.rows.values()}

    def until(self, check: Callable[[TreeStream], Any], what: str) -> Any:
        """Read events until `check(self)` is truthy (the stream's own pings bound each read)."""
        for name, data in self.events:
            if name == "tree":
                self.batches += 1
                self.rows.update((row["session_id"], row) for row in data["rows"])
                if data["order"] is not None:
                    self.order = data["order"]
            elif name == "records":
                self.records.extend(data["records"])
            elif name == "jobs":
                self.jobs = data["jobs"]
            found = check(self)
            if found:
                return found
        raise AssertionError(f"the stream ended before {what}")


def text_of(record: dict[str, Any]) -> str:
    """The text blocks of a recorded message."""
    blocks = record["payload"]["message"]["content"]
    return "".join(b["text"] for b in blocks if b.get("kind") == "text")


def job_ended(console: ConsoleProcess, job_id: int) -> dict[str, Any] | None:
    with console.client() as client:
        jobs = client.get("/api/jobs").json()["jobs"]
    job = next(j for j in jobs if j["id"] == job_id)
    return job if job["state"] != "running" else None


def post(console: ConsoleProcess, path: str, body: dict[str, Any]) -> dict[str, Any]:
    with console.client() as client:
        answer = client.post(path, json=body)
    assert answer.status_code == 202, answer.text
    return answer.json()["job"]


def test_the_console_follows_a_running_tree_and_controls_it(
    tmp_path: Path, home: Path, store: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", LIVE_SCRIPT)
    view = StoreView(store)
    with started(home, tmp_path) as start:
        holder = start("run", "Go", "--model", spec, "--json")
        root = wait_until(lambda: view.roots(), "the root session")[0]
        with console_process(home, tmp_path, store=store) as console, console.client() as client:
            with client.stream("GET", f"/api/sessions/{root}/stream") as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                tree = TreeStream(sse_events(response))
                # Members appear and change status while the other process runs them.
                tree.until(lambda t: "lead" in t.by_name(), "the lead's row")
                worker = tree.until(
                    lambda t: (
                        (w := t.by_name().get("worker"))
                        and w["status"] == "running"
                        and w["tools"] == ["bash"]
                        and w
                    ),
                    "the worker running bash",
                )
                assert tree.order[0] == root
                assert tree.by_name()["worker"]["parent"] == "lead"

                # Interrupt from the console: the holder stops the worker's turn.
                job = post(console, f"/api/sessions/{root}/interrupt", {"name": "worker"})
                tree.until(
                    lambda t: t.rows[worker["session_id"]]["status"] == "aborted",
                    "the worker stopped",
                )
                ended = wait_until(lambda: job_ended(console, job["id"]), "the interrupt job")
                assert ended["state"] == "done", ended
                assert ended["result"]["interrupted"] is True
                # A steer joins the lead's running turn (it waits in bash).
                job = post(
                    console,
                    f"/api/sessions/{root}/steer",
                    {"name": "lead", "message": "Also check the tests"},
                )
                steered = wait_until(lambda: job_ended(console, job["id"]), "the steer job")
                assert steered["state"] == "done", steered
                assert steered["result"]["placement"] == "joined"
                assert holder.poll() is None  # the tree never left its holder

            # A message to the worker reaches it in the running tree; its answer tails live.
            member = f"/api/sessions/{root}/stream?member={worker['session_id']}"
            with client.stream("GET", member) as response:
                tree = TreeStream(sse_events(response))
                tree.until(lambda t: t.records, "the worker's records")
                job = post(
                    console,
                    f"/api/sessions/{root}/send",
                    {"name": "worker", "message": "What did you see?"},
                )
                answer = tree.until(
                    lambda t: [
                        r
                        for r in t.records
                        if r["kind"] == "assistant/message" and "worker answer" in text_of(r)
                    ],
                    "the worker's answer",
                )
                assert text_of(answer[0]) == "worker answer: <i>noted</i>"
                entered = [text_of(r) for r in tree.records if r["kind"] == "user/message"]
                assert entered.count("What did you see?") == 1
                sent = wait_until(lambda: job_ended(console, job["id"]), "the send job")
                assert sent["state"] == "done", sent
                assert sent["result"]["output"] == "worker answer: <i>noted</i>"

            (tmp_path / "lead-go").touch()
            status, _, err = finished(holder)
            assert status == 0, err
            # Settled and released, the tree stays listed with every member.
            settled = wait_until(
                lambda: [
                    s
                    for s in client.get("/api/sessions").json()["sessions"]
                    if s["session_id"] == root and not s["held"]
                ],
                "the settled session",
            )
            assert settled[0]["status"] == "completed"
            assert settled[0]["members"] == 2
    commands = view.commands()
    assert [(kind, state) for _, kind, state, _ in commands] == [
        ("interrupt", "done"),
        ("steer", "done"),
        ("send", "done"),
    ]


def test_a_run_started_and_resumed_from_the_console(
    tmp_path: Path, home: Path, store: Path, tree_spec: str
) -> None:
    view = StoreView(store)
    with (
        console_process(home, tmp_path, "--model", tree_spec, store=store) as console,
        console.client() as client,
    ):
        # A prompt that looks like an option is the task itself, never an option.
        job = post(console, "/api/runs", {"prompt": "--help me survey"})
        assert job["kind"] == "run"
        ran = wait_until(lambda: job_ended(console, job["id"]), "the run")
        assert ran["state"] == "done", ran
        root = ran["session_id"]
        assert root in view.roots()
        assert ran["result"]["type"] == "result"
        assert ran["result"]["stop_reason"] == "completed"
        sessions = client.get("/api/sessions").json()["sessions"]
        assert [(s["session_id"], s["prompt"]) for s in sessions] == [(root, "--help me survey")]

        again = post(console, f"/api/sessions/{root}/resume", {"prompt": "And once more"})
        resumed = wait_until(lambda: job_ended(console, again["id"]), "the resume")
        assert resumed["state"] == "done", resumed
        assert resumed["result"]["session_id"] == root
        lead = client.get(f"/api/sessions/{root}/members/{root}/records").json()["records"]
        entered = [text_of(r) for r in lead if r["kind"] == "user/message"]
        assert "And once more" in entered

        # A job that fails keeps its exit status and the one line its command printed.
        broken = post(console, "/api/runs", {"prompt": "go", "model": "scripted:/nowhere.yaml"})
        failed = wait_until(lambda: job_ended(console, broken["id"]), "the failing run")
        assert failed["state"] == "failed"
        assert failed["exit_code"] == 2
        assert failed["error"].startswith("subagents: error: ")
        listed = client.get("/api/jobs").json()["jobs"]
        assert [j["id"] for j in listed] == [broken["id"], again["id"], job["id"]]


def test_a_job_keeps_a_large_result_whole(tmp_path: Path, home: Path, store: Path) -> None:
    big = "x" * 300_000  # several pipe reads: the result is read to its end
    script = f"""
lead:
  - calls:
      - {{tool: subagent, args: {{name: keeper, description: Keep, prompt: Keep,
          run_in_background: true}}}}
  - text: lead done
  - text: lead done
  - text: lead done
keeper:
  - text: ready
  - text: {big}
"""
    spec = write_script(tmp_path / "big.yaml", script)
    with console_process(home, tmp_path, "--model", spec, store=store) as console:
        ran = post(console, "/api/runs", {"prompt": "go"})
        root = wait_until(lambda: job_ended(console, ran["id"]), "the run")["session_id"]
        job = post(console, f"/api/sessions/{root}/send", {"name": "keeper", "message": "all"})
        sent = wait_until(lambda: job_ended(console, job["id"]), "the send")
    assert sent["state"] == "done", sent
    assert sent["result"]["output"] == big
