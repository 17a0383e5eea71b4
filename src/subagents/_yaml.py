r"""The one YAML loader for files a user hands us: definition frontmatter and model scripts.

PyYAML's `SafeLoader` constructs no arbitrary objects, but a hostile document can still hurt:
aliases share nodes, so nine lines of "billion laughs" expand to a billion strings as soon as
anything walks the value (`repr`, `json.dumps`); an alias may refer to itself; a collection
nested thousands of levels deep recurses through the composer; `\ud800` escapes yield text
that cannot be stored; and an integer of 5,000 digits raises a bare `ValueError`. The
`BoundedLoader` refuses each of these with a `YamlLimitError`, which is a `MarkedYAMLError`,
so callers that already report YAML errors with their line report these too.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_NESTING",
    "BoundedLoader",
    "YamlLimitError",
    "load_bounded",
]

MAX_NESTING = 64
"""Deepest nesting of lists and mappings; deeper is refused before it is composed."""
MAX_ALIAS_NODES = 10_000
"""How many nodes aliases may add to a document beyond the ones written in it."""


class YamlLimitError(yaml.MarkedYAMLError):
    """A document refused for its shape (nesting, aliases, text, numbers), with its mark."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


class BoundedLoader(yaml.SafeLoader):
    """A `SafeLoader` that refuses deep nesting, alias bombs, lone surrogates and huge ints."""

    def __init__(self, stream: str, *, max_nesting: int = MAX_NESTING) -> None:
        super().__init__(stream)
        self.max_nesting = max_nesting
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        # Counted here, before the composer recurses, so depth never reaches the stack limit.
        if not self.check_event(yaml.CollectionStartEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > self.max_nesting:
                mark: Any = self.peek_event().start_mark  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
                raise YamlLimitError(
                    f"lists or mappings nest more than {self.max_nesting} levels deep", mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node: yaml.Node | None = super().compose_document()
        if node is not None:
            _check_graph(node)
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)  # pyright: ignore[reportUnknownMemberType]
        except ValueError as exc:  # int() over the digit limit, a bad base-60 number
            if isinstance(exc, yaml.YAMLError):
                raise
            # Python's own advice (set_int_max_str_digits) is for programmers, so it is cut.
            reason = str(exc).split(";")[0]
            raise YamlLimitError(f"cannot read this value: {reason}", node.start_mark) from exc


def load_bounded(text: str) -> object:
    """`yaml.safe_load(text)` through `BoundedLoader`; raises `yaml.YAMLError`."""
    loader = BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        pairs: list[tuple[yaml.Node, yaml.Node]] = node.value
        return [part for pair in pairs for part in pair]
    if isinstance(node, yaml.SequenceNode):
        items: list[yaml.Node] = node.value
        return items
    return []


def _check_graph(root: yaml.Node) -> None:
    """Refuse recursive aliases, expansion over `MAX_ALIAS_NODES` and unencodable text.

    An iterative depth-first walk over distinct nodes (aliases make the tree a graph), so it is
    linear in the document; `expanded` counts each node as often as the value would hold it.
    """
    expanded: dict[int, int] = {}
    on_path: set[int] = set()
    written = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            on_path.discard(key)
            expanded[key] = 1 + sum(expanded[id(child)] for child in _children(node))
            if expanded[key] - written > MAX_ALIAS_NODES:
                raise YamlLimitError(
                    f"aliases expand the document by more than {MAX_ALIAS_NODES} nodes",
                    node.start_mark,
                )
            continue
        if key in expanded:
            continue
        if key in on_path:
            raise YamlLimitError(
                "an alias refers to a collection that contains it", node.start_mark
            )
        written += 1
        if isinstance(node, yaml.ScalarNode):
            _check_text(node)
            expanded[key] = 1
            continue
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))


def _check_text(node: yaml.ScalarNode) -> None:
    value: str = node.value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start].encode("utf-8", "backslashreplace").decode("ascii")
        raise YamlLimitError(
            f"the text holds {bad}, a lone surrogate that is not valid Unicode text",
            node.start_mark,
        ) from None
