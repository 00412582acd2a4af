"""Seed 000 section 13: ``ModelId`` (four variants) and GGUF ``Quantization``."""

from __future__ import annotations

import pytest

from foundation_ai.errors import ConfigurationError
from foundation_ai.types import ModelId, ModelProviders, Quantization, from_json, to_json


@pytest.mark.parametrize(
    ("variant", "tag"),
    [
        (ModelId.Name, "name"),
        (ModelId.Alias, "alias"),
        (ModelId.Group, "group"),
        (ModelId.Architecture, "architecture"),
    ],
)
def test_four_variants(variant: type[ModelId], tag: str) -> None:
    cloud = variant("gpt-4o-mini")  # type: ignore[call-arg]
    local = variant("SmolLM2-135M", Quantization.Q4_K_M)  # type: ignore[call-arg]
    assert cloud.name() == "gpt-4o-mini" and cloud.quant() is None
    assert local.name() == "SmolLM2-135M" and local.quant() is Quantization.Q4_K_M
    assert str(local) == "SmolLM2-135M:Q4_K_M" and str(cloud) == "gpt-4o-mini"
    assert to_json(cloud) == f'{{"type":"{tag}","value":"gpt-4o-mini"}}'.encode()
    assert to_json(local) == f'{{"type":"{tag}","value":"SmolLM2-135M","quantization":"Q4_K_M"}}'.encode()
    for m in (cloud, local):
        assert from_json(to_json(m), ModelId) == m


def test_variants_differ_but_names_match() -> None:
    assert ModelId.Name("claude") != ModelId.Group("claude")
    assert ModelId.Name("claude").name() == ModelId.Group("claude").name()


@pytest.mark.parametrize("text", ["Q4_K_M", "q4_k_m", " Q4_k_m "])
def test_quantization_parse(text: str) -> None:
    assert Quantization.parse(text) is Quantization.Q4_K_M


def test_quantization_parse_unknown_raises() -> None:
    with pytest.raises(ConfigurationError, match="unknown GGUF quantization 'Q9_X'"):
        Quantization.parse("Q9_X")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("org/Model-GGUF:q4_k_m", Quantization.Q4_K_M),
        ("SmolLM2-135M-Instruct.Q4_1.gguf", Quantization.Q4_1),
        ("smollm2-135m-instruct-q8_0.gguf", Quantization.Q8_0),
        ("Qwen3-8B-UD-IQ2_XXS.gguf", Quantization.IQ2_XXS),
        ("Llama-3.2-1B-Instruct-Q4_K_S.gguf", Quantization.Q4_K_S),
        ("model.BF16.gguf", Quantization.BF16),
        ("model-f16.gguf", Quantization.F16),
        ("gpt-oss-20b-MXFP4.gguf", Quantization.MXFP4),
        ("Q4_K_M", Quantization.Q4_K_M),
        ("gpt-4o-mini", None),
        ("model-Q4_K_M2.gguf", None),
        ("llama3:latest", None),
    ],
)
def test_quantization_from_text(text: str, expected: Quantization | None) -> None:
    assert Quantization.from_text(text) is expected


def test_model_id_parse_with_quantization_suffix() -> None:
    assert ModelId.parse("org/Model-GGUF:q4_k_m") == ModelId.Name("org/Model-GGUF", Quantization.Q4_K_M)
    assert ModelId.parse("bartowski/SmolLM2-GGUF:Q8_0").quant() is Quantization.Q8_0


@pytest.mark.parametrize("text", ["llama3:latest", "gpt-4o-mini", "http://host:8080/model", "a:b/c"])
def test_model_id_parse_keeps_other_suffixes_in_the_name(text: str) -> None:
    got = ModelId.parse(text)
    assert got == ModelId.Name(text)
    assert got.quant() is None


def test_match_on_model_id() -> None:
    match ModelId.Alias("fast"):
        case ModelId.Alias(value=v, quantization=None):
            assert v == "fast"
        case _:
            pytest.fail("no match")


def test_providers_are_lowercase_strings() -> None:
    assert ModelProviders.OpenAI == "openai"
    assert ModelProviders.Anthropic == "anthropic"
    assert ModelProviders.custom("groq") == "groq"
