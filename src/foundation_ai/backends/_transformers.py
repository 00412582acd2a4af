"""Hugging Face ``transformers`` in-process: safetensors models on ``torch`` (the Candle
backend, in Python).

::

    from foundation_ai.backends._transformers import transformers_model

    model = transformers_model("models/SmolLM2-135M-Instruct")        # a local directory
    model = transformers_model("HuggingFaceTB/SmolLM2-135M-Instruct")  # a hub name (network)
    model = transformers_model(path, device="cuda", dtype="bfloat16", threads=4)
    # or: foundation_ai.model("hf:models/SmolLM2-135M-Instruct"); CLI: -m hf:DIR

Needs the ``transformers`` extra (``pip install 'foundation-ai[transformers]'``; docs/models.md
gives the CPU-only and CUDA installs).

**Streaming** follows the llama.cpp backend's contract (``backends/_llamacpp.py``,
``chunk_mode == "delta"``): ``Init``; ``Pending(GeneratingTokens)``; chunks holding only the new
piece, sharing one id per output; tool calls once, complete; cumulative usage from real token
counts (end-of-generation token excluded); the last chunk carries the stop reason and a
``GenerationMetadata.Timing``; then ``Pending(Finished())``. ``model.generate`` runs in its own
thread (set to the calling thread's ``torch.get_num_threads()``) with a streamer and a
``StoppingCriteria`` watching the stream's cancel flag: closing, dropping or cancelling the
stream stops generation before the next token. Failures (template
error, unknown forced tool, schema xgrammar rejects, context overflow, a torch error) are an
Assistant message with ``StopReason.Error`` and ``error_detail``, then ``Pending(ModelState.Error)``.

**Prompt**: the tokenizer's chat template through ``tokenizer.apply_chat_template`` (the
interaction's ``chat_template`` overrides it), messages built by ``_llama_prompt.chat_messages``;
``tools=`` passed when the template reads ``tools``, else the ``<tool_call>`` text protocol in the
system prompt (``_llama_tools``); calls parsed from the output by the same streaming parser.
**Overflow**: the prompt's token count is checked against the context window
(``max_position_embeddings``) before generating; the detail uses llama.cpp server's wording so
``Messages.is_context_overflow`` recognises it. **Sampling**: ``_transformers_gen.generation_config``
(only what the caller set, over the model's ``generation_config.json``); a call without params
uses the model's own config. **Constrained decoding** (xgrammar): ``output_format`` JSON object
/ JSON Schema, and ``ToolChoice.Required`` / ``Function`` (the prompt ends in ``<tool_call>`` and
the model writes one call's JSON). **Embeddings**: ``embedding=True``: the mean of the last hidden
states over the tokens, L2-normalised.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..types import (
    AssistantMessage,
    FunctionSpec,
    GenerationMetadata,
    ModelId,
    ModelInteraction,
    ModelOutput,
    ModelParams,
    ModelProviders,
    ModelState,
    StopReason,
    Stream,
    ToolChoice,
    UsageReport,
)
from ..types.content import StopReasonT
from ._http.failures import error_items
from ._llama_prompt import ChatTemplateError, chat_messages, supports_native_tools
from ._llama_request import Emitter
from ._llama_tools import CALL_CLOSE, CALL_OPEN, StopFilter, ToolCallStreamParser
from ._llamacpp import OVERFLOW_WORDING, _athreaded, _threaded_iter
from ._transformers_gen import TokenQueue, call_schema, constraint, generation_config, schema_of
from .base import BaseModel, ChunkMode, ModelDescriptor, ModelStream

__all__ = ["TransformersModel", "transformers_model"]

_PROVIDER = ModelProviders.Transformers
_log = logging.getLogger(__name__)
MISSING_EXTRA = "the hf: backend needs the 'transformers' extra: pip install 'foundation-ai[transformers]'"


def _libs() -> tuple[Any, Any]:
    """``(torch, transformers)``, or one line naming the extra."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ConfigurationError(f"{MISSING_EXTRA} ({exc})") from exc
    return torch, transformers


