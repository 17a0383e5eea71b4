"""Attacks on the web console's door and on every entry point, as a hostile page or process.

The door: no token, wrong tokens, the token where it must not count (a POST's query), broken
and foreign cookies, cross-site POSTs (no Origin, another origin, `null`, another port or
scheme), DNS rebinding (a foreign `Host`), another tenant's sessions. The entry points: every
control fed malformed, oversized, mistyped and hostile bodies, the readers fed bad query
parameters, a message that looks like a CLI option, and the real `subagents web` process
refusing a remote bind. Every refusal is checked to have changed nothing: no job started and
the store byte-for-byte the same events and commands.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import httpx2 as httpx
import pytest
from cli_support import Cli
from live_support import WAIT_SECONDS, environment, wait_until
from web_support import Console, console, console_process, snapshot, sse_events, stop

ZERO = "00000000-0000-0000-0000-000000000000"
CONTROLS = ("send", "steer", "interrupt", "resume")


@contextmanager
def unchanged(store: Path, page: Console) -> Generator[None, None, None]:
    """The block must start no job and change nothing in the store."""
    before = snapshot(store)
    jobs_before = page.jobs()
    yield
    assert page.jobs() == jobs_before
    assert snapshot(store) == before


def assert_error(response: httpx.Response, status: int, code: str) -> str:
    """A refusal: the status, JSON `{"error": {"code", "message"}}` with a one-line message."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert list(body) == ["error"]
    assert sorted(body["error"]) == ["code", "message"]
    assert body["error"]["code"] == code, body
    message = body["error"]["message"]
    assert isinstance(message, str)
    assert message.strip()
    assert len(message.splitlines()) == 1, message
    return message


def tree_ids(page: Console, root: str) -> dict[str, str]:
    """Member session ids by name."""
    rows = page.get(f"/api/sessions/{root}/tree").json()["rows"]
    return {row["name"]: row["session_id"] for row in rows}


# --- the token -----------------------------------------------------------------------------


def _near_miss(token: str) -> str:
    """A token of the same length that differs in one character."""
    last = "A" if token[-1] != "A" else "B"
    return token[:-1] + last


def _credentials(page: Console) -> dict[str, dict[str, str]]:
    other_port = page.port + 1 if page.port < 65535 else page.port - 1
    return {
        "none": {},
        "wrong bearer": {"authorization": "Bearer not-the-token"},
        "near-miss bearer": {"authorization": f"Bearer {_near_miss(page.token)}"},
        "token without scheme": {"authorization": page.token},
        "basic scheme": {"authorization": f"Basic {page.token}"},
        "wrong cookie": {"cookie": f"{page.cookie}=not-the-token"},
        "near-miss cookie": {"cookie": f"{page.cookie}={_near_miss(page.token)}"},
        "empty cookie": {"cookie": f"{page.cookie}="},
        "empty cookie header": {"cookie": ""},
        "malformed cookie": {"cookie": '=;;; ==="\\; \x7f; ,,,'},
        "another port's cookie": {"cookie": f"subagents-console-{other_port}={page.token}"},
        "token as the cookie's name": {"cookie": f"{page.token}={page.token}"},
    }


def test_every_entry_point_refuses_a_missing_or_wrong_token(store: Path, tree_spec: str) -> None:
    with console(store, model=tree_spec) as page, unchanged(store, page):
        targets = [
            ("GET", "/", None),
            ("GET", "/api/info", None),
            ("GET", "/api/sessions", None),
            ("GET", "/api/stream", None),
            ("GET", f"/api/sessions/{ZERO}/stream", None),
            ("GET", "/static/app.js", None),
            ("POST", "/api/runs", {"prompt": "run me"}),
        ]
        for label, headers in _credentials(page).items():
            for method, path, body in targets:
                sent = {**headers, "origin": page.origin} if method == "POST" else headers
                response = page.client.request(method, path, json=body, headers=sent)
                assert "set-cookie" not in response.headers, (label, path)
                assert_error(response, 401, "UNAUTHORIZED")
        # The right token works through each door, so the refusals above are the token's.
        assert page.client.get("/api/info", headers=page.bearer).status_code == 200
        assert page.client.get("/api/info", headers=page.cookie_auth).status_code == 200


