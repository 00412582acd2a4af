"""``AgentSession``: multi-step turns with tools, streaming events, steering and persistence
(docs/concepts.md: Messages, Tools, The stream contract, Stores, Events).

    agent = (
        AgentSession.builder(model)              # any Model, or a ProviderRouter
        .with_system_prompt("Be brief.")
        .with_tools(add, search)
        .with_store(SqliteSessionStore("chat.db"))
        .build()
    )
    turn = agent.run_turn("What is 2 + 40?")     # Turn: records, outcome, text(), tool_calls(), usage()
    answer = agent.ask("And 5 + 5?")             # Answer: text, turn
    for event in agent.run_turn_stream("Hi").events(): ...
    again = AgentSession.builder(model).with_store(store).resume(agent.session_id)

Every blocking call has an async twin (``arun_turn``, ``aask``, ``arun_turn_stream``). Blocking
calls run on the session's private event loop in the calling thread; called from inside a
running event loop, ``run_turn``/``ask`` run in a worker thread instead.

Failures: ``run_turn``, ``ask`` and their async twins raise :class:`~foundation_ai.errors.TurnFailedError`
(carrying the ``Turn``, the error kind and the provider's text) when a turn ends without an
answer: an HTTP error, a refused connection, a bad key, budget or iteration limits. A streamed
turn reports the same as values: ``TurnStream.events()`` ends with ``TurnEvent.Failed``. An
aborted turn is not an error.

The parts live beside this module: :class:`~.turn_result.Turn`, :class:`~.answer.Answer` and
:class:`~.builder.AgentSessionBuilder` (re-exported here).
"""

from __future__ import annotations

import _thread
import asyncio
import functools
import logging
import threading
import weakref
from collections.abc import Sequence
from types import CoroutineType
from typing import TYPE_CHECKING, Any, TypeVar, Unpack, overload

from ..errors import (
    FoundationAIError,
)
from ..types import (
    AgentProgress,
    ImageContent,
    Messages,
    ModelParams,
    ParamFields,
    SessionRecord,
    Stream,
    ToolCall,
)
from ..types.interaction import with_fields
from ._interrupt import run_interruptible
from .answer import Answer, _answer
from .context import window
from .errors import ApprovalPendingError, SessionClosedError
from .events import TurnOutcome, TurnStream
from .ledger import TokenBudget, TokenLedger
from .output import OutputSpec, output_spec
from .session_meta import header_for
from .steering import Steering, checked_message
from .stores import SessionHeader, SessionMeta, SessionStore
from .stores.base import takes_header
from .stores.lease import LEASE_SECONDS, atake_session_lease, give_back_lease
from .tools import ToolRegistry
from .turn import (
    CircuitBreaker,
    TurnHooks,
    TurnState,
    run_turn,
)
from .turn.hooks import IN_PROCESS
from .turn.machine import run_quiet
from .turn.persist import flush as flush_pending
from .turn.state import DISCARD
from .turn_result import Turn

if TYPE_CHECKING:
    from .builder import AgentSessionBuilder
from ._private_loop import _close_loop, _settle
from .turn_inputs import _prompt_messages, _tool_choices

__all__ = ["AgentSession", "Answer", "Turn"]


log = logging.getLogger(__name__)
T = TypeVar("T")
_BUSY = threading.Lock()
"""Guards the test-and-set of every session's ``_running`` flag (``AgentSession._enter``)."""
_LOCKS_MADE = threading.Lock()
"""Guards making a session's ``_loop_lock`` on first use."""
_NO_HOOKS = TurnHooks()
"""No hooks (frozen, shared by every session that sets none)."""


