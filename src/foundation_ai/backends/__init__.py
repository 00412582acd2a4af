"""Model backends: one module per wire format, loaded on first use.

- :func:`openai_chat` (``backends/openai_chat.py``): OpenAI Chat Completions and every
  OpenAI-compatible server (OpenRouter, Ollama, vLLM, LM Studio, llama-server) by ``base_url``.
- :func:`openai_responses` (``backends/openai_responses.py``): the OpenAI Responses API.
- :func:`anthropic` (``backends/anthropic.py``): the Anthropic Messages API.
- :func:`llamacpp` and :func:`default_model` (``backends/llamacpp.py``): llama.cpp in-process;
  the default is the bundled SmolLM2-135M-Instruct (needs the ``local`` extra).

Every backend implements :class:`~foundation_ai.backends.base.Model`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import BaseModel, ChunkMode, Model, ModelDescriptor, ModelStream, assemble

if TYPE_CHECKING:
    from .anthropic import anthropic
    from .llamacpp import default_model, llamacpp
    from .openai_chat import openai_chat
    from .openai_responses import openai_responses

_LAZY = {
    "openai_chat": ".openai_chat",
    "openai_responses": ".openai_responses",
    "anthropic": ".anthropic",
    "llamacpp": ".llamacpp",
    "default_model": ".llamacpp",
}

__all__ = [
    "BaseModel",
    "ChunkMode",
    "Model",
    "ModelDescriptor",
    "ModelStream",
    "anthropic",
    "assemble",
    "default_model",
    "llamacpp",
    "openai_chat",
    "openai_responses",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'foundation_ai.backends' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
