"""The ``Model`` contract every backend implements, and the chunk assembly rule.

A backend turns a ``ModelInteraction`` into its wire request and its wire stream back into
``Stream[Messages, ModelState]`` items (docs/concepts.md: Messages, The stream contract):

1. The stream starts with ``Stream.Init()``.
2. Each output (a text, a thinking block, a tool call, an embedding) is streamed as one or more
   ``Stream.Next(Messages.Assistant)`` chunks holding one ``ModelOutput`` each. **Every chunk of
   one output carries the same message ``id``; a new output gets a new id.** A text or thinking
   chunk holds the whole text so far (``chunk_mode == "snapshot"``: the HTTP backends) or only the
   new piece (``"delta"``: llama.cpp). A tool call is emitted once, complete. Usage on every chunk
   is cumulative for the generation. When the final stop reason and usage arrive after an
   output's last piece, the backend repeats that output's id in one more chunk (snapshot: the
   whole text again; delta: an empty piece) carrying them.
3. ``Stream.Pending(ModelState.GeneratingTokens(usage))`` may come at any time.
4. Success ends with ``Stream.Pending(ModelState.Finished())``. A failure (HTTP error, dropped
   connection, malformed event, overflow) yields one more ``Messages.Assistant`` with a fresh id,
   empty ``TextContent``, ``StopReason.Error`` and the provider's text in ``error_detail``, then
   ends with ``Stream.Pending(ModelState.Error(detail))``. Output already streamed stays valid.
   Backends never raise out of ``stream`` for provider or network failures, nor for anything a
   server sends (malformed or wrongly typed events, a stream holding no answer).
5. A refusal is not a failure: the stream ends with ``Finished``, the last output carrying
   ``StopReason.REFUSAL`` (or ``Message("content_filter")``) and a
   ``GenerationMetadata.RefusalReason`` with the provider's text (docs/providers.md).

``generate`` returns exactly :func:`assemble` of the streamed chunks: one message per output.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from ..types import (
    AssistantMessage,
    Messages,
    ModelId,
    ModelInteraction,
    ModelParams,
    ModelState,
    Stream,
    TextContent,
    ThinkingContent,
)

__all__ = ["BaseModel", "ChunkMode", "Model", "ModelDescriptor", "ModelStream", "assemble", "merge_chunk"]

ChunkMode = Literal["snapshot", "delta"]
"""How text/thinking chunks relate: the whole text so far, or only the new piece."""

ModelStream = Stream[Messages, ModelState]
"""One item of a model-level stream."""


class ModelDescriptor(msgspec.Struct, frozen=True, kw_only=True):
    """What is known about a model.

    Prices are USD per million tokens, ``None`` when unknown.
    """

    name: str
    """The model name as sent to the provider."""
    provider: str
    """A ``ModelProviders`` name."""
    context_window: int | None = None
    """Tokens the model accepts (prompt + output), when known."""
    max_output_tokens: int | None = None
    """The provider's cap on output tokens, when known."""
    input_price: float | None = None
    """USD per million input tokens."""
    output_price: float | None = None
    """USD per million output tokens."""
    cache_read_price: float | None = None
    """USD per million cached input tokens read."""
    cache_write_price: float | None = None
    """USD per million input tokens written to the cache."""


