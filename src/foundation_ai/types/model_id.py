"""Model identifiers and GGUF quantizations (docs/concepts.md: Model ids), and provider names."""

from __future__ import annotations

import enum
import functools
import re
from typing import ClassVar

import msgspec

from ..errors import ConfigurationError

__all__ = ["ModelId", "ModelProviders", "Quantization"]


class Quantization(enum.Enum):
    """A GGUF quantization type, as llama.cpp names its files (``Q4_K_M``, ``Q8_0``, …).

    ``Quantization.parse("q4_k_m")`` is case-insensitive; ``Quantization.from_text`` finds one
    inside a file name or model id such as ``"SmolLM2-135M-Instruct.Q4_1.gguf"``.
    """

    F32 = "F32"
    F16 = "F16"
    BF16 = "BF16"
    Q8_0 = "Q8_0"
    Q6_K = "Q6_K"
    Q5_K_M = "Q5_K_M"
    Q5_K_S = "Q5_K_S"
    Q5_1 = "Q5_1"
    Q5_0 = "Q5_0"
    Q4_K_M = "Q4_K_M"
    Q4_K_S = "Q4_K_S"
    Q4_1 = "Q4_1"
    Q4_0 = "Q4_0"
    Q3_K_L = "Q3_K_L"
    Q3_K_M = "Q3_K_M"
    Q3_K_S = "Q3_K_S"
    Q2_K = "Q2_K"
    IQ4_XS = "IQ4_XS"
    IQ4_NL = "IQ4_NL"
    IQ3_M = "IQ3_M"
    IQ3_S = "IQ3_S"
    IQ3_XS = "IQ3_XS"
    IQ3_XXS = "IQ3_XXS"
    IQ2_M = "IQ2_M"
    IQ2_S = "IQ2_S"
    IQ2_XS = "IQ2_XS"
    IQ2_XXS = "IQ2_XXS"
    IQ1_M = "IQ1_M"
    IQ1_S = "IQ1_S"
    TQ2_0 = "TQ2_0"
    TQ1_0 = "TQ1_0"
    MXFP4 = "MXFP4"

    @classmethod
    def parse(cls, text: str) -> Quantization:
        """Parse a quantization name, case-insensitively (``"q4_k_m"`` -> ``Q4_K_M``).

        Raises:
            ConfigurationError: the text names no known quantization.
        """
        try:
            return cls(text.strip().upper())
        except ValueError:
            raise ConfigurationError(f"unknown GGUF quantization {text!r}") from None

    @classmethod
    def from_text(cls, text: str) -> Quantization | None:
        """Find a quantization named inside ``text`` (a file name or id), or ``None``.

        The longest matching name wins, so ``"x.Q4_K_M.gguf"`` gives ``Q4_K_M``, not ``Q4_K_S``.
        """
        m = _quant_in_text().search(text)
        return cls(m.group(1).upper()) if m else None


@functools.cache
def _quant_in_text() -> re.Pattern[str]:
    """Every quantization name as one regex, longest first, compiled on first use."""
    names = sorted((q.value for q in Quantization), key=len, reverse=True)
    return re.compile(r"(?i)(?<![A-Za-z0-9])(" + "|".join(names) + r")(?![A-Za-z0-9])")


class ModelProviders:
    """Names of the providers a message can come from (``Messages.Assistant.provider``).

    A provider is stored as its lowercase string; any other string is a custom provider
    (``ModelProviders.custom("groq")`` returns ``"groq"``).
    """

    OpenAI: ClassVar[str] = "openai"
    """OpenAI Chat Completions, and OpenAI-compatible servers used through it."""
    OpenAIResponses: ClassVar[str] = "openai_responses"
    """The OpenAI Responses API."""
    Anthropic: ClassVar[str] = "anthropic"
    """The Anthropic Messages API."""
    LlamaCpp: ClassVar[str] = "llamacpp"
    """llama.cpp in-process (the prebuilt xllamacpp engine)."""
    Transformers: ClassVar[str] = "transformers"
    """Hugging Face ``transformers`` in-process (safetensors models on torch)."""
    Scripted: ClassVar[str] = "scripted"
    """A scripted model in tests."""
    Unknown: ClassVar[str] = "unknown"

    @staticmethod
    def custom(name: str) -> str:
        """A custom provider name, stored as given."""
        return name


class ModelId(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True):
    """Which model (docs/concepts.md: Model ids). Four variants, each a name plus an optional GGUF
    quantization (``None`` for cloud models):

    - ``ModelId.Name(value, quantization)``: a concrete model name, ``"gpt-4o-mini"``.
    - ``ModelId.Alias(...)``: an alias a router resolves, ``"fast"``.
    - ``ModelId.Group(...)``: a family, ``"claude"``.
    - ``ModelId.Architecture(...)``: an architecture, ``"llama"``.

    Routing matches on :meth:`name` only. JSON: ``{"type": "name", "value": "...",
    "quantization": "Q4_K_M" | null}``.
    """

    Name: ClassVar[type[_Name]]
    Alias: ClassVar[type[_Alias]]
    Group: ClassVar[type[_Group]]
    Architecture: ClassVar[type[_Architecture]]

    def name(self) -> str:
        """The model name string, without quantization."""
        return self.value  # type: ignore[attr-defined, no-any-return]

    def quant(self) -> Quantization | None:
        """The GGUF quantization, or ``None``."""
        return self.quantization  # type: ignore[attr-defined, no-any-return]

    def __str__(self) -> str:
        q = self.quant()
        return f"{self.name()}:{q.value}" if q else self.name()

    @staticmethod
    def parse(text: str) -> ModelId:
        """Parse ``"name"`` or ``"name:quant"`` into a ``ModelId.Name``.

        ``"org/Model-GGUF:q4_k_m"`` -> ``Name("org/Model-GGUF", Q4_K_M)``. A suffix after the last
        ``:`` that is not a known quantization stays part of the name (``"llama3:latest"``).
        """
        base, sep, suffix = text.rpartition(":")
        if sep and base and "/" not in suffix:
            try:
                return _Name(base, Quantization.parse(suffix))
            except ConfigurationError:
                pass
        return _Name(text, None)


class _Name(ModelId, tag="name", frozen=True, gc=False):
    """``ModelId.Name(value, quantization=None)``: a concrete model name. JSON tag ``"name"``."""

    value: str
    quantization: Quantization | None = None


class _Alias(ModelId, tag="alias", frozen=True, gc=False):
    """``ModelId.Alias(value, quantization=None)``: an alias a router resolves. JSON tag ``"alias"``."""

    value: str
    quantization: Quantization | None = None


class _Group(ModelId, tag="group", frozen=True, gc=False):
    """``ModelId.Group(value, quantization=None)``: a model family. JSON tag ``"group"``."""

    value: str
    quantization: Quantization | None = None


class _Architecture(ModelId, tag="architecture", frozen=True, gc=False):
    """``ModelId.Architecture(value, quantization=None)``: an architecture. JSON tag ``"architecture"``."""

    value: str
    quantization: Quantization | None = None


ModelId.Name = _Name
ModelId.Alias = _Alias
ModelId.Group = _Group
ModelId.Architecture = _Architecture
for _cls, _n in ((_Name, "Name"), (_Alias, "Alias"), (_Group, "Group"), (_Architecture, "Architecture")):
    _cls.__qualname__ = f"ModelId.{_n}"
    _cls.__name__ = f"ModelId.{_n}"

ModelIdT = _Name | _Alias | _Group | _Architecture
"""The decodable union of ``ModelId`` variants."""
