"""Generation pieces of the ``transformers`` backend: the generation config, constrained decoding
and the token hand-over from ``model.generate`` to the stream.

- :func:`generation_config`: ``ModelParams`` onto the model's own ``GenerationConfig``
  (https://huggingface.co/docs/transformers/main_classes/text_generation): only the fields the
  caller set (:func:`~foundation_ai.types.is_set`) override the model's
  ``generation_config.json``.
- :func:`constraint`: a ``LogitsProcessor`` from xgrammar
  (https://xgrammar.mlc.ai/docs/) for ``output_format`` (JSON object / JSON Schema) and for a
  forced tool call (a JSON Schema over ``{"name", "arguments"}``, one branch per function).
- :class:`TokenQueue`: a ``transformers`` streamer (``put``/``end``) that hands each new token
  id to the consuming thread, and a ``StoppingCriteria`` that stops ``generate`` at the next
  token once the consumer is cancelled.
"""

from __future__ import annotations

import copy
import json
import queue
import threading
from collections.abc import Sequence
from typing import Any

import msgspec

from ..errors import ConfigurationError
from ..types import FunctionSpec, ModelParams, OutputFormat, is_set

__all__ = ["TokenQueue", "call_schema", "constraint", "generation_config", "user_set"]


def user_set(params: ModelParams | None) -> dict[str, Any]:
    """The fields of ``params`` the caller set (:func:`~foundation_ai.types.is_set`: a value given
    explicitly counts even when it equals the default), as JSON-ready values; ``{}`` for
    ``None``."""
    if params is None:
        return {}
    built: dict[str, Any] = msgspec.to_builtins(msgspec.structs.asdict(params))
    return {k: v for k, v in built.items() if is_set(params, k)}


def generation_config(base: Any, params: ModelParams | None, room: int) -> tuple[Any, list[str]]:
    """A copy of the model's ``GenerationConfig`` ``base`` with what the caller set in ``params``.

    Mapping: ``temperature`` (0 = greedy: ``do_sample=False``; > 0 samples), ``top_p``,
    ``top_k``, ``repeat_penalty`` -> ``repetition_penalty``, ``max_tokens`` ->
    ``max_new_tokens`` (capped at ``room``, the tokens left in the context; when neither the
    caller nor the model's config sets a length, ``room``), ``logit_bias`` (token id string ->
    bias) -> ``sequence_bias``. ``frequency_penalty``/``presence_penalty`` have no
    ``GenerationConfig`` field: they are returned as ignored names.

    Returns:
        ``(config, ignored)``: the config, and names of set fields it cannot carry.
    """
    config = copy.deepcopy(base)
    set_ = user_set(params)
    ignored = [k for k in ("frequency_penalty", "presence_penalty") if set_.get(k)]
    if "temperature" in set_:
        temp = float(set_["temperature"])
        config.do_sample = temp > 0
        if temp > 0:
            config.temperature = temp
    if "top_p" in set_:
        config.top_p = float(set_["top_p"])
    if "top_k" in set_:
        config.top_k = int(set_["top_k"])
    if "repeat_penalty" in set_:
        config.repetition_penalty = float(set_["repeat_penalty"])
    if set_.get("logit_bias"):
        config.sequence_bias = {(int(k),): float(v) for k, v in set_["logit_bias"].items()}
    if not config.do_sample:
        config.temperature, config.top_p, config.top_k = None, None, None
    wanted = set_.get("max_tokens")
    if isinstance(wanted, int) and wanted > 0:
        config.max_new_tokens = min(wanted, room)
    elif base.max_new_tokens is not None:
        config.max_new_tokens = min(int(base.max_new_tokens), room)
    else:
        config.max_new_tokens = room
    return config, ignored


