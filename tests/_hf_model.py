"""Models for the transformers backend's tests and bench, made offline from the bundled GGUF.

- :func:`convert_bundled`: ``transformers`` reads the bundled SmolLM2-135M-Instruct GGUF
  (``gguf_file=``, needs ``gguf``; weights dequantized to fp32); ``save_pretrained`` refuses a
  GGUF-quantized model, so its state is copied into a plain model of the same config (the
  GGUF ``quantization_config`` dropped) and saved as fp32 safetensors with the tokenizer.
- :func:`tiny_random`: a 2-layer, 32-wide Llama with random weights and the same tokenizer and
  chat template, for fast unit tests (its output is noise; it rarely ends by itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from foundation_ai.backends._llama_source import bundled_model_path


def _gguf_model_and_tokenizer() -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = bundled_model_path()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    return model, tokenizer


def convert_bundled(out: Path) -> Path:
    """Write the bundled model as a safetensors directory ``out``; return ``out``."""
    import torch
    from transformers import AutoModelForCausalLM

    quantized, tokenizer = _gguf_model_and_tokenizer()
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict(), strict=False)
    plain.generation_config = quantized.generation_config
    plain.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


def tiny_random(out: Path, tokenizer_dir: Path, *, context: int = 256) -> Path:
    """A random-weight Llama (2 layers, hidden 32, ``context`` positions) with the tokenizer of
    ``tokenizer_dir``, saved to ``out``; return ``out``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=context,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out