def test_a_token_in_the_query_does_not_authenticate_a_change(store: Path, tree_spec: str) -> None:
    with console(store, model=tree_spec) as page, unchanged(store, page):
        for path, body in [
            ("/api/runs", {"prompt": "run me"}),
            (f"/api/sessions/{ZERO}/resume", {}),
        ]:
            response = page.client.post(
                path, params={"token": page.token}, json=body, headers={"origin": page.origin}
            )
            assert_error(response, 401, "UNAUTHORIZED")
        # A wrong token in the address opens nothing either, and sets no cookie.
        for path in ("/", "/api/info"):
            response = page.client.get(path, params={"token": _near_miss(page.token)})
            assert "set-cookie" not in response.headers
            assert_error(response, 401, "UNAUTHORIZED")


def test_the_address_token_is_swapped_for_a_strict_cookie(store: Path) -> None:
    with console(store) as page:
        response = page.client.get("/", params=[("token", page.token), ("a", "1"), ("b", "x")])
        assert response.status_code == 303
        assert response.headers["location"] == "/?a=1&b=x"
        cookie = response.headers["set-cookie"]
        parts = [part.strip() for part in cookie.split(";")]
        assert parts[0] == f"{page.cookie}={page.token}"
        assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(parts[1:])
        assert page.token not in response.headers["location"]

        api = page.client.get("/api/info", params={"token": page.token})
        assert api.status_code == 303
        assert api.headers["location"] == "/api/info"

        # The cookie it set opens the page and the API, with no token in the address.
        opened = page.client.get("/?a=1&b=x", headers={"cookie": parts[0]})
        assert opened.status_code == 200
        assert opened.headers["content-type"].startswith("text/html")
        info = page.client.get("/api/info", headers={"cookie": parts[0]})
        assert info.status_code == 200
        assert info.json()["tenant"] == "default"


@pytest.mark.parametrize(
    "path",
    ["/%2F%2Fevil.example/", "/%5C%5Cevil.example/", "/x%0D%0ASet-Cookie:%20evil=1", "/a%20b"],
)
def test_the_token_redirect_stays_on_the_console(store: Path, path: str) -> None:
    with console(store) as page:
        response = page.client.get(f"{path}?token={page.token}")
        assert response.status_code == 303
        location = response.headers["location"]
        # A path on this console: not `//host` or `/\host` (another site, for a browser),
        # no control characters (a second header), no raw space (not a URL).
        assert location.startswith("/"), location
        assert not location.startswith(("//", "/\\")), location
        assert not any(c in location for c in "\r\n \\"), repr(location)
        assert "evil" not in response.headers["set-cookie"]


def test_the_console_cookie_counts_next_to_other_sites_cookies(store: Path) -> None:
    # Browsers share 127.0.0.1's cookies across ports: other local apps' cookies come too,
    # and some are not RFC 6265 tokens (JSON, spaces). They must not hide the console's.
    with console(store) as page:
        mine = f"{page.cookie}={page.token}"
        for header in [
            f"theme=dark; {mine}",
            f'prefs={{"theme":"dark"}}; {mine}',
            f"{mine}; greeting=hello world",
            f'{mine}; flash="unterminated',
        ]:
            response = page.client.get("/api/info", headers={"cookie": header})
            assert response.status_code == 200, (header, response.text)


# --- cross-site requests and DNS rebinding -----------------------------------------------


