"""`subagents demo` gives the same answer on every run, whichever turn takes the reviewer's notice.

A background child's settlement notice joins its parent's running turn (next step) or starts a
new one. The demo's lead starts the reviewer in its last tool step, so its next step is claimed
before the reviewer can have settled and its final answer is the response after the notice.
"""

from __future__ import annotations

import json
from typing import Any

from cli_support import Cli

FINAL = (
    'The motto has 13 words and its longest word is "message" (7 letters, measured by a '
    "workflow). The reviewer finds the wording clear, and its checker found no spelling mistakes."
)


def _text(message: dict[str, Any]) -> str:
    return "".join(b["text"] for b in message["content"] if b["kind"] == "text")


def test_the_demo_answers_after_the_reviewers_notice(cli: Cli) -> None:
    done = cli("demo")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == FINAL
    events = json.loads(cli("log", "lead", "--json").stdout)
    said: list[str] = []
    for event in events:
        payload = event["payload"]
        if event["kind"] == "assistant/message":
            said.append(_text(payload["message"]))
        elif event["kind"] == "user/message":
            source = payload["message"]["source"]
            if source["name"] != "context":  # the runtime-context snapshot
                said.append(f"<{source['kind']}>")
    # The notice comes after the lead's "at work" step (in that turn or a new one), and the
    # final answer is the one response after it: five model calls in every ordering.
    assert said[0] == "<user>"
    assert said[-3:] == [
        "The reviewer is at work; I will answer once its notice arrives.",
        "<subagent-settled>",
        FINAL,
    ]
    assert len([s for s in said if not s.startswith("<")]) == 5
