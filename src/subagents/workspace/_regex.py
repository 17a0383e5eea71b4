"""Linear-time regular expressions for `grep`: a small typed face on google-re2.

Python's `re` backtracks, so a pattern such as `(a+)+$` can take exponential time on one line,
in a worker thread that cannot be cancelled. RE2 matches in time linear in the text, at the
price of the features that need backtracking (backreferences, lookaround, atomic groups and
possessive repetitions). A pattern that uses them is refused with a message that says so.

google-re2 ships no type information, so its few entry points used here are described by
`Protocol`s and the module is cast to them once.
"""

from __future__ import annotations

import re
from typing import Protocol, cast

import re2 as _untyped_re2  # pyright: ignore[reportMissingTypeStubs]

from ..errors import ErrorCode, ToolError

__all__ = ["Regex", "compile_regex"]


class Regex(Protocol):
    """A compiled RE2 pattern (only what `grep` uses)."""

    def search(self, text: str) -> object | None: ...


class _Options(Protocol):
    log_errors: bool


class _Re2(Protocol):
    error: type[Exception]

    def Options(self) -> _Options: ...  # the library's name

    def compile(self, pattern: str, options: _Options | None = None) -> Regex: ...


_re2 = cast("_Re2", _untyped_re2)

# What RE2's parser says about the constructs it leaves out on purpose (and, where its message
# is too short to tell, what the pattern holds), and how to name them.
_UNSUPPORTED = (
    (r"invalid escape sequence: \\[1-9]", "", "backreferences (\\1)"),
    (r"invalid perl operator: \(\?P$", r"\(\?P=", "named backreferences ((?P=name))"),
    (r"invalid perl operator: \(\?<?[=!]", "", "lookaround ((?=, (?!, (?<=, (?<!)"),
    (r"invalid perl operator: \(\?>", "", "atomic groups ((?>...))"),
    (r"bad repetition operator: [*+?}]\+", "", "possessive repetition (a++)"),
    (r"invalid escape sequence: \\Z", "", "\\Z (RE2 spells the end of text \\z)"),
)


def _options() -> _Options:
    options = _re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to the process's stderr
    return options


def compile_regex(pattern: str) -> Regex:
    """`pattern` compiled with RE2, or a one-line `INVALID_PATTERN` tool error saying why not."""
    try:
        return _re2.compile(pattern, _options())
    except _re2.error as exc:
        raw = exc.args[0] if exc.args else ""
        reason = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        raise _invalid(pattern, reason) from exc


def _invalid(pattern: str, reason: str) -> ToolError:
    for said, holds, feature in _UNSUPPORTED:
        if re.search(said, reason) and re.search(holds, pattern):
            message = (
                f"unsupported regular expression {pattern!r}: it uses {feature}, which grep's "
                "RE2 syntax does not support (RE2 leaves out what needs backtracking)"
            )
            break
    else:
        message = f"invalid regular expression {pattern!r}: {reason} (grep uses RE2 syntax)"
    return ToolError(message, code=ErrorCode.INVALID_PATTERN, pattern=pattern)
