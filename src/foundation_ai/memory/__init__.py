"""Memory for agent sessions: embeddings, the three memory tiers, context assembly, retrieval.

    from foundation_ai.memory import default_embedder, Embedder
    vectors = default_embedder().embed(["a text", "another"])   # float32 (2, 256)

Names load lazily (numpy and the embedding engines are imported on first use, never by
``import foundation_ai``). See ``docs/memory.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .embedders import (
        CachedEmbedder,
        Embedder,
        EmbeddingError,
        LlamaCppEmbedder,
        OpenAIEmbedder,
        WordLlamaEmbedder,
        default_embedder,
    )

_LAZY: dict[str, str] = {
    "CachedEmbedder": "embedders",
    "Embedder": "embedders",
    "EmbeddingError": "embedders",
    "LlamaCppEmbedder": "embedders",
    "OpenAIEmbedder": "embedders",
    "WordLlamaEmbedder": "embedders",
    "default_embedder": "embedders",
}

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "EmbeddingError",
    "LlamaCppEmbedder",
    "OpenAIEmbedder",
    "WordLlamaEmbedder",
    "default_embedder",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'foundation_ai.memory' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
