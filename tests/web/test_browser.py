"""The console in a real browser (Debian's chromium, driven by Playwright).

A scripted tree runs in another process while the page shows its members appear and change
status; a message typed in the page reaches the named member and its answer appears; an
interrupt from the page stops a running member; model-written markup is shown as text; and
a browser without the token is refused. Screenshots of the tree view and the timeline are
saved as test artifacts (`build/test-artifacts/web/`).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Generator
from pathlib import Path

import pytest
from cli_support import write_script
from live_support import StoreView, finished, started, wait_until
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright
from test_live_console import LIVE_SCRIPT
from web_support import console_process

from subagents.core import CONTEXT_SOURCE
from subagents.sessions import UserMessageEvent

ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS", "build/test-artifacts")) / "web"
WAIT_MS = 60_000
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Generator[Browser, None, None]:
    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail(
                "chromium is missing: `make install` installs it (Debian: apt-get install chromium)"
            )
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Generator[Page, None, None]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    yield opened
    context.close()


def member_row(page: Page, name: str) -> Locator:
    return page.locator(f'#tree [data-member="{name}"]')


def test_a_running_tree_live_in_the_page_with_its_controls(
    page: Page, tmp_path: Path, home: Path, store: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", LIVE_SCRIPT)
    view = StoreView(store)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with started(home, tmp_path) as start:
        holder = start("run", "Go", "--model", spec, "--json")
        root = wait_until(lambda: view.roots(), "the root session")[0]
        with console_process(home, tmp_path, store=store) as console:
            page.goto(console.url)
            assert "token=" not in page.url  # swapped for the cookie
            session = page.locator(f'#sessions tr[data-session-id="{root}"]')
            expect(session).to_be_visible()
            session.locator("a.session-link").click()

            # Members appear and change status while the other process runs them.
            expect(member_row(page, "lead").locator(".status")).to_have_text("running")
            worker = member_row(page, "worker")
            expect(worker.locator(".status")).to_have_text("running")
            expect(worker.locator(".tools")).to_contain_text("bash")
            page.screenshot(path=ARTIFACTS / "tree.png", full_page=True)

            # An interrupt from the page stops the running worker.
            worker.click()
            expect(page.locator("#member-name")).to_have_text("worker")
            page.locator("#interrupt-button").click()
            expect(worker.locator(".status")).to_have_text("aborted")

            # A message typed in the page reaches the worker; its answer appears.
            page.locator("#message-input").fill("What did you see?")
            page.locator("#send-button").click()
            transcript = page.locator("#transcript")
            expect(
                transcript.locator('.entry[data-kind="user/message"]').filter(
                    has_text="What did you see?"
                )
            ).to_have_count(1)
            answer = transcript.locator('.entry[data-kind="assistant/message"]').filter(
                has_text="worker answer"
            )
            # The model's markup is shown as its characters, not as an element.
            expect(answer.first).to_contain_text("worker answer: <i>noted</i>")
            assert transcript.locator("i").count() == 0
            # The runtime context reads as the model is sent it: its blocks joined as they are.
            worker_id = view.children(root)["worker"]
            told = [
                e.event.message.text
                for e in view.events(worker_id)
                if isinstance(e.event, UserMessageEvent)
                and e.event.message.source == CONTEXT_SOURCE
            ]
            shown = transcript.locator(".entry.runtime .text").first.text_content()
            assert len(told) == 1
            assert shown == told[0]

            (tmp_path / "lead-go").touch()
            expect(member_row(page, "lead").locator(".status")).to_have_text("completed")
            page.locator("#timeline-link").click()
            lanes = page.locator("#timeline-svg g.lane")
            expect(lanes).to_have_count(2)
            expect(
                page.locator('#timeline-svg g.lane[data-member="worker"] rect.call')
            ).not_to_have_count(0)
            expect(page.locator("#usage-chart rect.usage-bar")).to_have_count(2)
            page.screenshot(path=ARTIFACTS / "timeline.png", full_page=True)
            status, _, err = finished(holder)
    assert status == 0, err
    kinds = [(kind, state) for _, kind, state, _ in view.commands()]
    assert kinds == [("interrupt", "done"), ("send", "done")]


def test_model_markup_is_text_and_no_script_runs(
    page: Page, tmp_path: Path, home: Path, store: Path, stored_tree: str
) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    with console_process(home, tmp_path, store=store) as console:
        page.goto(console.url)
        page.goto(f"{console.base}/#/s/{stored_tree}/m/{stored_tree}")
        entry = page.locator('#transcript .entry[data-kind="assistant/message"]').filter(
            has_text="lead answer"
        )
        expect(entry.first).to_contain_text(
            "<script>window.__pwned = 1</script><img src=x onerror=window.__pwned=2>"
        )
        assert page.locator("#transcript script, #transcript img, #transcript b").count() == 0
        assert page.evaluate("() => window.__pwned") is None
        expect(member_row(page, "scout").locator(".status")).to_have_text("completed")
    assert errors == []


def test_a_browser_without_the_token_is_refused(
    browser: Browser, tmp_path: Path, home: Path, store: Path
) -> None:
    with console_process(home, tmp_path, store=store) as console:
        context = browser.new_context()
        try:
            page = context.new_page()
            response = page.goto(f"{console.base}/")
            assert response is not None
            assert response.status == 401
            assert "UNAUTHORIZED" in page.content()
            wrong = page.goto(f"{console.base}/?token=not-the-token")
            assert wrong is not None
            assert wrong.status == 401
            assert context.cookies() == []
        finally:
            context.close()


def test_a_member_whose_process_died_is_marked_and_the_tree_let_go(
    page: Page, tmp_path: Path, home: Path, store: Path
) -> None:
    spec = write_script(tmp_path / "s.yaml", LIVE_SCRIPT)
    view = StoreView(store)
    with started(home, tmp_path) as start:
        holder = start("run", "Go", "--model", spec)
        root = wait_until(lambda: view.roots(), "the root session")[0]
        with console_process(home, tmp_path, store=store) as console:
            page.goto(console.url)
            page.goto(f"{console.base}/#/s/{root}")
            lead = member_row(page, "lead")
            expect(lead.locator(".status")).to_have_text("running")
            expect(page.locator("#held")).to_have_text("held")
            holder.kill()
            holder.wait()  # reaped: its pid is gone, as after any SIGKILL
            # No commit follows a kill: the console notices from the lease alone.
            expect(page.locator("#held")).to_have_text("not held")
            expect(lead.locator(".status")).to_have_text("crashed")
            expect(lead).to_have_class(re.compile(r"\bcrashed\b"))
            expect(member_row(page, "worker")).to_have_class(re.compile(r"\bcrashed\b"))
