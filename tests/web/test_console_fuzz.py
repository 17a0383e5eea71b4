"""Fuzzing the web console in-process: arbitrary API paths, query strings, bodies and headers.

Attacked: the router and the readers (any path under `/api/` and any query string must answer
a documented error or a JSON answer, never a server error), the controls' body checks (any
JSON or bytes must be refused with a documented code and start nothing), and the door (any
Cookie, Authorization, Origin and Host: only the exact token opens it, only the console's own
names and origin pass). The console is built once per test and shared by its examples; the
store is checked to be unchanged at the end.
"""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl, quote, unquote, urlencode

import httpx2 as httpx
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from web_support import Console, console, snapshot

from subagents.sessions import MAX_COMMAND_TEXT

DOCUMENTED = frozenset(
    {
        "USAGE",
        "INVALID_NAME",
        "BAD_REQUEST",
        "UNAUTHORIZED",
        "BAD_ORIGIN",
        "BAD_HOST",
        "NOT_FOUND",
        "NOT_RESUMABLE",
    }
)
CONTROL_CODES = DOCUMENTED | {"MODEL_MISSING"}
MISSING_ROOT = "12345678-1234-4234-8234-123456789abc"
FUZZ = settings(
    max_examples=75,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def assert_error(response: httpx.Response, codes: frozenset[str]) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:300])
    assert response.headers.get("content-type", "").startswith("application/json"), (
        response.status_code,
        dict(response.headers),
    )
    body = response.json()
    assert isinstance(body, dict)
    assert list(cast("dict[str, Any]", body)) == ["error"], body
    error = cast("dict[str, Any]", body)["error"]
    assert isinstance(error, dict)
    assert sorted(cast("dict[str, Any]", error)) == ["code", "message"], error
    fields = cast("dict[str, Any]", error)
    assert fields["code"] in codes, fields
    message = fields["message"]
    assert isinstance(message, str)
    assert message.strip()
    assert len(message.splitlines()) == 1, repr(message)


def member_ids(page: Console, root: str) -> list[str]:
    rows = page.client.get(f"/api/sessions/{root}/tree", headers=page.cookie_auth).json()["rows"]
    return [row["session_id"] for row in rows]


# --- paths and query strings ---------------------------------------------------------------


def _segment(words: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(words), st.text(max_size=30))


def test_any_api_path_and_query_answers_json_or_a_documented_error(
    store: Path, stored_tree: str
) -> None:
    with console(store) as page:
        members = member_ids(page, stored_tree)
        words = [
            stored_tree,
            *members,
            MISSING_ROOT,
            stored_tree.upper(),
            stored_tree + "\n",
            stored_tree[:-1],
            "sessions",
            "members",
            "records",
            "timeline",
            "tree",
            "stream",
            "info",
            "jobs",
            "runs",
            "send",
            "steer",
            "interrupt",
            "resume",
            "..",
            ".",
            "",
            "%",
        ]
        keys = st.one_of(
            st.sampled_from(["from", "limit", "member", "q", "token", "from", "limit"]),
            st.text(max_size=8),
        )
        values = st.one_of(
            st.sampled_from(["0", "1", "-1", "1e9", "abc", "", "999999999999", *members]),
            st.integers(-(10**15), 10**15).map(str),
            st.text(max_size=30),
        )
        streams = {"/api/stream", f"/api/sessions/{stored_tree}/stream"}
        before = snapshot(store)

        templates = [
            ["sessions"],
            ["info"],
            ["jobs"],
            ["runs"],
            ["sessions", "{}", "tree"],
            ["sessions", "{}", "timeline"],
            ["sessions", "{}", "stream"],
            ["sessions", "{}", "members", "{}"],
            ["sessions", "{}", "members", "{}", "records"],
            *(["sessions", "{}", kind] for kind in ("send", "steer", "interrupt", "resume")),
        ]
        segment = _segment(words)

        @st.composite
        def route(draw: st.DrawFn) -> list[str]:
            parts = [draw(segment) if p == "{}" else p for p in draw(st.sampled_from(templates))]
            return [*parts, ""] if draw(st.booleans()) else parts  # and a trailing slash

        @settings(FUZZ, max_examples=100)
        @given(
            segments=st.one_of(route(), st.lists(segment, min_size=1, max_size=5)),
            query=st.lists(st.tuples(keys, values), max_size=4),
        )
        def check(segments: list[str], query: list[tuple[str, str]]) -> None:
            # Dots are escaped so that no client folds `..` away: the server sees them as sent.
            path = "/api/" + "/".join(quote(s, safe="").replace(".", "%2E") for s in segments)
            decoded = unquote(path)
            assume(not {decoded, posixpath.normpath(decoded)} & streams)  # an endless stream
            url = f"{path}?{urlencode(query)}" if query else path
            try:
                response = page.client.get(url, headers=page.cookie_auth)
            except UnicodeEncodeError as exc:  # the test client reads the answer's headers
                raise AssertionError(f"{url}: a response header is not ASCII: {exc}") from None
            status = response.status_code
            assert status < 500, (url, status, response.text[:300])
            if 200 <= status < 300:
                assert response.headers["content-type"].startswith("application/json"), url
                assert isinstance(response.json(), dict)
            elif status == 303:
                # The token in the address is swapped for the cookie: the same path, without.
                assert "token" in [key for key, _ in query], url
                location = response.headers["location"]
                assert location.startswith("/api/"), location
                assert not any(c in location for c in "\r\n"), repr(location)
                assert "token" not in [k for k, _ in parse_qsl(location.partition("?")[2])]
            else:
                assert_error(response, DOCUMENTED)

        check()
        assert page.jobs() == []
        assert snapshot(store) == before


