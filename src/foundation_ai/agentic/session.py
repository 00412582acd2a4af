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
"""

from __future__ import annotations

import _thread
import asyncio
import dataclasses
import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from types import CoroutineType
from typing import Any, TypeVar, overload

from ..errors import (
    ConfigurationError,
    EmptyPromptError,
    FoundationAIError,
    OutputValidationError,
    RefusalError,
    TurnFailedError,
)
from ..ids import new_scru128
from ..types import (
    AgenticError,
    AgentProgress,
    AssistantMessage,
    Messages,
    ModelId,
    ModelParams,
    SessionRecord,
    StopReason,
    Stream,
    TextContent,
    TokenSnapshot,
    ToolCall,
    ToolResultMessage,
    UsageReport,
    UserMessage,
)
from ..types.choices import tool_choice_of
from ._interrupt import run_interruptible
from .context import dangling_calls, interrupted_results, window
from .errors import ApprovalPendingError, SessionClosedError, SessionExistsError, SessionNotFoundError
from .events import TurnOutcome, TurnStream, TurnSummary
from .ledger import TokenBudget, TokenLedger
from .output import OutputSpec, output_spec
from .session_meta import header_for
from .steering import Steering, checked_message
from .stores import SessionHeader, SessionMeta, SessionStore, SqliteSessionStore, conversation_of
from .stores.base import takes_header
from .stores.lease import LEASE_SECONDS, atake_session_lease, give_back_lease
from .tools import ToolRegistry, as_agent_tool
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
from .turn.hooks import IN_PROCESS
from .turn.machine import run_quiet
from .turn.persist import flush as flush_pending
from .turn.state import DISCARD

__all__ = ["AgentSession", "AgentSessionBuilder", "Answer", "Turn"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_CONVERSATION, _SUMMARY = SessionRecord.Conversation, SessionRecord.Summary
_BUSY = threading.Lock()
"""Guards the test-and-set of every session's ``_running`` flag (``AgentSession._enter``)."""
_LOCKS_MADE = threading.Lock()
"""Guards making a session's ``_loop_lock`` on first use."""
_NO_HOOKS = TurnHooks()
"""No hooks (frozen, shared by every session that sets none)."""


