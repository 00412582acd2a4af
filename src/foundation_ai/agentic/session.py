"""``AgentSession``: multi-step turns with tools, streaming events, steering and persistence
(seed 000, sections 1, 5-7, 10-12).

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
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigurationError, FoundationAIError
from ..ids import new_scru128
from ..types import (
    AgenticError,
    AssistantMessage,
    Messages,
    ModelId,
    ModelParams,
    SessionRecord,
    StopReason,
    TextContent,
    TokenSnapshot,
    ToolCall,
    ToolResultMessage,
    UsageReport,
)
from .context import dangling_calls, interrupted_results, window
from .errors import ApprovalPendingError, SessionClosedError
from .events import TurnOutcome, TurnStream, TurnSummary
from .ledger import TokenBudget, TokenLedger
from .steering import Steering, checked_message
from .stores import SessionStore, SqliteSessionStore, conversation_of
from .tools import ToolRegistry
from .turn import (
    ChainedPhaseHooks,
    CircuitBreaker,
    ContextAssembler,
    PhaseHooks,
    StepRunner,
    ToolGate,
    TurnHooks,
    TurnState,
    run_turn,
)

__all__ = ["AgentSession", "AgentSessionBuilder", "Answer", "Turn"]


class Turn:
    """A finished turn.

    Attributes:
        records: what the turn produced, in order: ``Conversation`` (one per persisted message),
            ``Retracted``, ``Summary`` and, for a failed turn, a last ``FailedAction``.
        outcome: a :class:`TurnOutcome`.
        error: why it did not complete (``None`` when completed).
        summary: the :class:`TurnSummary`.
    """

    __slots__ = ("_usage", "awaiting", "error", "outcome", "records", "summary")

    def __init__(self, state: TurnState, usage: UsageReport) -> None:
        self.records: list[SessionRecord] = state.records
        self.outcome: TurnOutcome = state.outcome
        self.error: AgenticError | None = state.error
        self.awaiting: list[ToolCall] = list(state.awaiting)
        """The tool calls the turn paused on (outcome ``AwaitingApproval``), else empty."""
        self._usage = usage
        self.summary = TurnSummary(
            outcome=state.outcome,
            message_count=state.persisted,
            usage=state.snapshot or TokenSnapshot.from_usage(usage),
            generations=state.generations,
            error=state.error,
            refusal=state.refusal,
        )

    @property
    def stop_reason(self) -> StopReason:
        """``Stop`` (completed), ``StopReason.REFUSAL`` (refused), ``Aborted``, ``Error``
        (failed) or ``Message(kind)`` (budget, iteration limit)."""
        if self.outcome is TurnOutcome.Completed:
            return StopReason.STOP
        if self.outcome is TurnOutcome.Refused:
            return StopReason.REFUSAL
        if self.outcome is TurnOutcome.Aborted:
            return StopReason.ABORTED
        if self.outcome is TurnOutcome.Failed:
            return StopReason.ERROR
        return StopReason.Message(self.outcome.value)

    @property
    def ok(self) -> bool:
        """True when the turn completed."""
        return self.outcome is TurnOutcome.Completed

    def messages(self) -> list[Messages]:
        """The messages persisted by the turn, in order."""
        return [r.message for r in self.records if isinstance(r, SessionRecord.Conversation)]

    def text(self) -> str:
        """The answer: the text outputs after the last tool result or user message (joined)."""
        out: list[str] = []
        for m in self.messages():
            if not isinstance(m, AssistantMessage):
                out = []
            elif isinstance(m, AssistantMessage) and isinstance(m.content, TextContent):
                out.append(m.content.content)
        return "".join(out)

    def tool_calls(self) -> list[ToolCall]:
        """Every tool call of the turn, in order."""
        return [
            m.content
            for m in self.messages()
            if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall)
        ]

    def tool_results(self) -> list[ToolResultMessage]:
        """Every tool result of the turn, in order."""
        return [m for m in self.messages() if isinstance(m, ToolResultMessage)]

    def usage(self) -> UsageReport:
        """Cumulative usage of the turn (tokens; cost in USD)."""
        return self._usage

    def __repr__(self) -> str:
        return (
            f"Turn(outcome={self.outcome.name}, messages={len(self.messages())}, text={self.text()[:40]!r})"
        )


class Answer:
    """The result of :meth:`AgentSession.ask`: ``text`` plus the ``turn`` behind it."""

    __slots__ = ("text", "turn")

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.text = turn.text()

    @property
    def usage(self) -> UsageReport:
        """The turn's usage."""
        return self.turn.usage()

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Answer({self.text!r})"