# --- bodies --------------------------------------------------------------------------------

_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", " ", "\u3000", "-", "--help", "lead"]),
)
JSON: st.SearchStrategy[Any] = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
NAMES: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(["lead", "/lead", "keeper", "scout", "/scout", "kid/", "//x", "../x", ""]),
    st.text(max_size=20),
    JSON,
)
TEXTS: st.SearchStrategy[Any] = st.one_of(st.text(max_size=40), _LEAVES, JSON)
_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "name": NAMES,
    "message": TEXTS,
    "prompt": TEXTS,
    "model": TEXTS,
}
_MESSAGE: dict[str, st.SearchStrategy[Any]] = {"name": NAMES, "message": TEXTS}
_EXTRA: dict[str, st.SearchStrategy[Any]] = {"extra": JSON, "": JSON, "Name": JSON}
BODIES: st.SearchStrategy[Any] = st.one_of(
    JSON,
    st.fixed_dictionaries({}, optional=_FIELDS),
    st.fixed_dictionaries(_MESSAGE),
    st.fixed_dictionaries(_MESSAGE, optional=_EXTRA),
)
ALLOWED = {
    "send": frozenset({"name", "message"}),
    "steer": frozenset({"name", "message"}),
    "interrupt": frozenset({"name"}),
    "resume": frozenset({"prompt"}),
    "runs": frozenset({"prompt", "model"}),
}


def _text_ok(value: object, *, required: bool = True) -> bool:
    """Whether the console's checks take `value` as a command's text (docs/web.md)."""
    if value is None:
        return not required
    if not isinstance(value, str) or "\x00" in value or len(value) > MAX_COMMAND_TEXT:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(value.strip()) or not required


def _could_start(route: str, body: object) -> bool:
    """Whether a body is well-formed enough that a control could start a process for it."""
    if not isinstance(body, dict):
        return False
    fields = cast("dict[str, Any]", body)
    if set(fields) - ALLOWED[route]:
        return False
    if route == "runs":
        model = fields.get("model")
        return _text_ok(fields.get("prompt")) and isinstance(model, str) and _text_ok(model)
    if route == "resume":
        return _text_ok(fields.get("prompt"), required=False)
    name = fields.get("name")
    if not (isinstance(name, str) and name.lstrip("/") in {"lead", "keeper", "scout"}):
        return False
    return route == "interrupt" or _text_ok(fields.get("message"))