class Turn:
    """A finished turn.

    Attributes:
        records: what the turn produced, in order: ``Conversation`` (one per persisted message),
            ``Retracted``, ``Summary`` and, for a failed turn, a last ``FailedAction``.
        outcome: a :class:`TurnOutcome`.
        output: the answer as the requested ``output_type`` (validated), or the text.
        error: why it did not complete (``None`` when completed).
        summary: the :class:`TurnSummary`.
    """

    __slots__ = (
        "_counts",
        "_output",
        "_summary",
        "_usage",
        "awaiting",
        "error",
        "outcome",
        "output_spec",
        "records",
        "refusal",
    )

    def __init__(self, state: TurnState, usage: UsageReport | Callable[[], UsageReport]) -> None:
        """``usage``: the turn's cumulative usage, or a function returning it (called once,
        when first needed: see :meth:`TokenLedger.turn_usage`)."""
        self.records: list[SessionRecord] = state.records
        self.outcome: TurnOutcome = state.outcome
        self.error: AgenticError | None = state.error
        self.output_spec: OutputSpec | None = state.output_spec
        """The output type asked for (``None``: plain text)."""
        self.refusal: str | None = state.refusal
        """The model's refusal text when the outcome is ``Refused``."""
        # the turn's own lists (a finished turn's state is not used again): no copies
        self._output = (state.output, state.output_errors, state.output_text)
        awaiting = state.awaiting
        self.awaiting: list[ToolCall] = awaiting if type(awaiting) is list else list(awaiting)
        """The tool calls the turn paused on (outcome ``AwaitingApproval``), else empty."""
        self._usage = usage
        self._counts = (state.persisted, state.generations, state.snapshot)
        self._summary: TurnSummary | None = None

    @property
    def summary(self) -> TurnSummary:
        """The :class:`TurnSummary` (messages persisted, usage, model calls, outcome), built
        on first read."""
        made = self._summary
        if made is None:
            persisted, generations, snapshot = self._counts
            made = self._summary = TurnSummary(
                outcome=self.outcome,
                message_count=persisted,
                usage=snapshot or TokenSnapshot.from_usage(self.usage()),
                generations=generations,
                error=self.error,
                refusal=self.refusal,
            )
        return made

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
        records = self.records
        i = len(records)
        while i:  # from the end back to the last tool result or user message
            i -= 1
            r = records[i]
            # exact types first: ``isinstance`` on these classes is the slower check
            kind = type(r)
            if kind is not _CONVERSATION and (kind is _SUMMARY or not isinstance(r, _CONVERSATION)):
                continue
            m = r.message  # type: ignore[attr-defined]
            kind = type(m)
            if kind is not AssistantMessage and (
                kind is UserMessage or kind is ToolResultMessage or not isinstance(m, AssistantMessage)
            ):
                break
            c = m.content
            if type(c) is TextContent or (type(c) is not ToolCall and isinstance(c, TextContent)):
                out.append(c.content)
        if len(out) == 1:  # the usual answer: one text output
            return out[0]
        out.reverse()
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
        usage = self._usage
        if isinstance(usage, UsageReport):
            return usage
        self._usage = made = usage()  # the ledger's report, built on first need
        return made

    @property
    def output(self) -> Any:
        """The answer: an instance of the turn's ``output_type`` (validated), or :meth:`text`
        when none was asked for. For a turn that did not complete: ``None`` (with an output
        type) or the partial text."""
        if self.output_spec is None:
            return self.text()
        return self._output[0]

    def raise_for_outcome(self) -> None:
        """Raise when the turn ended without an answer; return when it completed or was aborted.
        (``run_turn`` calls it for every outcome but ``Refused``; ``ask`` for every outcome.)

        Raises:
            RefusalError: the model refused (outcome ``Refused``).
            OutputValidationError: no answer matched the ``output_type``, retries included.
            TurnFailedError: the outcome is ``Failed``, ``BudgetExhausted``, ``IterationLimit``
                or ``LoopDetected`` (``kind`` and ``detail`` from :attr:`error`).
        """
        if self.outcome in (TurnOutcome.Completed, TurnOutcome.Aborted, TurnOutcome.AwaitingApproval):
            return  # a pause for approval is not a failure: approve()/deny() continue it
        if self.outcome is TurnOutcome.Refused:
            code = self.refusal or ""
            said = self.text().strip()
            # the provider's explanation; a bare reason code gives way to what the model said
            raise RefusalError(self, said if said and code in ("refusal", "content_filter", "") else code)
        if self.error is not None and self.error.kind == "output_validation":
            _, errors, text = self._output
            raise OutputValidationError(self, errors or [self.error.message], text)
        err = self.error
        kind = err.kind if err is not None else self.outcome.value
        detail = err.message if err is not None else f"the turn ended as {self.outcome.value}"
        raise TurnFailedError(self, kind, detail, retryable=bool(err is not None and err.retryable))

    def __repr__(self) -> str:
        return (
            f"Turn(outcome={self.outcome.name}, messages={len(self.messages())}, text={self.text()[:40]!r})"
        )


class Answer:
    """The result of :meth:`AgentSession.ask`: ``text`` plus the ``turn`` behind it. It
    compares equal to its text (``agent.ask("Yes or no?") == "yes"``) and prints as it."""

    __slots__ = ("text", "turn")

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.text = turn.text()

    @property
    def truncated(self) -> bool:
        """True when the answer was cut at ``ModelParams.max_tokens`` (its last output stopped
        with ``StopReason.Length``): the text is incomplete."""
        return _cut_at_max_tokens(self.turn)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Answer):
            return self.text == other.text and self.turn is other.turn
        if isinstance(other, str):
            return self.text == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.text)

    @property
    def usage(self) -> UsageReport:
        """The turn's usage."""
        return self.turn.usage()

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Answer({self.text!r})"


def _unique_prefix(store: Any, prefix: str) -> str:
    """The one stored session id starting with ``prefix`` (``SessionNotFoundError`` otherwise)."""
    text = prefix.strip()
    matches: list[str] = sorted(i for i in store.sessions() if i.startswith(text)) if text else []
    if len(matches) != 1:
        raise SessionNotFoundError(prefix, matches)
    return matches[0]


