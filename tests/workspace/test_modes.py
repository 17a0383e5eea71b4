"""Each file tool enforces the caller's sandbox mode itself (docs/design.md §10).

read-only refuses every write; workspace-write refuses writes outside the workspace, however
the path gets there (absolute, `..`, a symlink inside the workspace); reads of $HOME, the store
and /proc are refused under both confined modes; danger-full-access restricts nothing. A refused
call names the mode, carries code SANDBOX_DENIED, and leaves the file system as it was.
"""

from __future__ import annotations

import os

import pytest
from workspace_support import Box

from subagents.errors import ErrorCode
from subagents.messages import JsonObject
from subagents.policy import SandboxMode


def marker(mode: str) -> str:
    return f"[sandbox: file access denied under {mode} mode]"


@pytest.fixture
def world(box: Box) -> Box:
    (box.ws / "a.txt").write_text("alpha\n")
    (box.outside / "o.txt").write_text("outside\n")
    (box.home / "secret.txt").write_text("TOPSECRET\n")
    (box.store / "state.db").write_text("EVERY TENANT'S LOG\n")
    os.symlink(box.outside, box.ws / "out-dir")
    os.symlink(box.outside / "o.txt", box.ws / "out-file")
    os.symlink(box.outside / "new.txt", box.ws / "dangling")
    os.symlink(box.home / "secret.txt", box.ws / "secret-link")
    return box


async def denied(box: Box, tool: str, args: JsonObject, *, mode: SandboxMode) -> str:
    """Call under `mode`, assert a sandbox refusal that changed nothing, return the message."""
    box.mode = mode
    before = box.snapshot()
    outcome = await box.call(tool, args)
    assert outcome.is_error, outcome.content
    assert outcome.code == ErrorCode.SANDBOX_DENIED, outcome.content
    assert outcome.content.endswith(" " + marker(mode)), outcome.content
    assert box.snapshot() == before
    return outcome.content


WRITES: list[tuple[str, JsonObject]] = [
    ("write_file", {"path": "a.txt", "content": "changed"}),
    ("write_file", {"path": "new.txt", "content": "new"}),
    ("edit_file", {"path": "a.txt", "old_string": "alpha", "new_string": "omega"}),
]


@pytest.mark.parametrize(("tool", "args"), WRITES, ids=["write", "create", "edit"])
async def test_read_only_refuses_every_write(world: Box, tool: str, args: JsonObject) -> None:
    text = await denied(world, tool, args, mode="read-only")
    assert "denied: the session is read-only" in text


async def test_read_only_message_names_the_path_and_the_mode(world: Box) -> None:
    text = await denied(world, "write_file", {"path": "a.txt", "content": "x"}, mode="read-only")
    assert text == (
        f"Error: write of 'a.txt' (resolves to {world.ws / 'a.txt'}) denied: the session is "
        "read-only [sandbox: file access denied under read-only mode]"
    )


async def test_read_only_still_reads_and_searches_the_workspace(world: Box) -> None:
    world.mode = "read-only"
    assert await world.ok("read_file", {"path": "a.txt"}) == "     1\talpha"
    assert await world.ok("glob", {"pattern": "*.txt"}) == "a.txt"
    assert await world.ok("grep", {"pattern": "alpha", "glob": "*.txt"}) == "a.txt:1: alpha"


def outside_writes(box: Box) -> list[tuple[str, JsonObject]]:
    o = box.outside
    return [
        ("write_file", {"path": str(o / "x.txt"), "content": "pwned"}),
        ("write_file", {"path": "../outside/x.txt", "content": "pwned"}),
        ("write_file", {"path": "sub/../../outside/x.txt", "content": "pwned"}),
        ("write_file", {"path": "out-dir/x.txt", "content": "pwned"}),
        ("write_file", {"path": "out-file", "content": "pwned"}),
        ("write_file", {"path": "dangling", "content": "pwned"}),
        ("edit_file", {"path": "out-file", "old_string": "outside", "new_string": "pwned"}),
        ("edit_file", {"path": "out-dir/o.txt", "old_string": "outside", "new_string": "pwned"}),
        ("edit_file", {"path": str(o / "o.txt"), "old_string": "outside", "new_string": "x"}),
    ]


async def test_workspace_write_refuses_writes_outside_the_workspace(world: Box) -> None:
    for tool, args in outside_writes(world):
        text = await denied(world, tool, args, mode="workspace-write")
        assert f"denied: it is outside the workspace {world.ws} " in text
    assert not (world.outside / "new.txt").exists()
    assert not (world.outside / "x.txt").exists()
    assert (world.outside / "o.txt").read_text() == "outside\n"


