from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from subagents.errors import ConfigError, ErrorCode
from subagents.mcp import (
    MAX_MCP_JSON_BYTES,
    McpServerConfig,
    check_executable,
    parse_mcp_json,
    parse_servers,
    read_mcp_json,
)


def one_line_error(text: str, environ: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_mcp_json(text, source="proj/.mcp.json", environ=environ or {})
    error = caught.value
    assert error.code == ErrorCode.MCP_CONFIG_INVALID
    assert "\n" not in error.message
    assert error.message.startswith("proj/.mcp.json")
    return error


def test_claude_code_shapes_parse() -> None:
    text = json.dumps(
        {
            "mcpServers": {
                "files": {"command": "npx", "args": ["-y", "server-fs", "${ROOT}"]},
                "typed": {"type": "stdio", "command": "srv", "env": {"KEY": "${KEY:-none}"}},
                "remote": {
                    "type": "http",
                    "url": "https://${HOST}/mcp",
                    "headers": {"Authorization": "Bearer ${TOKEN}"},
                },
            }
        }
    )
    servers = parse_mcp_json(
        text, source=".mcp.json", environ={"ROOT": "/data", "HOST": "h.example", "TOKEN": "t0k"}
    )
    assert servers["files"] == McpServerConfig(
        name="files",
        transport="stdio",
        source=".mcp.json",
        command="npx",
        args=("-y", "server-fs", "/data"),
    )
    assert servers["typed"].env == (("KEY", "none"),)
    remote = servers["remote"]
    assert (remote.transport, remote.url) == ("http", "https://h.example/mcp")
    assert remote.headers == (("Authorization", "Bearer t0k"),)


def test_a_default_covers_an_empty_variable_and_a_set_one_wins() -> None:
    servers = parse_servers(
        {"s": {"command": "x", "args": ["${A:-d}", "${B:-d}", "${C}"]}},
        source="definition",
        environ={"A": "", "B": "b", "C": ""},
    )
    assert servers["s"].args == ("d", "b", "")


def test_a_file_without_servers_declares_none() -> None:
    assert parse_mcp_json('{"other": 1}', source="f") == {}


def test_bad_json_names_the_file_and_line() -> None:
    error = one_line_error('{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}')
    assert error.message.startswith("proj/.mcp.json:3: invalid JSON")


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ({"command": 3}, "command must be a string, got a number"),
        ({"command": "x", "args": "a b"}, "args must be an array of strings, got a string"),
        ({"command": "x", "args": [1]}, "args[0] must be a string"),
        ({"command": "x", "env": {"K": True}}, "env.K must be a string, got a boolean"),
        ({"command": ""}, "command must not be empty"),
        ({"type": "sse", "url": "http://h/sse"}, '"sse" is not supported'),
        ({"type": "ws"}, 'type must be "stdio" or "http"'),
        ({"type": "http", "url": "ftp://h"}, "url must be an http:// or https:// URL"),
        ({"type": "http"}, "url must be a string, got null"),
        ({"command": "x", "argz": []}, "unknown key 'argz'"),
        ({"command": "${NOPE}"}, "environment variable NOPE is not set and has no default"),
        ([], "must be an object, got an array"),
    ],
)
def test_wrong_shapes_are_one_line_errors_naming_file_line_and_server(
    server: object, expected: str
) -> None:
    text = '{"mcpServers": {\n  "srv": ' + json.dumps(server) + "\n}}"
    error = one_line_error(text)
    assert error.message.startswith("proj/.mcp.json:2: MCP server 'srv': ")
    assert expected in error.message
    assert error.fields["server"] == "srv"


def test_sse_says_to_use_http() -> None:
    error = one_line_error('{"mcpServers": {"old": {"type": "sse", "url": "http://h/sse"}}}')
    assert "use" in error.message
    assert '"http"' in error.message


@pytest.mark.parametrize("name", ["", "has space", "x" * 33, "dot.ted", "ünï"])
def test_server_names_must_fit_in_tool_names(name: str) -> None:
    error = one_line_error(json.dumps({"mcpServers": {name: {"command": "x"}}}))
    assert "invalid MCP server name" in error.message


def test_mcp_servers_must_be_an_object() -> None:
    error = one_line_error('{"mcpServers": []}')
    assert "mcpServers must be an object" in error.message


def test_read_mcp_json(tmp_path: Path) -> None:
    assert read_mcp_json(tmp_path / "missing.json") == {}
    good = tmp_path / "good.json"
    good.write_text('{"mcpServers": {"a": {"command": "x"}}}')
    assert read_mcp_json(good)["a"].source == str(good)


def test_read_mcp_json_refuses_what_is_not_a_small_utf8_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_MCP_JSON_BYTES + 1))
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{\n"mcpServers": {"a": {"command": "caf\xe9"}}}')
    expected = {
        tmp_path: "not a regular file",
        fifo: "not a regular file",
        big: "larger than",
        latin: ":2: not valid UTF-8",
    }
    for path, text in expected.items():
        with pytest.raises(ConfigError) as caught:
            read_mcp_json(path)
        assert caught.value.code == ErrorCode.MCP_CONFIG_INVALID
        assert text in caught.value.message, caught.value.message
        assert caught.value.message.startswith(str(path))


def test_check_executable(tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n")
    config = parse_servers({"s": {"command": str(script)}}, source="f")["s"]
    with pytest.raises(ConfigError) as caught:
        check_executable(config, {})
    assert caught.value.code == ErrorCode.MCP_SERVER_NOT_EXECUTABLE
    assert "not executable" in caught.value.message
    script.chmod(0o755)
    assert check_executable(config, {}) == str(script)
    missing = parse_servers({"s": {"command": "no-such-mcp-server"}}, source="f")["s"]
    with pytest.raises(ConfigError) as caught:
        check_executable(missing, {"PATH": str(tmp_path)})
    assert caught.value.code == ErrorCode.MCP_SERVER_NOT_EXECUTABLE
    assert "not found on PATH" in caught.value.message
    assert check_executable(missing.__class__(name="h", transport="http", source="f")) is None


def attempt(
    parse: Callable[[], dict[str, McpServerConfig]],
) -> dict[str, McpServerConfig] | ConfigError:
    """The servers, or the ConfigError; any other exception fails the test."""
    try:
        return parse()
    except ConfigError as exc:
        return exc


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["type", "command", "args", "env", "url", "headers", "a", "x" * 40])
            | st.text(max_size=6),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_fuzz_parse_servers_only_raises_config_errors(value: object) -> None:
    for candidate in (value, {"srv": value}):
        outcome = attempt(
            functools.partial(parse_servers, candidate, source="fuzz", environ={"A": "1"})
        )
        if isinstance(outcome, ConfigError):
            assert outcome.code == ErrorCode.MCP_CONFIG_INVALID
            assert "\n" not in outcome.message
        else:
            assert all(isinstance(s, McpServerConfig) for s in outcome.values())


@settings(max_examples=300, deadline=None)
@given(value=json_values, text=st.text(max_size=40))
def test_fuzz_parse_mcp_json_only_raises_config_errors(value: object, text: str) -> None:
    for document in (json.dumps({"mcpServers": value}), json.dumps(value), text):
        outcome = attempt(
            functools.partial(parse_mcp_json, document, source="fuzz.json", environ={})
        )
        if isinstance(outcome, ConfigError):
            assert outcome.code == ErrorCode.MCP_CONFIG_INVALID
            assert "\n" not in outcome.message
