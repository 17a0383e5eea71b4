"""A stray slash in a name is an error, never a near miss for the name without it.

`kid/`, `//kid` and `a//b` used to resolve as `kid` and `a/b`; one leading `/` stays the
documented absolute form (`/reviewer/checker`, a path from the root).
"""

from __future__ import annotations

import pytest
from delegation_support import make_runtime
from test_names import TREE_SCRIPT

from subagents.delegation import resolve_name
from subagents.delegation._catalog import check_name_path, store_readers
from subagents.errors import ErrorCode, SubagentError
from subagents.ids import SessionId

MALFORMED = [
    ("reviewer/", "a slash may only separate two names"),
    ("//reviewer", "a slash may only separate two names"),
    ("reviewer//checker", "a slash may only separate two names"),
    ("reviewer/checker/", "a slash may only separate two names"),
    ("/", "a slash may only separate two names"),
    ("///", "a slash may only separate two names"),
    ("", "the name is empty"),
    ("Reviewer", "each part must be a name"),
    ("lead/reviewer", "each part must be a name"),
]


@pytest.mark.parametrize(("path", "problem"), MALFORMED)
def test_a_malformed_path_is_an_invalid_name(path: str, problem: str) -> None:
    with pytest.raises(SubagentError) as caught:
        check_name_path(path)
    assert caught.value.code == ErrorCode.INVALID_NAME
    assert caught.value.message.startswith(f"invalid agent name {path!r}: {problem}")
    assert "\n" not in caught.value.message


@pytest.mark.parametrize("path", ["reviewer", "reviewer/checker", "/reviewer", "lead", "/lead"])
def test_a_full_name_passes_unchanged(path: str) -> None:
    assert check_name_path(path) == path


async def test_stray_slashes_resolve_to_nobody() -> None:
    rt, _ = make_runtime(TREE_SCRIPT)
    async with rt:
        result = await rt.run("go")
        read, _ = store_readers(rt.store, rt.tenant)

        async def resolve(path: str) -> SessionId | None:
            return await resolve_name(read, start=result.session_id, path=path)

        reviewer = await resolve("reviewer")
        checker = await resolve("reviewer/checker")
        assert reviewer is not None
        assert checker is not None
        assert await resolve("/reviewer") == reviewer
        for path, _ in MALFORMED:
            assert await resolve(path) is None, path
        # The near misses that used to resolve:
        assert await resolve("reviewer/checker/") is None
        assert await resolve("//reviewer/checker") is None