async def test_workspace_write_message_shows_where_a_symlink_leads(world: Box) -> None:
    text = await denied(
        world, "write_file", {"path": "out-dir/x.txt", "content": "x"}, mode="workspace-write"
    )
    assert text == (
        f"Error: write of 'out-dir/x.txt' (resolves to {world.outside / 'x.txt'}) denied: it is "
        f"outside the workspace {world.ws} [sandbox: file access denied under workspace-write "
        "mode]"
    )


async def test_workspace_write_allows_writes_inside_the_workspace(world: Box) -> None:
    assert await world.ok("write_file", {"path": "sub/../b.txt", "content": "b"})
    assert (world.ws / "b.txt").read_text() == "b"
    assert await world.ok("edit_file", {"path": "a.txt", "old_string": "alpha", "new_string": "z"})
    assert (world.ws / "a.txt").read_text() == "z\n"


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_confined_modes_hide_home_store_and_proc(world: Box, mode: SandboxMode) -> None:
    home, store = world.home, world.store
    for tool, args in [
        ("read_file", {"path": str(home / "secret.txt")}),
        ("read_file", {"path": "secret-link"}),
        ("read_file", {"path": "../home/secret.txt"}),
        ("read_file", {"path": str(store / "state.db")}),
        ("read_file", {"path": "/proc/self/environ"}),
        ("glob", {"pattern": "*", "path": str(home)}),
        ("grep", {"pattern": "SECRET", "path": str(home)}),
        ("grep", {"pattern": "LOG", "path": str(store / "state.db")}),
    ]:
        await denied(world, tool, args, mode=mode)
    # A search of the workspace does not follow a symlink into a hidden place.
    world.mode = mode
    out = await world.ok("grep", {"pattern": "TOPSECRET"})
    assert out == (
        "no lines match 'TOPSECRET' under .\n(2 files skipped: unreadable, hidden or too large)"
    )


async def test_confined_reads_elsewhere_are_allowed(world: Box) -> None:
    world.mode = "workspace-write"
    assert await world.ok("read_file", {"path": "out-file"}) == "     1\toutside"
    assert await world.ok("read_file", {"path": str(world.outside / "o.txt")}) == "     1\toutside"
    assert await world.ok("glob", {"pattern": "*", "path": str(world.outside)}) == str(
        world.outside / "o.txt"
    )


async def test_home_holding_the_workspace_hides_only_what_is_outside_it(
    world: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(world.root))
    world.mode = "workspace-write"
    assert await world.ok("read_file", {"path": "a.txt"}) == "     1\talpha"
    text = await denied(
        world, "read_file", {"path": str(world.outside / "o.txt")}, mode="workspace-write"
    )
    assert "the home directory is hidden from agents outside the workspace" in text


async def test_a_store_inside_the_workspace_stays_hidden(
    world: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner = world.ws / ".subagents"
    inner.mkdir()
    (inner / "state.db").write_text("LOG\n")
    monkeypatch.setenv("SUBAGENTS_HOME", str(inner))
    for tool, args in [
        ("read_file", {"path": ".subagents/state.db"}),
        ("write_file", {"path": ".subagents/state.db", "content": "x"}),
        ("edit_file", {"path": ".subagents/state.db", "old_string": "LOG", "new_string": "x"}),
    ]:
        text = await denied(world, tool, args, mode="workspace-write")
        assert "the subagents store is hidden from agents" in text
    world.mode = "workspace-write"
    assert await world.ok("glob", {"pattern": ".*"}) == "no paths match '.*' under ."
    assert ".subagents" not in await world.ok("glob", {"pattern": "**"})
    # An explicit $SUBAGENTS_STORE's directory is hidden as well, whatever the URL's form.
    for url in (str(world.outside / "db"), f"sqlite://{world.outside}/db"):
        monkeypatch.setenv("SUBAGENTS_STORE", url)
        text = await denied(
            world, "read_file", {"path": str(world.outside / "o.txt")}, mode="read-only"
        )
        assert "the subagents store is hidden from agents" in text
    monkeypatch.setenv("SUBAGENTS_STORE", "postgres://elsewhere")  # refused by the runtime
    world.mode = "read-only"
    assert await world.ok("read_file", {"path": str(world.outside / "o.txt")})


async def test_danger_full_access_restricts_nothing(world: Box) -> None:
    world.mode = "danger-full-access"
    assert await world.ok("read_file", {"path": "secret-link"}) == "     1\tTOPSECRET"
    assert await world.ok("write_file", {"path": "out-dir/x.txt", "content": "ok"})
    assert (world.outside / "x.txt").read_text() == "ok"
    assert await world.ok("write_file", {"path": "dangling", "content": "made"})
    assert (world.outside / "new.txt").read_text() == "made"
