"""Choosing a model in one line: ``foundation_ai.model("openai:gpt-4o-mini")``.

The forms (``docs/models.md``), the same for the library, ``AgentSession.builder(...)`` and the
CLI's ``--model``:

- ``"local"`` (also ``""``, ``"default"``, ``"smollm2"``): the bundled SmolLM2-135M-Instruct,
  in-process via llama.cpp; no key, no network (needs the ``local`` extra).
- ``"gguf:PATH"``: any local GGUF file, in-process.
- ``"hf:PATH_OR_NAME"``: a Hugging Face ``transformers`` model (a local directory of
  ``config.json``, ``*.safetensors`` and tokenizer files, or a hub name), in-process on torch
  (needs the ``transformers`` extra; options ``device``, ``dtype``, ``threads``).
- ``"openai:NAME"``: OpenAI Chat Completions, or any OpenAI-compatible server with ``base_url``.
- ``"responses:NAME"``: the OpenAI Responses API.
- ``"anthropic:NAME"``: the Anthropic Messages API.

The key rule (one rule for library and CLI): a key passed as ``api_key=`` goes where the model
goes. A key read from the environment (``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``) goes only to
the provider's own host, or to the host the user paired with it in the environment
(``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``); to any other ``base_url`` no key is sent.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .backends._http import mask_url, resolve_endpoint
from .errors import ConfigurationError

__all__ = ["PROVIDERS", "ModelSpec", "check_base_url", "load_model_spec", "model", "parse_model_string"]

LOCAL_ALIASES = frozenset({"", "local", "smollm2", "default"})
"""Spellings of the bundled model."""


@dataclass(frozen=True)
class _Provider:
    backend: str
    """The factory's name in ``foundation_ai.backends``."""
    key_env: str
    base_env: str
    default_base_url: str


