"""Approvals in the web console: the requests that wait, and approve / deny from the page.

Every tree is a real `subagents run --approve bash` process whose child's `bash` call waits
for a decision; a test learns that it waits from the store (the request is durable before
anything of the call runs), never from a sleep. A tree nobody holds is that process killed
(SIGKILL) while it waits, as after any crash; a held one is the same process left running,
and a decision reaches it through its control channel. The console's buttons are CLI
processes (`subagents approve|deny`), followed to their end through the jobs API.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_support import write_script
from live_support import StoreView, finished, started, wait_until
from playwright.sync_api import Page, expect
from test_browser import ARTIFACTS, browser, member_row, page
from test_console_attacks import ZERO, assert_error, unchanged
from test_live_console import TreeStream, job_ended, post
from web_support import Console, console, console_process, snapshot, sse_events

from subagents.sessions import ApprovalDecided, ToolResultEvent

APPROVAL_SCRIPT = """
lead:
  - calls: [{tool: subagent, args: {name: worker, description: Work, prompt: Work on it}}]
  - text: lead done
  - text: lead done
worker:
  - calls: [{tool: bash, args: {command: "echo ran >> ran.txt"}}]
  - text: worker done
  - text: worker done
"""
COMMAND = "echo ran >> ran.txt"
__all__ = ["browser", "page"]  # the browser test's fixtures, shared with test_browser


@dataclass
class Waiting:
    """A tree whose child `worker` waits for a decision on its `bash` call."""

    root: str
    worker: str
    """The worker's session id."""
    call_id: str
    holder: subprocess.Popen[str]
    view: StoreView


def requested(view: StoreView) -> list[tuple[str, str]]:
    """(session id, call id) of every approval request in the store."""
    return [
        (e.session_id, e.event.call_id)
        for e in view.events()
        if e.kind == "tool/approval-requested"
    ]


@contextmanager
def waiting_tree(tmp_path: Path, home: Path, store: Path) -> Generator[Waiting, None, None]:
    """`subagents run` of `APPROVAL_SCRIPT`, yielded once the worker's request is durable."""
    spec = write_script(tmp_path / "approvals.yaml", APPROVAL_SCRIPT)
    view = StoreView(store)
    with started(home, tmp_path) as start:
        holder = start("run", "Go", "--model", spec, "--approve", "bash", "--json")
        ((worker, call_id),) = wait_until(lambda: requested(view), "the worker's request")
        yield Waiting(view.roots()[0], worker, call_id, holder, view)


@pytest.fixture
def stored(tmp_path: Path, home: Path, store: Path) -> Generator[Waiting, None, None]:
    """A waiting tree whose process was killed: nobody holds it, the request still waits."""
    with waiting_tree(tmp_path, home, store) as tree:
        tree.holder.kill()
        tree.holder.wait()
        yield tree


def ended(page: Console, job_id: int) -> dict[str, Any] | None:
    job = next(j for j in page.jobs() if j["id"] == job_id)
    return job if job["state"] != "running" else None


