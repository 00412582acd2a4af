"""``--model`` / ``--base-url``: which backend the CLI talks to.

Model specs (``--model``):

- omitted, ``local`` or ``smollm2``: the bundled SmolLM2-135M-Instruct, in-process via llama.cpp
  (``backends.default_model()``); no key, no network.
- ``gguf:PATH``: any local GGUF file, in-process (``backends.llamacpp(PATH)``).
- ``openai:NAME``: OpenAI Chat Completions (``backends.openai_chat``); key ``OPENAI_API_KEY``.
  With ``--base-url`` it talks to any OpenAI-compatible server (llama-server, vLLM, Ollama, LM
  Studio, OpenRouter); the key is then optional.
- ``responses:NAME``: the OpenAI Responses API (``backends.openai_responses``); key
  ``OPENAI_API_KEY`` (optional with ``--base-url``).
- ``anthropic:NAME``: the Anthropic Messages API (``backends.anthropic``); key
  ``ANTHROPIC_API_KEY`` (optional with ``--base-url``).

Errors are :class:`~foundation_ai.errors.ConfigurationError` with a one-line message fit to print
as is.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..backends._http import mask_url
from ..errors import ConfigurationError, ProviderError

__all__ = ["ModelChoice", "check_base_url", "check_reachable", "load_model", "parse_model_spec"]

_LOCAL_ALIASES = frozenset({"", "local", "smollm2", "default"})

_PROVIDERS: dict[str, tuple[str, str]] = {
    # prefix -> (backend function in foundation_ai.backends, API key environment variable)
    "openai": ("openai_chat", "OPENAI_API_KEY"),
    "responses": ("openai_responses", "OPENAI_API_KEY"),
    "anthropic": ("anthropic", "ANTHROPIC_API_KEY"),
}


@dataclass(frozen=True)
class ModelChoice:
    """A parsed ``--model`` spec.

    Attributes:
        kind: ``"local"`` (bundled model), ``"gguf"``, ``"openai"``, ``"responses"`` or
            ``"anthropic"``.
        name: the model name sent to the provider, or the GGUF path; ``""`` for the bundled one.
        base_url: ``--base-url``, for the HTTP kinds.
    """

    kind: str
    name: str = ""
    base_url: str | None = None

    @property
    def label(self) -> str:
        """A short display name, e.g. ``"openai:gpt-4o-mini"`` or ``"local:SmolLM2-135M"``."""
        if self.kind == "local":
            return "local:SmolLM2-135M-Instruct"
        return f"{self.kind}:{self.name}"


def check_base_url(base_url: str) -> str:
    """``base_url`` if it is an absolute ``http://`` or ``https://`` URL with a host and a valid
    port (``--base-url``), else a one-line error naming it.

    Raises:
        ConfigurationError: not an http(s) URL, no host, or a bad port.
    """
    from urllib.parse import urlsplit

    text = base_url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ConfigurationError(f"--base-url {mask_url(base_url)!r} has a bad port") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"--base-url {mask_url(base_url)!r} is not an http(s) URL (e.g. http://127.0.0.1:8080/v1)"
        )
    del port  # read only to validate it
    return text


def parse_model_spec(spec: str | None, base_url: str | None = None) -> ModelChoice:
    """Parse a ``--model`` value (see the module docstring for the forms).

    Raises:
        ConfigurationError: an unknown prefix, a missing name, ``--base-url`` with a local
            model, or a ``--base-url`` that is not an http(s) URL.
    """
    text = (spec or "").strip()
    if text.lower() in _LOCAL_ALIASES:
        if base_url:
            raise ConfigurationError(
                "--base-url needs an HTTP model, e.g. --model openai:NAME (the default model runs in-process)"
            )
        return ModelChoice("local")
    prefix, sep, name = text.partition(":")
    prefix = prefix.lower()
    if not sep:
        raise ConfigurationError(
            f"unknown model {text!r}: use PROVIDER:NAME (openai:, responses:, anthropic:, gguf:) or 'local'"
        )
    if not name:
        raise ConfigurationError(f"model {text!r} has no name after {prefix + ':'!r}")
    if prefix == "gguf":
        if base_url:
            raise ConfigurationError("--base-url needs an HTTP model, not gguf:")
        return ModelChoice("gguf", name)
    if prefix not in _PROVIDERS:
        raise ConfigurationError(
            f"unknown model provider {prefix!r}: use openai:, responses:, anthropic:, gguf: or 'local'"
        )
    return ModelChoice(prefix, name, check_base_url(base_url) if base_url else None)


def load_model(choice: ModelChoice, env: Mapping[str, str] | None = None) -> Any:
    """Build the backend for ``choice`` (a ``foundation_ai.backends.Model``).

    API keys come from ``env`` (default ``os.environ``): ``OPENAI_API_KEY`` or
    ``ANTHROPIC_API_KEY``. Without ``--base-url`` the key is required; with it, a key is used
    when set and otherwise none is sent (local servers need none).

    Raises:
        ConfigurationError: a missing key, the ``local`` extra not installed, or a GGUF file
            that does not exist (one-line messages).
    """
    from .. import backends

    env = os.environ if env is None else env
    if choice.kind == "local":
        try:
            return backends.default_model()
        except ImportError as exc:
            raise ConfigurationError(
                f"the bundled model needs the 'local' extra (pip install 'foundation-ai[local]'): {exc}"
            ) from None
    if choice.kind == "gguf":
        if not os.path.isfile(choice.name):
            raise ConfigurationError(f"no such GGUF file: {choice.name}")
        try:
            return backends.llamacpp(choice.name)
        except ImportError as exc:
            raise ConfigurationError(
                f"local models need the 'local' extra (pip install 'foundation-ai[local]'): {exc}"
            ) from None
    func_name, env_var = _PROVIDERS[choice.kind]
    key = env.get(env_var) or None
    if key is None and not choice.base_url:
        raise ConfigurationError(
            f"{env_var} is not set: export {env_var}=... to use {choice.kind}:{choice.name} "
            f"(or pass --base-url for a server that needs no key)"
        )
    factory = getattr(backends, func_name)
    kwargs: dict[str, Any] = {"api_key": key}
    if choice.base_url:
        kwargs["base_url"] = choice.base_url
    return factory(choice.name, **kwargs)


def check_reachable(base_url: str, timeout: float = 5.0) -> None:
    """Open (and close) a TCP connection to ``base_url``'s host and port.

    ``chat`` calls this before its first prompt when ``--base-url`` is given, so a server that is
    down is reported at once instead of after the user typed something.

    Raises:
        ConfigurationError: not an http(s) URL (see :func:`check_base_url`).
        ProviderError: the connection is refused, times out or the host is unknown.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(check_base_url(base_url))
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ProviderError(f"cannot reach {mask_url(base_url)}: {reason}") from None