def call_schema(functions: Sequence[FunctionSpec]) -> dict[str, Any]:
    """The JSON Schema of one call ``{"name": <one of functions>, "arguments": {...}}``: one
    ``anyOf`` branch per function, ``name`` a constant, ``arguments`` its parameters schema."""
    branches = [
        {
            "type": "object",
            "properties": {"name": {"const": f.name}, "arguments": _closed(f.parameters)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for f in functions
    ]
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    if (
        schema.get("type") == "object"
        and not schema.get("properties")
        and "additionalProperties" not in schema
    ):
        return {**schema, "properties": {}, "additionalProperties": False}
    return schema


class _Compilers:
    """One xgrammar ``GrammarCompiler`` per tokenizer (its vocabulary is analysed once)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_tokenizer: dict[int, tuple[Any, Any]] = {}

    def get(self, xgr: Any, tokenizer: Any, vocab_size: int) -> Any:
        with self.lock:
            hit = self.by_tokenizer.get(id(tokenizer))
            if hit is None or hit[0] is not tokenizer:
                info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
                hit = (tokenizer, xgr.GrammarCompiler(info))
                self.by_tokenizer[id(tokenizer)] = hit
            return hit[1]


_COMPILERS = _Compilers()


def _xgrammar() -> Any:
    try:
        import xgrammar
    except ImportError as exc:
        raise ConfigurationError(
            "constrained decoding needs xgrammar, part of the 'transformers' extra: "
            "pip install 'foundation-ai[transformers]'"
        ) from exc
    return xgrammar


def constraint(tokenizer: Any, vocab_size: int, schema: dict[str, Any] | None) -> Any:
    """A fresh xgrammar ``LogitsProcessor`` (one per generation: it keeps the matcher state)
    accepting any JSON object when ``schema`` is ``None``, else JSON matching ``schema``.

    Raises:
        ConfigurationError: xgrammar is not installed.
        ValueError: xgrammar rejects the schema.
    """
    xgr = _xgrammar()
    compiler = _COMPILERS.get(xgr, tokenizer, vocab_size)
    if schema is None:
        compiled = compiler.compile_builtin_json_grammar()
    else:
        try:
            compiled = compiler.compile_json_schema(
                json.dumps(schema), any_whitespace=False, strict_mode=True
            )
        except Exception as exc:
            raise ValueError(f"output JSON Schema is not supported by xgrammar: {exc}") from exc
    return xgr.contrib.hf.LogitsProcessor(compiled)


def schema_of(output_format: Any) -> tuple[bool, dict[str, Any] | None]:
    """``(constrained, schema)`` for an ``OutputFormat``: JSON object -> ``(True, None)``, JSON
    Schema -> ``(True, schema)``, text -> ``(False, None)``."""
    if isinstance(output_format, OutputFormat.JsonSchema):
        return True, dict(output_format.schema)
    if isinstance(output_format, OutputFormat.JsonObject):
        return True, None
    return False, None


_END = object()


class TokenQueue:
    """The hand-over from ``model.generate`` (one thread) to the stream (another).

    ``generate`` calls :meth:`put` with the prompt first (skipped), then each new token id
    tensor, and :meth:`end` when it returns; :meth:`stopping` is a ``StoppingCriteria`` that is
    true once :attr:`cancel` is set, so ``generate`` stops before its next forward pass.
    """

    def __init__(self, cancel: threading.Event, counts: list[int]) -> None:
        self.cancel = cancel
        self.counts = counts  # [0] += each token handed over
        self.stop = threading.Event()
        """Set by the consumer when it is done: ``generate`` stops at the next token too."""
        self.items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._prompt_seen = False

    def put(self, value: Any) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        for token in value.reshape(-1).tolist():
            self.counts[0] += 1
            self.items.put(int(token))

    def end(self) -> None:
        self.items.put(_END)

    def fail(self, exc: BaseException) -> None:
        """Hand ``generate``'s exception to the consumer (re-raised by :meth:`tokens`)."""
        self.items.put(exc)

    def tokens(self) -> Any:
        """Yield token ids until ``generate`` ends; re-raise its failure."""
        while True:
            item = self.items.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def stopping(self) -> Any:
        """A ``transformers`` ``StoppingCriteria`` true once :attr:`cancel` is set."""
        from transformers import StoppingCriteria

        cancel, stop = self.cancel, self.stop

        class _Cancelled(StoppingCriteria):  # type: ignore[misc]
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                import torch

                return torch.full((input_ids.shape[0],), cancel.is_set() or stop.is_set(), dtype=torch.bool)

        return _Cancelled()
