"""Memory for agent sessions: embeddings, the three memory tiers, context assembly, retrieval.

    from foundation_ai.agentic import AgentSession
    from foundation_ai.memory import MemoryConfig, default_embedder

    agent = AgentSession.builder(model).with_memory(MemoryConfig()).build()
    vectors = default_embedder().embed(["a text", "another"])   # float32 (2, 256)

Modules: ``embedders`` (``Embedder`` and implementations), ``tokens`` (token counts),
``state`` (the tiers rebuilt from records), ``assembly`` (context assembly, a pure function),
``generation`` (observation and reflection calls), ``retrieval`` (semantic / keyword / hybrid
search), ``tools`` (``memory`` and ``search_context``), ``manager`` (``MemoryConfig``,
``MemoryManager``: the session integration).

Names load lazily (numpy and the embedding engines are imported on first use, never by
``import foundation_ai``). See ``docs/memory.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .assembly import AssembledContext, Recalled, assemble_context
    from .embedders import (
        CachedEmbedder,
        Embedder,
        EmbeddingError,
        LlamaCppEmbedder,
        OpenAIEmbedder,
        WordLlamaEmbedder,
        default_embedder,
    )
    from .generation import MemoryGenerationError, observe, reflect
    from .manager import MemoryConfig, MemoryManager
    from .retrieval import Retriever
    from .state import MemoryState
    from .tokens import EstimateCounter, LlamaTokenCounter, MessageTokens, TokenCounter, counter_for
    from .tools import MAX_FACT_CHARS, memory_tool, search_context_tool

_LAZY: dict[str, str] = {
    "AssembledContext": "assembly",
    "Recalled": "assembly",
    "assemble_context": "assembly",
    "CachedEmbedder": "embedders",
    "Embedder": "embedders",
    "EmbeddingError": "embedders",
    "LlamaCppEmbedder": "embedders",
    "OpenAIEmbedder": "embedders",
    "WordLlamaEmbedder": "embedders",
    "default_embedder": "embedders",
    "MemoryGenerationError": "generation",
    "observe": "generation",
    "reflect": "generation",
    "MemoryConfig": "manager",
    "MemoryManager": "manager",
    "Retriever": "retrieval",
    "MemoryState": "state",
    "EstimateCounter": "tokens",
    "LlamaTokenCounter": "tokens",
    "MessageTokens": "tokens",
    "TokenCounter": "tokens",
    "counter_for": "tokens",
    "MAX_FACT_CHARS": "tools",
    "memory_tool": "tools",
    "search_context_tool": "tools",
}

__all__ = [
    "AssembledContext",
    "CachedEmbedder",
    "Embedder",
    "EmbeddingError",
    "EstimateCounter",
    "LlamaCppEmbedder",
    "LlamaTokenCounter",
    "MAX_FACT_CHARS",
    "MemoryConfig",
    "MemoryGenerationError",
    "MemoryManager",
    "MemoryState",
    "MessageTokens",
    "OpenAIEmbedder",
    "Recalled",
    "Retriever",
    "TokenCounter",
    "WordLlamaEmbedder",
    "assemble_context",
    "counter_for",
    "default_embedder",
    "memory_tool",
    "observe",
    "reflect",
    "search_context_tool",
]


__getattr__ = lazy_exports(globals(), _LAZY, __name__)
