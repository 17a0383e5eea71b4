"""The file tools resolve and open in one walk: a concurrent rename cannot redirect them.

The attack: a directory of the workspace swapped for a symlink to a hidden or outside place
(`renameat2(RENAME_EXCHANGE)`, in a loop) while many parallel calls use paths below it. Also
hard links (a write through one name would reach the others), symlinks inside the workspace
(they must keep working), `..` after a symlink (realpath semantics), link loops, the store's
hidden files, and a property: without concurrent changes the walk agrees with `realpath`.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import platform
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st
from workspace_support import Box

from subagents.errors import ErrorCode
from subagents.messages import JsonObject
from subagents.policy import SandboxPolicy
from subagents.tools import ToolContext
from subagents.workspace import _walk
from subagents.workspace._walk import MAX_LINKS, Resolved, resolve


def marker(mode: str) -> str:
    return f"[sandbox: file access denied under {mode} mode]"


# -- the race --------------------------------------------------------------------------------

TOKEN = "HIDDEN-TOKEN-93c2"
Exchange = Callable[[bytes, bytes], int]


def _exchanger() -> Exchange | str:
    """renameat2(RENAME_EXCHANGE) through `syscall`, or why it is unavailable here."""
    if sys.platform != "linux" or platform.machine() != "x86_64":
        where = f"{sys.platform}/{platform.machine()}"
        return f"renameat2 is called as syscall 316, which is x86_64 Linux only (here: {where})"
    syscall = ctypes.CDLL(None, use_errno=True).syscall

    def exchange(a: bytes, b: bytes) -> int:
        return int(syscall(316, -100, a, -100, b, 2))  # AT_FDCWD, RENAME_EXCHANGE

    with tempfile.TemporaryDirectory() as probe:
        a, b = os.path.join(probe, "a"), os.path.join(probe, "b")
        os.mkdir(a)
        os.symlink("a", b)
        if exchange(os.fsencode(a), os.fsencode(b)) != 0:
            return f"renameat2(RENAME_EXCHANGE) fails here: {os.strerror(ctypes.get_errno())}"
    return exchange


class Swapper(threading.Thread):
    """Swaps `a` and `b` until told to stop or a swap fails, at most `max_swaps` times."""

    def __init__(self, exchange: Exchange, a: Path, b: Path, max_swaps: int) -> None:
        super().__init__(name="swapper", daemon=True)
        self._exchange, self._a, self._b = exchange, os.fsencode(a), os.fsencode(b)
        self._max, self.swaps, self.failed = max_swaps, 0, False
        self.stop, self.running = threading.Event(), threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and self.swaps < self._max and not self.failed:
            self.failed = self._exchange(self._a, self._b) != 0
            self.swaps += not self.failed
            self.running.set()  # also on failure: never leave the test waiting


def _tree(*roots: Path) -> dict[str, bytes | None]:
    """Every entry under `roots` (real directories, never swapped): file contents, or None."""
    return {
        os.path.join(top, name): Path(top, name).read_bytes() if name in files else None
        for root in roots
        for top, dirs, files in os.walk(root)
        for name in dirs + files
    }


def _attack_calls(rounds: int) -> list[tuple[str, JsonObject]]:
    calls: list[tuple[str, JsonObject]] = []
    for i in range(rounds):
        calls += [
            ("write_file", {"path": f"d/new-{i}.txt", "content": "made\n"}),
            ("write_file", {"path": f"d/sub-{i}/deep.txt", "content": "made\n"}),
            ("write_file", {"path": "d/f.txt", "content": "marker inside\n"}),
            ("read_file", {"path": "d/f.txt"}),
            ("edit_file", {"path": "d/f.txt", "old_string": "marker", "new_string": "marker!"}),
            ("grep", {"pattern": "marker", "path": "d"}),
        ]
    return calls


@pytest.mark.parametrize("target", ["hidden", "outside"])
async def test_a_directory_swapped_for_a_symlink_never_redirects_a_call(
    box: Box, target: str
) -> None:
    exchange = _exchanger()
    if isinstance(exchange, str):
        pytest.skip(exchange)
    elsewhere = box.store if target == "hidden" else box.outside  # box.store is $SUBAGENTS_HOME
    (box.ws / "d").mkdir()
    (box.ws / "d" / "f.txt").write_text("marker inside\n")
    (elsewhere / "f.txt").write_text(f"marker {TOKEN}\n")
    (box.home / "secret.txt").write_text(f"{TOKEN}\n")
    os.symlink(elsewhere, box.ws / "link")
    before = _tree(box.store, box.outside, box.home)

    swapper = Swapper(exchange, box.ws / "d", box.ws / "link", max_swaps=50_000_000)
    swapper.start()
    try:
        assert await asyncio.to_thread(swapper.running.wait)
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(box.call(n, a)) for n, a in _attack_calls(50)]
        outcomes = [task.result() for task in tasks]
    finally:
        swapper.stop.set()
        swapper.join()
    assert not swapper.failed
    assert swapper.swaps > 0

    assert _tree(box.store, box.outside, box.home) == before  # nothing escaped the workspace
    hidden_seen = [o.content for o in outcomes if TOKEN in o.content]
    if target == "hidden":
        assert hidden_seen == []
    written = [o for o in outcomes if o.content.startswith(("created", "overwrote"))]
    assert written, "no write reached the workspace: the attack proved nothing"
    for outcome in outcomes:
        if outcome.is_error and outcome.code == ErrorCode.SANDBOX_DENIED:
            assert outcome.content.endswith(marker("workspace-write")), outcome.content


# -- hard links ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "a.txt", "content": "pwned\n"}),
        ("edit_file", {"path": "a.txt", "old_string": "original", "new_string": "pwned"}),
    ],
    ids=["write", "edit"],
)
@pytest.mark.parametrize("other", ["outside", "workspace"])
async def test_a_file_with_other_hard_links_is_not_written(
    box: Box, tool: str, args: JsonObject, other: str
) -> None:
    victim = (box.outside if other == "outside" else box.ws) / "victim.txt"
    victim.write_text("original\n")
    os.link(victim, box.ws / "a.txt")
    before = box.snapshot()
    outcome = await box.call(tool, args)
    assert outcome.is_error
    assert outcome.code == ErrorCode.SANDBOX_DENIED
    assert outcome.content == (
        f"Error: write of 'a.txt' (resolves to {box.ws / 'a.txt'}) denied: the file has 2 hard "
        "links; writing it would also change the file under its other names, which are outside "
        f"the tool's control {marker('workspace-write')}"
    )
    assert box.snapshot() == before
    assert victim.read_text() == (box.ws / "a.txt").read_text() == "original\n"


async def test_hard_links_are_still_readable_and_writable_without_confinement(box: Box) -> None:
    (box.outside / "victim.txt").write_text("original\n")
    os.link(box.outside / "victim.txt", box.ws / "a.txt")
    assert await box.ok("read_file", {"path": "a.txt"}) == "     1\toriginal"
    box.mode = "danger-full-access"
    assert await box.ok("write_file", {"path": "a.txt", "content": "shared\n"})
    assert (box.outside / "victim.txt").read_text() == "shared\n"


# -- symlinks that stay inside the workspace --------------------------------------------------


async def test_symlinks_inside_the_workspace_work_for_read_write_and_edit(box: Box) -> None:
    (box.ws / "dir").mkdir()
    real = box.ws / "dir" / "real.txt"
    real.write_text("one\n")
    os.symlink("dir/real.txt", box.ws / "rel-link")
    os.symlink(real, box.ws / "abs-link")
    os.symlink("dir", box.ws / "dir-link")
    for link in ("rel-link", "abs-link", "dir-link/real.txt"):
        assert await box.ok("read_file", {"path": link}) == "     1\tone"
    assert await box.ok("write_file", {"path": "rel-link", "content": "two\n"}) == (
        "overwrote dir/real.txt (4 bytes, 1 lines)"
    )
    assert await box.ok("edit_file", {"path": "abs-link", "old_string": "two", "new_string": "3"})
    assert real.read_text() == "3\n"
    assert await box.ok("write_file", {"path": "dir-link/new/x.txt", "content": "x"}) == (
        "created dir/new/x.txt (1 bytes, 1 lines)"
    )
    assert (box.ws / "dir" / "new" / "x.txt").read_text() == "x"
    assert (box.ws / "rel-link").is_symlink()


async def test_dotdot_after_a_symlink_leaves_the_links_target(box: Box) -> None:
    (box.ws / "a" / "b").mkdir(parents=True)
    (box.ws / "x.txt").write_text("top\n")
    (box.ws / "a" / "x.txt").write_text("in a\n")
    os.symlink("a/b", box.ws / "l")
    assert await box.ok("read_file", {"path": "l/../x.txt"}) == "     1\tin a"
    assert await box.ok("write_file", {"path": "l/../new.txt", "content": "n"}) == (
        "created a/new.txt (1 bytes, 1 lines)"
    )
    # Where a `..` leads outside the workspace, it is refused as the walk saw it.
    os.symlink(box.outside, box.ws / "out")
    outcome = await box.call("write_file", {"path": "out/../outside/y.txt", "content": "y"})
    assert outcome.code == ErrorCode.SANDBOX_DENIED
    assert not (box.outside / "y.txt").exists()


async def test_a_symlink_loop_or_an_overlong_chain_is_a_clear_error(box: Box) -> None:
    os.symlink("loop2", box.ws / "loop1")
    os.symlink("loop1", box.ws / "loop2")
    before = box.snapshot()
    for tool, args in [
        ("read_file", {"path": "loop1"}),
        ("write_file", {"path": "loop1", "content": "x"}),
        ("write_file", {"path": "loop2/x.txt", "content": "x"}),
        ("edit_file", {"path": "loop1", "old_string": "a", "new_string": "b"}),
        ("grep", {"pattern": "x", "path": "loop1"}),
    ]:
        outcome = await box.call(tool, args)
        assert (outcome.code, outcome.content) == (
            ErrorCode.FILE_ERROR,
            f"Error: {args['path']!r}: too many levels of symbolic links (a loop, or a chain of "
            "more than 40)",
        )
    assert box.snapshot() == before
    # A chain of exactly MAX_LINKS links resolves, one more does not (as the kernel counts).
    (box.ws / "end.txt").write_text("end\n")
    os.symlink("end.txt", box.ws / "c1")
    for i in range(2, MAX_LINKS + 2):
        os.symlink(f"c{i - 1}", box.ws / f"c{i}")
    assert await box.ok("read_file", {"path": f"c{MAX_LINKS}"}) == "     1\tend"
    outcome = await box.call("read_file", {"path": f"c{MAX_LINKS + 1}"})
    assert outcome.code == ErrorCode.FILE_ERROR


async def test_a_name_that_keeps_turning_into_a_symlink_gives_up_cleanly(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def always_raced(walker: object, flags: int, **kwargs: object) -> None:
        calls.append("open")
        return None  # as if the final name were a symlink at every open

    monkeypatch.setattr(_walk, "_open_final", always_raced)
    outcome = await box.call("write_file", {"path": "a.txt", "content": "x"})
    assert (outcome.code, outcome.content) == (
        ErrorCode.FILE_ERROR,
        "Error: 'a.txt' kept being replaced by a symlink while it was opened; nothing was "
        "changed, try again",
    )
    assert len(calls) == _walk.MAX_ATTEMPTS
    assert not (box.ws / "a.txt").exists()


# -- the store's files -----------------------------------------------------------------------

STORE_FILES = ("state.db", "state.db-wal", "state.db-shm", "state.db-journal")


@dataclass
class StoreBox(Box):
    """A box whose policy hides a store's directory and its files, as the runtime's does."""

    hidden: tuple[str, ...] = ()

    def policy_for(self, ctx: ToolContext) -> SandboxPolicy:
        return SandboxPolicy(mode=self.mode, workspace_root=self.workspace_root, hidden=self.hidden)


def store_box(root: Path, where: str) -> StoreBox:
    """A fresh tree with a store at `ws/<where>` (HOME and SUBAGENTS_HOME stay `box`'s)."""
    root.mkdir()
    made = StoreBox(root)
    store = made.ws / where
    store.mkdir(exist_ok=True)
    (store / "state.db").write_text(f"{TOKEN} every tenant's log\n")
    (store / "state.db-wal").write_text(f"{TOKEN} wal\n")
    made.hidden = (str(store), *(str(store / name) for name in STORE_FILES))
    return made


@pytest.fixture
def db_store(box: Box) -> StoreBox:
    made = store_box(box.root / "s", "db")
    (made.ws / "db" / "notes.txt").write_text("beside the store\n")
    (made.ws / "a.txt").write_text("free\n")
    os.symlink("db/state.db", made.ws / "db-link")
    return made


@pytest.fixture
def root_store(box: Box) -> StoreBox:
    made = store_box(box.root / "s", ".")
    (made.ws / "a.txt").write_text("free\n")
    (made.ws / "state.db.bak").write_text("not the store\n")
    return made


async def refused(box: Box, tool: str, args: JsonObject) -> None:
    before = box.snapshot()
    outcome = await box.call(tool, args)
    assert outcome.code == ErrorCode.SANDBOX_DENIED, outcome.content
    assert "the subagents store is hidden from agents" in outcome.content
    assert outcome.content.endswith(marker(box.mode))
    assert box.snapshot() == before


async def test_a_store_directory_inside_the_workspace_is_hidden_entirely(
    db_store: StoreBox,
) -> None:
    sbox = db_store
    for path in ("db/state.db", "db/state.db-wal", "db/notes.txt", "db-link", "db"):
        await refused(sbox, "read_file", {"path": path})
    for path in ("db/state.db", "db/state.db-journal", "db/new.txt", "db-link"):
        await refused(sbox, "write_file", {"path": path, "content": "x"})
        await refused(sbox, "edit_file", {"path": path, "old_string": TOKEN, "new_string": "x"})
    assert not (sbox.ws / "db" / "state.db-journal").exists()
    out = await sbox.ok("grep", {"pattern": "."})
    assert TOKEN not in out
    assert "a.txt:1: free" in out
    assert "db/" not in await sbox.ok("glob", {"pattern": "**"})
    assert await sbox.ok("write_file", {"path": "a.txt", "content": "ok\n"})


async def test_a_store_in_the_workspace_root_hides_exactly_its_four_files(
    root_store: StoreBox,
) -> None:
    sbox = root_store
    for name in STORE_FILES:
        await refused(sbox, "read_file", {"path": name})
        await refused(sbox, "write_file", {"path": name, "content": "x"})
    for name in ("state.db-shm", "state.db-journal"):
        assert not (sbox.ws / name).exists()
    assert await sbox.ok("read_file", {"path": "a.txt"}) == "     1\tfree"
    assert await sbox.ok("read_file", {"path": "state.db.bak"}) == "     1\tnot the store"
    assert await sbox.ok("write_file", {"path": "new/b.txt", "content": "b"})
    assert await sbox.ok("edit_file", {"path": "a.txt", "old_string": "free", "new_string": "f"})
    out = await sbox.ok("grep", {"pattern": "."})
    assert TOKEN not in out
    assert out.endswith("(2 files skipped: unreadable, hidden or too large)")  # db and -wal
    # Another name for a store file (a hard link) is the store file.
    await asyncio.to_thread(os.link, sbox.ws / "state.db", sbox.ws / "copy.db")
    await refused(sbox, "read_file", {"path": "copy.db"})
    assert TOKEN not in await sbox.ok("grep", {"pattern": "."})


# -- the walk agrees with realpath -----------------------------------------------------------

NAMES = ("a", "b", "c")
PART = st.sampled_from((*NAMES, "..", "."))


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """(kind, relative path, link target) entries; targets may leave the tree."""
    entries: list[tuple[str, str, str]] = []
    dirs = [""]
    for _ in range(draw(st.integers(1, 8))):
        parent = draw(st.sampled_from(dirs))
        rel = os.path.join(parent, draw(st.sampled_from(NAMES)))
        kind = draw(st.sampled_from(("dir", "file", "rel", "abs")))
        parts = draw(st.lists(PART, min_size=1, max_size=3))
        if kind == "abs":
            start = draw(st.sampled_from(("{root}", "{root}/..", "/")))
            target = "/".join((start, *parts))
        else:
            target = "/".join(parts)
        entries.append((kind, rel, target))
        if kind == "dir":
            dirs.append(rel)
    return entries


def _build(root: str, entries: list[tuple[str, str, str]]) -> None:
    """Make the tree, never through a symlink: links may point anywhere, even at `/`.

    An entry is made only inside a directory this build created (a real directory, never
    replaced), and neither `mkdir`, `symlink` nor `O_CREAT | O_EXCL` follows a final symlink.
    """
    made = {""}
    for kind, rel, target in entries:
        if os.path.dirname(rel) not in made:
            continue
        path = os.path.join(root, rel)
        try:
            if kind == "dir":
                os.mkdir(path)
                made.add(rel)
            elif kind == "file":
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            else:
                os.symlink(target.replace("{root}", root), path)
        except FileExistsError:
            continue  # the name is taken


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=trees(), query=st.lists(PART, min_size=1, max_size=5))
def test_the_walk_resolves_exactly_as_realpath(
    entries: list[tuple[str, str, str]], query: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.realpath(tmp)
        _build(root, entries)
        path = os.path.join(root, *query)
        expected = os.path.realpath(path)
        try:
            with resolve(path) as walked:
                event("outside the tree" if not expected.startswith(root) else "in the tree")
                event("a missing parent" if walked.missing else "parent held")
                assert walked.path == expected
                _same_object(walked, expected)
        except OSError as exc:
            refusal = exc
        else:
            return
        event("ELOOP")
        assert refusal.errno == errno.ELOOP
        # realpath has no link limit: it must have met a loop (its strict mode says so), or the
        # kernel, which counts links as the walk does, refuses the path too.
        if _errno_of(lambda: os.path.realpath(path, strict=True)) == 0:
            assert _errno_of(lambda: os.stat(path)) == errno.ELOOP


def _same_object(walked: Resolved, expected: str) -> None:
    """The walk's parent fd and name (when no parent is missing) are what realpath names."""
    if walked.missing:
        assert not os.path.isdir(os.path.dirname(expected))
        return
    try:
        found = os.stat(walked.name, dir_fd=walked.parent, follow_symlinks=False)
    except FileNotFoundError:
        assert not os.path.lexists(expected)
    else:
        assert os.path.samestat(found, os.lstat(expected))


def _errno_of(call: Callable[[], object]) -> int:
    try:
        call()
    except OSError as exc:
        return exc.errno or -1
    return 0