def _is_model(obj: Any) -> bool:
    return hasattr(obj, "astream") and hasattr(obj, "descriptor")


def _resolve_model(obj: Any, model_id: Any = None, router: Any = None) -> Any:
    """A ``Model``; a ``ProviderRouter`` resolved with ``router.as_model`` (its ``model_id`` or
    its default); a model name or ``ModelId`` resolved through ``router`` (for fallbacks); without
    a router, a model string such as ``"anthropic:claude-sonnet-4-5"`` (``foundation_ai.model``).

    Raises:
        ConfigurationError: none of these (or the router cannot resolve it).
    """
    from ..router import ProviderRouter, as_model

    if isinstance(obj, ProviderRouter):
        return as_model(obj, model_id)
    if isinstance(obj, str | ModelId):
        if router is None and isinstance(obj, str):
            from .._model_string import model

            return model(obj)  # a model string: "openai:gpt-4o-mini", "local", ... (docs/models.md)
        if router is None:
            raise ConfigurationError(f"a model name ({obj!r}) needs a ProviderRouter as the session's model")
        return router.resolve(obj)
    if _is_model(obj):
        return obj
    raise ConfigurationError(f"expected a Model or a ProviderRouter, got {type(obj).__name__}")


def _awaiting_ids(records: Sequence[SessionRecord]) -> set[str]:
    """The call ids the last ``Summary`` of ``records`` says its turn paused on."""
    for r in reversed(records):
        if isinstance(r, SessionRecord.Summary):
            return set(r.awaiting_approval)
    return set()


def _prompt_messages(prompt: object) -> list[Messages]:
    """The prompt of a turn as messages: a ``str``, a ``Messages`` or a non-empty list/tuple of
    them.

    Raises:
        TypeError: anything else (e.g. ``5``, ``None``, ``b"..."``), checked before the turn
            starts so nothing unloadable is ever persisted.
        ValueError: an empty text, or an empty list.
    """
    if isinstance(prompt, str | Messages):
        return [checked_message(prompt)]
    if isinstance(prompt, Sequence) and not isinstance(prompt, bytes | bytearray):
        if not prompt:
            raise ValueError("the prompt is empty (an empty list)")
        return [checked_message(p) for p in prompt]
    raise TypeError(
        f"the prompt must be a str, a Messages or a list of them, got {type(prompt).__name__}: {prompt!r:.60}"
    )


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    if not loop.is_closed() and not loop.is_running():
        loop.close()


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


