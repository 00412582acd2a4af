"""Model backends: one module per wire format, loaded on first use.

- :func:`openai_chat` (``backends/_openai_chat.py``): OpenAI Chat Completions and every
  OpenAI-compatible server (OpenRouter, Ollama, vLLM, LM Studio, llama-server) by ``base_url``.
- :func:`openai_responses` (``backends/_openai_responses.py``): the OpenAI Responses API.
- :func:`anthropic` (``backends/_anthropic.py``): the Anthropic Messages API.
- :func:`llamacpp` and :func:`default_model` (``backends/_llamacpp.py``): llama.cpp in-process;
  the default is the bundled SmolLM2-135M-Instruct (needs the ``local`` extra).

Every backend implements :class:`~foundation_ai.backends.base.Model`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from .base import BaseModel, ChunkMode, Model, ModelDescriptor, ModelStream, assemble

if TYPE_CHECKING:
    from ._anthropic import anthropic
    from ._llamacpp import default_model, llamacpp
    from ._openai_chat import openai_chat
    from ._openai_responses import openai_responses

_LAZY = {
    "openai_chat": "_openai_chat",
    "openai_responses": "_openai_responses",
    "anthropic": "_anthropic",
    "llamacpp": "_llamacpp",
    "default_model": "_llamacpp",
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


__getattr__ = lazy_exports(globals(), _LAZY, __name__)
