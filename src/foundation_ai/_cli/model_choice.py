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

The parsing and the key rule live in the library (``foundation_ai.model``, ``docs/models.md``):
a key from the environment is never sent to a ``--base-url`` the user did not pair with it in
``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``; ``--key`` sends a key anywhere.

Errors are :class:`~foundation_ai.errors.ConfigurationError` with a one-line message fit to print
as is.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from .._model_string import ModelSpec, load_model_spec, parse_model_string
from .._model_string import check_base_url as _check_base_url
from ..backends._http import mask_url
from ..errors import ProviderError

__all__ = ["ModelChoice", "check_base_url", "check_reachable", "load_model", "parse_model_spec"]

ModelChoice = ModelSpec
"""A parsed ``--model`` spec (the library's :class:`~foundation_ai._model_string.ModelSpec`)."""


def check_base_url(base_url: str) -> str:
    """``base_url`` if it is an absolute http(s) URL with a host and a valid port
    (:func:`foundation_ai._model_string.check_base_url` naming ``--base-url``).

    Raises:
        ConfigurationError: not an http(s) URL, no host, or a bad port.
    """
    return _check_base_url(base_url, flag="--base-url")


def parse_model_spec(spec: str | None, base_url: str | None = None) -> ModelChoice:
    """Parse a ``--model`` value (the library's model strings, errors naming ``--base-url``).

    Raises:
        ConfigurationError: an unknown prefix, a missing name, ``--base-url`` with a local
            model, or a ``--base-url`` that is not an http(s) URL.
    """
    return parse_model_string(spec, base_url, flag="--base-url")


def load_model(choice: ModelChoice, env: Mapping[str, str] | None = None, api_key: str | None = None) -> Any:
    """Build the backend for ``choice`` (a ``foundation_ai.backends.Model``) by the library's key
    rule (``docs/models.md``): ``api_key`` (the ``--key`` flag) goes where the model goes; a key
    from ``env`` (default ``os.environ``: ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``) only to the
    provider's own host or to the host paired with it in ``OPENAI_BASE_URL`` /
    ``ANTHROPIC_BASE_URL`` -- never to another ``--base-url``.

    Raises:
        ConfigurationError: a missing key for the provider's own host, the ``local`` extra not
            installed, or a GGUF file that does not exist (one-line messages).
    """
    return load_model_spec(choice, api_key=api_key, env=env, key_flag="--key", base_flag="--base-url")


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