class AgentSessionBuilder:
    """Configures an :class:`AgentSession`; every ``with_*`` returns the builder."""

    def __init__(self, model_or_router: Any) -> None:
        self._model = model_or_router
        self._model_id: Any = None
        self._system: str | None = None
        self._soul: str | None = None
        self._tools: list[Any] = []
        self._params: ModelParams | None = None
        self._inner = 25
        self._outer = 10
        self._fallbacks: list[Any] = []
        self._budget: TokenBudget | None = None
        self._store: SessionStore | None = None
        self._tool_timeout: float | None = None
        self._tool_choice: Any = None
        self._chat_template: str | None = None
        self._cooldown = 30.0
        self._shed: Any = None
        self._factories: list[Any] = []
        self._can_use_tool: Any = None
        self._hooks = TurnHooks()

    def with_model_id(self, model_id: Any) -> AgentSessionBuilder:
        """For a ``ProviderRouter``: the ``ModelId`` (or name) to route to (default: the
        router's ``default``)."""
        self._model_id = model_id
        return self

    def with_system_prompt(self, prompt: str) -> AgentSessionBuilder:
        """Instructions, sent as ``ModelInteraction.system_prompt`` (never as a message)."""
        self._system = prompt
        return self

    def with_soul(self, soul: str) -> AgentSessionBuilder:
        """A persona text, appended to the system prompt by the backend."""
        self._soul = soul
        return self

    def with_tools(self, *tools: Any) -> AgentSessionBuilder:
        """Add tools: ``@tool`` functions, plain typed functions, class tools, MultiCommandTools
        (iterables of them are flattened)."""
        for t in tools:
            if isinstance(t, list | tuple):
                self._tools.extend(t)
            else:
                self._tools.append(t)
        return self

    def with_tool_shed(self, shed: Any) -> AgentSessionBuilder:
        """Discover tools with ``shed`` (a ``toolsets.ToolShed``): each request declares the
        ``shed`` meta-tool plus the active tools only; tools given to :meth:`with_tools` stay
        always declared. See ``docs/tools.md``."""
        self._shed = shed
        return self

    def with_tool_factory(self, make: Any) -> AgentSessionBuilder:
        """Session-aware tools: ``make(session)`` returns tools for each session built or
        resumed (e.g. ``toolsets.SubAgents``); with a tool shed they are always declared."""
        self._factories.append(make)
        return self

    def with_params(self, params: ModelParams) -> AgentSessionBuilder:
        """Sampling parameters for every generation."""
        self._params = params
        return self

    def with_max_iterations(self, inner: int = 25, outer: int = 10) -> AgentSessionBuilder:
        """``inner``: model calls per round; ``outer``: follow-up rounds per turn."""
        if inner < 1 or outer < 1:
            raise ConfigurationError("iteration limits must be at least 1")
        self._inner, self._outer = inner, outer
        return self

    def with_fallback_models(self, *models: Any, cooldown: float = 30.0) -> AgentSessionBuilder:
        """Models to use, in order, while the primary is rate limited (``cooldown`` seconds per
        tripped circuit breaker). With a ``ProviderRouter`` as the session's model, a fallback
        may be a model name or ``ModelId``, resolved through the router."""
        self._fallbacks.extend(models)
        self._cooldown = cooldown
        return self

    def with_token_budget(
        self, max_tokens: float | None = None, *, max_cost_usd: float | None = None
    ) -> AgentSessionBuilder:
        """Stop with ``BudgetExhausted`` once the session used this many tokens or USD."""
        self._budget = TokenBudget(max_tokens=max_tokens, max_cost_usd=max_cost_usd)
        return self

    def with_store(self, store: SessionStore) -> AgentSessionBuilder:
        """Where records are persisted (default: ``SqliteSessionStore()`` in the user data dir)."""
        self._store = store
        return self

    def with_tool_timeout(self, seconds: float | None) -> AgentSessionBuilder:
        """Default per-call timeout for tools that set none."""
        self._tool_timeout = seconds
        return self

    def with_tool_choice(self, choice: Any) -> AgentSessionBuilder:
        """``ToolChoice`` for the first generation of every turn (later ones use the default),
        or a list of them for the first generations in order."""
        self._tool_choice = choice
        return self

    def with_chat_template(self, template: str) -> AgentSessionBuilder:
        """Local backends: a chat template overriding the model's own."""
        self._chat_template = template
        return self

    def with_phase_hooks(self, *hooks: PhaseHooks) -> AgentSessionBuilder:
        """Call ``hooks.before_phase(phase, state)`` / ``hooks.after_phase(phase, state, error)``
        around every phase of every turn (e.g. a tracing span per phase). Calling it again adds
        hooks: ``before_phase`` runs in the order they were added, ``after_phase`` in reverse.
        See ``docs/turn-loop.md``."""
        current = self._hooks.phases
        if isinstance(current, ChainedPhaseHooks):
            hooks = (*current.hooks, *hooks)
        elif current is not None:
            hooks = (current, *hooks)
        phases = hooks[0] if len(hooks) == 1 else ChainedPhaseHooks(*hooks) if hooks else None
        self._hooks = dataclasses.replace(self._hooks, phases=phases)
        return self

    def with_context_assembler(self, assembler: ContextAssembler) -> AgentSessionBuilder:
        """Build the request of every generation with ``assembler(ContextRequest) ->
        ModelInteraction`` (sync or async), e.g. to add memories; it receives the request the
        session would send. See ``docs/turn-loop.md``."""
        self._hooks = dataclasses.replace(self._hooks, context=assembler)
        return self

    def with_tool_gate(self, gate: ToolGate) -> AgentSessionBuilder:
        """Decide about every tool call before it runs: ``gate(GateRequest) -> Allow() |
        Deny(reason) | Ask(question)`` (sync or async). A denied call gets an error result with
        the reason; ``Ask`` pauses the turn until :meth:`AgentSession.approve` /
        :meth:`AgentSession.deny` (outcome ``AwaitingApproval``). See ``docs/turn-loop.md`` and
        ``docs/tools.md``."""
        self._hooks = dataclasses.replace(self._hooks, gate=gate)
        return self

    def with_can_use_tool(self, can_use_tool: Any) -> AgentSessionBuilder:
        """Decide about every tool call with ``can_use_tool(call, context) -> Allow() |
        Deny(reason) | Ask(question)`` (sync or async; ``context`` is a
        ``toolsets.approval.ToolContext``). For a tool marked ``requires_approval`` an ``Allow``
        counts as the approval. ``Ask`` pauses the turn until ``approve``/``deny``. Replaces a
        :meth:`with_tool_gate` gate. See ``docs/tools.md``."""
        self._can_use_tool = can_use_tool
        return self

    def with_tool_policy(self, policy: Any) -> AgentSessionBuilder:
        """Retries, error policy and loop detection for tool calls (a
        ``toolsets.policy.ToolPolicy``; default: no retries, errors reported to the model, loop
        detection at 3 identical calls). See ``docs/tools.md``."""
        self._hooks = dataclasses.replace(self._hooks, policy=policy)
        return self

    def with_can_spend(self, check: Any = None) -> AgentSessionBuilder:
        """Check before each generation that the session may spend on it: ``check(SpendRequest)
        -> None | True | False | reason`` (default: ``toolsets.approval.estimated_spend_check``,
        the request's estimated size against the budget's remaining tokens and USD). A refusal
        ends the turn ``BudgetExhausted`` before the model is called."""
        if check is None:
            from .toolsets.approval import estimated_spend_check

            check = estimated_spend_check
        self._hooks = dataclasses.replace(self._hooks, can_spend=check)
        return self

    def with_step_runner(self, runner: StepRunner) -> AgentSessionBuilder:
        """Run every generation and tool call through ``runner`` (e.g. durable steps; default
        ``InProcessSteps``). See ``docs/turn-loop.md``."""
        self._hooks = dataclasses.replace(self._hooks, steps=runner)
        return self

    def build(self, session_id: str | None = None) -> AgentSession:
        """A new session (fresh id unless given).

        Raises:
            ConfigurationError: a model or tool is unusable.
        """
        store = self._store if self._store is not None else SqliteSessionStore()
        from ..router import ProviderRouter

        router = self._model if isinstance(self._model, ProviderRouter) else None
        models = [_resolve_model(self._model, self._model_id)] + [
            _resolve_model(m, None if router is None else m, router) for m in self._fallbacks
        ]
        registry: Any = (
            ToolRegistry(self._tools, default_timeout=self._tool_timeout)
            if self._shed is None
            else self._shed.registry(pinned=self._tools, default_timeout=self._tool_timeout)
        )
        session = AgentSession(
            models=models,
            system_prompt=self._system,
            soul=self._soul,
            registry=registry,
            params=self._params,
            max_inner=self._inner,
            max_outer=self._outer,
            budget=self._budget,
            store=store,
            session_id=session_id or new_scru128(),
            tool_choice=self._tool_choice,
            chat_template=self._chat_template,
            breaker=CircuitBreaker(self._cooldown),
            hooks=self._session_hooks(registry),
        )
        if self._shed is not None:
            registry.bind(session)
        for make in self._factories:
            for t in make(session):
                if self._shed is None:
                    registry.add(t)
                else:
                    registry.pin(t)
        return session

    def _session_hooks(self, registry: Any) -> TurnHooks:
        if self._can_use_tool is None:
            return self._hooks
        from .toolsets.approval import can_use_tool_gate

        return dataclasses.replace(self._hooks, gate=can_use_tool_gate(self._can_use_tool, registry))

    def resume(self, session_id: str) -> AgentSession:
        """Rebuild a stored session: its conversation exactly as persisted (retracted outputs
        left out; tool calls left without a result by a crash get an "interrupted" result).

        Raises:
            FoundationAIError: the store has no such session.
        """
        session = self.build(session_id)
        records = session.store.load(session_id)
        if not records:
            raise FoundationAIError(f"no stored session {session_id!r}")
        session.messages = conversation_of(records)
        restore = getattr(session.registry, "restore", None)
        if restore is not None:
            restore(session.messages)
        open_calls = dangling_calls(session.messages)
        waiting = _awaiting_ids(records)
        if open_calls and waiting and waiting <= {c.id for c in open_calls}:
            session.paused_calls = open_calls  # paused for approval: kept open, see approve()
            session.awaiting = [c for c in open_calls if c.id in waiting]
        elif open_calls:
            fix = interrupted_results(open_calls, "the process stopped")
            session.messages.extend(fix)
            session.store.append(session_id, [SessionRecord.Conversation(message=m) for m in fix])
        return session

    async def aresume(self, session_id: str) -> AgentSession:
        """Async :meth:`resume` (the store is read in a worker thread)."""
        return await asyncio.to_thread(self.resume, session_id)


