"""Property-based fuzzing of the command line and the files it reads.

Whatever the arguments, model script or definition file, a command exits 0, 1 or 2, never
prints a traceback, and a refused command (exit 2) leaves the store exactly as it was. The CLI
runs in-process through its real entry point (`subagents.cli.main`), since a subprocess per
example would be too slow; each example gets a fresh temporary directory.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from blockbuster import blockbuster_ctx
from hypothesis import HealthCheck, given, settings, strategies as st

from subagents.cli import main

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,  # the same examples every run: a failure here is reproducible
)
GOOD_SCRIPT = "lead: [{text: done}, {text: again}, {text: more}]\n"


@pytest.fixture(autouse=True)
def no_blocking_calls_in_the_loop() -> Generator[None, None, None]:
    """The suite's guard (tests/conftest.py), with the calls it allows for in-process runs."""
    with blockbuster_ctx("subagents") as buster:
        for function in buster.functions.values():
            function.can_block_in("openai/_base_client.py", "__init__")
            function.can_block_in("subagents/models/_scripted.py", "from_file")
        yield


@dataclass(frozen=True, slots=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def _invoke(args: list[str], home: Path) -> Outcome:
    """`subagents ARGS` in this process with its own SUBAGENTS_HOME and captured streams.

    It runs in the example's own directory (the parent of `home`), so a relative path the
    fuzzer made up (`--store --store`) lands there, never in the repository.
    """
    saved = dict(os.environ)
    for key in list(os.environ):
        if key.startswith(("SUBAGENTS_", "OPENAI_", "DEEPSEEK_")):
            del os.environ[key]
    os.environ["SUBAGENTS_HOME"] = str(home)
    out, err = io.StringIO(), io.StringIO()
    # Under pytest, log records go to its handler rather than stderr: keep them to check too.
    logged = _Records()
    logging.getLogger().addHandler(logged)
    code: int | str | None = 0
    try:
        with (
            contextlib.chdir(home.parent),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                main(args)
            except SystemExit as exc:
                code = exc.code
    finally:
        logging.getLogger().removeHandler(logged)
        os.environ.clear()
        os.environ.update(saved)
    assert isinstance(code, int | None), code
    tracebacks = [r.getMessage() for r in logged.records if r.exc_info]
    return Outcome(
        code or 0,
        out.getvalue(),
        err.getvalue() + "".join(f"Traceback logged with: {m}\n" for m in tracebacks),
    )


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _snapshot(store: Path) -> bytes | None:
    return store.read_bytes() if store.exists() else None


def _check(outcome: Outcome, store: Path, before: bytes | None) -> None:
    assert outcome.code in (0, 1, 2), outcome
    assert "Traceback" not in outcome.stderr, outcome.stderr
    assert "Traceback" not in outcome.stdout, outcome.stdout
    if outcome.code == 2:
        assert _snapshot(store) == before, "a refused command changed the store"


@contextlib.contextmanager
def _workspace() -> Generator[Path, None, None]:
    with tempfile.TemporaryDirectory(prefix="fuzz-cli-") as name:
        root = Path(name)
        (root / "home").mkdir()
        (root / "project").mkdir()
        yield root


_SEEDED: dict[str, bytes] = {}


def _seeded_store(root: Path) -> tuple[Path, str]:
    """A store holding one finished session (built once, copied per example)."""
    store = root / "state.db"
    if "db" not in _SEEDED:
        script = root / "good.yaml"
        script.write_text(GOOD_SCRIPT, encoding="utf-8")
        done = _invoke(
            ["run", "hello", "--model", f"scripted:{script}", "--store", str(store), "--json"],
            root / "home",
        )
        assert done.code == 0, done
        _SEEDED["db"] = store.read_bytes()
        _SEEDED["id"] = str(json.loads(done.stdout)["session_id"]).encode()
    store.write_bytes(_SEEDED["db"])
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(f"{store}{suffix}")
    return store, _SEEDED["id"].decode()


def _dump(data: object) -> str:
    text: str = yaml.safe_dump(data, allow_unicode=True)  # pyright: ignore[reportUnknownMemberType]
    return text


# -- strategies ------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_Strategies = dict[str, st.SearchStrategy[object]]
_NONE: _Strategies = {}
_CALL: _Strategies = {"tool": st.sampled_from(["read", "grep", "subagent", "nope", ""])}
_CALL_OPTIONAL: _Strategies = {"args": _values, "id": _values}
_RESPONSE_OPTIONAL: _Strategies = {
    "text": _values,
    "calls": st.lists(
        st.fixed_dictionaries(_CALL, optional=_CALL_OPTIONAL),
        max_size=2,
    ),
    "error": _values,
    "stop": st.sampled_from(["max-tokens", "refusal", "other"]),
    "sleep": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.just(0)),
    "usage": st.dictionaries(
        st.sampled_from(["input_tokens", "output_tokens", "bogus"]), _values, max_size=2
    ),
}
_response = st.fixed_dictionaries(_NONE, optional=_RESPONSE_OPTIONAL)
_structured_script = st.dictionaries(
    st.sampled_from(["lead", "*", "reviewer", ""]), st.lists(_response, max_size=3), max_size=2
).map(_dump)
_hostile_text = st.sampled_from(
    [
        "lead: [{text: " + "[" * 500 + "]" * 500 + "}]\n",
        'a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n'
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
        "lead: [{text: a, calls: [{tool: t, args: {x: *e}}]}]\n",
        'lead: [{text: "\\ud800"}]\n',
        "lead: [{text: a, sleep: .inf}]\n",
        "lead: [{text: " + "9" * 5000 + "}]\n",
        "lead: &x [*x]\n",
    ]
)
_script_text = st.one_of(st.text(max_size=200), _structured_script, _hostile_text)
_script_bytes = st.one_of(_script_text.map(lambda t: t.encode("utf-8")), st.binary(max_size=200))


@FUZZ
@given(script=_script_bytes)
def test_any_model_script(script: bytes) -> None:
    with _workspace() as root:
        path = root / "script.yaml"
        path.write_bytes(script)
        store = root / "state.db"
        args = ["run", "go", "--model", f"scripted:{path}", "--store", str(store)]
        args += ["--cwd", str(root / "project")]
        _check(_invoke(args, root / "home"), store, None)


_frontmatter = st.one_of(
    st.text(max_size=200),
    st.dictionaries(
        st.sampled_from(
            ["name", "description", "tools", "model", "max_depth", "budget", "output_schema", "x"]
        ),
        _values,
        max_size=5,
    ).map(_dump),
    _hostile_text,
)
_definition = st.tuples(_frontmatter, st.text(max_size=60)).map(
    lambda parts: f"---\n{parts[0]}\n---\n{parts[1]}\n"
)


@FUZZ
@given(definition=st.one_of(_definition, st.text(max_size=200)), use=st.booleans())
def test_any_definition_file(definition: str, use: bool) -> None:
    with _workspace() as root:
        agents = root / "project" / ".subagents" / "agents"
        agents.mkdir(parents=True)
        (agents / "fuzzed.md").write_text(definition, encoding="utf-8", errors="surrogatepass")
        script = root / "good.yaml"
        script.write_text(GOOD_SCRIPT, encoding="utf-8")
        store = root / "state.db"
        home = root / "home"
        _check(_invoke(["agents", "--cwd", str(root / "project")], home), store, None)
        args = ["run", "go", "--model", f"scripted:{script}", "--store", str(store)]
        args += ["--cwd", str(root / "project")] + (["--agent", "fuzzed"] if use else [])
        _check(_invoke(args, home), store, None)


_COMMANDS = ["run", "resume", "send", "steer", "interrupt", "watch", "agents", "sessions", "tree",
             "log", "demo"]  # fmt: skip
_OPTIONS = ["--model", "--store", "--tenant", "--cwd", "--agent", "--json", "--stream",
            "--sandbox", "--budget-tokens", "--budget-model-calls", "--session", "--last",
            "--interval", "-h"]  # fmt: skip
_word = st.one_of(
    st.sampled_from(["lead", "reviewer", "reviewer/", "/reviewer", "//x", "", "-", "..", "a/b"]),
    st.text(max_size=30),
    st.integers().map(str),
    st.sampled_from(_OPTIONS),
)


@FUZZ
@given(command=st.sampled_from(_COMMANDS), words=st.lists(_word, max_size=6), data=st.data())
def test_any_arguments_against_a_stored_session(
    command: str, words: list[str], data: st.DataObject
) -> None:
    if command == "demo":
        words = [w for w in words if w not in ("-h",)]
    with _workspace() as root:
        store, session = _seeded_store(root)
        script = root / "good.yaml"
        script.write_text(GOOD_SCRIPT, encoding="utf-8")
        extras = data.draw(
            st.lists(
                st.sampled_from(
                    [session, session[:8], f"scripted:{script}", str(store), "--store", "--model"]
                ),
                max_size=3,
            )
        )
        args = [command, *data.draw(st.permutations([*words, *extras]))]
        if "--store" not in args:
            args += ["--store", str(store)]
        before = _snapshot(store)
        _check(_invoke(args, root / "home"), store, before)
        shutil.rmtree(root / "home", ignore_errors=True)