class _HFEmitter(Emitter):
    def _chunk(self, msg_id: str, content: Any, usage: UsageReport, **extra: Any) -> Any:
        return Stream.Next(
            AssistantMessage(
                id=msg_id, model=self.model_id, content=content, usage=usage, provider=_PROVIDER, **extra
            )
        )


class _Failure(Exception):
    """A failure reported in the stream (its message becomes ``error_detail``)."""


@dataclass(frozen=True, slots=True)
class _Plan:
    ids: list[int]
    functions: list[FunctionSpec]
    forced: bool
    processor: Any


class TransformersModel(BaseModel):
    """A ``Model`` over one ``transformers`` causal LM and its tokenizer (module docstring).

    Attributes:
        descriptor: name, provider ``"transformers"``, ``context_window`` = the model config's
            ``max_position_embeddings``; prices 0 USD (local).
        chunk_mode: ``"delta"``.
        hf_model / tokenizer: the ``PreTrainedModel`` and its tokenizer.
        embedding: True: ``stream`` yields one ``ModelOutput.Embedding`` per text message.
    """

    chunk_mode: ChunkMode = "delta"

    def __init__(
        self, hf_model: Any, tokenizer: Any, *, name: str, seed: int | None = None, embedding: bool = False
    ) -> None:
        self.hf_model, self.tokenizer, self.embedding = hf_model, tokenizer, embedding
        self._torch, _ = _libs()
        self._seed = seed
        self._lock = threading.Lock()
        self._model_id = ModelId.Name(name)
        config = hf_model.config
        window = getattr(config, "max_position_embeddings", None) or tokenizer.model_max_length
        self._window = int(window)
        self.descriptor = ModelDescriptor(
            name=name, provider=_PROVIDER, context_window=int(window), input_price=0.0, output_price=0.0
        )
        self.default_params: ModelParams | None = None
        """``None``: a call without params uses the model's own ``generation_config``."""
        eos = hf_model.generation_config.eos_token_id
        self._eos = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self._counts = [0, 0]  # tokens sampled by generate(), generate() calls running

    @property
    def tokens_generated(self) -> int:
        """Tokens sampled so far by every ``generate`` on this model object (counted as
        ``generate`` hands them over, so a stopped generation stops counting)."""
        return self._counts[0]

    @property
    def active_generations(self) -> int:
        """``generate`` calls still running (0 once a closed stream's generation has stopped)."""
        return self._counts[1]

    @property
    def model_id(self) -> ModelId:
        return self._model_id

    # -- prompt ---------------------------------------------------------------------------------

    def render(self, interaction: ModelInteraction, functions: Sequence[FunctionSpec] | None = None) -> str:
        """The prompt text: ``tokenizer.apply_chat_template`` over the interaction.

        Raises:
            ChatTemplateError: no template, or it fails to render.
        """
        if functions is None:
            functions = _offered(interaction)
        template = interaction.chat_template or self.tokenizer.chat_template
        if not template:
            raise ChatTemplateError("the tokenizer has no chat template and the interaction gives none")
        native = supports_native_tools(template)
        messages = chat_messages(interaction, functions=functions, native_tools=native)
        tools = [_openai_tool(f) for f in functions] if native and functions else None
        try:
            text: str = self.tokenizer.apply_chat_template(
                messages, tools=tools, chat_template=template, add_generation_prompt=True, tokenize=False
            )
        except Exception as exc:
            raise ChatTemplateError(f"chat template failed to render: {type(exc).__name__}: {exc}") from exc
        return text

    def prompt_tokens(self, interaction: ModelInteraction) -> list[int]:
        """The token ids a generation for ``interaction`` evaluates (the template writes any BOS)."""
        ids: list[int] = self.tokenizer(self.render(interaction), add_special_tokens=False)["input_ids"]
        return ids

    def _plan(self, interaction: ModelInteraction, params: ModelParams | None) -> _Plan:
        functions = _offered(interaction)
        choice = interaction.tool_choice
        forced: list[FunctionSpec] = []
        if isinstance(choice, ToolChoice.Function):
            forced = [f for f in functions if f.name == choice.name]
            if not forced:
                raise _Failure(f"tool_choice names {choice.name!r}, which is not among the tools offered")
        elif isinstance(choice, ToolChoice.Required):
            if not functions:
                raise _Failure("tool_choice is Required but no tool is offered")
            forced = functions
        text = self.render(interaction, functions)
        vocab = int(self.hf_model.config.vocab_size)
        processor = None
        try:
            if forced:
                text += CALL_OPEN
                processor = constraint(self.tokenizer, vocab, call_schema(forced))
            elif params is not None:
                wanted, schema = schema_of(params.output_format)
                if wanted:
                    processor = constraint(self.tokenizer, vocab, schema)
        except ValueError as exc:
            raise _Failure(str(exc)) from exc
        ids: list[int] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return _Plan(ids, functions, bool(forced), processor)

    # -- streaming ------------------------------------------------------------------------------

    def stream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> Iterator[ModelStream]:
        """Stream the answer; closing or dropping the iterator stops generation (module docstring)."""
        return _threaded_iter(lambda cancel: self._produce(interaction, params, cancel))

    async def astream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> AsyncIterator[ModelStream]:
        """Async ``stream``: generation runs in worker threads; cancelling or closing stops it."""
        produce = _athreaded(
            lambda cancel: self._produce(interaction, params, cancel), "foundation-ai-transformers"
        )
        async with contextlib.aclosing(produce):  # closing this stream stops the worker at once
            async for item in produce:
                yield item

    def _produce(
        self, interaction: ModelInteraction, params: ModelParams | None, cancel: threading.Event
    ) -> Iterator[ModelStream]:
        started = time.perf_counter()
        yield Stream.Init()
        while not self._lock.acquire(timeout=0.05):
            if cancel.is_set():
                return
        try:
            if self.embedding:
                yield from self._embed_stream(interaction, cancel)
            else:
                yield from self._generate(interaction, params, cancel, started)
        except Exception as exc:  # a safety net: failures are stream values, never raised
            _log.exception("transformers backend failed")
            yield from self._error(f"transformers backend failed: {type(exc).__name__}: {exc}", UsageReport())
        finally:
            self._lock.release()

    def _error(self, detail: str, usage: UsageReport) -> Iterator[ModelStream]:
        yield from error_items(detail, self._model_id, _PROVIDER, usage)  # the contract's failure tail

    def _start(self, plan: _Plan, config: Any, cancel: threading.Event) -> TokenQueue:
        """Run ``model.generate`` in its own thread, feeding a ``TokenQueue``."""
        torch = self._torch
        hand = TokenQueue(cancel, self._counts)
        kwargs: dict[str, Any] = {"generation_config": config, "streamer": hand}
        kwargs["stopping_criteria"] = [hand.stopping()]
        if plan.processor is not None:
            kwargs["logits_processor"] = [plan.processor]
        ids = torch.tensor([plan.ids], device=self.hf_model.device)
        threads = torch.get_num_threads()  # the caller's setting (``threads=`` or its own)

        def run() -> None:
            # A new thread starts with OpenMP's and MKL's default team size, not the caller's:
            # without this, threads=1 ran generate on 2 threads, 10x slower on a loaded 2-core VM.
            torch.set_num_threads(threads)
            try:
                with torch.inference_mode():
                    self.hf_model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)
            except BaseException as exc:
                hand.fail(exc)
            finally:
                self._counts[1] -= 1
                hand.end()

        self._counts[1] += 1
        threading.Thread(target=run, name="foundation-ai-transformers-generate", daemon=True).start()
        return hand

    def _generate(
        self,
        interaction: ModelInteraction,
        params: ModelParams | None,
        cancel: threading.Event,
        started: float,
    ) -> Iterator[ModelStream]:
        try:
            plan = self._plan(interaction, params)
        except (_Failure, ConfigurationError) as exc:
            yield from self._error(str(exc), UsageReport())
            return
        n_prompt, n_ctx = len(plan.ids), self._window
        if n_prompt >= n_ctx:
            detail = (
                f"{OVERFLOW_WORDING}: the prompt has {n_prompt} tokens and the context holds {n_ctx} "
                f"(max_position_embeddings); shorten the conversation"
            )
            yield from self._error(detail, UsageReport.of(input=n_prompt))
            return
        config, ignored = generation_config(self.hf_model.generation_config, params, n_ctx - n_prompt)
        for name in ignored:
            _log.warning(
                "%s: ModelParams.%s has no transformers equivalent; ignored", self.descriptor.name, name
            )
        seed = params.seed if params is not None and params.seed is not None else self._seed
        if seed is not None:
            self._torch.manual_seed(seed)
        usage = UsageReport.of(input=n_prompt)
        yield Stream.Pending(ModelState.GeneratingTokens(usage))
        hand = self._start(plan, config, cancel)
        try:
            yield from self._drain(plan, params, hand, config, started)
        finally:
            hand.stop.set()  # generate() ends before its next token (also when the consumer left)

    def _drain(
        self, plan: _Plan, params: ModelParams | None, hand: TokenQueue, config: Any, started: float
    ) -> Iterator[ModelStream]:
        parser = ToolCallStreamParser(parse_calls=bool(plan.functions))
        emitter = _HFEmitter(self._model_id)
        stops = StopFilter(params.stop_tokens if params is not None else [])
        n_prompt, n_out, first, last = len(plan.ids), 0, 0.0, 0.0
        out: list[ModelStream] = []
        usage = UsageReport.of(input=n_prompt)
        if plan.forced:
            parser.feed(CALL_OPEN)
        generated: list[int] = []
        decoder = _Detokenizer(self.tokenizer)
        truncated, hit = True, False
        for token in hand.tokens():
            if hand.cancel.is_set():
                return
            if token in self._eos:
                truncated = False
                break
            n_out += 1
            last = time.perf_counter()
            first = first or last
            generated.append(token)
            piece, hit = stops.feed(decoder.feed(generated))
            usage = UsageReport.of(input=n_prompt, output=n_out)
            if piece:
                emitter.feed(parser.feed(piece), usage, out)
            if out:
                yield from out
                out.clear()
            if hit:
                truncated = False
                break
        if hand.cancel.is_set():
            return
        if n_out < int(config.max_new_tokens) and not hit:
            truncated = False
        tail = stops.flush() + (CALL_CLOSE if plan.forced else "")
        events = (parser.feed(tail) if tail else []) + parser.finish(truncated=truncated)
        emitter.feed(events, usage, out)
        for problem in parser.problems:
            _log.warning("%s: %s", self.descriptor.name, problem)
        stop: StopReasonT = (
            StopReason.Length() if truncated else StopReason.ToolUse() if emitter.calls else StopReason.Stop()
        )
        timing = GenerationMetadata.Timing(
            time_to_first_token=(first - started) if n_out else None,
            tokens_per_second=((n_out - 1) / (last - first)) if n_out > 1 and last > first else None,
            duration=time.perf_counter() - started,
        )
        emitter.finish(stop, usage, timing, out)
        yield from out
        yield Stream.Pending(ModelState.Finished())

    # -- embeddings -----------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text: the mean of the last hidden states over its tokens
        (width ``hidden_size``)."""
        with self._lock:
            return [self._vector(t)[0] for t in texts]

    def _vector(self, text: str) -> tuple[list[float], int]:
        torch = self._torch
        enc = self.tokenizer(text, return_tensors="pt").to(self.hf_model.device)
        with torch.inference_mode():
            out = self.hf_model(**enc, output_hidden_states=True)
        mean = out.hidden_states[-1][0].mean(dim=0)
        mean = torch.nn.functional.normalize(mean.float(), dim=0)
        return [float(v) for v in mean.tolist()], int(enc["input_ids"].shape[1])

    def _embed_stream(self, interaction: ModelInteraction, cancel: threading.Event) -> Iterator[ModelStream]:
        texts = [t for m in interaction.messages if (t := m.text()) is not None]
        if not texts:
            yield from self._error("nothing to embed: the interaction has no text message", UsageReport())
            return
        yield Stream.Pending(ModelState.GeneratingEmbeddings())
        total = 0
        for text in texts:
            if cancel.is_set():
                return
            values, count = self._vector(text)
            total += count
            content = ModelOutput.Embedding(dimensions=len(values), values=values)
            yield Stream.Next(
                AssistantMessage(
                    model=self._model_id,
                    content=content,
                    usage=UsageReport.of(input=total),
                    provider=_PROVIDER,
                )
            )
        yield Stream.Pending(ModelState.Finished())


class _Detokenizer:
    """Text of the new tokens only: decodes from a moving anchor and holds back an incomplete
    UTF-8 sequence (shown by the tokenizer as U+FFFD), as ``transformers.TextStreamer`` does."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.anchor = 0
        self.shown = 0

    def feed(self, generated: list[int]) -> str:
        text: str = self.tokenizer.decode(generated[self.anchor :], skip_special_tokens=False)
        if text.endswith("\ufffd"):
            return ""
        piece = text[self.shown :]
        if text.endswith((" ", "\n")) and len(generated) - self.anchor > 16:
            self.anchor, self.shown = len(generated), 0
        else:
            self.shown = len(text)
        return piece


