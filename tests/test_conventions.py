"""House rules that review alone would not keep: exports, layers, errors, sizes, event kinds."""

from __future__ import annotations

import ast
import importlib
import os
import pickle
import pkgutil
import re
from pathlib import Path

import pytest

import subagents
from subagents import errors
from subagents.sessions._events import EVENT_KINDS

SRC = Path(subagents.__file__).parent

# Imports only go downward (docs/design.md §3). Same-layer imports are allowed only within one
# subpackage, except at the bottom layer.
LAYERS = {
    "errors": 0,
    "ids": 0,
    "names": 0,
    "messages": 0,
    "_clock": 0,
    "_task_owner": 0,
    "_yaml": 0,
    "sessions": 1,
    "policy": 1,
    "models": 2,
    "tools": 3,
    "core": 4,
    "workspace": 4,
    "definitions": 5,
    "delegation": 6,
    "workflows": 7,
    "testing": 8,
    "__init__": 8,
    "cli": 9,
    "__main__": 10,
}
LINE_CEILING = 1000
LINE_CEILING_ALLOWLIST: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _top(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = (
        _module_name(path) if path.name == "__init__.py" else _module_name(path).rsplit(".", 1)[0]
    )
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                found.append(".".join([*base, node.module] if node.module else base))
            elif node.module:
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [name for name in found if name == "subagents" or name.startswith("subagents.")]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_go_downward(path: Path) -> None:
    source = _top(_module_name(path))
    for target_name in _imports(path):
        target = _top(target_name)
        assert LAYERS[target] <= LAYERS[source], f"{path.name}: {source} must not import {target}"
        if LAYERS[target] == LAYERS[source] and LAYERS[source] != 0:
            assert target == source, f"{path.name}: {source} must not import sibling {target}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_modules_stay_small(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    rel = str(path.relative_to(SRC))
    assert lines <= LINE_CEILING or rel in LINE_CEILING_ALLOWLIST, f"{rel} has {lines} lines"


def _packages() -> list[str]:
    names = ["subagents"]
    names += [
        info.name
        for info in pkgutil.walk_packages(subagents.__path__, "subagents.")
        if info.ispkg or not info.name.rsplit(".", 1)[-1].startswith("_")
    ]
    return sorted(n for n in names if not n.endswith("__main__"))


@pytest.mark.parametrize("name", _packages())
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert list(exported) == sorted(exported), f"{name}.__all__ is not sorted"
    for item in exported:
        assert hasattr(module, item), f"{name}.__all__ names missing {item!r}"


def _error_classes() -> list[type[errors.SubagentsError]]:
    return [getattr(errors, n) for n in errors.__all__ if n != "ErrorCode"]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_pickles_and_has_a_json_form(cls: type[errors.SubagentsError]) -> None:
    error = cls("something broke; do this", retryable=True, path="/x")
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is cls
    assert (clone.message, clone.code, clone.retryable, clone.fields) == (
        error.message,
        error.code,
        True,
        {"path": "/x"},
    )
    data = error.to_json()
    assert data["code"] == str(cls.default_code)
    rebuilt = cls.from_json(data)
    assert rebuilt.to_json() == data


def test_error_tree_is_drawn_in_the_docstring() -> None:
    doc = errors.__doc__ or ""
    for cls in _error_classes():
        assert cls.__name__ in doc, f"{cls.__name__} is missing from the errors docstring"


def test_event_kinds_are_unique_slash_names() -> None:
    kinds = list(EVENT_KINDS)
    assert len(kinds) == len(set(kinds))
    assert all("/" in kind for kind in kinds)


# -- documentation pointers -------------------------------------------------------------------

ROOT = SRC.parent.parent
DESIGN_DOC = ROOT / "docs" / "design.md"
# What users of the project have: these trees and files. Pointers must stay inside them.
POINTER_SCOPE = (
    "src",
    "tests",
    "bench",
    "docs",
    "examples",
    "README.md",
    "Makefile",
    "pyproject.toml",
)
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules"})
# Files that exist only beside the repository, never in it. Spelled from parts so that this
# test does not find itself.
FOREIGN_POINTERS = re.compile(
    "|".join(
        [
            re.escape(".." + "/shared"),
            re.escape("DESIGN" + ".md"),
            re.escape("BENCHMARKS" + ".md"),
            re.escape("STYLE" + ".md"),
            "spec" + r"/[\w.-]+\.md",
        ]
    )
)
SECTION_SIGN = "\N{SECTION SIGN}"
SECTION_REF = re.compile(SECTION_SIGN + r"(\d+(?:\.\d+)?)")
HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", re.MULTILINE)


def _pointer_files() -> list[Path]:
    """Every text file in `POINTER_SCOPE`, not descending into venvs, caches or hidden dirs."""
    found: list[Path] = []
    for name in POINTER_SCOPE:
        top = ROOT / name
        paths = [top] if top.is_file() else []
        for folder, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
            paths += [Path(folder, n) for n in sorted(names)]
        # Text only: a store file or an image holds no pointer a reader would follow.
        found += [path for path in paths if b"\0" not in path.read_bytes()]
    return found


def _foreign_pointers(text: str) -> list[str]:
    return [match.group(0) for match in FOREIGN_POINTERS.finditer(text)]


def test_foreign_pointer_pattern_finds_what_it_should() -> None:
    """The scan below can fail: each foreign spelling is caught, the repository's own are not."""
    hits = _foreign_pointers(
        "see ../" + "shared/x, DESIGN" + ".md 4.2, BENCHMARKS" + ".md, STYLE" + ".md 14, "
        "spec" + "/core.md 1.6 and spec" + "/workflow-sandbox.md"
    )
    assert len(hits) == 6, hits
    assert _foreign_pointers("docs/design.md §4.2, docs/benchmarks.md, docs/sandbox.md") == []


def test_no_pointer_to_files_users_do_not_have() -> None:
    files = _pointer_files()
    assert DESIGN_DOC in files
    assert ROOT / "README.md" in files
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {hit}"
        for path in files
        for number, line in enumerate(path.read_text("utf-8", "replace").splitlines(), 1)
        for hit in _foreign_pointers(line)
    ]
    assert offenders == [], "point at docs/ instead:\n" + "\n".join(offenders)


def test_every_design_section_cited_exists() -> None:
    """`docs/design.md §N` in code and docs names a numbered section that is really there."""
    sections = set(HEADING.findall(DESIGN_DOC.read_text("utf-8")))
    assert {"1", "3", "4.2", "12"} <= sections
    citing = [
        path
        for path in _pointer_files()
        if path == DESIGN_DOC
        or (
            path.parent != DESIGN_DOC.parent
            and "docs/design.md" in path.read_text("utf-8", "replace")
        )
    ]
    assert len(citing) > 20
    missing = [
        f"{path.relative_to(ROOT)}: {SECTION_SIGN}{ref}"
        for path in citing
        for ref in SECTION_REF.findall(path.read_text("utf-8", "replace"))
        if ref not in sections
    ]
    assert missing == [], "no such section in docs/design.md:\n" + "\n".join(missing)
