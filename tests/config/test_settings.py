"""Settings files: tiers merged key by key, origins, overrides, and every bad file refused."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st

from subagents.config import Settings, load_settings
from subagents.errors import ConfigError, ErrorCode

USER = """\
model = "openai:gpt-5-mini"
sandbox = "read-only"

[aliases]
fast = "openai:gpt-5-mini"
sonnet = "openai:gpt-5"

[budget]
tokens = 1000
children = 3

[concurrency]
background_tasks = 4
"""

PROJECT = """\
# the project's own choices
model = "fast"

[budget]
tokens = 50
"""


def tiers(
    tmp_path: Path, *, project: str | None = None, user: str | None = None
) -> tuple[Path, Path]:
    cwd, home = tmp_path / "proj", tmp_path / "home"
    (cwd / ".subagents").mkdir(parents=True)
    home.mkdir()
    if project is not None:
        (cwd / ".subagents" / "config.toml").write_text(project, encoding="utf-8")
    if user is not None:
        (home / "config.toml").write_text(user, encoding="utf-8")
    return cwd, home


def values(settings: Settings) -> dict[str, tuple[str, str]]:
    return {key: (value, origin) for key, value, origin in settings.rows()}


def test_the_project_wins_key_by_key_and_every_value_says_where_it_came_from(
    tmp_path: Path,
) -> None:
    cwd, home = tiers(tmp_path, project=PROJECT, user=USER)
    settings = load_settings(cwd, home, "default", environ={})
    project, user = cwd / ".subagents" / "config.toml", home / "config.toml"
    assert values(settings) == {
        "model": ("openai:gpt-5-mini", f"{project}:2"),
        "sandbox": ("read-only", f"{user}:2"),
        "aliases.fast": ("openai:gpt-5-mini", f"{user}:5"),
        "aliases.haiku": ("anthropic:claude-haiku-4-5", "built-in"),
        "aliases.opus": ("anthropic:claude-opus-4-5", "built-in"),
        "aliases.sonnet": ("openai:gpt-5", f"{user}:6"),
        "budget.children": ("3", f"{user}:10"),
        "budget.tokens": ("50", f"{project}:5"),
        "concurrency.background_tasks": ("4", f"{user}:13"),
    }
    assert settings.files == (str(project), str(user))
    assert settings.int_of("budget", "tokens") == 50
    assert settings.sandbox_mode == "read-only"


def test_environment_then_flags_override_the_files(tmp_path: Path) -> None:
    cwd, home = tiers(tmp_path, project=PROJECT, user=USER)
    settings = load_settings(
        cwd,
        home,
        "default",
        environ={"SUBAGENTS_MODEL": "sonnet", "SUBAGENTS_SANDBOX": "workspace-write"},
    )
    assert settings.model is not None
    assert (settings.model.value, settings.model.origin) == ("openai:gpt-5", "$SUBAGENTS_MODEL")
    assert settings.sandbox.origin == "$SUBAGENTS_SANDBOX"
    flagged = settings.override("model", "fast", "--model").override(
        "sandbox", "danger-full-access", "--sandbox"
    )
    assert values(flagged)["model"] == ("openai:gpt-5-mini", "--model")
    assert values(flagged)["sandbox"] == ("danger-full-access", "--sandbox")
    assert settings.override("model", None, "--model") is settings
    with pytest.raises(ConfigError) as caught:
        settings.override("sandbox", "wide-open", "--sandbox")
    assert caught.value.code == ErrorCode.CONFIG_INVALID


def test_no_files_gives_the_defaults(tmp_path: Path) -> None:
    cwd, home = tiers(tmp_path)
    settings = load_settings(cwd, home, "default", environ={})
    assert settings.model is None
    assert settings.files == ()
    assert values(settings)["sandbox"] == ("workspace-write", "default")
    assert [s.path.name for s in settings.mcp_sources] == [".mcp.json", ".mcp.json"]


def test_another_tenant_reads_only_its_own_file(tmp_path: Path) -> None:
    cwd, home = tiers(tmp_path, project=PROJECT, user=USER)
    own = home / "tenants" / "acme" / "config.toml"
    own.parent.mkdir(parents=True)
    own.write_text('sandbox = "danger-full-access"\n', encoding="utf-8")
    settings = load_settings(cwd, home, "acme", environ={})
    assert settings.files == (str(own),)
    assert settings.model is None
    assert "aliases.fast" not in values(settings)
    assert [s.path for s in settings.mcp_sources] == [own, own.parent / ".mcp.json"]


def test_mcp_servers_of_a_settings_file_are_kept_as_written_with_their_line(
    tmp_path: Path,
) -> None:
    text = '[mcp_servers.files]\ncommand = "npx"\nargs = ["-y", "server"]\n'
    cwd, home = tiers(tmp_path, project=text)
    settings = load_settings(cwd, home, "default", environ={})
    first = settings.mcp_sources[0]
    assert first.tier == "project"
    assert first.servers is not None
    entry = first.servers["files"]
    assert entry.value == {"command": "npx", "args": ["-y", "server"]}
    assert entry.origin == f"{cwd / '.subagents' / 'config.toml'}:1"


BAD = [
    ("model = \n", 1, "invalid TOML"),
    ('model = "x"\nmodel = "y"\n', 2, "invalid TOML"),
    ("colour = 1\n", 1, "unknown key `colour`"),
    ('sandbox = "wide"\n', 1, "sandbox must be one of read-only, workspace-write"),
    ("max_tokens = 0\n", 1, "must be a whole number >= 1"),
    ("max_tokens = true\n", 1, "must be a whole number >= 1"),
    ("model = 3\n", 1, "model must be a spec or an alias"),
    ("budget = 3\n", 1, "`budget` must be a table"),
    ("[budget]\nturns = 3\n", 2, "unknown key `budget.turns`"),
    ("[budget]\ntokens = -1\n", 2, "must be a whole number >= 0"),
    ("[concurrency]\nbackground_tasks = 0\n", 2, "must be a whole number >= 1"),
    ("[mcp]\ntool_timeout = 0\n", 2, "must be a number of seconds > 0"),
    ("[mcp]\ntool_timeout = nan\n", 2, "must be a number of seconds > 0"),
    ("[mcp]\nsearch = 1\n", 2, "unknown key `mcp.search`"),
    ("[mcp_servers]\nfiles = 1\n", 2, "server `files` must be a table"),
    ('[aliases]\nfast = "gpt-5"\n', 2, "model spec 'gpt-5' is not valid"),
    ('[aliases]\n"2fast" = "openai:x"\n', 2, "alias name '2fast' must start with a letter"),
    ('[aliases]\ninherit = "openai:x"\n', 2, "`inherit` cannot be an alias"),
    ("[aliases]\nfast = 1\n", 2, "alias `fast` must name a model spec"),
]


@pytest.mark.parametrize(("text", "line", "needle"), BAD)
def test_a_bad_file_is_one_line_naming_the_file_and_line(
    tmp_path: Path, text: str, line: int, needle: str
) -> None:
    cwd, home = tiers(tmp_path, user=text)
    with pytest.raises(ConfigError) as caught:
        load_settings(cwd, home, "default", environ={})
    message = caught.value.message
    assert "\n" not in message
    assert message.startswith(f"{home / 'config.toml'}:{line}: "), message
    assert needle in message
    assert caught.value.code in (ErrorCode.CONFIG_INVALID, ErrorCode.MODEL_SPEC_INVALID)


def test_a_model_naming_an_unknown_alias_has_its_own_code(tmp_path: Path) -> None:
    cwd, home = tiers(tmp_path, project='model = "turbo"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(cwd, home, "default", environ={})
    assert caught.value.code == ErrorCode.MODEL_ALIAS_UNKNOWN
    assert caught.value.message.startswith(f"{cwd / '.subagents' / 'config.toml'}:1: ")
    with pytest.raises(ConfigError) as caught:
        load_settings(cwd.parent, home, "default", environ={"SUBAGENTS_MODEL": "turbo"})
    assert caught.value.message.startswith("$SUBAGENTS_MODEL: unknown model alias 'turbo'")


def test_files_that_are_not_settings_text_are_refused(tmp_path: Path) -> None:
    cwd, home = tiers(tmp_path)
    path = home / "config.toml"
    path.write_bytes(b'model = "\xff"\n')
    with pytest.raises(ConfigError, match=r"config\.toml:1: not UTF-8 text"):
        load_settings(cwd, home, "default", environ={})
    path.write_bytes(b"# " + b"x" * (256 * 1024) + b"\n")
    with pytest.raises(ConfigError, match="bytes; at most"):
        load_settings(cwd, home, "default", environ={})
    path.unlink()
    os.mkfifo(path)  # never opened for blocking reads: a FIFO cannot hang a command
    with pytest.raises(ConfigError, match="not a regular file"):
        load_settings(cwd, home, "default", environ={})
    path.unlink()
    path.mkdir()
    with pytest.raises(ConfigError, match=r"not a regular file|cannot read"):
        load_settings(cwd, home, "default", environ={})


def test_a_bad_tenant_is_refused_before_any_file_is_named(tmp_path: Path) -> None:
    cwd, home = tiers(tmp_path)
    with pytest.raises(ConfigError):
        load_settings(cwd, home, "../etc", environ={})


# -- fuzz -------------------------------------------------------------------------------------

scalars = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
KEYS = st.sampled_from(
    [
        "model",
        "sandbox",
        "max_tokens",
        "aliases",
        "budget",
        "concurrency",
        "mcp",
        "mcp_servers",
        "tokens",
        "fast",
        "sonnet",
        "background_tasks",
        "tool_timeout",
        "other",
    ]
)


def _nested(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(children, max_size=3), st.dictionaries(KEYS, children, max_size=3))


values_strategy = st.recursive(scalars, _nested, max_leaves=8)


def _refusal(cwd: Path, home: Path) -> ConfigError | None:
    """Load; a refusal must be one line with a settings code (anything else escapes)."""
    try:
        load_settings(cwd, home, "default", environ={})
    except ConfigError as exc:
        refusal = exc
    else:
        return None
    assert "\n" not in refusal.message
    assert refusal.code in (
        ErrorCode.CONFIG_INVALID,
        ErrorCode.MODEL_SPEC_INVALID,
        ErrorCode.MODEL_ALIAS_UNKNOWN,
    )
    return refusal


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"  # type: ignore[misc]
    items = ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items())
    return "{" + items + "}"


@hypothesis_settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=st.dictionaries(KEYS, values_strategy, max_size=5))
def test_any_table_is_settings_or_one_clear_error(tmp_path: Path, table: dict[str, Any]) -> None:
    home = tmp_path / "fuzz-home"
    home.mkdir(exist_ok=True)
    text = "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in table.items())
    (home / "config.toml").write_text(text, encoding="utf-8")
    refusal = _refusal(tmp_path / "nowhere", home)
    if refusal is not None:
        assert str(home / "config.toml") in refusal.message


@hypothesis_settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=200))
def test_any_text_is_settings_or_one_clear_error(tmp_path: Path, text: str) -> None:
    home = tmp_path / "text-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
    _refusal(tmp_path / "nowhere", home)