def started_job(page: Console, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a control; its job once the process ended."""
    answer = page.post(path, body)
    assert answer.status_code == 202, answer.text
    job = answer.json()["job"]
    return wait_until(lambda: ended(page, job["id"]), f"the job of {path}")


def decisions(view: StoreView, session_id: str) -> list[ApprovalDecided]:
    return [e.event for e in view.events(session_id) if isinstance(e.event, ApprovalDecided)]


def rows_by_name(page: Console, root: str) -> dict[str, dict[str, Any]]:
    rows = page.get(f"/api/sessions/{root}/tree").json()["rows"]
    return {row["name"]: row for row in rows}


def test_a_waiting_request_is_listed_and_approved_in_a_tree_nobody_holds(
    store: Path, stored: Waiting
) -> None:
    with console(store) as page:
        listed = page.get(f"/api/sessions/{stored.root}/approvals")
        assert listed.status_code == 200, listed.text
        (request,) = listed.json()["approvals"]
        assert request["root"] == stored.root
        assert request["session_id"] == stored.worker
        assert request["name"] == "worker"
        assert request["call_id"] == stored.call_id
        assert request["tool"] == "bash"
        assert json.loads(request["arguments"]) == {"command": COMMAND}
        assert request["state"] == "pending"
        assert request["held"] is False
        assert request["decided_by"] is None
        assert page.get("/api/approvals").json() == listed.json()

        rows = rows_by_name(page, stored.root)
        assert rows["worker"]["status"] == "waiting for approval"
        assert (rows["worker"]["approvals_pending"], rows["worker"]["approvals_below"]) == (1, 0)
        assert (rows["lead"]["approvals_pending"], rows["lead"]["approvals_below"]) == (0, 1)
        member = page.get(f"/api/sessions/{stored.root}/members/{stored.worker}").json()
        assert member["row"]["approvals_pending"] == 1

        job = started_job(page, f"/api/sessions/{stored.root}/approve", {"name": "worker"})
        assert job["kind"] == "approve"
        assert job["state"] == "done", job
        assert job["result"]["call_id"] == stored.call_id
        assert job["result"]["approved"] is True
        assert job["result"]["applied"] is False  # nobody holds the tree: a resume applies it
        assert job["result"]["by"].startswith("cli:")
        (decision,) = decisions(stored.view, stored.worker)
        assert (decision.call_id, decision.approved) == (stored.call_id, True)
        assert decision.by == job["result"]["by"]

        # Decided, not yet acted on: still listed (the next resume runs it), no longer pending.
        (after,) = page.get(f"/api/sessions/{stored.root}/approvals").json()["approvals"]
        assert (after["state"], after["decided_by"]) == ("approved", decision.by)
        rows = rows_by_name(page, stored.root)
        assert rows["worker"]["status"] != "waiting for approval"
        assert rows["worker"]["approvals_pending"] == rows["lead"]["approvals_below"] == 0

        # A decision is final: a second one is refused, and changes nothing.
        with unchanged(store, page):
            again = page.post(
                f"/api/sessions/{stored.root}/approve",
                {"name": "worker", "call_id": stored.call_id},
            )
            assert_error(again, 409, "ALREADY_DECIDED")
            denied = page.post(
                f"/api/sessions/{stored.root}/deny",
                {"name": "worker", "call_id": stored.call_id, "reason": "too late"},
            )
            assert_error(denied, 409, "ALREADY_DECIDED")
            none_left = page.post(f"/api/sessions/{stored.root}/approve", {"name": "worker"})
            assert_error(none_left, 409, "NO_PENDING_REQUEST")


def test_bad_decisions_are_refused_and_change_nothing(store: Path, stored: Waiting) -> None:
    root = stored.root
    approve, deny = f"/api/sessions/{root}/approve", f"/api/sessions/{root}/deny"
    refused: list[tuple[str, Any, int, str]] = [
        (approve, {"name": "nobody"}, 404, "NOT_FOUND"),
        (approve, {"name": "worker", "call_id": "call-nobody-made"}, 404, "NOT_FOUND"),
        (approve, {"name": "lead"}, 409, "NO_PENDING_REQUEST"),
        (approve, {"name": "worker", "call_id": 7}, 400, "BAD_REQUEST"),
        (approve, {"name": "worker", "call_id": ["x"]}, 400, "BAD_REQUEST"),
        (approve, {"name": "worker", "call_id": " "}, 400, "USAGE"),
        (approve, {"name": "worker", "call_id": "c" * 201}, 400, "USAGE"),
        (approve, {"name": "worker", "reason": "an approval takes none"}, 400, "BAD_REQUEST"),
        (approve, {"name": "worker", "extra": 1}, 400, "BAD_REQUEST"),
        (approve, {}, 400, "BAD_REQUEST"),
        (approve, {"name": ""}, 400, "USAGE"),
        (approve, {"name": "worker/"}, 400, "INVALID_NAME"),
        (approve, ["worker"], 400, "BAD_REQUEST"),
        (deny, {"name": "worker", "reason": "r" * 2001}, 400, "USAGE"),
        (deny, {"name": "worker", "reason": 5}, 400, "BAD_REQUEST"),
        (deny, {"name": "worker", "reason": "nul\x00"}, 400, "BAD_REQUEST"),
        (deny, {"name": "worker", "why": "no"}, 400, "BAD_REQUEST"),
        (f"/api/sessions/{ZERO}/approve", {"name": "worker"}, 404, "NOT_FOUND"),
        (f"/api/sessions/{stored.worker}/deny", {"name": "worker"}, 404, "NOT_FOUND"),
    ]
    with console(store) as page, unchanged(store, page):
        for path, body, status, code in refused:
            response = page.post(path, body)
            assert response.status_code == status, (path, body, response.text)
            assert_error(response, status, code)
        assert_error(page.get(f"/api/sessions/{ZERO}/approvals"), 404, "NOT_FOUND")
        assert_error(page.get(f"/api/sessions/{stored.worker}/approvals"), 404, "NOT_FOUND")
        assert len(page.get(f"/api/sessions/{root}/approvals").json()["approvals"]) == 1

    # Another tenant's console: the tree is not found, and its requests are not listed.
    before = snapshot(store)
    with console(store, tenant="other") as page:
        assert_error(page.get(f"/api/sessions/{root}/approvals"), 404, "NOT_FOUND")
        assert page.get("/api/approvals").json() == {"approvals": []}
        for path in (approve, deny):
            assert_error(page.post(path, {"name": "worker"}), 404, "NOT_FOUND")
        assert page.jobs() == []
    assert snapshot(store) == before
    assert decisions(stored.view, stored.worker) == []


def stream_until(
    tree: TreeStream, approvals: list[list[dict[str, Any]]], check: Callable[[], Any], what: str
) -> Any:
    """Read `tree`'s events, keeping each batch's `approvals` list, until `check()` holds."""
    for name, data in tree.events:
        if name == "tree":
            tree.rows.update((row["session_id"], row) for row in data["rows"])
            if data["approvals"] is not None:
                approvals.append(data["approvals"])
        elif name == "jobs":
            tree.jobs = data["jobs"]
        found = check()
        if found:
            return found
    raise AssertionError(f"the stream ended before {what}")


def test_a_denial_with_a_reason_reaches_the_running_tree_live(
    tmp_path: Path, home: Path, store: Path
) -> None:
    with (
        waiting_tree(tmp_path, home, store) as tree,
        console_process(home, tmp_path, store=store) as page,
        page.client() as client,
        client.stream("GET", f"/api/sessions/{tree.root}/stream") as response,
    ):
        stream = TreeStream(sse_events(response))
        seen: list[list[dict[str, Any]]] = []
        stream_until(
            stream,
            seen,
            lambda: (
                seen
                and seen[-1]
                and stream.by_name().get("worker", {}).get("status") == "waiting for approval"
                and stream.by_name().get("lead", {}).get("approvals_below") == 1
            ),
            "the worker waiting, its request streamed",
        )
        (request,) = seen[-1]
        assert (request["name"], request["call_id"], request["held"]) == (
            "worker",
            tree.call_id,
            True,
        )
        assert stream.by_name()["worker"]["approvals_pending"] == 1

        body = {"name": "/worker", "reason": "--not now; use a dry run"}
        job = post(page, f"/api/sessions/{tree.root}/deny", body)
        assert job["kind"] == "deny"
        stream_until(
            stream,
            seen,
            lambda: (
                seen[-1] == []
                and stream.by_name()["worker"]["status"] != "waiting for approval"
                and stream.by_name()["lead"]["approvals_below"] == 0
            ),
            "the request gone from the stream",
        )
        done = wait_until(lambda: job_ended(page, job["id"]), "the deny job")
        assert done["state"] == "done", done
        assert (done["result"]["approved"], done["result"]["applied"]) == (False, True)
        status, _, err = finished(tree.holder)
        assert status == 0, err
    (decision,) = decisions(tree.view, tree.worker)
    assert (decision.approved, decision.reason) == (False, "--not now; use a dry run")
    assert decision.by.startswith("cli:")
    results = [
        e.event for e in tree.view.events(tree.worker) if isinstance(e.event, ToolResultEvent)
    ]
    assert [r.message.call_id for r in results] == [tree.call_id]
    assert results[0].code == "APPROVAL_DENIED"
    assert "--not now; use a dry run" in results[0].message.content
    assert not (tmp_path / "ran.txt").exists()  # a denied call never runs


def test_approve_from_the_page_and_the_call_runs(
    page: Page, tmp_path: Path, home: Path, store: Path
) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (
        waiting_tree(tmp_path, home, store) as tree,
        console_process(home, tmp_path, store=store) as console,
    ):
        page.goto(console.url)
        page.goto(f"{console.base}/#/s/{tree.root}")
        worker = member_row(page, "worker")
        expect(worker.locator(".status")).to_have_text("waiting for approval")
        expect(member_row(page, "lead").locator(".pending-below")).to_have_text(
            "1 approval pending below"
        )
        expect(worker.locator(".pending-below")).to_be_hidden()

        worker.click()
        request = page.locator(f'#approvals .approval[data-call-id="{tree.call_id}"]')
        expect(request.locator(".approval-tool")).to_have_text("bash")
        expect(request.locator("pre.args")).to_have_text(json.dumps({"command": COMMAND}, indent=2))
        expect(request.locator(".approval-reason")).to_contain_text("bash")
        page.screenshot(path=ARTIFACTS / "approval.png", full_page=True)
        request.locator(".approve-button").click()

        expect(worker.locator(".status")).not_to_have_text("waiting for approval")
        expect(page.locator("#approvals")).to_be_hidden()
        expect(member_row(page, "lead").locator(".pending-below")).to_be_hidden()
        expect(member_row(page, "lead").locator(".status")).to_have_text("completed")
        status, _, err = finished(tree.holder)
    assert status == 0, err
    (decision,) = decisions(tree.view, tree.worker)
    assert decision.approved is True
    assert (tmp_path / "ran.txt").read_text() == "ran\n"  # approved: it ran, once
    assert errors == []
