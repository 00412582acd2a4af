"""What a session records about itself (model string, system prompt, tool names) and how a
resumed session gets it back.

Every append of a session carries a :class:`~foundation_ai.agentic.stores.SessionHeader` when
the header changed (its first append, or after a change), so the store's metadata row names the
model, system prompt and tools of the session. ``AgentSessionBuilder.resume(id)`` uses the
stored row for what the builder was not given: the model (through ``foundation_ai.model(...)``),
the system prompt, and the tools whose names were recorded (from the builder's tool catalog).
"""

from __future__ import annotations

from typing import Any

from ..types import ModelProviders
from .stores import SessionHeader

__all__ = ["header_for", "model_string_of"]

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
        path = getattr(getattr(model, "llama", None), "model_path", None)
        if isinstance(path, str) and path:
            return "local" if _is_bundled(path) else f"gguf:{path}"
    return f"{provider}:{name}"


def _is_bundled(path: str) -> bool:
    try:
        from ..backends._llama_source import bundled_model_path

        return str(bundled_model_path()) == path
    except Exception:  # the local extra is not installed: it cannot be the bundled file
        return False


def header_for(model: Any, system_prompt: str | None, tool_names: list[str]) -> SessionHeader:
    """The :class:`SessionHeader` a session with this primary model, system prompt and tools
    records."""
    return SessionHeader(model=model_string_of(model), system_prompt=system_prompt, tools=tuple(tool_names))
