"""Recommended sampling defaults of local models (``docs/models.md``, "Sampling defaults").

A local model answers with these parameters when the caller passes no ``ModelParams`` (a
session built without ``with_params``, the CLI without ``--temperature``); any ``ModelParams``
the caller gives is used exactly as given.

Sources, first match wins per field:

1. the GGUF file's own ``general.sampling.*`` metadata (``temp``, ``top_p``, ``top_k``,
   ``penalty_repeat``), which llama.cpp's converters write from the model author's
   ``generation_config.json``;
2. :data:`KNOWN_MODELS`: the recommendation on a model's card, by GGUF ``general.basename``
   and ``general.size_label``;
3. the generic :class:`~foundation_ai.types.ModelParams` defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..types import ModelParams

__all__ = ["KNOWN_MODELS", "recommended_params"]

KNOWN_MODELS: dict[tuple[str, str], dict[str, float]] = {
    # https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct (the card's example):
    # temperature 0.2, top_p 0.9. At 0.7 the 135M model drifts into nonsense.
    ("smollm2", "135m"): {"temperature": 0.2, "top_p": 0.9},
    ("smollm2", "360m"): {"temperature": 0.2, "top_p": 0.9},
    ("smollm2", "1.7b"): {"temperature": 0.2, "top_p": 0.9},
}
"""(``general.basename``, ``general.size_label``), lower-cased -> recommended fields."""

_GGUF_KEYS = {
    "general.sampling.temp": ("temperature", float),
    "general.sampling.top_p": ("top_p", float),
    "general.sampling.top_k": ("top_k", float),
    "general.sampling.penalty_repeat": ("repeat_penalty", float),
}


def recommended_params(metadata: Mapping[str, Any]) -> ModelParams:
    """The default ``ModelParams`` of a local model whose GGUF metadata is ``metadata``
    (key -> value, values possibly as strings; ``_llamacpp._metadata`` builds it).

    Unreadable or out-of-range values are ignored (a ``top_k`` <= 0 means "off" in llama.cpp and
    is kept as 0). Never raises.
    """
    fields: dict[str, float] = {}
    base = str(metadata.get("general.basename", "")).strip().lower()
    size = str(metadata.get("general.size_label", "")).strip().lower()
    fields.update(KNOWN_MODELS.get((base, size), {}))
    for key, (name, kind) in _GGUF_KEYS.items():
        raw = metadata.get(key)
        if raw is None:
            continue
        try:
            value = kind(raw)
        except (TypeError, ValueError):
            continue
        if value != value or value < 0:  # NaN, negative
            if name == "top_k":
                fields[name] = 0.0
            continue
        fields[name] = value
    return ModelParams(**fields) if fields else ModelParams()  # type: ignore[arg-type]