def _cut_at_max_tokens(turn: Turn) -> bool:
    for m in reversed(turn.messages()):
        if isinstance(m, AssistantMessage):
            return isinstance(m.stop_reason, StopReason.Length)
    return False


def _answer(turn: Turn, output_type: Any) -> Any:
    """What ``ask`` returns: the text for ``output_type=str``, the validated output for an
    output type, else an :class:`Answer`.

    Raises:
        TurnFailedError: ``kind`` ``"length"``: the answer was cut at ``max_tokens`` before any
            text (a reasoning model can spend them all on reasoning): never an empty answer.
    """
    if turn.output_spec is None and not turn.text() and _cut_at_max_tokens(turn):
        raise TurnFailedError(
            turn,
            "length",
            "the answer was cut at max_tokens before any text (a reasoning model may spend them"
            " all on reasoning): raise ModelParams.max_tokens",
        )
    if output_type is str:
        return turn.text()
    return Answer(turn) if turn.output_spec is None else turn.output


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
        EmptyPromptError: (a ``ValueError``) an empty text, or an empty list.
    """
    if type(prompt) is str or isinstance(prompt, str | Messages):
        return [checked_message(prompt)]
    if isinstance(prompt, Sequence) and not isinstance(prompt, bytes | bytearray):
        if not prompt:
            raise EmptyPromptError("the prompt is empty (an empty list)")
        return [checked_message(p) for p in prompt]
    raise TypeError(
        f"the prompt must be a str, a Messages or a list of them, got {type(prompt).__name__}: {prompt!r:.60}"
    )


_SETTLE_SECONDS = 5.0
"""How long a blocking call waits, once done, for clean-up tasks it left on the private loop
(async generators a backend left open closing in a worker thread, e.g. with a sync-only
``httpx.Client``); the rest is cancelled when the session or the interpreter closes the loop."""


def _tool_choices(choice: Any, registry: ToolRegistry) -> Any:
    """A turn's tool choice checked against the registered tools: ``None``, one choice or a
    list of them, each a ``ToolChoice`` or ``"auto"`` / ``"none"`` / ``"required"`` / a tool name.

    Raises:
        ToolChoiceError: an unknown string, or a tool name that is not registered.
    """
    if choice is None:
        return None
    offered = [f.name for f in registry.declarations().functions()]
    if isinstance(choice, list | tuple):
        return [tool_choice_of(c, offered) for c in choice]
    return tool_choice_of(choice, offered)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close a session's private loop: let its leftover tasks finish (bounded), cancel the rest,
    close the HTTP connections kept alive on it, finalize open async generators; never "Task
    was destroyed but it is pending!"."""
    if loop.is_closed() or loop.is_running():
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # called from async code (another loop runs in this thread): just close it
        loop.close()
        return
    try:
        loop.run_until_complete(_settle())
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        from ..backends._http import close_pools  # the HTTP connections kept alive on this loop

        loop.run_until_complete(close_pools(loop))
        loop.run_until_complete(loop.shutdown_asyncgens())
    except Exception:  # closing must not fail (it may run at interpreter exit)
        pass
    finally:
        loop.close()


async def _settle() -> None:
    """Let async generators left open finish closing (their ``aclose`` tasks, at most
    ``_SETTLE_SECONDS``); other tasks are left alone."""
    for _ in range(3):
        await asyncio.sleep(0)
    closing = [t for t in asyncio.all_tasks() if not t.done() and _is_generator_close(t)]
    if closing:
        await asyncio.wait(closing, timeout=_SETTLE_SECONDS)


def _is_generator_close(task: asyncio.Task[Any]) -> bool:
    """True for the task the event loop runs to close an async generator that was dropped."""
    return type(task.get_coro()).__name__ in ("async_generator_athrow", "async_generator_asend")


def _meta_of(store: Any, session_id: str) -> SessionMeta | None:
    """The store's metadata row of the session (``None`` for a store without metadata)."""
    read = getattr(store, "session_meta", None)
    if read is None:
        return None
    meta: SessionMeta | None = read(session_id)
    return meta