class AgentSession:
    """A conversation with a model and tools; see the module docstring. Build with
    :meth:`builder`."""

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
        self.hooks = hooks or TurnHooks()
        """The turn hooks (phase hooks, context assembler, tool gate, step runner)."""
        self.steering = Steering()
        self.messages: list[Messages] = []
        """The conversation, oldest first (what ``resume`` rebuilds)."""
        self.context_start = 0
        """Index of the first message sent to the model (moves forward on context overflow)."""
        self.context_cut: tuple[int, int] | None = None
        """Within the running turn, after an overflow with no older exchange left: send
        ``messages[context_start:head_end] + messages[cut:]`` (the prompt, then the latest rounds)."""
        self.awaiting: list[ToolCall] = []
        """The tool calls the last turn paused on, waiting for :meth:`approve`/:meth:`deny`."""
        self.paused_calls: list[ToolCall] = []
        """Every call of the paused response (run, or denied, once the turn continues)."""
        self._decisions: dict[str, Any] = {}
        self._busy = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    @staticmethod
    def builder(model_or_router: Any) -> AgentSessionBuilder:
        """Start configuring a session on a ``Model``, a ``ProviderRouter`` or a model string
        (``"openai:gpt-4o-mini"``, ``"local"``: ``foundation_ai.model``, ``docs/models.md``)."""
        return AgentSessionBuilder(model_or_router)

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
        skipped; see ``SqliteSessionStore.load``).

        Raises:
            SessionClosedError: the session was closed.
        """
        self._check_open()
        return self.store.load(self.session_id)

    async def ahistory(self) -> list[SessionRecord]:
        """Async :meth:`history` (the store is read in a worker thread)."""
        return await asyncio.to_thread(self.history)

    # -- steering --------------------------------------------------------------------------------

    def steer(self, message: str | Messages) -> None:
        """Interrupt the running turn at the next safe point and continue with ``message``
        (any thread or task). A ``str`` becomes ``Messages.agent(text)`` (seed 000 section 1).
        With no turn running it behaves like :meth:`follow_up`: the message is queued and sent
        right after the next turn's prompt.

        Raises:
            TypeError: ``message`` is neither a ``str`` nor a ``Messages``.
            ValueError: an empty text.
            SessionClosedError: the session was closed.
        """
        self._check_open()
        self.steering.steer(message)

    def follow_up(self, message: str | Messages) -> None:
        """Queue ``message`` (a ``str`` becomes ``Messages.user(text)``) for after the current
        answer (any thread or task); with no turn running, for the next turn.

        Raises:
            TypeError: ``message`` is neither a ``str`` nor a ``Messages``.
            ValueError: an empty text.
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
        if entering:
            return self._busy.acquire(blocking=False)
        self._busy.release()
        return True

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"session {self.session_id!r} is closed")

    def _start(
        self, prompt: str | Messages | Sequence[str | Messages], tool_choice: Any, emit: bool
    ) -> tuple[Any, Any]:
        prompts = _prompt_messages(prompt)
        self._check_open()
        if self.awaiting:
            ids = ", ".join(c.id for c in self.awaiting)
            raise ApprovalPendingError(
                f"the last turn is waiting for approval of tool call(s) {ids}: approve() or deny() them first"
            )
        tc = tool_choice if tool_choice is not None else self.tool_choice
        state = TurnState(prompts, tc, emit=emit)
        agen = run_turn(self, state, on_exit=self._enter)

        def finish() -> Turn:
            return Turn(state, self.ledger.turn)

        return agen, finish

    def _finish_stream(self, make: Any) -> Any:
        try:
            return make()
        finally:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                self._settle()

    def run_turn_stream(
        self, prompt: str | Messages | Sequence[str | Messages], *, tool_choice: Any = None
    ) -> TurnStream:
        """Start a turn and stream it (``for`` or ``async for``; ``.events()`` for TurnEvents).

        ``tool_choice`` applies to the turn's first generation only; a list applies its items to
        the first generations in order (``[ToolChoice.Function("add"), ToolChoice.None_()]``:
        force the call, then force an answer); later generations use the provider default.

        Raises:
            TypeError: ``prompt`` is not a ``str``, a ``Messages`` or a list of them (at once).
            ValueError: an empty prompt (at once).
            SessionClosedError: the session was closed (at once).
            FoundationAIError: a turn is already running (when iteration starts).
        """
        agen, finish = self._start(prompt, tool_choice, True)
        return TurnStream(agen, self._drive, lambda: self._finish_stream(finish))

    def arun_turn_stream(
        self, prompt: str | Messages | Sequence[str | Messages], *, tool_choice: Any = None
    ) -> TurnStream:
        """The same as :meth:`run_turn_stream` (the stream supports ``async for``)."""
        return self.run_turn_stream(prompt, tool_choice=tool_choice)

    async def arun_turn(
        self, prompt: str | Messages | Sequence[str | Messages], *, tool_choice: Any = None
    ) -> Turn:
        """Run a turn to its end; see :class:`Turn`.

        Raises:
            TypeError: ``prompt`` is not a ``str``, a ``Messages`` or a list of them.
            ValueError: an empty prompt.
            SessionClosedError: the session was closed.
            FoundationAIError: a turn is already running.
        """
        agen, finish = self._start(prompt, tool_choice, False)
        try:
            async for _ in agen:
                pass
        finally:
            await agen.aclose()
        turn: Turn = finish()
        return turn

    def run_turn(self, prompt: str | Messages | Sequence[str | Messages], *, tool_choice: Any = None) -> Turn:
        """Blocking :meth:`arun_turn`."""
        return self._run_sync(lambda: self.arun_turn(prompt, tool_choice=tool_choice))  # type: ignore[no-any-return]

    async def aask(self, prompt: str | Messages, *, tool_choice: Any = None) -> Answer:
        """Run a turn and return its answer text."""
        return Answer(await self.arun_turn(prompt, tool_choice=tool_choice))

    def ask(self, prompt: str | Messages, *, tool_choice: Any = None) -> Answer:
        """Blocking :meth:`aask`."""
        return Answer(self.run_turn(prompt, tool_choice=tool_choice))

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

    async def _acontinue(self) -> Turn:
        state = TurnState([], None, emit=False)
        state.resuming = True
        state.calls = list(self.paused_calls)
        state.results = [None] * len(state.calls)
        state.decisions = dict(self._decisions)
        self.awaiting, self.paused_calls, self._decisions = [], [], {}
        agen: Any = run_turn(self, state, on_exit=self._enter)
        try:
            async for _ in agen:
                pass
        finally:
            await agen.aclose()
        return Turn(state, self.ledger.turn)

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

    def _drive(self, awaitable: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._own_loop().run_until_complete(awaitable)
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
            try:
                return self._own_loop().run_until_complete(make())
            finally:
                self._settle()
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

    def close(self) -> None:
        """Release the private event loop and the store (idempotent). Afterwards every turn,
        steering and history call raises :class:`SessionClosedError`."""
        if self._closed:
            return
        self._closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.close()
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