def _offered(interaction: ModelInteraction) -> list[FunctionSpec]:
    if isinstance(interaction.tool_choice, ToolChoice.None_):
        return []
    return interaction.tools_shed.functions()


def _openai_tool(f: FunctionSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": f.name, "description": f.description, "parameters": f.parameters},
    }


def transformers_model(
    source: str | os.PathLike[str],
    *,
    device: str = "cpu",
    dtype: str = "auto",
    threads: int | None = None,
    seed: int | None = None,
    embedding: bool = False,
    name: str | None = None,
) -> TransformersModel:
    """Load a causal LM and its tokenizer with ``from_pretrained``.

    Args:
        source: a local directory (``config.json``, ``*.safetensors``, tokenizer files) or a hub
            name (downloaded by ``transformers``; needs network).
        device: ``"cpu"``, ``"cuda"`` (``"cuda:N"``) or ``"auto"`` (accelerate's ``device_map``).
        dtype: ``"auto"`` (the checkpoint's), ``"float32"``, ``"bfloat16"``, ``"float16"``.
        threads: torch intra-op threads (``torch.set_num_threads``; process-wide, and set again in
            each generation's thread, which would otherwise start with OpenMP's default).
        seed: default sampling seed when ``ModelParams.seed`` is unset.
        embedding: open for embeddings (``stream`` yields ``ModelOutput.Embedding``).

    Raises:
        ConfigurationError: the extra is missing, a bad option, or the model fails to load.
    """
    torch, tf = _libs()
    if dtype != "auto" and not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise ConfigurationError(f"dtype must be auto, float32, bfloat16 or float16, got {dtype!r}")
    if not (device in ("cpu", "auto") or device.startswith("cuda")):
        raise ConfigurationError(f"device must be cpu, cuda or auto, got {device!r}")
    if threads is not None:
        torch.set_num_threads(int(threads))
    path = os.fspath(source)
    kwargs: dict[str, Any] = {"dtype": dtype if dtype == "auto" else getattr(torch, dtype)}
    if device == "auto":
        kwargs["device_map"] = "auto"
    try:
        tokenizer = tf.AutoTokenizer.from_pretrained(path)
        hf_model = tf.AutoModelForCausalLM.from_pretrained(path, **kwargs)
        if device != "auto":
            hf_model = hf_model.to(device)
    except Exception as exc:
        raise ConfigurationError(f"could not load the transformers model {path!r}: {exc}") from exc
    hf_model.eval()
    label = name or os.path.basename(os.path.normpath(path)) or path
    return TransformersModel(hf_model, tokenizer, name=label, seed=seed, embedding=embedding)