def test_a_change_from_another_origin_is_refused_and_starts_nothing(
    store: Path, stored_tree: str, tree_spec: str
) -> None:
    with console(store, model=tree_spec) as page, unchanged(store, page):
        other_port = page.port + 1 if page.port < 65535 else page.port - 1
        origins: list[str | None] = [
            None,
            "http://evil.example",
            "null",
            f"http://127.0.0.1:{other_port}",
            f"http://localhost:{other_port}",
            f"https://127.0.0.1:{page.port}",
            f"http://127.0.0.1.evil.example:{page.port}",
            f"{page.origin}.evil.example",
            "",
        ]
        valid = {
            "send": {"name": "keeper", "message": "hello"},
            "steer": {"name": "keeper", "message": "hello"},
            "interrupt": {"name": "keeper"},
            "resume": {},
        }
        posts = [(f"/api/sessions/{stored_tree}/{kind}", body) for kind, body in valid.items()]
        posts.append(("/api/runs", {"prompt": "run me"}))
        for origin in origins:
            headers = dict(page.cookie_auth)
            if origin is not None:
                headers["origin"] = origin
            for path, body in posts:
                response = page.client.post(path, json=body, headers=headers)
                assert_error(response, 403, "BAD_ORIGIN")
        # The bearer header does not excuse a foreign Origin either.
        response = page.client.post(
            "/api/runs",
            json={"prompt": "run me"},
            headers={**page.bearer, "origin": "http://evil.example"},
        )
        assert_error(response, 403, "BAD_ORIGIN")


def test_a_script_with_the_bearer_header_and_no_origin_is_let_in(store: Path) -> None:
    # A console without a model: the run reaches the controls (MODEL_MISSING), and none starts.
    with console(store) as page, unchanged(store, page):
        response = page.client.post("/api/runs", json={"prompt": "run me"}, headers=page.bearer)
        assert_error(response, 400, "MODEL_MISSING")
        # The page's own origin, under any of the console's names, is let in too.
        for name in ("127.0.0.1", "localhost", "[::1]"):
            response = page.client.post(
                "/api/runs",
                json={"prompt": "run me"},
                headers={**page.cookie_auth, "origin": f"http://{name}:{page.port}"},
            )
            assert_error(response, 400, "MODEL_MISSING")


def test_a_foreign_host_is_refused_even_with_the_token(store: Path, tree_spec: str) -> None:
    with console(store, model=tree_spec) as page, unchanged(store, page):
        hosts = [
            "evil.example",
            "127.0.0.1:1",
            f"evil.example:{page.port}",
            f"127.0.0.1.evil.example:{page.port}",
            f"127.0.0.2:{page.port}",
            "127.0.0.1",
            "",
        ]
        for host in hosts:
            both = {**page.bearer, **page.cookie_auth, "host": host}
            for method, path, body in [
                ("GET", "/", None),
                ("GET", "/api/info", None),
                ("GET", "/api/stream", None),
                ("GET", f"/?token={page.token}", None),
                ("POST", "/api/runs", {"prompt": "run me"}),
            ]:
                headers = both if method == "GET" else {**both, "origin": page.origin}
                response = page.client.request(method, path, json=body, headers=headers)
                assert "set-cookie" not in response.headers
                assert_error(response, 403, "BAD_HOST")
        for host in (f"localhost:{page.port}", f"[::1]:{page.port}", f"LOCALHOST:{page.port}"):
            response = page.client.get("/api/info", headers={**page.bearer, "host": host})
            assert response.status_code == 200, host


# --- tenancy -------------------------------------------------------------------------------