def _post(page: Console, path: str, content: bytes) -> httpx.Response:
    headers = {**page.cookie_auth, "origin": page.origin, "content-type": "application/json"}
    return page.client.post(path, content=content, headers=headers)


def test_any_body_to_a_control_is_refused_cleanly_and_starts_nothing(
    store: Path, stored_tree: str
) -> None:
    with console(store) as page:
        before = snapshot(store)

        @FUZZ
        @given(
            route=st.sampled_from(sorted(ALLOWED)),
            real_root=st.booleans(),
            body=BODIES,
        )
        def check(route: str, real_root: bool, body: object) -> None:
            if route == "runs":
                path = "/api/runs"  # the console has no model: a run needs one in the body
                assume(not _could_start(route, body))
            elif real_root and route != "resume":
                path = f"/api/sessions/{stored_tree}/{route}"
                assume(not _could_start(route, body))
            else:
                path = f"/api/sessions/{MISSING_ROOT}/{route}"
            response = _post(page, path, json.dumps(body).encode())
            assert response.status_code in (400, 404, 409, 413, 415), (
                path,
                body,
                response.status_code,
                response.text[:300],
            )
            assert_error(response, CONTROL_CODES)
            assert page.jobs() == []

        check()

        @FUZZ
        @given(route=st.sampled_from(sorted(ALLOWED)), content=st.binary(max_size=300))
        def check_bytes(route: str, content: bytes) -> None:
            try:
                body: object = json.loads(content or b"{}")  # no body at all reads as `{}`
            except ValueError:
                body = None
            else:
                assume(not _could_start(route, body))
            path = "/api/runs" if route == "runs" else f"/api/sessions/{stored_tree}/{route}"
            assume(route != "resume" or body is None)  # a resume with a valid body starts
            response = _post(page, path, content)
            assert response.status_code in (400, 404, 409, 413, 415), (content, response.text)
            assert_error(response, CONTROL_CODES)
            assert page.jobs() == []

        check_bytes()
        assert page.jobs() == []
        assert snapshot(store) == before


# --- headers -------------------------------------------------------------------------------

# A header value as HTTP can carry it: tabs, visible ASCII and obs-text (no CR, LF or NUL).
_FIELD = st.lists(
    st.one_of(st.just(9), st.integers(0x20, 0x7E), st.integers(0x80, 0xFF)), max_size=60
).map(bytes)


def _near_misses(token: str) -> st.SearchStrategy[str]:
    """Strings close to the token that are not it: one character dropped, added or changed."""

    def mutate(position: int, char: str, how: int) -> str:
        i = position % len(token)
        if how == 0:
            return token[:i] + token[i + 1 :]
        if how == 1:
            return token[:i] + char + token[i:]
        return token[:i] + char + token[i + 1 :]

    return (
        st.tuples(
            st.integers(0, len(token) - 1),
            st.characters(min_codepoint=0x21, max_codepoint=0x7E),
            st.integers(0, 2),
        )
        .map(lambda t: mutate(*t))
        .filter(lambda s: s != token)
    )