@runtime_checkable
class Model(Protocol):
    """A model backend: one class, one obvious method (``stream``)."""

    descriptor: ModelDescriptor
    """Name, provider, context window and prices."""
    chunk_mode: ChunkMode
    """``"snapshot"`` (HTTP backends) or ``"delta"`` (llama.cpp)."""

    @property
    def model_id(self) -> ModelId:
        """The ``ModelId`` stamped on this backend's messages."""
        ...

    def stream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> Iterator[ModelStream]:
        """Stream the answer synchronously (see the module docstring for the item order)."""
        ...

    def astream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> AsyncIterator[ModelStream]:
        """Stream the answer asynchronously; closing the iterator cancels the request."""
        ...

    def generate(self, interaction: ModelInteraction, params: ModelParams | None = None) -> list[Messages]:
        """The assembled answer: one message per output (:func:`assemble` of ``stream``)."""
        ...

    async def agenerate(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> list[Messages]:
        """Async ``generate``."""
        ...


def merge_chunk(prev: AssistantMessage | None, new: AssistantMessage, mode: ChunkMode) -> AssistantMessage:
    """Fold chunk ``new`` of one output into what ``prev`` (its earlier chunks, or ``None``) holds.

    ``"snapshot"``: ``new`` is the whole output so far and replaces ``prev``. ``"delta"``: text
    and thinking are concatenated; every other field (usage, stop reason, metadata, signature
    when set) comes from ``new``. Source: the chunk rule of docs/concepts.md (The stream contract) and this module's
    contract.
    """
    if prev is None or mode == "snapshot":
        return new
    a, b = prev.content, new.content
    if isinstance(a, TextContent) and isinstance(b, TextContent):
        merged: Any = TextContent(a.content + b.content, b.signature or a.signature)
    elif isinstance(a, ThinkingContent) and isinstance(b, ThinkingContent):
        merged = msgspec.structs.replace(
            b, thinking=a.thinking + b.thinking, signature=b.signature or a.signature
        )
    else:
        merged = b
    return msgspec.structs.replace(new, content=merged)


def assemble(items: Sequence[ModelStream] | Iterator[ModelStream], chunk_mode: ChunkMode) -> list[Messages]:
    """Merge a model stream into one message per output.

    Chunks sharing an ``id`` are one output: in ``"snapshot"`` mode the last chunk wins, in
    ``"delta"`` mode text and thinking are concatenated; usage, stop reason, metadata and
    signature come from the output's last chunk. Non-assistant data items are kept as they are.
    Scheduling signals and ``Pending`` items are skipped.
    """
    out: list[Messages] = []
    index: dict[str, int] = {}
    for item in items:
        if isinstance(item, Stream.Next):
            msgs = [item.value]
        elif isinstance(item, Stream.Spread):
            msgs = list(item.value)
        else:
            continue
        for m in msgs:
            pos = index.get(m.id)
            if pos is None or not isinstance(m, AssistantMessage):
                index[m.id] = len(out)
                out.append(m)
                continue
            prev = out[pos]
            assert isinstance(prev, AssistantMessage)
            out[pos] = merge_chunk(prev, m, chunk_mode)
    return out


class BaseModel:
    """A convenience base for backends: implement ``astream``; get ``stream``, ``generate`` and
    ``agenerate`` for free.

    ``stream`` runs ``astream`` on a private event loop in a worker thread and hands items over
    through a bounded queue; abandoning or closing the sync iterator cancels the async one.
    """

    descriptor: ModelDescriptor
    chunk_mode: ChunkMode = "snapshot"

    @property
    def model_id(self) -> ModelId:
        return ModelId.Name(self.descriptor.name)

    def astream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> AsyncIterator[ModelStream]:
        raise NotImplementedError

    def stream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> Iterator[ModelStream]:
        return _sync_iter(lambda: self.astream(interaction, params))

    def generate(self, interaction: ModelInteraction, params: ModelParams | None = None) -> list[Messages]:
        return assemble(self.stream(interaction, params), self.chunk_mode)

    async def agenerate(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> list[Messages]:
        items = [item async for item in self.astream(interaction, params)]
        return assemble(items, self.chunk_mode)


_DONE = object()


def _sync_iter(make: Any) -> Iterator[Any]:
    """Iterate an async iterator from sync code, on a private loop in a daemon thread."""
    q: queue.Queue[Any] = queue.Queue(maxsize=64)
    stop = threading.Event()
    loop = asyncio.new_event_loop()
    task_box: list[asyncio.Task[None]] = []

    async def pump() -> None:
        agen = make()
        try:
            async for item in agen:
                while True:
                    if stop.is_set():
                        return
                    try:
                        q.put(item, timeout=0.05)
                        break
                    except queue.Full:
                        await asyncio.sleep(0)
        except BaseException as exc:  # handed to the consumer, re-raised there
            if not stop.is_set():
                q.put(exc)
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:
                    pass
            q.put(_DONE)

    def run() -> None:
        asyncio.set_event_loop(loop)
        task = loop.create_task(pump())
        task_box.append(task)
        try:
            loop.run_until_complete(task)
        except BaseException:
            pass
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="foundation-ai-stream", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        if task_box:
            try:
                loop.call_soon_threadsafe(task_box[0].cancel)
            except RuntimeError:  # the loop already finished and closed
                pass
        while thread.is_alive():  # drain so the pump can finish
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        thread.join()
