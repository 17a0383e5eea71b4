"""House rules that review alone would not keep: exports, layers, errors, sizes, event kinds."""

from __future__ import annotations

import ast
import importlib
import inspect
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
    "_lazy": 0,
    "_resource": 0,
    "_task_owner": 0,
    "_yaml": 0,
    "sessions": 1,
    "policy": 1,
    "models": 2,
    "config": 3,
    "tools": 3,
    "core": 4,
    "workspace": 4,
    "mcp": 4,
    "definitions": 5,
    "delegation": 6,
    "workflows": 7,
    "testing": 8,
    "__init__": 8,
    "web": 9,
    "cli": 10,
    "__main__": 11,
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
    package = (
        _module_name(path) if path.name == "__init__.py" else _module_name(path).rsplit(".", 1)[0]
    )
    return _imports_in(path.read_text(encoding="utf-8"), package)


def _imports_in(text: str, package: str) -> list[str]:
    """The `subagents` modules that `text`, a module of `package`, imports (absolute names)."""
    tree = ast.parse(text)
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
    # Complete (httpx's rule): every public class or function the package binds, defined in it
    # or below it, is in `__all__`.
    unlisted = [
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and (value.__module__ == name or value.__module__.startswith(f"{name}."))
        and attr not in exported
    ]
    assert unlisted == [], f"{name} binds public names missing from __all__: {unlisted}"


def _own_doc(value: object) -> str | None:
    """A class's own docstring (not one it inherits), or a function's."""
    return vars(value).get("__doc__") if inspect.isclass(value) else getattr(value, "__doc__", None)


@pytest.mark.parametrize("name", _packages())
def test_every_exported_class_and_function_has_a_docstring(name: str) -> None:
    module = importlib.import_module(name)
    undocumented = [
        item
        for item in getattr(module, "__all__", ())
        if (inspect.isclass(value := getattr(module, item)) or inspect.isfunction(value))
        and not (_own_doc(value) or "").strip()
    ]
    assert undocumented == [], f"{name} exports these without a docstring: {undocumented}"


def test_the_docstring_rule_sees_inherited_docstrings_as_missing() -> None:
    class Base:
        """Documented."""

    class Child(Base):
        pass

    assert _own_doc(Base) == "Documented."
    assert _own_doc(Child) is None


def _private_module(parts: list[str]) -> bool:
    return any(part.startswith("_") for part in parts[2:])


# Cross-package imports of a private module that stay, each with its reason. A package's
# `__init__` is its contract; these reach past it on purpose.
PRIVATE_IMPORT_ALLOWED: dict[tuple[str, str], str] = {}


def _cross_package_private_imports(source: str, targets: list[str]) -> list[str]:
    """The private modules of other top-level packages among `source`'s imports."""
    return [t for t in targets if _top(t) != _top(source) and _private_module(t.split("."))]


def test_the_private_import_rule_finds_what_it_should() -> None:
    """The scan can fail: another package's private module is caught, its `__init__` is not,
    and a private module of the importer's own package is its own business."""
    text = (
        "from ..sessions._repair import crash_recovery\n"
        "from ..sessions import fold\n"
        "from ._render import dumps\n"
        "from ...core._status import Status\n"
    )
    imports = _imports_in(text, "subagents.cli.sub")
    # From a subpackage, `..` stays inside cli: only the `...` import leaves it.
    assert _cross_package_private_imports("subagents.cli.sub.probe", imports) == [
        "subagents.core._status"
    ]
    flat = _imports_in(text, "subagents.cli")
    assert _cross_package_private_imports("subagents.cli.probe", flat) == [
        "subagents.sessions._repair"
    ]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_packages_meet_only_through_their_init(path: Path) -> None:
    source = _module_name(path)
    found = [
        target
        for target in _cross_package_private_imports(source, _imports(path))
        if (source, target) not in PRIVATE_IMPORT_ALLOWED
    ]
    assert found == [], f"{source} imports private modules of other packages: {found}"


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


# Exception classes defined outside `errors.py`, each with why no user ever catches it there.
EXCEPTIONS_OUTSIDE_ERRORS = {
    "subagents._yaml.YamlLimitError": "a YAML error with a mark; the loaders turn it into a "
    "ConfigError or a definition problem",
    "subagents.models._openai._ConnectionRefused": "the adapter's own retry signal; it leaves "
    "as a ModelError",
    "subagents.policy._launcher.LaunchError": "raised inside the stdlib-only launcher process, "
    "which reports by exit status",
    "subagents.workflows._guest.HostError": "guest process (stdlib only, no package imports)",
    "subagents.workflows._guest.NotJson": "guest process (stdlib only, no package imports)",
    "subagents.workflows._guest.ScriptParseError": "guest process (stdlib only, no package "
    "imports); the host reports a parse failure as the run's error",
    "subagents.workflows._guest.WorkflowError": "guest process (stdlib only, no package imports)",
    "subagents.workflows._protocol.ProtocolError": "the channel's framing failure; the script "
    "runtime turns it into the run's protocol failure",
    "subagents.workspace._walk.NotRegularFile": "an OSError the file tools report as a ToolError",
    "subagents.workspace._walk.PathRaced": "an OSError the file tools report as a ToolError",
}


def _exception_classes() -> list[str]:
    """Every exception class defined in a module of the package, by qualified name."""
    found: list[str] = []
    for path in _modules():
        name = _module_name(path)
        if name.endswith("__main__"):
            continue  # importing it runs the CLI
        module = importlib.import_module(name)
        found += [
            f"{name}.{value.__qualname__}"
            for value in vars(module).values()
            if inspect.isclass(value)
            and issubclass(value, BaseException)
            and value.__module__ == name
        ]
    return found


def test_every_exception_a_user_can_catch_is_in_errors() -> None:
    found = _exception_classes()
    assert "subagents.errors.ConfigError" in found  # the scan sees errors.py too
    outside = sorted(c for c in found if not c.startswith("subagents.errors."))
    assert outside == sorted(EXCEPTIONS_OUTSIDE_ERRORS), (
        "define a new exception in errors.py (or give it a reason here)"
    )


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
