"""What a session records about itself (model string, system prompt, tool names) and how a
resumed session gets it back.

Every append of a session carries a :class:`~foundation_ai.agentic.stores.SessionHeader` when
the header changed (its first append, or after a change), so the store's metadata row names the
model, system prompt and tools of the session, and the base URL of an HTTP model that is not on
its provider's own host (without user name, password, query or fragment). ``AgentSessionBuilder
.resume(id)`` uses the stored row for what the builder was not given: the model (through
``foundation_ai.model(...)``, with the recorded base URL), the system prompt, and the tools whose
names were recorded (from the builder's tool catalog).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ..types import ModelProviders
from .stores import SessionHeader
from .stores.base import public_base_url

__all__ = ["base_url_of", "header_for", "model_string_of"]

_PREFIX = {
    ModelProviders.OpenAI: "openai",
    ModelProviders.OpenAIResponses: "responses",
    ModelProviders.Anthropic: "anthropic",
}


def model_string_of(model: Any) -> str | None:
    """The model string (``docs/models.md``) naming ``model``: the string it was built from when
    known (``model.model_string``), else ``"openai:NAME"`` / ``"responses:NAME"`` /
    ``"anthropic:NAME"`` from its descriptor, ``"local"`` for the bundled model,
    ``"gguf:PATH"`` for another in-process GGUF, ``"PROVIDER:NAME"`` for anything else (which
    ``foundation_ai.model`` may not load). A base URL is not part of it. ``None`` without a
    descriptor."""
    given = getattr(model, "model_string", None)
    if isinstance(given, str) and given:
        return given
    descriptor = getattr(model, "descriptor", None)
    if descriptor is None:
        return None
    provider, name = str(descriptor.provider), str(descriptor.name)
    if provider in _PREFIX:
        return f"{_PREFIX[provider]}:{name}"
    if provider == ModelProviders.LlamaCpp:
        path = str(getattr(getattr(model, "engine", None), "path", "") or "")  # the GGUF file
        if isinstance(path, str) and path:
            return "local" if _is_bundled(path) else f"gguf:{path}"
    return f"{provider}:{name}"


def _is_bundled(path: str) -> bool:
    try:
        from ..backends._llama_source import bundled_model_path

        return str(bundled_model_path()) == path
    except Exception:  # the local extra is not installed: it cannot be the bundled file
        return False


def base_url_of(model: Any) -> str | None:
    """The base URL an HTTP model (the OpenAI Chat, Responses and Anthropic backends:
    ``model.options.base_url``) is reached at, when its scheme, host or port differ from the
    provider's own (``docs/models.md``), without user name, password, query or fragment; else
    ``None`` (the provider's own host, an in-process model, anything without these attributes)."""
    url = getattr(getattr(model, "options", None), "base_url", None)
    if not isinstance(url, str):  # no HTTP options (an in-process or scripted model)
        return None
    descriptor = getattr(model, "descriptor", None)
    prefix = _PREFIX.get(str(getattr(descriptor, "provider", "")))
    if prefix is None:
        return None
    from .._model_string import PROVIDERS

    public = public_base_url(url)
    if public is None or _origin(public) == _origin(PROVIDERS[prefix].default_base_url):
        return None
    return public


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


def header_for(model: Any, system_prompt: str | None, tool_names: list[str]) -> SessionHeader:
    """The :class:`SessionHeader` a session with this primary model, system prompt and tools
    records."""
    return SessionHeader(
        model=model_string_of(model),
        system_prompt=system_prompt,
        tools=tuple(tool_names),
        base_url=base_url_of(model),
    )
