"""The console's JSON API over a real store: what the pages read, and how bad input is refused."""

from __future__ import annotations

from pathlib import Path

from web_support import console as local_console


def test_sessions_tree_member_records_and_timeline(store: Path, stored_tree: str) -> None:
    with local_console(store) as console:
        sessions = console.get("/api/sessions").json()["sessions"]
        assert [s["session_id"] for s in sessions] == [stored_tree]
        row = sessions[0]
        assert row["status"] == "completed"
        assert row["held"] is False
        assert row["members"] == 3
        assert row["prompt"] == "Survey <the> repo"
        assert row["total_usage"]["model_calls"] >= 4

        tree = console.get(f"/api/sessions/{stored_tree}/tree").json()
        names = [(r["name"], r["parent"], r["mode"], r["status"]) for r in tree["rows"]]
        assert names == [
            ("lead", None, "root", "completed"),
            ("scout", "lead", "one-shot", "completed"),
            ("keeper", "lead", "continuable", "ready"),
        ]
        scout = tree["rows"][1]
        details = console.get(f"/api/sessions/{stored_tree}/members/{scout['session_id']}").json()
        assert details["name"] == "scout"
        assert details["sandbox"] == "workspace-write"
        assert details["model"].startswith("scripted:")
        assert details["row"]["status"] == "completed"

        first = console.get(
            f"/api/sessions/{stored_tree}/members/{scout['session_id']}/records",
            limit="3",
        ).json()
        assert [r["seq"] for r in first["records"]] == [0, 1, 2]
        rest = console.get(
            f"/api/sessions/{stored_tree}/members/{scout['session_id']}/records",
            **{"from": str(first["next"])},
        ).json()
        kinds = [r["kind"] for r in first["records"] + rest["records"]]
        assert kinds[0] == "subagent/descriptor"
        assert "assistant/message" in kinds
        assert kinds[-1] == "turn/end"

        timeline = console.get(f"/api/sessions/{stored_tree}/timeline").json()
        lanes = {lane["name"]: lane for lane in timeline["lanes"]}
        assert list(lanes) == ["lead", "scout", "keeper"]
        assert all(span["end"] is not None for span in lanes["scout"]["turns"])
        assert [c["label"] for c in lanes["lead"]["calls"]][:2] == ["subagent", "subagent"]
        links = {(link["parent"], link["child"]) for link in timeline["links"]}
        assert (tree["rows"][0]["session_id"], scout["session_id"]) in links