PROVIDERS: dict[str, _Provider] = {
    "openai": _Provider("openai_chat", "OPENAI_API_KEY", "OPENAI_BASE_URL", "https://api.openai.com/v1"),
    "responses": _Provider(
        "openai_responses", "OPENAI_API_KEY", "OPENAI_BASE_URL", "https://api.openai.com/v1"
    ),
    "anthropic": _Provider(
        "anthropic", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "https://api.anthropic.com"
    ),
}
"""Model-string prefix -> backend factory, key and base-URL environment variables, own host."""


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model string.

    Attributes:
        kind: ``"local"`` (bundled model), ``"gguf"``, ``"hf"``, ``"openai"``, ``"responses"`` or
            ``"anthropic"``.
        name: the model name sent to the provider, or the GGUF path; ``""`` for the bundled one.
        base_url: the explicit base URL, for the HTTP kinds (``None``: the environment's
            ``*_BASE_URL`` or the provider's own host).
    """

    kind: str
    name: str = ""
    base_url: str | None = None

    @property
    def label(self) -> str:
        """A short display name, e.g. ``"openai:gpt-4o-mini"`` or ``"local:SmolLM2-135M-Instruct"``."""
        if self.kind == "local":
            return "local:SmolLM2-135M-Instruct"
        return f"{self.kind}:{self.name}"


def check_base_url(base_url: str, *, flag: str = "base_url") -> str:
    """``base_url`` stripped, if it is an absolute ``http://`` or ``https://`` URL with a host and
    a valid port; ``flag`` names the option in the error (``"--base-url"`` for the CLI).

    Raises:
        ConfigurationError: not an http(s) URL, no host, a bad port, or a query or fragment
            (the URL's password masked).
    """
    text = base_url.strip()
    try:
        parts = urlsplit(text)
        _ = parts.port
    except ValueError:
        raise ConfigurationError(f"{flag} {mask_url(base_url)!r} has a bad port") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"{flag} {mask_url(base_url)!r} is not an http(s) URL (e.g. http://127.0.0.1:8080/v1)"
        )
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise ConfigurationError(
            f"{flag} {mask_url(base_url)!r} has a query or fragment: a base URL is scheme, host, port"
            " and path only (the API path is appended to it)"
        )
    return text


def parse_model_string(spec: str | None, base_url: str | None = None, *, flag: str = "base_url") -> ModelSpec:
    """Parse a model string (see the module docstring for the forms). The provider prefix is
    case-insensitive; the name is kept as given (``"openai:org/model:tag"`` names
    ``org/model:tag``).

    Raises:
        ConfigurationError: not a string, an unknown prefix, a missing name, ``base_url`` with a local model,
            or a ``base_url`` that is not an http(s) URL (``flag`` names the option).
    """
    if spec is not None and not isinstance(spec, str):
        raise ConfigurationError(
            f"expected a model string such as 'local' or 'openai:gpt-4o-mini', got {type(spec).__name__}"
        )
    text = (spec or "").strip()
    if text.lower() in LOCAL_ALIASES:
        if base_url:
            raise ConfigurationError(
                f"{flag} needs an HTTP model, e.g. openai:NAME (the default model runs in-process)"
            )
        return ModelSpec("local")
    prefix, sep, name = text.partition(":")
    prefix = prefix.lower()
    if not sep:
        raise ConfigurationError(
            f"unknown model {text!r}: use PROVIDER:NAME (openai:, responses:, anthropic:, gguf:, hf:) or 'local'"
        )
    if not name:
        raise ConfigurationError(f"model {text!r} has no name after {prefix + ':'!r}")
    if prefix in ("gguf", "hf"):
        if base_url:
            raise ConfigurationError(f"{flag} needs an HTTP model, not {prefix}:")
        return ModelSpec(prefix, name)
    if prefix not in PROVIDERS:
        raise ConfigurationError(
            f"unknown model provider {prefix!r}: use openai:, responses:, anthropic:, gguf:, hf: or 'local'"
        )
    return ModelSpec(prefix, name, check_base_url(base_url, flag=flag) if base_url else None)


def load_model_spec(
    spec: ModelSpec,
    *,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    key_flag: str = "api_key=",
    base_flag: str = "base_url=",
    **options: Any,
) -> Any:
    """Build the backend for ``spec`` (a :class:`~foundation_ai.backends.Model`).

    The key follows the key rule of the module docstring (``env`` defaults to ``os.environ``).
    A local model gets its recommended sampling defaults (``docs/models.md``); ``options`` go to
    the backend factory (e.g. ``timeout=``, ``context_window=``). ``key_flag`` / ``base_flag``
    name the options in the error messages (the CLI passes ``--key`` / ``--base-url``).

    Raises:
        ConfigurationError: no key for the provider's own host; a key given for a local model;
            the ``local`` extra not installed; a GGUF file that does not exist; for ``hf:``, the
            ``transformers`` extra not installed or a model that does not load.
    """
    from . import backends

    env = os.environ if env is None else env
    if spec.kind == "hf":
        if api_key:
            raise ConfigurationError(f"{key_flag} is for HTTP models; {spec.label} runs in-process")
        factory = importlib.import_module("foundation_ai.backends._transformers").transformers_model
        _check_options(factory, options, spec)
        return factory(spec.name, **options)
    if spec.kind in ("local", "gguf"):
        if api_key:
            raise ConfigurationError(f"{key_flag} is for HTTP models; {spec.label} runs in-process")
        if spec.kind == "gguf" and not os.path.isfile(spec.name):
            raise ConfigurationError(f"no such GGUF file: {spec.name}")
        try:
            if spec.kind == "local" and not options:
                return backends.default_model()  # shared, loaded once per process
            factory = importlib.import_module("foundation_ai.backends._llamacpp").llamacpp
            _check_options(factory, options, spec)
            return factory(spec.name if spec.kind == "gguf" else None, **options)
        except ImportError as exc:
            raise ConfigurationError(
                f"local models need the 'local' extra (pip install 'foundation-ai[local]'): {exc}"
            ) from None
    prov = PROVIDERS[spec.kind]
    try:
        ep = resolve_endpoint(
            api_key=api_key,
            base_url=spec.base_url,
            key_env=prov.key_env,
            base_env=prov.base_env,
            default_base_url=prov.default_base_url,
            env=env,
        )
    except ConfigurationError:
        raise ConfigurationError(
            f"{prov.key_env} is not set: export {prov.key_env}=... or pass {key_flag}... to use "
            f"{spec.label} (or {base_flag}... for a server that needs no key)"
        ) from None
    # the factory from its own module: ``backends.<name>`` may be the module of the same name
    factory = getattr(importlib.import_module(f"foundation_ai.backends._{prov.backend}"), prov.backend)
    _check_options(factory, options, spec)
    return factory(spec.name, api_key=ep.api_key, base_url=ep.base_url, **options)


def _check_options(factory: Any, options: Mapping[str, Any], spec: ModelSpec) -> None:
    """Raise for an option ``factory`` does not take (never ignore a misspelt keyword)."""
    params = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(options) - set(params))
    if unknown:
        valid = ", ".join(n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY)
        raise ConfigurationError(f"unknown option(s) {', '.join(unknown)} for {spec.label}; valid: {valid}")


def model(
    spec: str = "local",
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> Any:
    """The model a model string names, ready to use::

        from foundation_ai import model
        m = model("openai:gpt-4o-mini")                       # OPENAI_API_KEY
        m = model("anthropic:claude-sonnet-4-5")              # ANTHROPIC_API_KEY
        m = model("openai:qwen3", base_url="http://127.0.0.1:8080")   # no key is sent
        m = model("gguf:/models/qwen3-4b.gguf")               # in-process
        m = model("local")                                    # the bundled SmolLM2-135M

    Args:
        spec: ``"local"``, ``"gguf:PATH"``, ``"openai:NAME"``, ``"responses:NAME"`` or
            ``"anthropic:NAME"`` (``docs/models.md``).
        base_url: another server for the HTTP kinds (default: ``OPENAI_BASE_URL`` /
            ``ANTHROPIC_BASE_URL``, else the provider's own host).
        api_key: the key to send (default: the provider's key variable, sent only to its own
            host or the host paired with it in the environment).
        env: the environment to read (default ``os.environ``).
        options: passed to the backend factory (``timeout``, ``deadline``, ``context_window``...).

    Returns:
        A :class:`~foundation_ai.backends.Model`.

    Raises:
        ConfigurationError: a malformed string, an unknown provider, a missing key for the
            provider's own host, a missing GGUF file, or the ``local`` extra not installed.
    """
    return load_model_spec(parse_model_string(spec, base_url), api_key=api_key, env=env, **options)
