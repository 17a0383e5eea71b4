"""House rules that review alone would not keep: exports, layers, errors, sizes, event kinds."""

from __future__ import annotations

import ast
import importlib
import pickle
import pkgutil
from pathlib import Path

import pytest

import subagents
from subagents import errors
from subagents.sessions._events import EVENT_KINDS

SRC = Path(subagents.__file__).parent

# Imports only go downward (STYLE.md point 1). Same-layer imports are allowed only within one
# subpackage, except at the bottom layer.
LAYERS = {
    "errors": 0,
    "ids": 0,
    "messages": 0,
    "_clock": 0,
    "_tasks": 0,
    "sessions": 1,
    "policy": 1,
    "models": 2,
    "tools": 3,
    "core": 4,
    "workspace": 4,
    "subagents": 5,
    "workflows": 6,
    "testing": 7,
    "__init__": 7,
    "cli": 8,
    "__main__": 9,
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