def _recorded_model(spec: str, base_url: str) -> Any:
    """The recorded model string loaded against the recorded base URL (``foundation_ai.model``;
    an environment key goes there only when the environment pairs it with that host).

    Raises:
        ConfigurationError: the model string or base URL cannot be loaded here.
    """
    from .._model_string import model

    loaded = model(spec, base_url=base_url)
    try:
        loaded.model_string = spec  # recorded again exactly as given
    except AttributeError:
        pass
    return loaded


def _stored(store: Any, session_id: str) -> bool:
    """True when the store holds a session with this id."""
    if getattr(store, "session_meta", None) is not None:
        return _meta_of(store, session_id) is not None
    return bool(store.load(session_id))


def _tools_named(catalog: list[Any], names: Sequence[str], own: frozenset[str] = frozenset()) -> list[Any]:
    """The catalog's tools with these function names, in that order; names in ``own`` (tools
    the session adds itself, like memory's) are neither looked up nor warned about."""
    names = [n for n in names if n not in own]
    if not names:
        return []
    by_name = {as_agent_tool(t).declaration.name(): t for t in catalog}
    found = [by_name[n] for n in names if n in by_name]
    missing = [n for n in names if n not in by_name]
    if missing:
        log.warning(
            "resumed session: recorded tools not in the tool catalog, left out: %s", ", ".join(missing)
        )
    return found


_MEMORY_TOOLS = frozenset({"memory", "search_context"})
"""The tools ``with_memory`` adds to every session it builds (``foundation_ai.memory.tools``)."""