@pytest.fixture
def other_tree(cli: Cli, tree_spec: str) -> str:
    done = cli("run", "Other tenant work", "--model", tree_spec, "--tenant", "other", "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["session_id"])


def test_another_tenants_tree_is_not_found_on_every_route(
    store: Path, stored_tree: str, other_tree: str, tree_spec: str
) -> None:
    with console(store, tenant="other") as theirs:
        other_ids = tree_ids(theirs, other_tree)
    assert set(other_ids) == {"lead", "scout", "keeper"}
    keeper = other_ids["keeper"]

    def routes(root: str, member: str) -> list[tuple[str, str, Any]]:
        return [
            ("GET", f"/api/sessions/{root}/tree", None),
            ("GET", f"/api/sessions/{root}/timeline", None),
            ("GET", f"/api/sessions/{root}/members/{member}", None),
            ("GET", f"/api/sessions/{root}/members/{member}/records", None),
            ("GET", f"/api/sessions/{root}/stream", None),
            ("GET", f"/api/sessions/{root}/stream?member={member}", None),
            ("POST", f"/api/sessions/{root}/send", {"name": "keeper", "message": "hi"}),
            ("POST", f"/api/sessions/{root}/steer", {"name": "keeper", "message": "hi"}),
            ("POST", f"/api/sessions/{root}/interrupt", {"name": "keeper"}),
            ("POST", f"/api/sessions/{root}/resume", {}),
            ("POST", f"/api/sessions/{root}/resume", {"prompt": "go on"}),
        ]

    missing = "12345678-1234-4234-8234-123456789abc"
    with console(store, model=tree_spec) as page, unchanged(store, page):
        theirs_routes = routes(other_tree, keeper)
        missing_routes = routes(missing, missing)
        for (method, path, body), (_, gone, _) in zip(theirs_routes, missing_routes, strict=True):
            if method == "GET":
                response = page.get(path)
                absent = page.get(gone)
            else:
                response = page.post(path, body)
                absent = page.post(gone, body)
            message = assert_error(response, 404, "NOT_FOUND")
            expected = assert_error(absent, 404, "NOT_FOUND")
            # The same answer as for a session that does not exist: nothing tells them apart.
            assert message.replace(other_tree, "ID").replace(keeper, "ID") == expected.replace(
                missing, "ID"
            ), path
        # Their member under our own tree is no member of ours either.
        for suffix in ("", "/records"):
            assert_error(
                page.get(f"/api/sessions/{stored_tree}/members/{keeper}{suffix}"),
                404,
                "NOT_FOUND",
            )
        assert_error(
            page.get(f"/api/sessions/{stored_tree}/stream", member=keeper), 404, "NOT_FOUND"
        )
        listed = page.get("/api/sessions").json()["sessions"]
        assert [row["session_id"] for row in listed] == [stored_tree]
        assert page.get("/api/sessions", q="Other tenant").json()["sessions"] == []
        assert page.get("/api/sessions", q=other_tree).json()["sessions"] == []


# --- bad input on the controls -------------------------------------------------------------


def test_malformed_bodies_are_refused_on_every_control(
    store: Path, stored_tree: str, tree_spec: str
) -> None:
    big = json.dumps({"name": "keeper", "message": "x" * (300 * 1024)}).encode()
    with console(store, model=tree_spec) as page, unchanged(store, page):
        paths = [f"/api/sessions/{stored_tree}/{kind}" for kind in CONTROLS] + ["/api/runs"]
        for path in paths:
            huge_int = b'{"name": ' + b"1" * 5000 + b"}"  # beyond Python's int digits limit
            for content in (b"{not json", b"{", b'{"name": "keeper",}', b"\xff\xfe", huge_int):
                assert_error(page.post_raw(path, content), 400, "BAD_REQUEST")
            for body in ([1, 2], "keeper", 7, True):
                assert_error(page.post(path, body), 400, "BAD_REQUEST")
            assert_error(page.post_raw(path, b"null"), 400, "BAD_REQUEST")
            assert_error(page.post(path, {"surprise": 1}), 400, "BAD_REQUEST")
            for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
                response = page.post_raw(path, b'{"name": "keeper"}', content_type)
                assert_error(response, 415, "BAD_REQUEST")
            response = page.post_raw(path, b"{}", "multipart/form-data; boundary=x")
            assert_error(response, 415, "BAD_REQUEST")
            assert_error(page.post_raw(path, big), 413, "BAD_REQUEST")


def test_a_deeply_nested_body_is_a_bad_request_not_a_crash(
    store: Path, stored_tree: str, tree_spec: str
) -> None:
    # Well under 256 KiB, but deeper than Python's recursion limit.
    with console(store, model=tree_spec) as page, unchanged(store, page):
        for path in (f"/api/sessions/{stored_tree}/send", "/api/runs"):
            for content in (b"[" * 100_000, b'{"a":' * 30_000):
                assert_error(page.post_raw(path, content), 400, "BAD_REQUEST")


def test_bad_fields_are_refused_with_the_clis_codes(
    store: Path, stored_tree: str, tree_spec: str
) -> None:
    with console(store, model=tree_spec) as page:
        ids = tree_ids(page, stored_tree)
        cases: list[tuple[str, Any, int, str]] = []
        for kind in ("send", "steer"):
            path = f"/api/sessions/{stored_tree}/{kind}"
            cases += [
                (path, {"name": 7, "message": "hi"}, 400, "BAD_REQUEST"),
                (path, {"name": "keeper", "message": ["hi"]}, 400, "BAD_REQUEST"),
                (path, {"name": "keeper", "message": {"text": "hi"}}, 400, "BAD_REQUEST"),
                (path, {"name": "keeper"}, 400, "BAD_REQUEST"),
                (path, {"message": "hi"}, 400, "BAD_REQUEST"),
                (path, {"name": "keeper", "message": "hi", "extra": 1}, 400, "BAD_REQUEST"),
                (path, {"name": "keeper", "message": ""}, 400, "USAGE"),
                (path, {"name": "keeper", "message": " \t\n\u3000"}, 400, "USAGE"),
                (path, {"name": "keeper", "message": "a\x00b"}, 400, "BAD_REQUEST"),
                (path, {"name": "", "message": "hi"}, 400, "USAGE"),
                (path, {"name": "kid/", "message": "hi"}, 400, "INVALID_NAME"),
                (path, {"name": "//x", "message": "hi"}, 400, "INVALID_NAME"),
                (path, {"name": "../x", "message": "hi"}, 400, "INVALID_NAME"),
                (path, {"name": "-x", "message": "hi"}, 400, "INVALID_NAME"),
                (path, {"name": "Keeper", "message": "hi"}, 400, "INVALID_NAME"),
                (path, {"name": "nobody", "message": "hi"}, 404, "NOT_FOUND"),
                (path, {"name": "keeper/nobody", "message": "hi"}, 404, "NOT_FOUND"),
                (path, {"name": "scout", "message": "hi"}, 409, "NOT_RESUMABLE"),
                (path, {"name": "/scout", "message": "hi"}, 409, "NOT_RESUMABLE"),
            ]
            for root in (ids["keeper"], ids["scout"], "not-a-uuid", ZERO, stored_tree.upper()):
                message = {"name": "keeper", "message": "hi"}
                cases.append((f"/api/sessions/{root}/{kind}", message, 404, "NOT_FOUND"))
        path = f"/api/sessions/{stored_tree}/interrupt"
        cases += [
            (path, {}, 400, "BAD_REQUEST"),
            (path, {"name": ["keeper"]}, 400, "BAD_REQUEST"),
            (path, {"name": "keeper", "message": "hi"}, 400, "BAD_REQUEST"),
            (path, {"name": "kid/"}, 400, "INVALID_NAME"),
            (path, {"name": "nobody"}, 404, "NOT_FOUND"),
            (f"/api/sessions/{ids['keeper']}/interrupt", {"name": "keeper"}, 404, "NOT_FOUND"),
        ]
        path = f"/api/sessions/{stored_tree}/resume"
        cases += [
            (path, {"prompt": 5}, 400, "BAD_REQUEST"),
            (path, {"prompt": ["go"]}, 400, "BAD_REQUEST"),
            (path, {"prompt": "go\x00on"}, 400, "BAD_REQUEST"),
            (path, {"prompt": "go", "name": "lead"}, 400, "BAD_REQUEST"),
            (f"/api/sessions/{ids['scout']}/resume", {}, 404, "NOT_FOUND"),
            ("/api/sessions/not-a-uuid/resume", {}, 404, "NOT_FOUND"),
        ]
        cases += [
            ("/api/runs", {}, 400, "BAD_REQUEST"),
            ("/api/runs", {"prompt": 3}, 400, "BAD_REQUEST"),
            ("/api/runs", {"prompt": ""}, 400, "USAGE"),
            ("/api/runs", {"prompt": "   "}, 400, "USAGE"),
            ("/api/runs", {"prompt": "-"}, 400, "USAGE"),
            ("/api/runs", {"prompt": "a\x00"}, 400, "BAD_REQUEST"),
            ("/api/runs", {"prompt": "go", "model": 3}, 400, "BAD_REQUEST"),
            ("/api/runs", {"prompt": "go", "tenant": "other"}, 400, "BAD_REQUEST"),
        ]
        with unchanged(store, page):
            for path, body, status, code in cases:
                assert_error(page.post(path, body), status, code)
            # A lone surrogate only JSON can carry: not text a command can take.
            surrogates = [
                (f"/api/sessions/{stored_tree}/send", b'{"name": "keeper", "message": "\\ud800"}'),
                (
                    f"/api/sessions/{stored_tree}/steer",
                    b'{"name": "keeper", "message": "a\\udfff"}',
                ),
                (f"/api/sessions/{stored_tree}/send", b'{"name": "\\ud800", "message": "hi"}'),
                (f"/api/sessions/{stored_tree}/interrupt", b'{"name": "\\ud800"}'),
                (f"/api/sessions/{stored_tree}/resume", b'{"prompt": "\\ud800"}'),
                ("/api/runs", b'{"prompt": "\\ud800"}'),
                ("/api/runs", b'{"prompt": "go", "model": "\\ud800"}'),
                ("/api/runs", b'{"\\ud800": 1}'),
            ]
            for path, content in surrogates:
                assert_error(page.post_raw(path, content), 400, "BAD_REQUEST")


def test_a_run_without_a_model_is_refused_when_the_console_has_none(store: Path) -> None:
    with console(store) as page, unchanged(store, page):
        assert page.get("/api/info").json()["model"] is None
        for body in (
            {"prompt": "go"},
            {"prompt": "go", "model": ""},
            {"prompt": "go", "model": None},
        ):
            assert_error(page.post("/api/runs", body), 400, "MODEL_MISSING")
        # A model the form names is checked before any process starts.
        for spec in ("bogus", "openai:", "scripted:", "--tenant=evil"):
            body = {"prompt": "go", "model": spec}
            assert_error(page.post("/api/runs", body), 400, "MODEL_SPEC_INVALID")


# --- query parameters ----------------------------------------------------------------------


def test_bad_query_parameters_are_clear_refusals(store: Path, stored_tree: str) -> None:
    with console(store) as page, unchanged(store, page):
        ids = tree_ids(page, stored_tree)
        records = f"/api/sessions/{stored_tree}/members/{ids['scout']}/records"
        stream = f"/api/sessions/{stored_tree}/stream"
        bad_numbers = ["-1", "abc", "1e9", "1.5", "", " 1", "0x10", "\u0661", "\uff11", "9" * 20]
        for value in bad_numbers:
            assert_error(page.get(records, **{"from": value}), 400, "USAGE")
            assert_error(page.get(records, limit=value), 400, "USAGE")
            assert_error(page.get(stream, **{"from": value}), 400, "USAGE")
        for member in ("garbage", "", ZERO, stored_tree.upper(), "../" + ids["scout"], "x" * 500):
            assert_error(page.get(stream, member=member), 404, "NOT_FOUND")
        assert_error(page.get(stream, member=ids["scout"], **{"from": "-1"}), 400, "USAGE")
        # In range, a large limit is capped and a far `from` is an empty page.
        capped = page.get(records, limit="999999999999")
        assert capped.status_code == 200
        far = page.get(records, **{"from": "999999999999"})
        assert far.json() == {"records": [], "next": 999999999999}
        assert page.get(records, limit="0").json()["records"] == []


def test_a_root_or_member_with_a_line_break_is_not_found_in_one_line(
    store: Path, stored_tree: str
) -> None:
    with console(store) as page:
        scout = tree_ids(page, stored_tree)["scout"]
        for path in [
            f"/api/sessions/{ZERO}%0A/tree",
            f"/api/sessions/{stored_tree}%0A/timeline",
            f"/api/sessions/{stored_tree}%0A/members/{scout}",
            f"/api/sessions/{stored_tree}/members/{scout}%0A",
            f"/api/sessions/{stored_tree}/members/{scout}%0A/records",
        ]:
            assert_error(page.get(path), 404, "NOT_FOUND")


def test_a_trailing_slash_is_answered_in_json(store: Path) -> None:
    # docs/web.md: every response is JSON, except the event streams and the static files.
    with console(store) as page:
        for path in ("/api/info/", "/api/sessions/", "/api/jobs/"):
            response = page.get(path)
            assert response.headers.get("content-type", "").startswith("application/json"), (
                path,
                response.status_code,
                response.headers.get("location"),
            )


# --- response headers ----------------------------------------------------------------------


def _assert_page_headers(response: httpx.Response) -> None:
    policy = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in policy, (response.request.url, policy)
    assert "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy
    assert response.headers.get("x-content-type-options") == "nosniff"
    assert response.headers.get("x-frame-options") == "DENY"


def test_every_response_carries_the_page_headers(
    store: Path, stored_tree: str, tree_spec: str
) -> None:
    with console(store, model=tree_spec) as page, unchanged(store, page):
        responses = [
            page.get("/"),
            page.get("/static/app.js"),
            page.get("/static/app.css"),
            page.get("/api/info"),
            page.get("/api/sessions"),
            page.get(f"/api/sessions/{stored_tree}/tree"),
            page.get("/api/nothing-here"),
            page.get("/static/nothing-here.js"),
            page.get(f"/api/sessions/{ZERO}/tree"),
            page.get(f"/api/sessions/{stored_tree}/members/{ZERO}/records", limit="x"),
            page.client.get("/api/info"),
            page.client.get("/", params={"token": page.token}),
            page.client.get("/api/info", headers={**page.bearer, "host": "evil.example"}),
            page.client.post("/api/runs", json={}, headers=page.cookie_auth),
            page.post_raw("/api/runs", b"{}", "text/plain"),
            page.client.put("/api/runs", json={}, headers=page.bearer),
            page.post("/api/runs", {"prompt": ""}),
        ]
        assert {r.status_code for r in responses} >= {200, 303, 400, 401, 403, 404, 405, 415}
        for response in responses:
            _assert_page_headers(response)


# --- the real process ----------------------------------------------------------------------


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ("--host", "0.0.0.0"),
        ("--host", "::"),
        ("--host", "192.0.2.1"),
        ("--host", "evil.example", "--allow-remote"),
        ("--port", "70000"),
        ("--port", "-1"),
        ("--interval", "0"),
        ("--interval", "-1"),
        ("--interval", "6"),
        ("--interval", "nan"),
        ("--tenant", "bad tenant"),
        ("--tenant", "../other"),
    ],
)
def test_bad_options_exit_2_with_one_line(cli: Cli, args: tuple[str, ...]) -> None:
    # `--port 0` unless the case sets the port: were it to serve, it would not take 8765.
    port = () if "--port" in args else ("--port", "0")
    done = cli("web", *port, *args)
    assert done.returncode == 2, (done.returncode, done.stderr)
    line = _one_line(done.stderr)
    assert line.startswith("subagents: error:"), line
    assert "http://" not in done.stderr
    assert "token" not in done.stderr
    assert done.stdout == ""


