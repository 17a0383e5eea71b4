"""Model specs and `open_model`, which builds the model a spec names.

The forms: `scripted:PATH`, `openai:MODEL`, `deepseek:MODEL`, `openai-compatible:MODEL@BASE_URL`,
`anthropic:MODEL`. `anthropic` needs the optional SDK (`pip install 'subagents[anthropic]'`),
its key in `ANTHROPIC_API_KEY` and, for a proxy, `ANTHROPIC_BASE_URL`.

A spec holds no secret: it is recorded in the session so that `resume` can reuse it. API keys
and base URLs from the environment are read only when the model is opened.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias
from urllib.parse import urlsplit

from subagents.errors import ConfigError, ErrorCode

from ._base import Model

__all__ = ["ModelSpec", "ModelSpecKind", "open_model", "parse_model_spec"]

ModelSpecKind: TypeAlias = Literal[
    "scripted", "openai", "deepseek", "openai-compatible", "anthropic"
]

ACCEPTED_FORMS = (
    "scripted:PATH, openai:MODEL, deepseek:MODEL, openai-compatible:MODEL@BASE_URL, anthropic:MODEL"
)
OPENAI_BASE_URL = "https://api.openai.com/v1"
DEEPSEEK_BASE_URL = "https://api.deepseek.com"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
PLACEHOLDER_API_KEY = "not-needed"
_COMPATIBLE = re.compile(r"(?P<model>.*?)@(?P<url>https?://.*)", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A parsed model spec.

    `model` is the model name (the script path for `scripted`); `base_url` is set only for
    `openai-compatible`. `str(spec)` gives the spec back in canonical form.
    """

    kind: ModelSpecKind
    model: str
    base_url: str | None = None

    def __str__(self) -> str:
        if self.kind == "openai-compatible":
            return f"{self.kind}:{self.model}@{self.base_url}"
        return f"{self.kind}:{self.model}"


def _invalid(spec: str, reason: str) -> ConfigError:
    return ConfigError(
        f"model spec {spec!r} is not valid: {reason}; use one of {ACCEPTED_FORMS}",
        code=ErrorCode.MODEL_SPEC_INVALID,
        spec=spec,
    )


def _is_http_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme.lower() in {"http", "https"} and bool(parts.hostname)


def parse_model_spec(spec: str) -> ModelSpec:
    """Parse a model spec; a malformed one raises `ConfigError` (`MODEL_SPEC_INVALID`)."""
    kind, colon, rest = spec.strip().partition(":")
    if not colon:
        raise _invalid(spec, "it has no 'KIND:' prefix")
    rest = rest.strip()
    match kind.strip().lower():
        case "scripted":
            if not rest:
                raise _invalid(spec, "the script path is empty")
            return ModelSpec(kind="scripted", model=rest)
        case "openai" | "deepseek" | "anthropic" as named:
            if not rest:
                raise _invalid(spec, "the model name is empty")
            return ModelSpec(kind=named, model=rest)
        case "openai-compatible":
            found = _COMPATIBLE.fullmatch(rest)
            if found is None:
                raise _invalid(spec, "it needs MODEL@BASE_URL with an http(s) base URL")
            model, url = found["model"].strip(), found["url"].strip()
            if not model:
                raise _invalid(spec, "the model name is empty")
            if not _is_http_url(url):
                raise _invalid(spec, f"base URL {url!r} is not an http(s) URL with a host")
            return ModelSpec(kind="openai-compatible", model=model, base_url=url)
        case _:
            raise _invalid(spec, f"unknown kind {kind!r}")


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _require_key(env: Mapping[str, str], variable: str, spec: ModelSpec) -> str:
    key = _get(env, variable)
    if key is None:
        raise ConfigError(
            f"model {str(spec)!r} needs an API key; set {variable}",
            code=ErrorCode.MISSING_CREDENTIAL,
            variable=variable,
        )
    return key


def _base_url_from(env: Mapping[str, str], variable: str, default: str) -> str:
    url = _get(env, variable)
    if url is None:
        return default
    if not _is_http_url(url):
        raise ConfigError(
            f"{variable}={url!r} is not an http(s) URL; fix or unset it",
            code=ErrorCode.CONFIG,
            variable=variable,
        )
    return url


def open_model(spec: str | ModelSpec, *, env: Mapping[str, str] | None = None) -> Model:
    """Build the model a spec names, reading keys and base URLs from `env` (`os.environ`).

    Raises `ConfigError`: `MODEL_SPEC_INVALID`, `MISSING_CREDENTIAL`, `CONFIG` for a bad base
    URL in the environment or a missing optional SDK, or the scripted model's codes for an
    unreadable or bad script.
    """
    parsed = parse_model_spec(spec) if isinstance(spec, str) else spec
    environ: Mapping[str, str] = os.environ if env is None else env
    if parsed.kind == "scripted":
        from ._scripted import ScriptedModel

        return ScriptedModel.from_file(parsed.model)
    if parsed.kind == "anthropic":
        return _open_anthropic(parsed, environ)
    from ._openai import OpenAICompatModel  # lazy: the openai SDK is slow to import

    match parsed.kind:
        case "openai":
            return OpenAICompatModel(
                parsed.model,
                base_url=_base_url_from(environ, "OPENAI_BASE_URL", OPENAI_BASE_URL),
                api_key=_require_key(environ, "OPENAI_API_KEY", parsed),
                provider="openai",
            )
        case "deepseek":
            return OpenAICompatModel(
                parsed.model,
                base_url=_base_url_from(environ, "DEEPSEEK_BASE_URL", DEEPSEEK_BASE_URL),
                api_key=_require_key(environ, "DEEPSEEK_API_KEY", parsed),
                provider="deepseek",
            )
        case "openai-compatible":
            return OpenAICompatModel(
                parsed.model,
                base_url=parsed.base_url,
                api_key=_get(environ, "OPENAI_API_KEY") or PLACEHOLDER_API_KEY,
                provider="openai-compatible",
            )


def _open_anthropic(spec: ModelSpec, env: Mapping[str, str]) -> Model:
    # The key and URL are checked first: they are wrong more often than the SDK is missing.
    base_url = _base_url_from(env, "ANTHROPIC_BASE_URL", ANTHROPIC_BASE_URL)
    api_key = _require_key(env, "ANTHROPIC_API_KEY", spec)
    try:
        from ._anthropic import AnthropicModel  # lazy: the SDK is an optional extra
    except ImportError as exc:
        if not (exc.name or "").startswith("anthropic"):
            raise  # not the SDK's own absence: a bug to see as is
        # A name missing from an installed SDK (`from anthropic import X`) means it is too old.
        missing = isinstance(exc, ModuleNotFoundError) and exc.name == "anthropic"
        state = "is not installed" if missing else "is too old"
        raise ConfigError(
            f"model {str(spec)!r} needs the anthropic SDK, which {state}; "
            "pip install -U 'subagents[anthropic]'",
            code=ErrorCode.CONFIG,
            package="anthropic",
        ) from exc
    return AnthropicModel(spec.model, base_url=base_url, api_key=api_key)