class AgentSessionBuilder:
    """Configures an :class:`AgentSession`; every ``with_*`` returns the builder."""

    def __init__(self, model_or_router: Any = None) -> None:
        self._model = model_or_router
        self._catalog: list[Any] = []
        self._memory: Any = None
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
        self._output: OutputSpec | None = None
        self._shed: Any = None
        self._factories: list[Any] = []
        self._can_use_tool: Any = None
        self._hooks = _NO_HOOKS  # frozen: shared until a ``with_*`` replaces it

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

    def with_tool_catalog(self, *tools: Any) -> AgentSessionBuilder:
        """Tools :meth:`resume` may enable: when no tools were given with :meth:`with_tools`,
        a resumed session gets those of the catalog whose names it recorded (in recorded order;
        a recorded name missing from the catalog is logged and skipped)."""
        for t in tools:
            if isinstance(t, list | tuple):
                self._catalog.extend(t)
            else:
                self._catalog.append(t)
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

    def with_memory(self, config: Any = None) -> AgentSessionBuilder:
        """Turn memory on: working memory (the ``memory`` tool), observations and reflections,
        context assembly before each generation and retrieval (``search_context``).
        ``config``: a :class:`foundation_ai.memory.MemoryConfig` (default settings when
        ``None``). See ``docs/memory.md``."""
        from ..memory.manager import MemoryConfig

        self._memory = config if config is not None else MemoryConfig()
        return self

    def with_tool_timeout(self, seconds: float | None) -> AgentSessionBuilder:
        """Default per-call timeout for tools that set none."""
        self._tool_timeout = seconds
        return self

    def with_tool_choice(self, choice: Any) -> AgentSessionBuilder:
        """``ToolChoice`` for the first generation of every turn (later ones use the default),
        or a list of them for the first generations in order. A string works too: ``"auto"``,
        ``"none"``, ``"required"`` or the name of a tool (checked by :meth:`build`, which raises
        :class:`~foundation_ai.errors.ToolChoiceError` for anything else)."""
        self._tool_choice = choice
        return self

    def with_output_type(self, output_type: Any, *, retries: int | None = None) -> AgentSessionBuilder:
        """Answer every turn as ``output_type``: a msgspec Struct, a dataclass, a TypedDict, a
        pydantic model, ``list[...]``, a ``Literal``, an enum or a primitive (``str`` or
        ``None``: plain text). ``ask`` then returns an instance, ``Turn.output`` holds it. The
        schema is sent in each provider's strict structured-output mode; an answer that does
        not validate goes back to the model with the errors, ``retries`` times (default 2),
        then the turn fails with :class:`~foundation_ai.errors.OutputValidationError`. See
        :mod:`foundation_ai.agentic.output`.

        Raises:
            ConfigurationError: the type cannot be expressed in strict mode (a free-form
                ``dict``, ``Any``, a fixed-length tuple, a recursive type).
        """
        self._output = output_spec(output_type, retries)
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
        from ..telemetry import TracingSteps  # no OpenTelemetry import: only the wrapper type

        current = self._hooks.steps
        if isinstance(current, TracingSteps):  # keep the tool spans around the new runner
            runner = TracingSteps(current.tracing, runner)
        self._hooks = dataclasses.replace(self._hooks, steps=runner)
        return self

    def with_tracing(
        self,
        tracer_provider: Any = None,
        *,
        agent_name: str = "foundation-ai",
        capture_content: bool | None = None,
    ) -> AgentSessionBuilder:
        """Emit OpenTelemetry spans (GenAI semantic conventions: ``invoke_agent`` per turn,
        ``chat`` per model call, ``execute_tool`` per tool call) to ``tracer_provider`` (default:
        the global one). Message content only with ``capture_content=True``. A no-op when
        ``opentelemetry-api`` is not installed. See ``docs/telemetry.md``."""
        from ..telemetry import Tracing, TracingSteps, tracing_available

        if not tracing_available():
            return self
        tracing = Tracing(tracer_provider, agent_name=agent_name, capture_content=capture_content)
        self.with_phase_hooks(tracing)
        self._hooks = dataclasses.replace(self._hooks, steps=TracingSteps(tracing, self._hooks.steps))
        return self

    def build(self, session_id: str | None = None) -> AgentSession:
        """A new session (fresh id unless given).

        Raises:
            SessionExistsError: ``session_id`` names a session the store already holds (continue
                it with :meth:`resume`).
            ConfigurationError: no model was given, or a model or tool is unusable.
            StoreError: the store could not be read.
            ToolChoiceError: the tool choice is unknown or names a tool that is not registered.
        """
        store = self._store if self._store is not None else SqliteSessionStore()
        if session_id is not None and _stored(store, session_id):
            raise SessionExistsError(session_id)
        return self._make(store, session_id or new_scru128(), self._model, self._system, self._tools)

    def _make(
        self, store: SessionStore, session_id: str, model: Any, system: str | None, tools: list[Any]
    ) -> AgentSession:
        from ..router import ProviderRouter

        if model is None:
            raise ConfigurationError(
                "no model: pass one to AgentSession.builder(...) (resume(id) can use the one the session recorded)"
            )
        memory = None
        hooks = self._hooks
        if self._memory is not None:
            from ..memory.manager import MemoryManager

            memory = MemoryManager(self._memory)
            hooks = dataclasses.replace(hooks, context=memory.assembler(hooks.context))
        tools = tools + (memory.tools() if memory is not None else [])
        registry: Any = (
            ToolRegistry(tools, default_timeout=self._tool_timeout)
            if self._shed is None
            else self._shed.registry(pinned=tools, default_timeout=self._tool_timeout)
        )
        if self._can_use_tool is not None:
            from .toolsets.approval import can_use_tool_gate

            hooks = dataclasses.replace(hooks, gate=can_use_tool_gate(self._can_use_tool, registry))
        tool_choice = _tool_choices(self._tool_choice, registry)
        router = model if isinstance(model, ProviderRouter) else None
        models = [_resolve_model(model, self._model_id)] + [
            _resolve_model(m, None if router is None else m, router) for m in self._fallbacks
        ]
        if isinstance(model, str) and getattr(models[0], "model_string", None) is None:
            try:
                models[0].model_string = model  # recorded as given ("local", "gguf:PATH", ...)
            except AttributeError:
                pass
        session = AgentSession(
            models=models,
            system_prompt=system,
            soul=self._soul,
            registry=registry,
            params=self._params,
            max_inner=self._inner,
            max_outer=self._outer,
            budget=self._budget,
            store=store,
            session_id=session_id,
            tool_choice=tool_choice,
            chat_template=self._chat_template,
            breaker=CircuitBreaker(self._cooldown),
            output=self._output,
            hooks=hooks,
        )
        if memory is not None:
            memory.bind(session)
            session.memory = memory
        if self._shed is not None:
            registry.bind(session)
        for make in self._factories:
            for t in make(session):
                if self._shed is None:
                    registry.add(t)
                else:
                    registry.pin(t)
        return session

    def resume(self, session_id: str) -> AgentSession:
        """Rebuild a stored session: its conversation exactly as persisted (retracted outputs
        left out; tool calls left without a result by a crash get an "interrupted" result), and
        what it recorded about itself where this builder was not told: the model (a model
        string, loaded with ``foundation_ai.model`` against the recorded base URL when there is
        one; ``docs/models.md``), the system prompt, and
        the tools of :meth:`with_tool_catalog` whose names it recorded. ``session.meta`` is the
        stored :class:`~foundation_ai.agentic.stores.SessionMeta` (``None`` for a store without
        metadata).

        ``session_id`` may be the start of a stored id (as the CLI's ``-S`` takes it) when
        exactly one stored session starts with it.

        Raises:
            SessionNotFoundError: the store has no such session (nor one starting with it), or
                the prefix matches several.
            ConfigurationError: no model was given and the session recorded none (or one that
                cannot be loaded here).
            StoreError: the store could not be read or written.
        """
        store = self._store if self._store is not None else SqliteSessionStore()
        records = store.load(session_id)
        if not records:
            session_id = _unique_prefix(store, session_id)
            records = store.load(session_id)
        meta = _meta_of(store, session_id)
        model = self._model
        if model is None:
            if meta is None or not meta.model:
                raise ConfigurationError(
                    f"session {session_id!r} recorded no model: pass one to AgentSession.builder(...)"
                )
            model = meta.model
            if meta.base_url:  # the server it was talking to (not the provider's own host)
                model = _recorded_model(meta.model, meta.base_url)
        system = self._system if self._system is not None else (meta.system_prompt if meta else None)
        own = _MEMORY_TOOLS if self._memory is not None else frozenset()
        if self._shed is not None:  # the shed's tools are reached through it, not the catalog
            own = own | self._shed.names()
        tools = self._tools or _tools_named(self._catalog, meta.tools if meta else (), own)
        session = self._make(store, session_id, model, system, tools)
        session.meta = meta
        if meta is not None:
            session.stored_header = SessionHeader(
                model=meta.model,
                system_prompt=meta.system_prompt,
                tools=tuple(meta.tools),
                base_url=meta.base_url,
            )
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
            fixed = [SessionRecord.Conversation(message=m) for m in fix]
            session.pending_records.extend(fixed)
            session.flush()
            records = [*records, *fixed]
        if session.memory is not None:
            session.memory.restore(records)
        return session

    async def aresume(self, session_id: str) -> AgentSession:
        """Async :meth:`resume` (the store is read in a worker thread)."""
        return await asyncio.to_thread(self.resume, session_id)


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
        self.context_start = 0
        """Index of the first message sent to the model (moves forward on context overflow)."""
        self.context_cut: tuple[int, int] | None = None
        """Within the running turn, after an overflow with no older exchange left: send
        ``messages[context_start:head_end] + messages[cut:]`` (the prompt, then the latest rounds)."""
        self.pending_records: list[SessionRecord] = []
        """Records kept in memory but not yet in the store (a write failed): the next turn, or
        :meth:`flush`, writes them first."""
        self.stored_header: SessionHeader | None = None
        """What the store last recorded about this session (model string, system prompt, tools)."""
        self._header: tuple[Any, Any, Any, int, SessionHeader] | None = None
        self.awaiting: Sequence[ToolCall] = ()
        """The tool calls the last turn paused on, waiting for :meth:`approve`/:meth:`deny`."""
        self.paused_calls: Sequence[ToolCall] = ()
        """Every call of the paused response (run, or denied, once the turn continues)."""
        self._decisions: dict[str, Any] = {}

    @staticmethod
    def builder(model_or_router: Any = None) -> AgentSessionBuilder:
        """Start configuring a session on a ``Model``, a ``ProviderRouter`` or a model string
        (``"openai:gpt-4o-mini"``, ``"local"``: ``foundation_ai.model``, ``docs/models.md``).
        Without one, only ``resume`` works (with the model the session recorded)."""
        return AgentSessionBuilder(model_or_router)

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
        prompt: str | Messages | Sequence[str | Messages],
        tool_choice: Any,
        emit: bool,
        output_type: Any = None,
        output_retries: int | None = None,
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
        prompt: str | Messages | Sequence[str | Messages],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
    ) -> TurnStream:
        """Start a turn and stream it (``for`` or ``async for``; ``.events()`` for TurnEvents).

        ``tool_choice`` applies to the turn's first generation only; a list applies its items to
        the first generations in order (``[ToolChoice.Function("add"), ToolChoice.None_()]``:
        force the call, then force an answer); later generations use the provider default.
        Strings work too: ``"auto"``, ``"none"``, ``"required"`` or a registered tool's name.
        ``output_type`` / ``output_retries``: see :meth:`AgentSessionBuilder.with_output_type`
        (this turn only; ``str`` asks for plain text). The stream's ``turn.output`` holds the value.

        A streamed turn reports failures as values and never raises them: ``events()`` ends
        with ``TurnEvent.Failed`` (a refusal ends with ``Done`` whose outcome is ``Refused``).

        Raises:
            ToolChoiceError: an unknown tool choice or tool name (at once).
            ConfigurationError: an ``output_type`` strict mode cannot express (at once).
            TypeError: ``prompt`` is not a ``str``, a ``Messages`` or a list of them (at once).
            EmptyPromptError: (a ``ValueError``) an empty prompt (at once).
            SessionClosedError: the session was closed (at once).
            FoundationAIError: a turn is already running (when iteration starts).
        """
        agen, state = self._start(prompt, tool_choice, True, output_type, output_retries)

        def finish() -> Turn:
            return Turn(state, self.ledger.turn_usage())

        return TurnStream(agen, self._drive, lambda: self._finish_stream(finish))

    def arun_turn_stream(
        self,
        prompt: str | Messages | Sequence[str | Messages],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
    ) -> TurnStream:
        """The same as :meth:`run_turn_stream` (the stream supports ``async for``)."""
        return self.run_turn_stream(
            prompt, tool_choice=tool_choice, output_type=output_type, output_retries=output_retries
        )

    async def arun_turn(
        self,
        prompt: str | Messages | Sequence[str | Messages],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
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
        agen, state = self._start(prompt, tool_choice, False, output_type, output_retries)
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
        prompt: str | Messages | Sequence[str | Messages],
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
    ) -> Turn:
        """Blocking :meth:`arun_turn` (raises :class:`~foundation_ai.errors.TurnFailedError` the
        same way)."""
        return self._run_sync(  # type: ignore[no-any-return]
            lambda: self.arun_turn(
                prompt, tool_choice=tool_choice, output_type=output_type, output_retries=output_retries
            )
        )

    @overload
    async def aask(
        self,
        prompt: str | Messages,
        *,
        tool_choice: Any = None,
        output_type: type[T],
        output_retries: int | None = None,
    ) -> T: ...

    @overload
    async def aask(
        self,
        prompt: str | Messages,
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
    ) -> Any: ...

    async def aask(
        self,
        prompt: str | Messages,
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
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
        """
        turn = await self.arun_turn(
            prompt, tool_choice=tool_choice, output_type=output_type, output_retries=output_retries
        )
        turn.raise_for_outcome()  # a refusal: RefusalError, never an empty answer
        return _answer(turn, output_type)

    @overload
    def ask(
        self,
        prompt: str | Messages,
        *,
        tool_choice: Any = None,
        output_type: type[T],
        output_retries: int | None = None,
    ) -> T: ...

    @overload
    def ask(
        self,
        prompt: str | Messages,
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
    ) -> Any: ...

    def ask(
        self,
        prompt: str | Messages,
        *,
        tool_choice: Any = None,
        output_type: Any = None,
        output_retries: int | None = None,
    ) -> Any:
        """Blocking :meth:`aask` (``agent.ask("...", output_type=Invoice)`` returns an
        ``Invoice``; raises :class:`~foundation_ai.errors.TurnFailedError` the same way)."""
        turn = self.run_turn(
            prompt, tool_choice=tool_choice, output_type=output_type, output_retries=output_retries
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
