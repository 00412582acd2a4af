"""Where a request goes and with which key: :func:`resolve_api_key`, :class:`Endpoint` /
:func:`resolve_endpoint` (base URL, key and its environment variable for one backend) and :func:`join_url`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

import msgspec

from ...errors import ConfigurationError
from .secrets import mask_url

__all__ = ["Endpoint", "join_url", "resolve_api_key", "resolve_endpoint"]


def resolve_api_key(api_key: str | None, env_var: str | None, *, required: bool) -> str | None:
    """The key from ``api_key``, else from the environment variable ``env_var``.

    Raises:
        ConfigurationError: ``required`` and no key was found (the message names the variable,
            never a key).
    """
    key = api_key or (os.environ.get(env_var) if env_var else None) or None
    if key is None and required:
        raise ConfigurationError(f"no API key: pass api_key=... or set the {env_var} environment variable")
    return key


class Endpoint(msgspec.Struct, frozen=True):
    """Where a backend sends its requests and with which key (see :func:`resolve_endpoint`).

    Attributes:
        base_url: the API base URL.
        api_key: the key to send, or ``None``.
        official: ``base_url`` is the provider's own host over HTTPS.
    """

    base_url: str
    api_key: str | None
    official: bool


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, lower-cased, the default port filled in; a URL whose
    port does not parse gives port ``-1`` (it pairs with nothing)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


def resolve_endpoint(
    *,
    api_key: str | None,
    base_url: str | None,
    key_env: str,
    base_env: str,
    default_base_url: str,
    env: Mapping[str, str] | None = None,
) -> Endpoint:
    """The base URL and the key of a provider backend, by the key rule of ``docs/models.md``.

    The base URL is ``base_url``, else the environment variable ``base_env``
    (``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``, as the official SDKs read them), else
    ``default_base_url``. The key is ``api_key`` when given (the caller chose where it goes).
    A key read from the environment variable ``key_env`` is sent only to the provider's own
    host (the origin of ``default_base_url``, over HTTPS) or to the host the user paired with
    it in the environment (the origin of ``base_env``); to any other host no key is sent, so an
    ``OPENAI_API_KEY`` never reaches a third-party server by accident.

    Raises:
        ConfigurationError: the provider's own host and no key at all (the message names
            ``key_env``, never a key); a base URL with a query or fragment.
    """
    env = os.environ if env is None else env
    env_base = (env.get(base_env) or "").strip() or None
    chosen = (base_url or "").strip() or env_base or default_base_url
    if "?" in chosen or "#" in chosen:
        raise ConfigurationError(
            f"the base URL {mask_url(chosen)!r} has a query or fragment: a base URL is scheme, host,"
            " port and path only (the API path is appended to it)"
        )
    here = _origin(chosen)
    official = here == _origin(default_base_url) and here[0] == "https"
    key = api_key or None
    if key is None:
        paired = env_base is not None and here == _origin(env_base)
        if official or paired:
            key = env.get(key_env) or None
    if key is None and official:
        raise ConfigurationError(f"no API key: pass api_key=... or set the {key_env} environment variable")
    return Endpoint(base_url=chosen, api_key=key, official=official)


def join_url(base_url: str, path: str, *, version_prefix: str | None = None) -> str:
    """``base_url`` + ``path``. With ``version_prefix="/v1"`` the prefix is added unless the base
    already ends with it: ``join_url("http://h:8080", "/chat/completions", version_prefix="/v1")``
    and ``join_url("http://h:8080/v1/", ...)`` both give ``http://h:8080/v1/chat/completions``."""
    base = base_url.rstrip("/")
    if version_prefix and not base.endswith(version_prefix):
        base += version_prefix
    return base + path