def test_only_the_exact_token_opens_the_door_whatever_the_headers(store: Path) -> None:
    with console(store) as page:
        right = {
            "cookie": f"{page.cookie}={page.token}".encode(),
            "authorization": f"Bearer {page.token}".encode(),
            "origin": page.origin.encode(),
            "host": f"127.0.0.1:{page.port}".encode(),
        }
        hosts = {f"{name}:{page.port}" for name in ("127.0.0.1", "localhost", "[::1]")}
        origins = {f"http://{host}" for host in hosts}
        near = _near_misses(page.token)
        wrong = {
            "cookie": st.one_of(
                _FIELD,
                near.map(lambda t: f"{page.cookie}={t}".encode()),
                near.map(lambda t: f"subagents-console-{page.port + 1}={t}".encode()),
            ),
            "authorization": st.one_of(
                _FIELD,
                near.map(lambda t: f"Bearer {t}".encode()),
                _FIELD.map(lambda b: b"Bearer " + b),
            ),
            "origin": st.one_of(_FIELD, st.sampled_from([b"null", b"http://evil.example"])),
            "host": st.one_of(_FIELD, st.sampled_from([b"evil.example", b"127.0.0.1:1"])),
        }

        def choice(name: str) -> st.SearchStrategy[bytes | None]:
            return st.one_of(st.none(), st.just(right[name]), wrong[name])

        before = snapshot(store)

        @FUZZ
        @given(
            post=st.booleans(),
            cookie=choice("cookie"),
            authorization=choice("authorization"),
            origin=choice("origin"),
            host=choice("host"),
        )
        def check(
            post: bool,
            cookie: bytes | None,
            authorization: bytes | None,
            origin: bytes | None,
            host: bytes | None,
        ) -> None:
            sent = {"cookie": cookie, "authorization": authorization, "origin": origin}
            sent["host"] = host
            headers = [(name.encode(), value) for name, value in sent.items() if value is not None]
            if post:
                response = page.client.post("/api/runs", json={"prompt": "go"}, headers=headers)
            else:
                response = page.client.get("/api/info", headers=headers)
            host_ok = host is None or host.decode("latin-1").lower() in hosts
            by_header = authorization == right["authorization"]
            authenticated = by_header or cookie == right["cookie"]
            origin_ok = (origin is None and by_header) or (
                origin is not None and origin.decode("latin-1").lower() in origins
            )
            if not host_ok:
                expected = (403, "BAD_HOST")
            elif not authenticated:
                expected = (401, "UNAUTHORIZED")
            elif not post:
                expected = (200, None)
            elif not origin_ok:
                expected = (403, "BAD_ORIGIN")
            else:
                expected = (400, "MODEL_MISSING")  # let in: the console has no model to run
            status, code = expected
            assert response.status_code == status, (headers, response.text[:300])
            if code is not None:
                assert_error(response, frozenset({code}))
            else:
                assert response.json()["tenant"] == "default"
            assert "set-cookie" not in response.headers

        check()
        assert page.jobs() == []
        assert snapshot(store) == before


def test_a_valid_token_is_never_taken_from_a_near_miss_in_the_address(store: Path) -> None:
    with console(store) as page:

        @FUZZ
        @given(token=_near_misses(page.token))
        def check(token: str) -> None:
            response = page.client.get("/api/info", params={"token": token})
            assert "set-cookie" not in response.headers
            assert_error(response, frozenset({"UNAUTHORIZED"}))

        check()


def test_any_sessions_filter_is_answered(store: Path, stored_tree: str) -> None:
    with console(store) as page:

        @FUZZ
        @given(query=st.text(max_size=60))
        def check(query: str) -> None:
            response = page.client.get(
                "/api/sessions", params={"q": query}, headers=page.cookie_auth
            )
            assert response.status_code == 200
            ids = [row["session_id"] for row in response.json()["sessions"]]
            assert ids in ([], [stored_tree])
            if not query or query.lower() in stored_tree:
                assert ids == [stored_tree]

        check()


def test_a_root_that_is_not_one_is_not_found_with_one_line(store: Path, stored_tree: str) -> None:
    with console(store) as page:

        @FUZZ
        @given(
            root=st.one_of(
                st.text(min_size=1, max_size=60).filter(lambda s: "/" not in s),
                st.uuids().map(str),
                st.text(max_size=4).map(lambda s: stored_tree + s),
                st.sampled_from([f"{stored_tree}\n", f"{MISSING_ROOT}\n", f" {stored_tree}"]),
            )
        )
        def check(root: str) -> None:
            assume(root != stored_tree)
            for route in ("tree", "timeline"):
                path = f"/api/sessions/{quote(root, safe='').replace('.', '%2E')}/{route}"
                response = page.client.get(path, headers=page.cookie_auth)
                assert response.status_code == 404, (root, response.text)
                assert_error(response, frozenset({"NOT_FOUND"}))

        check()