class AgentSession:
    """A conversation with a model and tools; see the module docstring. Build with
    :meth:`builder`."""

    replay: Any = None
    """What an interrupted run of the turn being replayed already stored (set by the durable
    runner: ``turn.persist.Replay``); ``None`` otherwise."""

    # Attributes most sessions never set are class-level defaults (an instance sets its own on
    # first write): with 30 attributes or more an instance keeps them in a dict object of its
    # own, one more object the cycle collector scans per session.
    meta: SessionMeta | None = None
    """The stored metadata this session was resumed from (``None`` when built)."""
    memory: Any = None
    """The session's ``MemoryManager`` (``with_memory``), else ``None``."""
    _loop: asyncio.AbstractEventLoop | None = None
    _loop_lock: _thread.LockType | None = None  # one blocking call at a time drives ``_loop``
    _closed = False
    _running = False  # a turn holds the session (see ``_enter``)
    _lease: Any = None  # the store's session lease the running turn holds (stores/lease.py)
    context_start = 0
    """Index of the first message sent to the model (moves forward on context overflow)."""
    context_cut: tuple[int, int] | None = None
    """Within the running turn, after an overflow with no older exchange left: send
    ``messages[context_start:head_end] + messages[cut:]`` (the prompt, then the latest rounds)."""
    stored_header: SessionHeader | None = None
    """What the store last recorded about this session (model string, system prompt, tools)."""
    _header: tuple[Any, Any, Any, int, SessionHeader] | None = None  # ``session_header``'s cache
    awaiting: Sequence[ToolCall] = ()
    """The tool calls the last turn paused on, waiting for :meth:`approve`/:meth:`deny`."""
    paused_calls: Sequence[ToolCall] = ()
    """Every call of the paused response (run, or denied, once the turn continues)."""
    lease_seconds: float = LEASE_SECONDS
    """How long the session's lease lives without renewal (``docs/sessions.md``)."""
    lease_turn_id: str | None = None
    """The id a turn takes the lease under (``None``: a new one per turn; a durable turn sets
    its workflow id, so its recovered run takes the crashed run's lease over)."""

    def __init__(
        self,
        *,
        models: Sequence[Any],
        system_prompt: str | None,
        soul: str | None,
        registry: ToolRegistry,
        params: ModelParams | None,
        max_inner: int,
        max_outer: int,
        budget: TokenBudget | None,
        store: SessionStore,
        session_id: str,
        tool_choice: Any = None,
        chat_template: str | None = None,
        breaker: CircuitBreaker | None = None,
        output: OutputSpec | None = None,
        hooks: TurnHooks | None = None,
    ) -> None:
        self.models = list(models)
        self.system_prompt = system_prompt
        self.soul = soul
        self.registry = registry
        self.params = params
        self.max_inner = max_inner
        self.max_outer = max_outer
        self.ledger = TokenLedger(budget)
        self.store = store
        self.session_id = session_id
        self.tool_choice = tool_choice
        self.chat_template = chat_template
        self.breaker = breaker or CircuitBreaker()
        self.output_spec = output
        """The session's output type (``None``: plain text); a call's ``output_type`` overrides it."""
        self.hooks = hooks or _NO_HOOKS
        """The turn hooks (phase hooks, context assembler, tool gate, step runner)."""
        self.steering = Steering()
        self.messages: list[Messages] = []
        """The conversation, oldest first (what ``resume`` rebuilds)."""
        self.pending_records: list[SessionRecord] = []
        """Records kept in memory but not yet in the store (a write failed): the next turn, or
        :meth:`flush`, writes them first."""
        self._decisions: dict[str, Any] = {}

    @staticmethod
    def builder(model_or_router: Any = None) -> AgentSessionBuilder:
        """Start configuring a session on a ``Model``, a ``ProviderRouter`` or a model string
        (``"openai:gpt-4o-mini"``, ``"local"``: ``foundation_ai.model``, ``docs/models.md``).
        Without one, only ``resume`` works (with the model the session recorded)."""
        return _builder_class()(model_or_router)

    def session_header(self) -> SessionHeader:
        """What this session records about itself in the store now: the primary model's model
        string, the system prompt and the tool names (written with the next records when it
        changed)."""
        cached = self._header  # (model, system prompt, registry, its version, header)
        registry = self.registry
        if (
            cached is not None
            and cached[0] is self.models[0]
            and cached[1] is self.system_prompt
            and cached[2] is registry
            and cached[3] == registry.version
        ):
            return cached[4]
        model, system, version = self.models[0], self.system_prompt, registry.version
        if cached is None or cached[:4] != (model, system, registry, version):
            cached = self._header = (
                model,
                system,
                registry,
                version,
                header_for(model, system, registry.names()),
            )
        return cached[4]

    def flush(self) -> None:
        """Write the records a failed store write left in memory (see ``pending_records``);
        nothing to write: returns at once.

        Raises:
            StoreError: the store still cannot be written (the records stay pending).
            SessionClosedError: the session was closed.
        """
        self._check_open()
        if not self.pending_records:
            return
        batch = list(self.pending_records)
        now = self.session_header()
        header = None if now == self.stored_header else now
        if header is not None and takes_header(self.store):
            self.store.append(self.session_id, batch, header)
        else:
            self.store.append(self.session_id, batch)
        del self.pending_records[: len(batch)]
        if header is not None:
            self.stored_header = header

    async def aflush(self) -> None:
        """Async :meth:`flush` (the store is written off the event loop)."""
        self._check_open()
        await flush_pending(self)

    def context(self) -> list[Messages]:
        """The messages the next request carries, oldest first (see ``context_start``,
        ``context_cut``)."""
        return window(self.messages, self.context_start, self.context_cut)

    @property
    def model(self) -> Any:
        """The primary model."""
        return self.models[0]

    # -- history ---------------------------------------------------------------------------------

    def history(self) -> list[SessionRecord]:
        """The session's persisted records, from the store (records that no longer decode are
        skipped; see ``SqliteSessionStore.load``). Records a failed write left in
        ``pending_records`` are not there yet (:meth:`flush` writes them).

        Raises:
            SessionClosedError: the session was closed.
            StoreError: the store could not be read.
        """
        self._check_open()
        return self.store.load(self.session_id)

    async def ahistory(self) -> list[SessionRecord]:
        """Async :meth:`history` (the store is read in a worker thread)."""
        return await asyncio.to_thread(self.history)

    # -- steering --------------------------------------------------------------------------------

    def steer(self, message: str | Messages) -> None:
        """Interrupt the running turn at the next safe point and continue with ``message``
        (any thread or task). A ``str`` becomes ``Messages.agent(text)`` (docs/concepts.md: Messages).
        With no turn running it behaves like :meth:`follow_up`: the message is queued and sent
        right after the next turn's prompt.

        Raises:
            TypeError: ``message`` is neither a ``str`` nor a ``Messages``.
            EmptyPromptError: (a ``ValueError``) an empty text.
            SessionClosedError: the session was closed.
        """
        self._check_open()
        self.steering.steer(message)

    def follow_up(self, message: str | Messages) -> None:
        """Queue ``message`` (a ``str`` becomes ``Messages.user(text)``) for after the current
        answer (any thread or task); with no turn running, for the next turn.

        Raises:
            TypeError: ``message`` is neither a ``str`` nor a ``Messages``.
            EmptyPromptError: (a ``ValueError``) an empty text.
            SessionClosedError: the session was closed.
        """
        self._check_open()
        self.steering.follow_up(message)

    def abort(self) -> None:
        """End the running turn as ``Aborted`` at the next safe point, keeping its output.
        With no turn running this is a no-op (it is not remembered for the next turn)."""
        self.steering.abort()

    # -- turns -----------------------------------------------------------------------------------

    def _enter(self, entering: bool) -> bool:
        """The one-turn-at-a-time guard: ``_enter(True)`` takes it (False: a turn holds it),
        ``_enter(False)`` gives it back. A flag tested and set under one lock shared by every
        session (no lock object per session)."""
        if entering:
            with _BUSY:
                if self._running:
                    return False
                self._running = True
            return True
        lease, self._lease = self._lease, None  # taken by _take_lease at the turn's start
        self._running = False
        if lease is not None:
            give_back_lease(lease)
        return True

    async def _take_lease(self) -> None:
        """Take the store's session lease for the turn that just entered (``run_turn``): one
        running turn per stored session, in every process (``SessionBusyError``)."""
        self._lease = await atake_session_lease(
            self.store, self.session_id, self.lease_turn_id, self.lease_seconds
        )

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"session {self.session_id!r} is closed")

    def _spec(self, output_type: Any, retries: int | None) -> OutputSpec | None:
        if output_type is None:
            return output_spec(self.output_spec, retries) if self.output_spec is not None else None
        return output_spec(output_type, retries)

    def _start(
        self,
        prompt: str | Messages | Sequence[str | Messages | ImageContent],
        tool_choice: Any,
        emit: bool,
        output_type: Any = None,
        output_retries: int | None = None,
        params: ParamFields | None = None,
    ) -> tuple[Any, TurnState]:
        # one text prompt (the usual case): a tuple, which the cycle collector stops tracking
        prompts = (checked_message(prompt),) if type(prompt) is str else _prompt_messages(prompt)
        if self._closed:
            self._check_open()  # raises
        if self.awaiting:
            ids = ", ".join(c.id for c in self.awaiting)
            raise ApprovalPendingError(
                f"the last turn is waiting for approval of tool call(s) {ids}: approve() or deny() them first"
            )
        hooks = self.hooks  # quiet_ok, inlined: no phase hooks, the in-process step runner
        quiet = not emit and self.memory is None and hooks.phases is None and hooks.steps is IN_PROCESS
        state = TurnState(
            prompts,
            _tool_choices(tool_choice, self.registry) if tool_choice is not None else self.tool_choice,
            emit=emit,
            out=DISCARD if quiet else None,  # nothing is yielded: the items are not kept
        )
        if output_type is not None or self.output_spec is not None:
            state.output_spec = self._spec(output_type, output_retries)
        if params:
            state.params = with_fields(ModelParams() if self.params is None else self.params, params)
        if quiet:
            agen: Any = run_quiet(self, state)  # a coroutine: no items
        else:
            agen = run_turn(self, state, on_exit=self._enter)
            if self.memory is not None:
                agen = self.memory.wrap_turn(agen, state, emit)
        return agen, state

    def _finish_stream(self, make: Any) -> Any:
        try:
            return make()
        finally:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                self._settle()

    def run_turn_stream(
        self,
        prompt: str | Messages | Sequence[str | Messages | ImageContent],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
        **params: Unpack[ParamFields],
    ) -> TurnStream:
        """Start a turn and stream it (``for`` or ``async for``; ``.events()`` for TurnEvents).

        ``tool_choice`` applies to the turn's first generation only; a list applies its items to
        the first generations in order (``[ToolChoice.Function("add"), ToolChoice.None_()]``:
        force the call, then force an answer); later generations use the provider default.
        Strings work too: ``"auto"``, ``"none"``, ``"required"`` or a registered tool's name.
        ``output_type`` / ``output_retries``: see :meth:`AgentSessionBuilder.with_output_type`
        (this turn only; ``str`` asks for plain text). The stream's ``turn.output`` holds the value.
        ``**params``: model parameters for this turn's generations only (``temperature=0``,
        ``max_tokens=200``, ... : the :class:`~foundation_ai.types.ParamFields`), over the
        session's (``AgentSessionBuilder.with_params``); like those, sent to an HTTP provider
        only because they were set (docs/models.md, "Parameters").

        A streamed turn reports failures as values and never raises them: ``events()`` ends
        with ``TurnEvent.Failed`` (a refusal ends with ``Done`` whose outcome is ``Refused``).

        Raises:
            ToolChoiceError: an unknown tool choice or tool name (at once).
            ConfigurationError: an ``output_type`` strict mode cannot express (at once).
            TypeError: ``prompt`` is not a ``str``, a ``Messages`` or a list of them, or an
                unknown parameter name (at once).
            EmptyPromptError: (a ``ValueError``) an empty prompt (at once).
            SessionClosedError: the session was closed (at once).
            FoundationAIError: a turn is already running (when iteration starts).
        """
        agen, state = self._start(prompt, tool_choice, True, output_type, output_retries, params)

        def finish() -> Turn:
            return Turn(state, self.ledger.turn_usage())

        return TurnStream(agen, self._drive, lambda: self._finish_stream(finish))

    def arun_turn_stream(
        self,
        prompt: str | Messages | Sequence[str | Messages | ImageContent],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
        **params: Unpack[ParamFields],
    ) -> TurnStream:
        """The same as :meth:`run_turn_stream` (the stream supports ``async for``)."""
        return self.run_turn_stream(
            prompt, tool_choice=tool_choice, output_type=output_type, output_retries=output_retries, **params
        )

    async def arun_turn(
        self,
        prompt: str | Messages | Sequence[str | Messages | ImageContent],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
        **params: Unpack[ParamFields],
    ) -> Turn:
        """Run a turn to its end; see :class:`Turn` (``turn.output`` is the answer, typed when
        ``output_type`` is given: see :meth:`AgentSessionBuilder.with_output_type`). Returns
        when the turn completed, was aborted or was refused (``TurnOutcome.Refused``, the text in
        ``turn.refusal``: a typed outcome, never retried); raises when it ended without an
        answer (the turn is kept: records persisted, ``error.turn`` holds it).

        Raises:
            TurnFailedError: the turn failed (``kind`` ``"provider"`` for an HTTP error, a
                refused connection or a bad key; ``"rate_limited"``, ``"context_overflow"``),
                or hit ``"budget_exhausted"`` / ``"iteration_limit"``.
            OutputValidationError: (a ``TurnFailedError``) no answer matched ``output_type``.
            ToolChoiceError: an unknown tool choice or tool name.
            TypeError: ``prompt`` is not a ``str``, a ``Messages`` or a list of them.
            EmptyPromptError: (a ``ValueError``) an empty prompt.
            SessionClosedError: the session was closed.
            FoundationAIError: a turn is already running.
        """
        agen, state = self._start(prompt, tool_choice, False, output_type, output_retries, params)
        if type(agen) is CoroutineType:
            await agen
        else:
            try:
                async for _ in agen:
                    pass
            finally:
                await agen.aclose()
        turn = Turn(state, self.ledger.turn_usage())
        if turn.outcome is not TurnOutcome.Completed and turn.outcome is not TurnOutcome.Refused:
            turn.raise_for_outcome()  # a refusal is an outcome: the turn returns
        return turn

    def run_turn(
        self,
        prompt: str | Messages | Sequence[str | Messages | ImageContent],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
        **params: Unpack[ParamFields],
    ) -> Turn:
        """Blocking :meth:`arun_turn` (raises :class:`~foundation_ai.errors.TurnFailedError` the
        same way)."""
        return self._run_sync(  # type: ignore[no-any-return]
            lambda: self.arun_turn(
                prompt,
                tool_choice=tool_choice,
                output_type=output_type,
                output_retries=output_retries,
                **params,
            )
        )

    @overload
    async def aask(
        self,
        prompt: str | Messages | Sequence[str | Messages | ImageContent],
        *,
        tool_choice: Any = None,
        output_type: type[T],
        output_retries: int | None = None,
        **params: Unpack[ParamFields],
    ) -> T: ...

    @overload
    async def aask(
        self,
        prompt: str | Messages | Sequence[str | Messages | ImageContent],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
        **params: Unpack[ParamFields],
    ) -> Any: ...

    async def aask(
        self,
        prompt: str | Messages | Sequence[str | Messages | ImageContent],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
        **params: Unpack[ParamFields],
    ) -> Any:
        """Run a turn and return its answer: an instance of ``output_type`` (this call's, else
        the session's; see :meth:`AgentSessionBuilder.with_output_type`); the answer's text as
        a ``str`` for ``output_type=str``; or an :class:`Answer` (its text and turn) when no
        output type is in effect.

        Raises:
            TurnFailedError: the turn ended without an answer (see :meth:`arun_turn`); never
                an empty answer in place of an error (an answer cut at ``max_tokens`` before
                any text: ``kind`` ``"length"``; a cut answer with text is returned, see
                :attr:`Answer.truncated`). ``OutputValidationError`` (no valid
                output) and ``RefusalError`` (the model refused) are ``TurnFailedError``s.
            ApprovalRequiredError: the turn paused for approval of a tool call (``error.calls``;
                decide with :meth:`approve`/:meth:`deny`). :meth:`arun_turn` returns the paused
                turn instead (outcome ``AwaitingApproval``).
        """
        turn = await self.arun_turn(
            prompt, tool_choice=tool_choice, output_type=output_type, output_retries=output_retries, **params
        )
        turn.raise_for_outcome()  # a refusal: RefusalError, never an empty answer
        return _answer(turn, output_type)

    @overload
    def ask(
        self,
        prompt: str | Messages | Sequence[str | Messages | ImageContent],
        *,
        tool_choice: Any = None,
        output_type: type[T],
        output_retries: int | None = None,
        **params: Unpack[ParamFields],
    ) -> T: ...

    @overload
    def ask(
        self,
        prompt: str | Messages | Sequence[str | Messages | ImageContent],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
        **params: Unpack[ParamFields],
    ) -> Any: ...

    def ask(
        self,
        prompt: str | Messages | Sequence[str | Messages | ImageContent],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
        **params: Unpack[ParamFields],
    ) -> Any:
        """Blocking :meth:`aask` (``agent.ask("...", output_type=Invoice)`` returns an
        ``Invoice``; raises :class:`~foundation_ai.errors.TurnFailedError` the same way)."""
        turn = self.run_turn(
            prompt, tool_choice=tool_choice, output_type=output_type, output_retries=output_retries, **params
        )
        turn.raise_for_outcome()  # a refusal: RefusalError, never an empty answer
        return _answer(turn, output_type)

    # -- approvals -------------------------------------------------------------------------------

    def pending_approvals(self) -> list[ToolCall]:
        """The tool calls waiting for :meth:`approve`/:meth:`deny` (empty when none)."""
        return [c for c in self.awaiting if c.id not in self._decisions]

    def _decide(self, call_id: str, decision: Any) -> bool:
        self._check_open()
        if call_id not in {c.id for c in self.awaiting}:
            known = ", ".join(c.id for c in self.awaiting) or "none"
            raise ApprovalPendingError(f"no tool call {call_id!r} is waiting for approval (waiting: {known})")
        self._decisions[call_id] = decision
        return not self.pending_approvals()

    def _continuation(self, emit: bool) -> tuple[Any, TurnState]:
        state = TurnState([], None, emit=emit)
        state.resuming = True
        state.calls = list(self.paused_calls)
        state.results = [None] * len(state.calls)
        state.decisions = dict(self._decisions)
        self.awaiting, self.paused_calls, self._decisions = (), (), {}
        return run_turn(self, state, on_exit=self._enter), state

    async def _acontinue(self) -> Turn:
        agen, state = self._continuation(False)
        try:
            async for _ in agen:
                pass
        finally:
            await agen.aclose()
        return Turn(state, self.ledger.turn_usage())

    async def aapprove(self, call_id: str) -> Turn | None:
        """Approve a pending tool call; once every pending call is decided the paused turn
        continues (its allowed and approved calls run, denied ones get error results, then the
        model is called again) and its :class:`Turn` is returned; ``None`` while others wait.

        Raises:
            ApprovalPendingError: no pending call has this id.
        """
        from .turn import Allow

        if not self._decide(call_id, Allow()):
            return None
        return await self._acontinue()

    async def adeny(self, call_id: str, reason: str = "the user denied it") -> Turn | None:
        """Deny a pending tool call (it gets an error result with ``reason``); see
        :meth:`aapprove`."""
        from .turn import Deny

        if not self._decide(call_id, Deny(reason)):
            return None
        return await self._acontinue()

    def approve_stream(self, call_id: str) -> TurnStream | None:
        """Approve a pending tool call like :meth:`aapprove`, but once every pending call is
        decided return the continued turn as a :class:`TurnStream` (``None`` while others
        wait). Iterate the stream (``events()`` for ``TurnEvent``s) to run the continuation;
        the decisions are taken by this call, so a stream that is never iterated drops them.

        Raises:
            ApprovalPendingError: no pending call has this id.
        """
        from .turn import Allow

        return self._continue_stream() if self._decide(call_id, Allow()) else None

    def deny_stream(self, call_id: str, reason: str = "the user denied it") -> TurnStream | None:
        """Deny a pending tool call (its error result says ``reason``); see
        :meth:`approve_stream`."""
        from .turn import Deny

        return self._continue_stream() if self._decide(call_id, Deny(reason)) else None

    def _continue_stream(self) -> TurnStream:
        agen, state = self._continuation(True)
        return TurnStream(
            agen, self._drive, lambda: self._finish_stream(lambda: Turn(state, self.ledger.turn_usage()))
        )

    def approve(self, call_id: str) -> Turn | None:
        """Blocking :meth:`aapprove`."""
        return self._run_sync(lambda: self.aapprove(call_id))  # type: ignore[no-any-return]

    def deny(self, call_id: str, reason: str = "the user denied it") -> Turn | None:
        """Blocking :meth:`adeny`."""
        return self._run_sync(lambda: self.adeny(call_id, reason))  # type: ignore[no-any-return]

    # -- sync plumbing ---------------------------------------------------------------------------

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
            weakref.finalize(self, _close_loop, self._loop)  # closed with the session, not by GC order
        return self._loop

    def _make_loop_lock(self) -> _thread.LockType:
        """``_loop_lock``, made on the first blocking call (an async-only session has none)."""
        with _LOCKS_MADE:
            if self._loop_lock is None:
                self._loop_lock = threading.Lock()
            return self._loop_lock

    def _drive(self, awaitable: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_interruptible(self._own_loop(), awaitable)
        raise FoundationAIError("iterate a TurnStream with `async for` inside a running event loop")

    def _settle(self) -> None:
        """Let finalizers scheduled on the private loop (async generators a backend left open)
        run now: the loop only runs while a blocking call is in progress."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and asyncio.all_tasks(loop):
            loop.run_until_complete(_settle())

    def _run_sync(self, make: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            lock = self._loop_lock or self._make_loop_lock()
            if not lock.acquire(blocking=False):  # another thread's blocking call
                raise FoundationAIError("a turn is already running on this session") from None
            try:
                return run_interruptible(self._own_loop(), make())
            finally:
                try:
                    self._settle()
                finally:
                    lock.release()
        box: list[Any] = []

        def work() -> None:
            try:
                box.append((True, asyncio.run(make())))
            except BaseException as exc:
                box.append((False, exc))

        t = threading.Thread(target=work, name="foundation-ai-turn")
        t.start()
        t.join()
        ok, value = box[0]
        if not ok:
            raise value
        return value

    async def _ending(self) -> list[Any]:
        self._check_open()
        if not self._enter(True):
            raise FoundationAIError("a turn is running on this session; end it after the turn")
        try:
            items: list[Any] = [Stream.Pending(AgentProgress.SessionEnding())]
            if self.memory is not None:
                items += await self.memory.final_pass()
        finally:
            self._enter(False)
        return items

    async def aend(self) -> list[Any]:
        """End the session: ``Stream.Pending(AgentProgress.SessionEnding())``, then with memory
        a final observation pass over what no observation covers yet (its
        ``ProcessingMemory`` progress and ``Observation`` record, or a ``FailedAction`` of kind
        ``"memory"``), then :meth:`close`. Returns those items.

        Raises:
            SessionClosedError: the session was already closed.
            FoundationAIError: a turn is running.
        """
        items = await self._ending()
        self.close()
        return items

    def end(self) -> list[Any]:
        """Blocking :meth:`aend`."""
        items: list[Any] = self._run_sync(self._ending)
        self.close()
        return items

    def close(self) -> None:
        """Release the private event loop and the store (idempotent), after a last attempt to
        write records a failed store write left pending (a failure is logged). Afterwards every
        turn, steering and history call raises :class:`SessionClosedError`."""
        if self._closed:
            return
        if self.pending_records:
            try:
                self.flush()
            except Exception:
                log.warning(
                    "session %s: %d record(s) could not be stored before closing",
                    self.session_id,
                    len(self.pending_records),
                    exc_info=True,
                )
        self._closed = True
        if self.memory is not None:
            self.memory.close()
        if self._loop is not None:
            _close_loop(self._loop)
        self.store.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        self.close()

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> AgentSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AgentSession(id={self.session_id!r}, model={self.model.descriptor.name!r}, messages={len(self.messages)})"


@functools.cache
def _builder_class() -> type[AgentSessionBuilder]:
    """``AgentSessionBuilder``, imported on the first :meth:`AgentSession.builder` call and
    kept (``agentic/builder.py`` imports this module): an import statement run per call costs
    some 12,000 instructions."""
    from .builder import AgentSessionBuilder

    return AgentSessionBuilder


def __getattr__(name: str) -> Any:
    """``AgentSessionBuilder`` is also reachable here, where it was defined before
    ``agentic/builder.py`` (which imports this module) held it."""
    if name == "AgentSessionBuilder":
        from .builder import AgentSessionBuilder

        return AgentSessionBuilder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
