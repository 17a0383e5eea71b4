"""One definition file's frontmatter: the `---` fences, YAML keys with their lines, checks.

Every problem names the file and the line it is about: a YAML error its `problem_mark`, a key
error the key's line. Checks never raise: they record a problem and return a neutral value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import yaml
from jsonschema import Draft202012Validator, SchemaError

from .._yaml import MAX_NESTING as _YAML_NESTING, BoundedLoader, YamlLimitError
from ..config import BUILTIN_ALIASES, resolve_model_name
from ..core import ApprovalPolicy
from ..errors import SubagentsError
from ..messages import JsonObject

__all__ = [
    "BUDGET_KEYS",
    "CLAUDE_KEYS",
    "KEYS",
    "DefinitionProblem",
    "Frontmatter",
    "read_frontmatter",
]

KEYS = (
    "name",
    "description",
    "tools",
    "disallowed_tools",
    "model",
    "context",
    "max_depth",
    "max_tokens",
    "background",
    "output_schema",
    "budget",
    "approval",
    "approval_timeout",
    "approver",
    "mcp_servers",
)
ALIASES = {"disallowedTools": "disallowed_tools", "mcpServers": "mcp_servers"}
"""Claude Code spellings of keys we do use (a deny list is never ignored)."""
CLAUDE_KEYS = frozenset(
    {
        "color",
        "permissionMode",
        "maxTurns",
        "skills",
        "hooks",
        "memory",
        "isolation",
        "effort",
        "initialPrompt",
    }
)
"""Claude Code frontmatter keys this runtime does not use: ignored with a warning."""
BUDGET_KEYS = ("tokens", "model_calls", "children")
MAX_NESTING = _YAML_NESTING
"""Deepest nesting of lists and mappings a frontmatter may have (a deeper one is refused
before it is built, so a hostile file can never exhaust the stack)."""


@dataclass(frozen=True, slots=True)
class DefinitionProblem:
    """Something wrong with a definition file; `skipped` when the file is not used."""

    path: str
    line: int | None
    message: str
    skipped: bool = True

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}" + ("; the file is skipped" if self.skipped else "")


def _shown(value: object) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"


@dataclass(slots=True)
class Frontmatter:
    """One file's keys (`key -> (line, value)`, aliases resolved), body and problems.

    `values` is None when the frontmatter itself is unusable (no fences, bad YAML).
    """

    path: str
    values: dict[str, tuple[int, Any]] | None = None
    body: str = ""
    errors: list[DefinitionProblem] = field(default_factory=list[DefinitionProblem])
    warnings: list[DefinitionProblem] = field(default_factory=list[DefinitionProblem])

    def error(self, line: int | None, message: str) -> None:
        self.errors.append(DefinitionProblem(self.path, line, message))

    def warn(self, line: int | None, message: str) -> None:
        self.warnings.append(DefinitionProblem(self.path, line, message, skipped=False))

    def problems(self) -> list[DefinitionProblem]:
        """Errors and warnings, by line."""
        return sorted(self.errors + self.warnings, key=lambda p: p.line or 0)

    def _get(self, key: str) -> tuple[int, Any] | None:
        return None if self.values is None else self.values.get(key)

    def line_of(self, key: str) -> int:
        found = self._get(key)
        return 1 if found is None else found[0]

    # -- typed checks -------------------------------------------------------------------------

    def text(self, key: str, *, required: bool) -> str | None:
        found = self._get(key)
        if found is None:
            if required:
                self.error(1, f"missing required key `{key}`")
            return None
        line, value = found
        if not isinstance(value, str) or not value.strip():
            self.error(line, f"`{key}` must be non-empty text, got {_shown(value)}")
            return None
        return value.strip()

    def tool_list(self, key: str) -> tuple[str, ...]:
        found = self._get(key)
        if found is None or found[1] is None:
            return ()
        line, value = found
        items: list[Any]
        if isinstance(value, str):
            # A comma inside parentheses belongs to a Claude Code rule: `Agent(worker, tester)`.
            items = [part for part in re.split(r",(?![^(]*\))", value) if part.strip()]
        elif isinstance(value, list):
            items = list(cast("list[Any]", value))
        else:
            self.error(line, f"`{key}` must be a list of tool names or a comma-separated string")
            return ()
        names: list[str] = []
        for item in items:
            if not isinstance(item, str) or not item.strip():
                self.error(line, f"`{key}` must name tools as text, got {_shown(item)}")
                return ()
            if item.strip() not in names:
                names.append(item.strip())
        return tuple(names)

    def model(self, aliases: Mapping[str, str] = BUILTIN_ALIASES, *, claude: bool = False) -> str:
        """`inherit`, or the canonical spec a model spec or alias names.

        A Claude Code file may also give a full model id (`claude-sonnet-4-5`): an Anthropic
        model.
        """
        found = self._get("model")
        if found is None or found[1] is None:
            return "inherit"
        line, value = found
        if not isinstance(value, str):
            self.error(
                line, f"`model` must be `inherit`, an alias or a model spec, got {_shown(value)}"
            )
            return "inherit"
        name = value.strip()
        if name == "inherit":
            return "inherit"
        if claude and name.startswith("claude-") and name not in aliases:
            name = f"anthropic:{name}"
        try:
            return resolve_model_name(name, aliases)
        except SubagentsError as exc:
            self.error(line, f"`model`: {exc.message}, or `inherit` [{exc.code}]")
            return "inherit"

    def mcp_servers(self) -> tuple[tuple[str, ...] | None, dict[str, Any]]:
        """`mcp_servers` (Claude Code's `mcpServers`): configured names and inline servers.

        A list whose items are server names or one-key mappings `{name: {command: ...}}`, or
        one mapping of names to servers. None when the key is absent: the servers of the agent
        that starts it. Inline servers are checked where they are started (the `mcp` package).
        """
        found = self._get("mcp_servers")
        if found is None or found[1] is None:
            return None, {}
        line, value = found
        items: list[Any]
        if isinstance(value, dict):
            items = [{k: v} for k, v in cast("dict[Any, Any]", value).items()]
        elif isinstance(value, list):
            items = list(cast("list[Any]", value))
        else:
            self.error(line, "`mcp_servers` must be a list of server names or inline servers")
            return None, {}
        names: list[str] = []
        inline: dict[str, Any] = {}
        for item in items:
            if isinstance(item, str) and item.strip():
                names.append(item.strip())
            elif isinstance(item, dict) and len(cast("dict[Any, Any]", item)) == 1:
                ((name, server),) = cast("dict[Any, Any]", item).items()
                if not isinstance(name, str) or not isinstance(server, dict):
                    self.error(line, "an inline MCP server is `{name: {command: ...}}`")
                    continue
                inline[name] = server
                names.append(name)
            else:
                shown = _shown(cast("object", item))
                self.error(line, f"`mcp_servers` items are names or inline servers, got {shown}")
        return tuple(dict.fromkeys(names)), inline

    def choice(self, key: str, choices: tuple[str, ...]) -> str | None:
        found = self._get(key)
        if found is None:
            return None
        line, value = found
        if value not in choices:
            self.error(line, f"`{key}` must be one of {', '.join(choices)}, got {_shown(value)}")
            return None
        return str(value)

    def integer(self, key: str, *, minimum: int) -> int | None:
        found = self._get(key)
        if found is None:
            return None
        line, value = found
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.error(line, f"`{key}` must be an integer >= {minimum}, got {_shown(value)}")
            return None
        return value

    def flag(self, key: str) -> bool | None:
        found = self._get(key)
        if found is None:
            return None
        line, value = found
        if not isinstance(value, bool):
            self.error(line, f"`{key}` must be true or false, got {_shown(value)}")
            return None
        return value

    def schema(self, key: str) -> JsonObject | None:
        """A JSON Schema object (checked against Draft 2020-12's meta-schema)."""
        found = self._get(key)
        if found is None:
            return None
        line, value = found
        if not isinstance(value, dict):
            self.error(line, f"`{key}` must be a JSON Schema object, got {_shown(value)}")
            return None
        try:
            schema: JsonObject = json.loads(json.dumps(value))
            Draft202012Validator.check_schema(schema)
        except (TypeError, ValueError) as exc:
            self.error(line, f"`{key}` is not JSON: {exc}")
            return None
        except SchemaError as exc:
            self.error(line, f"`{key}` is not a valid JSON Schema: {exc.message}")
            return None
        return schema

    def approval(self) -> ApprovalPolicy:
        """`approval` (`all` or tool names and patterns) with its `approval_timeout`."""
        gates = self._get("approval")
        timeout = self._get("approval_timeout")
        try:
            tools = ApprovalPolicy.parse(gates[1] if gates is not None else None, what="`approval`")
        except SubagentsError as exc:
            self.error(gates[0] if gates is not None else 1, exc.message)
            return ApprovalPolicy()
        try:
            return ApprovalPolicy.parse(
                tools, timeout=timeout[1] if timeout is not None else None, what="`approval`"
            )
        except SubagentsError as exc:
            self.error(timeout[0] if timeout is not None else 1, exc.message)
            return tools

    def limits(self, key: str, names: tuple[str, ...]) -> dict[str, int] | None:
        """A mapping of some of `names` to positive integers."""
        found = self._get(key)
        if found is None:
            return None
        line, value = found
        if not isinstance(value, dict):
            self.error(line, f"`{key}` must be a mapping of {', '.join(names)}")
            return None
        limits: dict[str, int] = {}
        for name, limit in cast("dict[Any, Any]", value).items():
            if name not in names:
                self.error(line, f"unknown {key} key `{name}`; the keys are: {', '.join(names)}")
            elif isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
                self.error(line, f"{key} `{name}` must be a positive integer, got {_shown(limit)}")
            else:
                limits[str(name)] = limit
        return limits


def read_frontmatter(text: str, *, path: str, claude: bool = False) -> Frontmatter:
    """Split a definition file into its keys and body.

    Unknown keys are errors, except in a Claude Code file (`claude`), whose format grows keys
    this runtime cannot know: there they are warnings.
    """
    found = Frontmatter(path)
    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != "---":
        found.error(
            1,
            "no frontmatter: an agent definition starts with a '---' line, then YAML keys "
            "(name, description, ...), a closing '---' line and the instructions",
        )
        return found
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if close is None:
        found.error(1, "the frontmatter opened on line 1 is never closed with a '---' line")
        return found
    found.values = _keys("\n".join(lines[1:close]), found, claude=claude)
    found.body = "\n".join(lines[close + 1 :]).strip()
    if found.values is not None and not found.body:
        found.error(
            close + 1, "the definition has no instructions: write them below this '---' line"
        )
    return found


def _keys(text: str, found: Frontmatter, *, claude: bool) -> dict[str, tuple[int, Any]] | None:
    """The frontmatter's keys with their line (the file's, so +1 for the opening fence).

    `BoundedLoader` refuses deep nesting, alias bombs and unstorable text while composing,
    before any value is built.
    """
    try:  # the reader checks every character as the loader is built
        loader = BoundedLoader(text, max_nesting=MAX_NESTING)
    except yaml.YAMLError as exc:
        found.error(2, f"invalid YAML: {' '.join(str(exc).split())}")
        return None
    try:
        node = loader.get_single_node()
        if node is None:
            found.error(2, "the frontmatter is empty; `name` and `description` are required")
            return None
        if not isinstance(node, yaml.MappingNode):
            found.error(node.start_mark.line + 2, "the frontmatter must be a mapping of keys")
            return None
        values: dict[str, tuple[int, Any]] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 2
            key = str(key_node.value)
            canonical = _known_key(key, line, found, claude=claude)
            if canonical is None:
                continue
            if canonical in values:
                first = values[canonical][0]
                found.error(line, f"key `{key}` is given twice (first on line {first})")
                continue
            value: Any = loader.construct_object(value_node, deep=True)
            values[canonical] = (line, value)
        return values
    except YamlLimitError as exc:
        found.error(_line_of(exc), f"the frontmatter is refused: {exc.problem}")
        return None
    except yaml.MarkedYAMLError as exc:
        found.error(_line_of(exc), f"invalid YAML: {exc.problem or exc.context or 'cannot parse'}")
        return None
    except yaml.YAMLError as exc:
        found.error(2, f"invalid YAML: {' '.join(str(exc).split())}")
        return None
    except RecursionError:  # a last resort: the loader refuses deep nesting first
        found.error(2, "the frontmatter is nested too deeply to read")
        return None
    finally:
        loader.dispose()


def _known_key(key: str, line: int, found: Frontmatter, *, claude: bool) -> str | None:
    """The key's canonical name, or None (with a warning or an error) when it is not used."""
    if key in CLAUDE_KEYS:
        found.warn(line, f"ignored Claude Code key `{key}`: subagents does not use it")
        return None
    canonical = ALIASES.get(key, key)
    if canonical in KEYS:
        return canonical
    if claude:
        found.warn(line, f"ignored unknown key `{key}`")
    else:
        found.error(line, f"unknown key `{key}`; the keys are: {', '.join(KEYS)}")
    return None


def _line_of(error: yaml.MarkedYAMLError) -> int:
    """The file line of a YAML error (the frontmatter starts on line 2)."""
    mark = error.problem_mark or error.context_mark
    return mark.line + 2 if mark is not None else 2
