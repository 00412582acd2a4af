"""The llama.cpp parameters ``LlamaEngine`` hands to ``xllamacpp.Server`` (no model is loaded:
the server is replaced by one that records its parameters and refuses to start)."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path
from typing import Any

import pytest

from foundation_ai.backends import _llama_engine
from foundation_ai.errors import ConfigurationError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None, reason="needs xllamacpp")


def _params_given(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **kw: Any) -> Any:
    real = _llama_engine.xllamacpp_module()
    seen: list[Any] = []

    class Refusing:
        def __init__(self, params: Any) -> None:
            seen.append(params)
            raise RuntimeError("not started in this test")

    fake = types.SimpleNamespace(
        CommonParams=real.CommonParams,
        Server=Refusing,
        llama_flash_attn_type=real.llama_flash_attn_type,
        llama_pooling_type=real.llama_pooling_type,
    )
    monkeypatch.setattr(_llama_engine, "xllamacpp_module", lambda: fake)
    with pytest.raises(ConfigurationError, match="could not load"):
        _llama_engine.LlamaEngine(tmp_path / "m.gguf", n_ctx=512, **kw)
    assert len(seen) == 1
    return seen[0]


def test_flash_attention_is_off_on_the_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    kinds = _llama_engine.xllamacpp_module().llama_flash_attn_type
    params = _params_given(monkeypatch, tmp_path)
    assert params.flash_attn_type == kinds.LLAMA_FLASH_ATTN_TYPE_DISABLED


def test_flash_attention_is_left_to_llama_cpp_with_gpu_layers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kinds = _llama_engine.xllamacpp_module().llama_flash_attn_type
    params = _params_given(monkeypatch, tmp_path, n_gpu_layers=99)
    assert params.flash_attn_type == kinds.LLAMA_FLASH_ATTN_TYPE_AUTO


def test_an_explicit_flash_attention_option_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    kinds = _llama_engine.xllamacpp_module().llama_flash_attn_type
    wanted = kinds.LLAMA_FLASH_ATTN_TYPE_ENABLED
    params = _params_given(monkeypatch, tmp_path, options={"flash_attn_type": wanted})
    assert params.flash_attn_type == wanted
