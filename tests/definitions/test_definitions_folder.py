"""`DelegationOptions(definitions=<folder>)`: a folder of definition files, as str or Path."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from delegation_support import ToolReply, make_runtime, replies

from subagents import DelegationOptions, Runtime
from subagents.errors import ConfigError, ErrorCode
from subagents.testing import ScriptedModel

REVIEWER = """\
---
name: reviewer
description: Reviews code from the folder.
tools: [read_file]
---
You are the folder reviewer.
"""

SCRIPT = (
    "lead:\n  - calls: [{tool: subagent, args: {description: d, prompt: p, agent: reviewer}}]\n"
    "  - text: ok\nreviewer:\n  - text: reviewed\n"
)


def folder_with_reviewer(tmp_path: Path) -> Path:
    folder = tmp_path / "defs"
    folder.mkdir()
    (folder / "reviewer.md").write_text(REVIEWER, encoding="utf-8")
    (folder / "broken.md").write_text("---\nname: broken\n", encoding="utf-8")
    (folder / "notes.txt").write_text("not a definition", encoding="utf-8")
    return folder


@pytest.mark.parametrize("as_type", [str, Path], ids=["str", "Path"])
async def test_a_folder_of_definition_files_is_read_on_entry(
    tmp_path: Path, as_type: type[str] | type[Path]
) -> None:
    folder = folder_with_reviewer(tmp_path)
    options = DelegationOptions(definitions=as_type(folder))
    rt, model = make_runtime(SCRIPT, delegation=options, cwd=str(tmp_path))
    async with rt:
        assert list(rt.definitions) == ["reviewer"]
        definition = rt.definitions["reviewer"]
        assert (definition.source, definition.tier) == (str(folder / "reviewer.md"), "folder")
        # The bad file is a reported problem, not an exception, and the .txt is not read.
        assert [(p.path, p.line) for p in rt.definition_problems] == [
            (str(folder / "broken.md"), 1)
        ]
        result = await rt.run("go")
        lead = rt.get_agent(result.session_id)
        assert lead is not None
        assert replies(lead) == [ToolReply("subagent", "reviewed", False, None)]
        [child_request] = model.requests_of("reviewer")
        assert "You are the folder reviewer." in child_request.system
        assert [t.name for t in child_request.tools] == ["read_file"]
    model.assert_complete()


async def test_reload_reads_the_folder_again(tmp_path: Path) -> None:
    folder = folder_with_reviewer(tmp_path)
    rt, _ = make_runtime("{}", delegation=DelegationOptions(definitions=folder))
    async with rt:
        (folder / "planner.md").write_text(
            "---\nname: planner\ndescription: Plans.\n---\nPlan.\n", encoding="utf-8"
        )
        await rt.reload_definitions()
        assert list(rt.definitions) == ["planner", "reviewer"]


class FolderLike(os.PathLike[str]):
    """Any os.PathLike is accepted, not only pathlib's."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def __fspath__(self) -> str:
        return str(self._path)


async def test_any_pathlike_is_accepted(tmp_path: Path) -> None:
    folder = folder_with_reviewer(tmp_path)
    rt, _ = make_runtime("{}", delegation=DelegationOptions(definitions=FolderLike(folder)))
    async with rt:
        assert list(rt.definitions) == ["reviewer"]


@pytest.mark.parametrize("as_type", [str, Path], ids=["str", "Path"])
async def test_a_missing_folder_is_a_one_line_config_error_and_opens_nothing(
    tmp_path: Path, as_type: type[str] | type[Path]
) -> None:
    missing = tmp_path / "nowhere"
    store = tmp_path / "state.db"
    options = DelegationOptions(definitions=as_type(missing))
    rt = Runtime(model=ScriptedModel.from_yaml("{}"), store=store, delegation=options)
    with pytest.raises(ConfigError) as caught:
        await rt.__aenter__()
    assert caught.value.code == ErrorCode.CONFIG
    assert caught.value.message == f"definitions folder {str(missing)!r} does not exist"
    # Refused before anything was opened or written.
    assert await asyncio.to_thread(os.listdir, tmp_path) == []


async def test_a_file_is_not_a_folder(tmp_path: Path) -> None:
    file = tmp_path / "reviewer.md"
    file.write_text(REVIEWER, encoding="utf-8")
    rt, _ = make_runtime("{}", delegation=DelegationOptions(definitions=file))
    with pytest.raises(ConfigError, match=r"reviewer.md' is not a directory$"):
        await rt.__aenter__()


@pytest.mark.parametrize("value", [42, ["reviewer.md"], {"reviewer": "reviewer.md"}])
def test_other_values_are_a_config_error(value: object) -> None:
    with pytest.raises(ConfigError, match="definitions must be a mapping of names to"):
        DelegationOptions(definitions=value)  # pyright: ignore[reportArgumentType]
