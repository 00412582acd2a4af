"""``AgentSessionBuilder``: configures and builds (or resumes) an
:class:`~foundation_ai.agentic.session.AgentSession` (docs/concepts.md: Stores; docs/turn-loop.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Sequence
from typing import Any, Unpack

from ..errors import (
    ConfigurationError,
)
from ..ids import new_scru128
from ..types import (
    ModelId,
    ModelParams,
    ParamFields,
    SessionRecord,
)
from ..types.interaction import with_fields
from . import plugins
from .context import dangling_calls, interrupted_results
from .errors import SessionExistsError, SessionNotFoundError
from .ledger import TokenBudget
from .output import OutputSpec, output_spec
from .session import _NO_HOOKS, AgentSession
from .stores import InMemorySessionStore, SessionHeader, SessionMeta, SessionStore, conversation_of
from .tools import ToolRegistry, as_agent_tool
from .turn import (
    ChainedPhaseHooks,
    CircuitBreaker,
    ContextAssembler,
    PhaseHooks,
    StepRunner,
    ToolGate,
)
from .turn_inputs import _tool_choices

__all__ = ["AgentSessionBuilder"]

log = logging.getLogger(__name__)


def _unique_prefix(store: Any, prefix: str) -> str:
    """The one stored session id starting with ``prefix`` (``SessionNotFoundError`` otherwise)."""
    text = prefix.strip()
    matches: list[str] = sorted(i for i in store.sessions() if i.startswith(text)) if text else []
    if len(matches) != 1:
        raise SessionNotFoundError(prefix, matches)
    return matches[0]


@functools.cache
def _router() -> Any:
    """The ``foundation_ai.router`` module (``ProviderRouter``, ``as_model``), imported on the
    first build, not at import, and kept: an import statement run per build cost some 12,000
    instructions each time."""
    from .. import router

    return router


def _is_model(obj: Any) -> bool:
    return hasattr(obj, "astream") and hasattr(obj, "descriptor")


_NAMES = (str, ModelId)
"""What names a model (an ``isinstance`` tuple: ``str | ModelId`` made a union per call)."""


def _resolve_model(obj: Any, model_id: Any = None, router: Any = None) -> Any:
    """A ``Model``; a ``ProviderRouter`` resolved with ``router.as_model`` (its ``model_id`` or
    its default); a model name or ``ModelId`` resolved through ``router`` (for fallbacks); without
    a router, a model string such as ``"anthropic:claude-sonnet-4-5"`` (``foundation_ai.model``).

    Raises:
        ConfigurationError: none of these (or the router cannot resolve it).
    """
    router_module = _router()
    if isinstance(obj, router_module.ProviderRouter):
        return router_module.as_model(obj, model_id)
    if isinstance(obj, _NAMES):
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

    # The settings a ``with_*`` call replaces are class-level defaults (an instance sets its own
    # on first write): a builder made per session costs only its model and its lists.
    _memory: Any = None
    _model_id: Any = None
    _system: str | None = None
    _soul: str | None = None
    _params: ModelParams | None = None
    _inner = 25
    _outer = 10
    _budget: TokenBudget | None = None
    _store: SessionStore | None = None
    _tool_timeout: float | None = None
    _tool_choice: Any = None
    _chat_template: str | None = None
    _cooldown = 30.0
    _output: OutputSpec | None = None
    _shed: Any = None
    _can_use_tool: Any = None
    _hooks = _NO_HOOKS  # frozen: shared until a ``with_*`` replaces it

    def __init__(self, model_or_router: Any = None) -> None:
        self._model = model_or_router
        self._catalog: list[Any] = []
        self._tools: list[Any] = []
        self._fallbacks: list[Any] = []
        self._factories: list[Any] = []

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

    def with_params(
        self, params: ModelParams | None = None, **fields: Unpack[ParamFields]
    ) -> AgentSessionBuilder:
        """Sampling parameters for every generation: a ``ModelParams``, or its fields as keywords
        (``.with_params(temperature=0.2, max_tokens=500)``, over what was set before), or both.

        HTTP backends send only the fields that were set, so a provider's or server's own
        defaults apply to the rest (docs/models.md, "Parameters"); ``ModelParams()`` still reports
        the library's defaults (``max_tokens`` 2048, ``temperature`` 0.7, ``top_p`` 0.9).

        Raises:
            TypeError: an unknown field name.
        """
        base = params if params is not None else self._params
        self._params = with_fields(ModelParams() if base is None else base, fields) if fields else base
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
        """Where records are persisted. Default: none, the history is kept in memory with the
        session (an ``InMemorySessionStore``) and :meth:`resume` needs a store; give
        ``SqliteSessionStore()`` (a file in the user data dir, what the command line uses), a
        path of your own, or ``PostgresSessionStore`` to keep sessions across processes."""
        self._store = store
        return self

    def with_memory(self, config: Any = None) -> AgentSessionBuilder:
        """Turn memory on: working memory (the ``memory`` tool), observations and reflections,
        context assembly before each generation and retrieval (``search_context``).
        ``config``: a :class:`foundation_ai.memory.MemoryConfig` (default settings when
        ``None``), or any :class:`~.plugins.MemoryPlugin`. See ``docs/memory.md``."""
        self._memory = config if config is not None else plugins.default("memory")()
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

    def with_output_type(
        self, output_type: Any, *, retries: int | None = None, strict: bool = True
    ) -> AgentSessionBuilder:
        """Answer every turn as ``output_type``: a msgspec Struct, a dataclass, a TypedDict, a
        pydantic model, ``list[...]``, a ``Literal``, an enum or a primitive (``str`` or
        ``None``: plain text). ``ask`` then returns an instance, ``Turn.output`` holds it. The
        schema is sent in each provider's strict structured-output mode; an answer that does
        not validate goes back to the model with the errors, ``retries`` times (default 2),
        then the turn fails with :class:`~foundation_ai.errors.OutputValidationError`.
        ``strict=False`` sends a non-strict schema instead (for an open ``dict``; still validated
        locally); per call, pass ``output_type=OutputSpec(T, strict=False)``. See
        :mod:`foundation_ai.agentic.output` and ``docs/structured-output.md``.

        Raises:
            ConfigurationError: (strict) the type cannot be expressed in strict mode (an open
                ``dict`` field, ``Any``, a fixed-length tuple; the message names its path).
        """
        self._output = output_spec(output_type, retries, strict)
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
        around = getattr(self._hooks.steps, "around", None)  # a plugins.WrappingSteps (tracing)
        if around is not None:  # keep the tool spans around the new runner
            runner = around(runner)
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
        make = plugins.default("tracing")  # foundation_ai.telemetry.session_tracing
        tracing = make(tracer_provider, agent_name=agent_name, capture_content=capture_content)
        if tracing is None:  # opentelemetry-api is not installed
            return self
        self.with_phase_hooks(tracing)
        self._hooks = dataclasses.replace(self._hooks, steps=tracing.steps(self._hooks.steps))
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
        # no store given: the history lives in memory, with the session (as in pydantic-ai and
        # the official SDKs); the CLI, serve and workers pass their SQLite or Postgres store
        store = self._store if self._store is not None else InMemorySessionStore()
        if session_id is not None and _stored(store, session_id):
            raise SessionExistsError(session_id)
        return self._make(store, session_id or new_scru128(), self._model, self._system, self._tools)

    def _make(
        self, store: SessionStore, session_id: str, model: Any, system: str | None, tools: list[Any]
    ) -> AgentSession:
        if model is None:
            raise ConfigurationError(
                "no model: pass one to AgentSession.builder(...) (resume(id) can use the one the session recorded)"
            )
        memory = None
        hooks = self._hooks
        if self._memory is not None:
            memory = self._memory.manager()
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
        router = model if isinstance(model, _router().ProviderRouter) else None
        models = [_resolve_model(model, self._model_id)]
        if self._fallbacks:
            models += [_resolve_model(m, None if router is None else m, router) for m in self._fallbacks]
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
        if self._store is None:
            raise SessionNotFoundError(
                session_id,
                hint="no store was given (with_store): sessions built without one keep their history"
                " in memory only; build and resume with the same store, e.g. SqliteSessionStore(path)",
            )
        store = self._store
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