def test_a_remote_bind_with_allow_remote_warns_and_still_needs_the_token(
    home: Path, tmp_path: Path, store: Path
) -> None:
    command = [sys.executable, "-m", "subagents", "web", "--host", "0.0.0.0", "--port", "0"]
    process = subprocess.Popen(
        [*command, "--allow-remote", "--store", str(store)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=environment(home),
        cwd=tmp_path,
    )
    try:
        assert process.stderr is not None
        printed = b""
        deadline = time.monotonic() + WAIT_SECONDS
        while b"/?token=" not in printed or not printed.endswith(b"\n"):
            assert time.monotonic() < deadline, printed
            ready, _, _ = select.select([process.stderr], [], [], 0.5)
            if ready:
                chunk = os.read(process.stderr.fileno(), 4096)
                assert chunk or process.poll() is None, (process.returncode, printed)
                printed += chunk
        lines = printed.decode().splitlines(keepends=True)
        warnings = [line for line in lines if "warning" in line]
        assert len(warnings) == 1, lines
        assert "0.0.0.0" in warnings[0]
        address = next(line for line in lines if "/?token=" in line).strip()
        assert lines.index(warnings[0]) < lines.index(address + "\n")
        url = address.split("subagents web: ", 1)[1]
        assert url.startswith("http://127.0.0.1:")  # a wildcard bind prints a reachable name
        port = int(url.split(":")[2].split("/")[0])
        token = url.split("?token=")[1]
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=WAIT_SECONDS) as client:
            # A page reached under another name (a LAN address) may change things from its
            # own origin, with the cookie; a foreign origin still may not.
            lan = {"host": f"192.0.2.2:{port}", "cookie": f"subagents-console-{port}={token}"}
            own = client.post(
                "/api/runs",
                json={"prompt": "go"},
                headers={**lan, "origin": f"http://192.0.2.2:{port}"},
            )
            assert_error(own, 400, "MODEL_MISSING")  # past the guard: refused for its body
            foreign = client.post(
                "/api/runs",
                json={"prompt": "go"},
                headers={**lan, "origin": "http://evil.example"},
            )
            assert_error(foreign, 403, "BAD_ORIGIN")
            assert_error(client.get("/api/info"), 401, "UNAUTHORIZED")
            assert_error(
                client.get("/api/info", headers={"authorization": "Bearer nope"}),
                401,
                "UNAUTHORIZED",
            )
            info = client.get("/api/info", headers={"authorization": f"Bearer {token}"})
            assert info.status_code == 200
            _assert_page_headers(info)
    finally:
        stop(process)


