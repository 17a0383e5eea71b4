"""Names of a package imported on first use (PEP 562), so a command pays only for what it uses.

A package's `__init__` lists where each public name lives and binds the two module hooks:

    __getattr__, __dir__ = lazy_names(__name__, globals(), {"._store": ("EventStore",)})

The same imports sit under `if TYPE_CHECKING:` for the type checker.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, namespace: MutableMapping[str, Any], sources: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose names live in `sources`' modules.

    `sources` maps a module (relative to `package`) to the names it holds. A name is imported
    the first time it is read, then stored in `namespace` (the package's globals), so later
    reads are plain attribute reads.
    """
    source_of = {name: module for module, names in sources.items() for name in names}

    def get(name: str) -> Any:
        module = source_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def listing() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return get, listing
