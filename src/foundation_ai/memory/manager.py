"""``MemoryConfig`` and ``MemoryManager``: memory for one agent session.

    agent = AgentSession.builder(model).with_memory(MemoryConfig(observation_trigger_tokens=8000)).build()

The manager:

- restores the memory tiers from the session's records (``resume``) and indexes them;
- offers the ``memory`` and ``search_context`` tools;
- assembles every request (:meth:`MemoryManager.assemble`, the session's context assembler);
- after each turn records what was persisted, indexes it for retrieval in the background, and
  runs the observation and reflection passes when their triggers are reached
  (:meth:`MemoryManager.after_turn`), announcing each with
  ``AgentProgress.ProcessingMemory(kind)``. A failed pass is logged and yields a
  ``FailedAction`` of kind ``"memory"``; the turn still completes;
- runs a final observation pass when the session ends (:meth:`MemoryManager.final_pass`).

See ``docs/memory.md``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ..errors import ConfigurationError, ContextOverflowError
from ..types import (
    AgenticError,
    AgentProgress,
    MemoryFact,
    ModelInteraction,
    SessionRecord,
    Stream,
    StructuredErrorTrace,
    ToolResultMessage,
    UserMessage,
)
from .assembly import AssembledContext, Recalled, assemble_context
from .state import MemoryState, observation_text, reflection_text
from .tokens import MessageTokens, counter_for, message_text

__all__ = ["DEFAULT_WINDOW", "MemoryConfig", "MemoryManager"]

log = logging.getLogger(__name__)

DEFAULT_WINDOW = 8192
"""Tokens assumed for a model whose descriptor gives no context window."""


@dataclass
class MemoryConfig:
    """Memory settings of a session (defaults in brackets).

    Attributes:
        observation_trigger_tokens: conversation tokens since the last observation that start an
            observation pass [30,000].
        reflection_trigger_tokens: observation tokens since the last reflection that start a
            reflection pass [40,000].
        pressure: share of the model's window a request may use before older exchanges are
            left out of it [0.8].
        context_window: the window in tokens [the model descriptor's, else 8,192].
        memory_model: the model for observation/reflection calls [the session's model].
        embedder: an ``Embedder`` for retrieval [``default_embedder()``]; ``False``: no
            retrieval (keyword search only is not kept either).
        vector_store: where message vectors go [a private ``InMemoryVectorStore``]. The store
            records the embedder's id and dimension and must match them when a session is built
            or resumed (``DimensionMismatchError`` / ``EmbedderMismatchError`` otherwise).
        reindex: switch ``vector_store`` to ``embedder`` when the session is built: every vector
            in it is deleted and the session's texts are embedded again [False]
            (``docs/memory.md``, "Vector stores").
        recall_k: memories retrieved for each prompt [4].
        recall_tokens: most tokens the ``[recalled]`` block may take [512].
        recall_min_score: semantic hits below this cosine similarity are not recalled [0.35].
        output_reserve: tokens kept free for the answer [256].
        memory_output_tokens: ``max_tokens`` of a memory call [800; at most a quarter of the
            memory model's window].
        tools: offer the ``memory`` and ``search_context`` tools [True].

    Raises:
        ConfigurationError: a trigger below 1, ``pressure`` outside (0, 1], negative budgets.
    """

    observation_trigger_tokens: int = 30_000
    reflection_trigger_tokens: int = 40_000
    pressure: float = 0.8
    context_window: int | None = None
    memory_model: Any = None
    embedder: Any = None
    vector_store: Any = None
    reindex: bool = False
    recall_k: int = 4
    recall_tokens: int = 512
    recall_min_score: float = 0.35
    output_reserve: int = 256
    memory_output_tokens: int = 800
    tools: bool = True

    def __post_init__(self) -> None:
        if self.observation_trigger_tokens < 1 or self.reflection_trigger_tokens < 1:
            raise ConfigurationError("memory triggers must be at least 1 token")
        if not 0.0 < self.pressure <= 1.0:
            raise ConfigurationError(f"pressure must be in (0, 1], got {self.pressure}")
        if self.context_window is not None and self.context_window < 64:
            raise ConfigurationError("context_window must be at least 64 tokens")
        if self.recall_k < 0 or self.recall_tokens < 0 or self.output_reserve < 0:
            raise ConfigurationError("recall_k, recall_tokens and output_reserve must be >= 0")
        if self.memory_output_tokens < 16:
            raise ConfigurationError("memory_output_tokens must be at least 16")

    def manager(self) -> MemoryManager:
        """A fresh :class:`MemoryManager` with these settings, for one session (what the session
        builder's ``with_memory`` calls: ``agentic.plugins.MemoryPlugin``)."""
        return MemoryManager(self)


def _indexable(records: Iterable[SessionRecord]) -> list[tuple[str, str, str]]:
    items: list[tuple[str, str, str]] = []
    for r in records:
        if isinstance(r, SessionRecord.Conversation):
            m = r.message
            if isinstance(m, UserMessage) and m.role == "system":
                continue
            text = message_text(m)
            if text:
                prefix = f"tool {m.name}: " if isinstance(m, ToolResultMessage) else ""
                items.append((m.id, prefix + text, "message"))
        elif isinstance(r, SessionRecord.Observation):
            items.extend((e.id, e.content, "observation") for e in r.observations)
        elif isinstance(r, SessionRecord.Reflection):
            items.extend((e.id, e.content, "reflection") for e in r.reflections)
    return items


class MemoryManager:
    """Memory of one session; see the module docstring. Made by the session builder's
    ``with_memory``; :meth:`bind` attaches it to its session."""

    def __init__(self, config: MemoryConfig | None = None) -> None:
        self.config = config or MemoryConfig()
        self.session: Any = None
        self.tokens: MessageTokens | None = None
        self.state: MemoryState | None = None
        self.retriever: Any = None
        self.last_context: AssembledContext | None = None
        self._dropped_unobserved = False
        self._recall_cache: tuple[str, list[Recalled]] | None = None
        self._turn_source: str | None = None
        self._fixed_cache: tuple[int, int] | None = None
        self._turn: Any = None  # the running turn's TurnState (wrap_turn)

    # -- wiring ------------------------------------------------------------------------------------

    def bind(self, session: Any) -> None:
        """Attach to ``session`` (reads ``models``, ``messages``, ``store``, ``session_id``)."""
        self.session = session
        self.tokens = MessageTokens(counter_for(session.models[0]))
        self.state = MemoryState(self.tokens)
        cfg = self.config
        if cfg.embedder is None:
            import importlib.util

            missing = [m for m in ("numpy", "wordllama") if importlib.util.find_spec(m) is None]
            if missing:
                raise ConfigurationError(
                    f"memory retrieval with the default embedder needs {' and '.join(missing)}: "
                    "pip install 'foundation-ai[memory]', or MemoryConfig(embedder=False)"
                )
        if cfg.embedder is not False:
            from .retrieval import Retriever

            self.retriever = Retriever(
                cfg.embedder, cfg.vector_store, session_id=session.session_id, reindex=cfg.reindex
            )

    def tools(self) -> list[Any]:
        """The ``memory`` and ``search_context`` tools (none when ``config.tools`` is false;
        ``search_context`` only with retrieval)."""
        if not self.config.tools:
            return []
        from .tools import memory_tool, search_context_tool

        made = [memory_tool(self)]
        if self.config.embedder is not False:
            made.append(search_context_tool(self))
        return made

    def restore(self, records: Sequence[SessionRecord]) -> None:
        """Rebuild the tiers and counters from a session's stored records and index them."""
        assert self.tokens is not None
        self.state = MemoryState.from_records(records, self.tokens)
        if self.retriever is not None:
            self.retriever.add(_indexable(records))

    def absorb(self, records: Iterable[SessionRecord]) -> None:
        """Take in records of a finished turn (persisted ``Conversation`` ones; ``Retracted``
        records are not stored and are skipped) and index them for retrieval."""
        assert self.state is not None
        convo = [r for r in records if isinstance(r, SessionRecord.Conversation)]
        for r in convo:
            self.state.apply(r)
        if self.retriever is not None and convo:
            self.retriever.add(_indexable(convo))

    def close(self) -> None:
        """Stop the background embedding worker."""
        if self.retriever is not None:
            self.retriever.close()

    # -- MemoryHost (the tools) ------------------------------------------------------------------

    def facts(self) -> list[MemoryFact]:
        """The current working-memory facts."""
        assert self.state is not None
        return self.state.facts

    def source_id(self) -> str | None:
        """The id of the running turn's prompt."""
        return self._turn_source

    def write_facts(self, facts: list[MemoryFact]) -> int:
        """Persist ``WorkingMemory(facts, version = current + 1)``; returns the new version.

        Inside a turn the record is the turn's: it joins ``Turn.records`` and the turn stream
        (``Stream.Next(record)``) and is written with the turn's next store write, off the event
        loop (``agentic/turn/persist.py``). Outside a turn it is written at once."""
        assert self.state is not None
        record = SessionRecord.WorkingMemory(facts=list(facts), version=self.state.version + 1)
        turn = self._turn
        if turn is None:
            self._write(record)
            return record.version
        from ..agentic.turn.persist import persist_records

        persist_records(self.session, turn, [record])
        if turn.emit:
            turn.out.append(Stream.Next(record))
        self._applied(record)
        return record.version

    def recall(self, query: str, mode: str, limit: int) -> list[tuple[str, str]]:
        """``search_context``: hits as ``(kind, text)``, best first (waits up to 5 s for
        queued embeddings)."""
        if self.retriever is None:
            return []
        self.retriever.flush(5.0)
        return [(r.kind, r.text) for r in self.retriever.search(query, limit, mode)]

    def _write(self, record: SessionRecord) -> None:
        self.session.store.append(self.session.session_id, [record])
        self._applied(record)

    async def _awrite(self, record: SessionRecord) -> None:
        """:meth:`_write` with the store written off the event loop (``aappend``)."""
        from ..agentic.stores import aappend

        await aappend(self.session.store, self.session.session_id, [record])
        self._applied(record)

    def _applied(self, record: SessionRecord) -> None:
        """Take a written (or queued) record into the tiers and the retrieval index."""
        assert self.state is not None
        self.state.apply(record)
        if self.retriever is not None:
            self.retriever.add(_indexable([record]))

    # -- context assembly --------------------------------------------------------------------------

    def window(self, model: Any) -> int:
        """The context window used for ``model``."""
        if self.config.context_window is not None:
            return self.config.context_window
        w = getattr(getattr(model, "descriptor", None), "context_window", None)
        return int(w) if w else DEFAULT_WINDOW

    def fixed_tokens(self, interaction: ModelInteraction) -> int:
        """Tokens of what rides beside the messages: system prompt and soul, tool declarations
        (as JSON) and the answer reserve."""
        assert self.tokens is not None
        decls = interaction.tools_shed
        key = id(decls)
        if self._fixed_cache is None or self._fixed_cache[0] != key:
            tools = self.tokens.counter.count(msgspec.json.encode(decls).decode()) if decls.tools else 0
            self._fixed_cache = (key, tools)
        system = interaction.full_system_prompt() or ""
        return self.tokens.text(system) + self._fixed_cache[1] + self.config.output_reserve

    def recalled_for(self, prompt: str) -> list[Recalled]:
        """Memories retrieved for ``prompt`` (hybrid search; cached for the turn's rounds)."""
        if self.retriever is None or self.config.recall_k == 0 or not prompt.strip():
            return []
        if self._recall_cache is not None and self._recall_cache[0] == prompt:
            return self._recall_cache[1]
        try:
            hits: list[Recalled] = self.retriever.search(
                prompt, self.config.recall_k, "hybrid", min_score=self.config.recall_min_score
            )
        except Exception as exc:  # a failing embedder must not fail the turn: keywords only
            log.warning(
                "session %s: semantic recall failed (%s); keyword recall only", self.session.session_id, exc
            )
            hits = self.retriever.search(prompt, self.config.recall_k, "keyword")
        self._recall_cache = (prompt, hits)
        return hits

    def assemble_for(
        self,
        interaction: ModelInteraction,
        model: Any,
        keep_from: int,
        head_end: int,
        recalled: list[Recalled] | None = None,
    ) -> ModelInteraction:
        """The request to send: ``interaction`` with its messages assembled from the session's
        history and memory (see :mod:`foundation_ai.memory.assembly`).

        When even the part no assembly leaves out (system prompt, tool declarations, the
        answer reserve, the current turn's prompt and latest round) exceeds the whole window:
        counted by the model's own tokenizer, the turn must fail before the model is called;
        counted by the estimate, the request is sent with a warning (the provider decides: an
        estimate cannot prove it too large). When only the memory blocks push it over the
        window, they are left out (a warning).

        Raises:
            ContextOverflowError: the fixed part exceeds the window, by the model's tokenizer.
        """
        assert self.state is not None and self.tokens is not None
        s = self.session
        history = s.messages
        if keep_from < len(history):
            self._turn_source = history[keep_from].id
        if recalled is None:
            recalled = self.recalled_for(self._prompt(keep_from, head_end))
        window = self.window(model)
        fixed = self.fixed_tokens(interaction)
        ctx = assemble_context(
            history,
            state=self.state,
            tokens=self.tokens,
            window=window,
            keep_from=keep_from,
            head_end=head_end,
            recalled=recalled,
            pressure=self.config.pressure,
            fixed_tokens=fixed,
            min_start=min(s.context_start, keep_from),
            recall_tokens=self.config.recall_tokens,
        )
        if getattr(s, "context_cut", None) is not None:
            # after an overflow inside this turn the loop's own cut wins: memory blocks + its window
            ctx.messages = ctx.messages[: ctx.blocks] + list(interaction.messages)
        elif ctx.tokens > window:
            self._over_window(ctx, window, fixed)
        self.last_context = ctx
        if ctx.dropped_ids and not self._dropped_unobserved:
            observed = self.state.observed_ids
            self._dropped_unobserved = any(i not in observed for i in ctx.dropped_ids)
        return msgspec.structs.replace(interaction, messages=ctx.messages)

    def _over_window(self, ctx: AssembledContext, window: int, fixed: int) -> None:
        """``ctx`` exceeds the whole window: see :meth:`assemble_for`."""
        assert self.tokens is not None
        pinned = ctx.tokens - ctx.block_tokens
        sid = self.session.session_id
        if pinned <= window:  # the memory blocks push it over: leave them out
            log.warning(
                "session %s: memory blocks (%d tokens) left out of a request: with them it would "
                "take %d tokens of a %d-token window",
                sid,
                ctx.block_tokens,
                ctx.tokens,
                window,
            )
            ctx.messages = ctx.messages[ctx.blocks :]
            ctx.tokens, ctx.blocks, ctx.block_tokens, ctx.recalled = pinned, 0, 0, []
            return
        counter = self.tokens.counter.name
        how = "the model's tokenizer" if counter == "tokenizer" else f"the {counter}"
        message = (
            f"the request needs at least {pinned:,} tokens, more than the {window:,}-token context "
            f"window: {fixed:,} for the system prompt, tool declarations and the "
            f"{self.config.output_reserve:,}-token answer reserve, {pinned - fixed:,} for the "
            f"current turn's prompt and latest round (counted by {how})"
        )
        if counter == "estimate":
            log.warning("session %s: %s; sent anyway: the provider decides", sid, message)
            return
        raise ContextOverflowError(
            message + "; shorten the prompt or use a larger window (MemoryConfig.context_window)",
            tokens=pinned,
            window=window,
        )

    def _prompt(self, keep_from: int, head_end: int) -> str:
        return "\n".join(message_text(m) for m in self.session.messages[keep_from:head_end])

    def assemble(self, request: Any) -> ModelInteraction:
        """The session's context assembler (``ContextRequest`` -> ``ModelInteraction``),
        blocking (see :meth:`aassemble`)."""
        st = request.state
        return self.assemble_for(request.interaction, request.model, st.keep_from, st.head_end)

    async def aassemble(self, request: Any) -> ModelInteraction:
        """:meth:`assemble` with the prompt's recall (an embedding and a vector-store search,
        which may wait for a database or a server) on a worker thread, so the event loop never
        waits for the vector store; the rest is computed on the loop."""
        st = request.state
        prompt = self._prompt(st.keep_from, st.head_end)
        cached = self._recall_cache
        if self.retriever is None or (cached is not None and cached[0] == prompt):
            recalled = self.recalled_for(prompt)
        else:
            import asyncio

            recalled = await asyncio.to_thread(self.recalled_for, prompt)
        return self.assemble_for(request.interaction, request.model, st.keep_from, st.head_end, recalled)

    def assembler(self, then: Any = None) -> Any:
        """The context assembler to install: :meth:`aassemble`, followed by ``then`` (a user's
        own assembler, sync or async, which receives the memory-assembled request) when one is
        given."""
        if then is None:
            return self.aassemble

        async def both(request: Any) -> Any:
            import dataclasses
            import inspect

            made = then(dataclasses.replace(request, interaction=await self.aassemble(request)))
            return await made if inspect.isawaitable(made) else made

        return both

    def progress(self, value: Any) -> Any:
        """``Generating`` progress with the request's estimated tokens and how they were
        counted (``context_tokens``, ``token_counter``)."""
        if isinstance(value, AgentProgress.Generating) and self.last_context is not None:
            assert self.tokens is not None
            return msgspec.structs.replace(
                value, context_tokens=self.last_context.tokens, token_counter=self.tokens.counter.name
            )
        return value

    # -- passes ------------------------------------------------------------------------------------

    def _memory_model(self) -> Any:
        return self.config.memory_model if self.config.memory_model is not None else self.session.models[0]

    def _failed(self, kind: str, exc: BaseException, detail: str = "") -> SessionRecord:
        what = f"{kind} failed" if kind == "indexing" else f"{kind} pass failed"
        log.warning("session %s: %s: %s", self.session.session_id, what, exc)
        log.debug("memory failure", exc_info=exc)
        context = {"pass": kind, "error_type": type(exc).__name__}
        message = f"{what}: {type(exc).__name__}: {exc}" + (f" ({detail})" if detail else "")
        return SessionRecord.FailedAction(
            error=AgenticError(kind="memory", message=message, retryable=True),
            trace=StructuredErrorTrace(frames=["memory", kind], context=context),
        )

    def wants_observation(self, final: bool = False) -> bool:
        """True when an observation pass is due (trigger reached, unobserved messages left out
        of a request by pressure, or ``final``)."""
        assert self.state is not None
        if not self.state.unobserved:
            return False
        return (
            final
            or self._dropped_unobserved
            or self.state.tokens_since_observation >= self.config.observation_trigger_tokens
        )

    def wants_reflection(self) -> bool:
        """True when the observation tokens since the last reflection reached the trigger."""
        assert self.state is not None
        return (
            bool(self.state.observations_since_reflection)
            and self.state.observation_tokens_since_reflection >= self.config.reflection_trigger_tokens
        )

    async def passes(self, *, emit: bool = True, final: bool = False) -> AsyncIterator[Any]:
        """Run the due passes; yields ``Stream.Pending(ProcessingMemory)`` (when ``emit``),
        then ``Stream.Next(record)`` for each record written, or ``Stream.Next(FailedAction)``
        for a failed pass (never raised)."""
        from .generation import observe, reflect

        assert self.state is not None and self.tokens is not None
        model = self._memory_model()
        window = self.window(model) if self.config.memory_model is None else self._own_window(model)
        chunk = max(128, int(window * 0.5) - 300)
        out_tokens = max(64, min(self.config.memory_output_tokens, window // 4))
        if self.wants_observation(final):
            if emit:
                yield Stream.Pending(AgentProgress.ProcessingMemory(kind="observation"))
            try:
                rec = await observe(
                    model,
                    self.state.unobserved,
                    self.tokens,
                    chunk_tokens=chunk,
                    max_output_tokens=out_tokens,
                )
                await self._awrite(rec)
            except Exception as exc:
                yield Stream.Next(self._failed("observation", exc))
                return
            self._dropped_unobserved = False
            yield Stream.Next(rec)
        if self.wants_reflection():
            if emit:
                yield Stream.Pending(AgentProgress.ProcessingMemory(kind="reflection"))
            try:
                ref = await reflect(
                    model,
                    self.state.reflection,
                    self.state.observations_since_reflection,
                    self.tokens,
                    max_input_tokens=chunk,
                    max_output_tokens=out_tokens,
                )
                await self._awrite(ref)
            except Exception as exc:
                yield Stream.Next(self._failed("reflection", exc))
                return
            yield Stream.Next(ref)

    def _own_window(self, model: Any) -> int:
        w = getattr(getattr(model, "descriptor", None), "context_window", None)
        return int(w) if w else DEFAULT_WINDOW

    async def wrap_turn(self, turn: AsyncIterator[Any], state: Any, emit: bool) -> AsyncIterator[Any]:
        """Stream ``turn`` (the loop's items; ``Generating`` gets the context figures), then,
        once it ended, absorb its records (also when the stream was abandoned) and run the due
        passes, holding the session so no other turn starts meanwhile (their items are added to
        ``state.records`` as well)."""
        self._recall_cache = None
        self._turn = state
        try:
            async for item in turn:
                if emit and isinstance(item, Stream.Pending):
                    item = Stream.Pending(self.progress(item.value))
                yield item
        finally:
            self._turn = None
            aclose = getattr(turn, "aclose", None)
            if aclose is not None:
                await aclose()
            self.absorb(state.records)
        async for item in self.index_failures():
            state.records.append(item.value)
            yield item
        enter = getattr(self.session, "_enter", None)
        if enter is not None and not enter(True):
            return  # another turn already started: the passes run when it ends
        try:
            async for item in self.passes(emit=emit):
                if isinstance(item, Stream.Next):
                    state.records.append(item.value)
                yield item
        finally:
            if enter is not None:
                enter(False)

    async def index_failures(self, timeout: float = 5.0) -> AsyncIterator[Any]:
        """Wait (off the event loop, at most ``timeout`` seconds) for the texts queued for
        retrieval to be embedded and stored, then yield ``Stream.Next(FailedAction)`` (kind
        ``"memory"``) for each vector-store write that failed since the last call: the turn goes
        on, its texts stay keyword-searchable."""
        r = self.retriever
        if r is None:
            return
        if not r.idle:
            import asyncio

            await asyncio.to_thread(r.flush, timeout)
        for exc, count in r.take_failures():
            yield Stream.Next(self._failed("indexing", exc, f"{count} texts were not embedded or stored"))

    async def final_pass(self) -> list[Any]:
        """``session.end()``: an observation pass over what is not observed yet; the items."""
        return [item async for item in self.passes(emit=True, final=True)]

    def describe(self) -> str:
        """A short text of the current tiers (for logs and the CLI)."""
        assert self.state is not None
        parts = [self.state.working_block() or "[working_memory]\n(empty)"]
        if self.state.reflection is not None:
            parts.append("[reflection]\n" + reflection_text(self.state.reflection))
        for rec in self.state.observations_since_reflection:
            parts.append("[observation]\n" + observation_text(rec))
        return "\n\n".join(parts)