def test_the_real_server_guards_streams_and_redirects(
    home: Path, tmp_path: Path, store: Path, stored_tree: str
) -> None:
    with console_process(home, tmp_path, store=store) as served:
        with httpx.Client(base_url=served.base, timeout=WAIT_SECONDS) as anonymous:
            for path in ("/", "/api/info", "/api/stream", f"/api/sessions/{stored_tree}/stream"):
                assert_error(anonymous.get(path), 401, "UNAUTHORIZED")
            rebound = anonymous.get(
                "/api/info",
                headers={"host": "evil.example", "authorization": f"Bearer {served.token}"},
            )
            assert_error(rebound, 403, "BAD_HOST")
        with served.client() as client, client.stream("GET", "/api/stream") as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            _assert_page_headers(stream)
            name, data = next(sse_events(stream))
            assert name == "sessions"
            assert [row["session_id"] for row in data["sessions"]] == [stored_tree]


def test_the_real_server_answers_a_redirect_of_a_path_with_a_line_break(
    home: Path, tmp_path: Path, store: Path
) -> None:
    # `%0D%0A` in the path decodes to a line break; the token's redirect repeats the path in
    # its Location: the console must answer (a redirect or a refusal), with no extra header.
    with console_process(home, tmp_path, store=store) as served, served.client() as client:
        try:
            response = client.get(f"/x%0D%0AX-Injected:%201?token={served.token}")
        except httpx.RemoteProtocolError as exc:
            pytest.fail(f"the console dropped the connection instead of answering: {exc}")
        assert response.status_code in (303, 400, 404), response.status_code
        assert "x-injected" not in response.headers
        assert client.get("/api/info").status_code == 200  # and it still serves


# --- a message that looks like an option ---------------------------------------------------


def test_a_message_that_looks_like_an_option_is_delivered_as_text(
    store: Path, stored_tree: str, tmp_path: Path
) -> None:
    with console(store, cwd=tmp_path) as page:
        keeper = tree_ids(page, stored_tree)["keeper"]
        response = page.post(
            f"/api/sessions/{stored_tree}/send", {"name": "keeper", "message": "--help"}
        )
        assert response.status_code == 202, response.text
        job_id = response.json()["job"]["id"]

        def ended() -> dict[str, Any] | None:
            job = next(j for j in page.jobs() if j["id"] == job_id)
            return job if job["state"] != "running" else None

        job = cast("dict[str, Any]", wait_until(ended, "the send job to end"))
        assert job["state"] == "done", job
        assert job["exit_code"] == 0
        records = page.get(f"/api/sessions/{stored_tree}/members/{keeper}/records").json()[
            "records"
        ]
        texts = [text for record in records for text in _strings(record["payload"])]
        assert "--help" in texts
        assert not any("Usage:" in text for text in texts)


def _strings(value: object) -> Iterator[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in cast("dict[str, object]", value).values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in cast("list[object]", value):
            yield from _strings(item)
