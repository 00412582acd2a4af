"""``shed``: tool discovery for agents with many tools.

A :class:`ToolShed` registers any number of tools; a session built with it declares, on each
request, the discovery meta-tool ``shed`` plus the *active* tools only (the request's
``ToolDeclarations(shed=..., tools=[...])``). The model calls ``shed(description, limit=5)`` to
find tools: the hits are activated (declared from the next request on) and returned as JSON
(no hit: a line saying so, how many tools can be found and how to list them all)::

    shed = ToolShed().tools(hundreds_of_tools).tool(one_more)
    agent = AgentSession.builder(model).with_tool_shed(shed).build()

Ranking: with an embedder (``ToolShed(embedder=...)`` or :meth:`ToolShed.with_default_embedder`),
tools whose "name: description" embedding has a cosine similarity of at least
``min_similarity`` with the description come first, best first; the rest of ``limit`` is
filled by a keyword score over the name (weight 3), category (2) and description (1); ties are
broken by name. An empty description lists every tool.

A call to a registered tool that is not active returns an error result telling the model to
call ``shed`` first; an unknown name returns an error result listing the closest names
(``difflib``). A joined name such as ``memory_add`` runs the ``add`` command of the
multi-command tool ``memory`` when that command exists.

Declared-tool cap: providers refuse requests declaring too many functions (OpenAI Chat
Completions and Responses: at most 128 tools, https://platform.openai.com/docs/api-reference/chat/create
``tools``; :data:`DECLARED_TOOL_LIMITS`). A session's registry declares at most
``max_declared`` tools (``shed`` and pinned tools included; default: the smallest limit of the
session's models, none when no limit is documented). Past the cap, ``on_cap="lru"`` (the
default) deactivates the least recently used active tools (activated or called longest ago);
``on_cap="refuse"`` activates what fits and answers the rest as refused. A call to a tool
deactivated that way gets the "call ``shed`` first" result, saying why.

Activation is persisted with the session: it is recorded by the ``shed`` results themselves
(tool results in the session's records), and :meth:`ShedRegistry.restore` (called by
``AgentSessionBuilder.resume``) activates again every tool a stored ``shed`` result returned.
See ``docs/tools.md``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ...errors import ConfigurationError
from ...types import (
    Args,
    Messages,
    TextContent,
    Tool,
    ToolCall,
    ToolDeclarations,
    ToolDefinition,
    ToolResultMessage,
)
from ..tools import AgentTool, ToolRegistry, as_agent_tool, error_result

if TYPE_CHECKING:
    from ..session import AgentSession

__all__ = ["DECLARED_TOOL_LIMITS", "SHED_NAME", "ShedHit", "ShedRegistry", "ToolShed", "declared_tool_limit"]

SHED_NAME = "shed"
"""The reserved name of the discovery meta-tool."""

DEFAULT_LIMIT = 5
MAX_LIMIT = 50

DECLARED_TOOL_LIMITS: dict[str, int] = {"openai": 128, "openai_responses": 128}
"""The documented maximum of function tools one request may declare, by provider
(``ModelDescriptor.provider``): OpenAI Chat Completions and Responses, 128
(https://platform.openai.com/docs/api-reference/chat/create, ``tools``: "A max of 128 functions
are supported"; https://platform.openai.com/docs/api-reference/responses/create). Anthropic's
Messages API and llama.cpp document no count limit (only the context window bounds them)."""


def declared_tool_limit(models: Iterable[Any]) -> int | None:
    """The smallest :data:`DECLARED_TOOL_LIMITS` entry of ``models`` (their
    ``descriptor.provider``), or ``None`` when none documents a limit."""
    limits = [
        DECLARED_TOOL_LIMITS[p]
        for m in models
        if (p := getattr(getattr(m, "descriptor", None), "provider", None)) in DECLARED_TOOL_LIMITS
    ]
    return min(limits) if limits else None


_SHED_DESCRIPTION = (
    "Find tools for a task and make them available. Describe what you need to do; the best "
    "matching tools are activated and returned (name, description, category, schema). Call the "
    "returned tools afterwards. An empty description lists every tool."
)
_SHED_ARGS = Args(
    {
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "What you need a tool for, in a few words."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "default": DEFAULT_LIMIT,
                "description": "How many tools to return.",
            },
        },
        "required": ["description"],
        "additionalProperties": False,
    }
)
SHED_TOOL = Tool.SingleCommand(
    ToolDefinition(name=SHED_NAME, description=_SHED_DESCRIPTION, arguments=_SHED_ARGS)
)
"""The declaration of ``shed`` as sent to the model."""

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "the",
        "this",
        "to",
        "with",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "you",
        "your",
    ]
)


def _words(text: str) -> list[str]:
    """Lower-case words without common stop words; ``snake_case``, ``kebab-case`` and
    ``camelCase`` split into parts."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return [w for w in _WORD.findall(spaced.lower()) if w not in _STOP]


class ShedHit(msgspec.Struct, frozen=True):
    """One ``shed`` result: the tool's function ``name``, ``description``, ``category`` and the
    JSON ``schema`` of its arguments (as offered to the provider)."""

    name: str
    description: str
    category: str
    schema: dict[str, Any]


def _hit_of(t: AgentTool) -> ShedHit:
    decl = t.declaration
    spec = decl.functions()[0]
    if isinstance(decl, Tool.SingleCommand):
        category = decl.definition.category
    else:
        category = next((c.category for c in decl.commands if c.category), "")  # type: ignore[attr-defined]
    return ShedHit(spec.name, spec.description, category, spec.parameters)


Factory = Callable[["AgentSession"], Iterable[Any]]
"""Makes tools for one session (called once, when the session is built or resumed)."""


class ToolShed:
    """Registers tools for discovery; a builder (every method returns the shed).

    Args:
        embedder: anything with ``embed(texts) -> matrix`` (rows are vectors), e.g.
            ``foundation_ai.memory.default_embedder()``; ``None``: keyword ranking only.
        min_similarity: cosine similarity a semantic hit needs (``-1``..``1``).
        max_declared: the most tools a request declares (``shed`` and pinned ones included);
            ``None``: :func:`declared_tool_limit` of the session's models.
        on_cap: ``"lru"`` (deactivate the least recently used) or ``"refuse"`` (module docstring).

    Raises:
        ConfigurationError: ``max_declared`` below 2 or ``on_cap`` not ``"lru"``/``"refuse"``.

    One shed may serve several sessions: each session gets its own :class:`ShedRegistry` (its
    own active set) from :meth:`registry`.
    """

    def __init__(
        self,
        *,
        embedder: Any = None,
        min_similarity: float = 0.4,
        max_declared: int | None = None,
        on_cap: str = "lru",
    ) -> None:
        if max_declared is not None and (not isinstance(max_declared, int) or max_declared < 2):
            raise ConfigurationError(
                f"max_declared must be an integer >= 2 (shed and one tool), got {max_declared!r}"
            )
        if on_cap not in ("lru", "refuse"):
            raise ConfigurationError(f"on_cap must be 'lru' or 'refuse', got {on_cap!r}")
        self.max_declared = max_declared
        self.on_cap = on_cap
        self._tools: list[Any] = []
        self._factories: list[Factory] = []
        self._active: list[str] = []
        self.embedder = embedder
        self.min_similarity = min_similarity
        self._vectors: dict[tuple[int, str], Any] = {}

    def tool(self, obj: Any) -> ToolShed:
        """Register one tool (anything ``ToolRegistry.add`` accepts).

        Raises:
            ConfigurationError: not a tool, or named ``shed``.
        """
        t = as_agent_tool(obj)
        if t.declaration.name() == SHED_NAME:
            raise ConfigurationError(f"the tool name {SHED_NAME!r} is reserved for tool discovery")
        self._tools.append(t)
        return self

    def tools(self, objs: Iterable[Any]) -> ToolShed:
        """Register several tools."""
        for o in objs:
            self.tool(o)
        return self

    def factory(self, make: Factory) -> ToolShed:
        """Register a session-aware factory: ``make(session)`` returns tools for that session
        (called when the session is built or resumed)."""
        self._factories.append(make)
        return self

    def activate(self, *names: str) -> ToolShed:
        """Tools active from the start in every session (declared without a ``shed`` call)."""
        self._active.extend(names)
        return self

    def with_embedder(self, embedder: Any, *, min_similarity: float | None = None) -> ToolShed:
        """Rank semantically with ``embedder`` (see the class docstring)."""
        self.embedder = embedder
        if min_similarity is not None:
            self.min_similarity = min_similarity
        return self

    def with_default_embedder(self, *, min_similarity: float | None = None) -> ToolShed:
        """Rank semantically with the memory package's default embedder (wordllama, offline).

        Raises:
            ConfigurationError: the memory package or ``wordllama`` is not available.
        """
        import importlib

        try:
            module = importlib.import_module("foundation_ai.memory.embedders")
        except ImportError as exc:
            raise ConfigurationError(f"the default embedder is not available: {exc}") from exc
        return self.with_embedder(module.default_embedder(), min_similarity=min_similarity)

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> frozenset[str]:
        """The function names a session built with this shed reaches through it: every
        registered tool and ``shed`` itself (a factory's tools exist only once a session is
        built). ``AgentSessionBuilder.resume`` uses it so that recorded names served by the
        shed are not reported as missing from the tool catalog."""
        return frozenset(t.declaration.name() for t in self._tools) | {SHED_NAME}

    def registry(
        self,
        session: AgentSession | None = None,
        *,
        pinned: Iterable[Any] = (),
        default_timeout: float | None = None,
    ) -> ShedRegistry:
        """A per-session registry: every registered tool, the factories' tools for ``session``,
        and ``pinned`` tools (always declared, never need ``shed``).

        Raises:
            ConfigurationError: two tools share a name, or one is named ``shed``.
        """
        reg = ShedRegistry(self, pinned=pinned, default_timeout=default_timeout)
        for t in self._tools:
            reg.add(t)
        if session is not None:
            reg.bind(session)
        else:
            reg.activate(*(n for n in self._active if n in reg))
        return reg

    def _embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        m = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return m / norms


class ShedRegistry(ToolRegistry):
    """The tools of one session with ``shed`` discovery; what the loop dispatches through.

    Attributes:
        shed: the :class:`ToolShed` it came from.
        pinned: names of tools always declared.
    """

    def __init__(
        self, shed: ToolShed, *, pinned: Iterable[Any] = (), default_timeout: float | None = None
    ) -> None:
        super().__init__((), default_timeout=default_timeout)
        self.shed = shed
        self._active: dict[str, None] = {}  # in order of last use (activation or call)
        self._shed_out: dict[str, None] = {}  # deactivated to stay within the cap
        self.max_declared: int | None = shed.max_declared
        self.pinned: list[str] = []
        self._index: tuple[list[str], Any] | None = None
        self._words: dict[str, tuple[ShedHit, frozenset[str], frozenset[str], frozenset[str]]] = {}
        self._shed_tool = _ShedTool(self)
        for p in pinned:
            self.pin(p)

    def add(self, obj: Any) -> AgentTool:
        """Register a tool (inactive unless pinned).

        Raises:
            ConfigurationError: not a tool, a taken name, or the reserved name ``shed``.
        """
        t = as_agent_tool(obj)
        if t.declaration.name() == SHED_NAME:
            raise ConfigurationError(f"the tool name {SHED_NAME!r} is reserved for tool discovery")
        super().add(t)
        self._index = None
        return t

    def _entry(self, name: str) -> tuple[ShedHit, frozenset[str], frozenset[str], frozenset[str]]:
        """The tool's hit and the words of its name, category and description (cached)."""
        entry = self._words.get(name)
        if entry is None:
            hit = _hit_of(self._tools[name])
            entry = (
                hit,
                frozenset(_words(hit.name)),
                frozenset(_words(hit.category)),
                frozenset(_words(hit.description)),
            )
            self._words[name] = entry
        return entry

    def pin(self, obj: Any) -> AgentTool:
        """Register a tool that is always declared (never needs ``shed``).

        Raises:
            ConfigurationError: see :meth:`add`.
        """
        t = self.add(obj)
        self.pinned.append(t.declaration.name())
        self._decls = None
        return t

    def bind(self, session: AgentSession) -> None:
        """Add the tools of the shed's factories for ``session``, then activate the shed's
        initially active tools.

        Raises:
            ConfigurationError: a factory's tool clashes with a registered name, or an initially
                active name is registered nowhere.
        """
        if self.max_declared is None:
            self.max_declared = declared_tool_limit(getattr(session, "models", ()))
        for make in self.shed._factories:
            for t in make(session):
                self.add(t)
        self.activate(*self.shed._active)

    # -- activation ------------------------------------------------------------------------------

    def room(self) -> int | None:
        """How many tools may be active at once under the cap (``None``: no cap)."""
        if self.max_declared is None:
            return None
        return max(self.max_declared - len(self.pinned) - 1, 0)

    def activate(self, *names: str) -> list[str]:
        """Activate registered tools by function name (an active one counts as used now);
        returns the names newly activated. Under the cap (class docstring), ``on_cap="lru"``
        deactivates the least recently used; ``"refuse"`` leaves out the names that do not
        fit (see :meth:`refused_by_cap`).

        Raises:
            ConfigurationError: a name is not registered.
        """
        new = []
        room = self.room()
        for n in names:
            if n not in self._tools:
                raise ConfigurationError(f"no registered tool {n!r} to activate")
            if n in self.pinned:
                continue
            if n in self._active:
                self._active[n] = self._active.pop(n)  # used now
                continue
            if room is not None and len(self._active) >= room:
                if self.shed.on_cap == "refuse" or room == 0:
                    continue
                oldest = next(iter(self._active))
                del self._active[oldest]
                self._shed_out[oldest] = None
            self._active[n] = None
            self._shed_out.pop(n, None)
            new.append(n)
        if new:
            self._decls = None
        return new

    def touch(self, name: str) -> None:
        """Count an active tool as used now (the LRU order of the cap)."""
        if name in self._active:
            self._active[name] = self._active.pop(name)

    def deactivate(self, *names: str) -> None:
        """Make tools inactive again (they stay registered)."""
        for n in names:
            self._active.pop(n, None)
            self._shed_out.pop(n, None)
        self._decls = None

    def active(self) -> list[str]:
        """The active tools (pinned first, then in activation order)."""
        return [*self.pinned, *self._active]

    def restore(self, messages: Iterable[Messages]) -> list[str]:
        """Activate again every tool a successful ``shed`` result in ``messages`` returned
        (how activation survives ``resume``); names no longer registered are skipped."""
        names: list[str] = []
        for m in messages:
            if isinstance(m, ToolResultMessage) and m.name == SHED_NAME and m.error_detail is None:
                content = m.content
                if not isinstance(content, TextContent):
                    continue
                try:
                    hits = msgspec.json.decode(content.content, type=list[ShedHit] | _Capped)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
                found = hits.activated if isinstance(hits, _Capped) else hits
                names += [h.name for h in found if h.name in self._tools]
        return self.activate(*names)

    # -- the registry interface ------------------------------------------------------------------

    def declarations(self) -> ToolDeclarations:
        """``shed`` plus the active tools; nothing at all when no tool is registered."""
        if self._decls is None:
            if not self._tools:
                self._decls = ToolDeclarations()
            else:
                discoverable = len(self._tools) > len(self.pinned)
                active = [self._tools[n].declaration for n in self.active()]
                self._decls = ToolDeclarations(shed=SHED_TOOL if discoverable else None, tools=active)  # type: ignore[arg-type]
        return self._decls

    def get(self, name: str) -> AgentTool | None:
        """The tool behind a function name (``shed`` included), or ``None``."""
        if name == SHED_NAME:
            return self._shed_tool
        return super().get(name)

    def is_sequential(self, call: ToolCall) -> bool:
        """See ``ToolRegistry.is_sequential``; ``shed`` calls never need to run alone."""
        return call.name != SHED_NAME and super().is_sequential(call)

    def prepare(self, call: ToolCall) -> tuple[AgentTool, ToolDefinition, dict[str, Any]] | ToolResultMessage:
        """Resolve and validate ``call`` (see the module docstring for ``shed``, inactive tools,
        unknown names and joined names)."""
        if call.name == SHED_NAME:
            value = call.arguments or {}
            violations = _SHED_ARGS.violations(value)
            if violations:
                return error_result(call, "invalid arguments: " + "; ".join(str(v) for v in violations))
            return self._shed_tool, SHED_TOOL.definition, value
        target = call
        if call.name not in self._tools:
            joined = self._joined(call)
            if joined is None:
                return error_result(call, self._unknown_text(call.name))
            target = joined
        if target.name not in self._active and target.name not in self.pinned:
            why = (
                f" (it was deactivated to stay within the limit of {self.max_declared} declared tools)"
                if target.name in self._shed_out
                else ""
            )
            return error_result(
                call,
                f"the tool {call.name!r} exists but is not active{why}: call {SHED_NAME} first (for example "
                f"{SHED_NAME}(description={call.name!r})) to activate it, then call it again",
            )
        self.touch(target.name)
        return super().prepare(target)

    def _joined(self, call: ToolCall) -> ToolCall | None:
        """``memory_add`` -> a call of ``memory`` with ``command="add"``, when ``memory`` is a
        registered multi-command tool with an ``add`` command."""
        name = call.name
        for i in range(len(name) - 1, 0, -1):
            if name[i] not in "_-":
                continue
            t = self._tools.get(name[:i])
            if t is None:
                continue
            decl = t.declaration
            command = name[i + 1 :]
            if isinstance(decl, Tool.MultiCommands) and any(c.name == command for c in decl.commands):
                args = dict(call.arguments or {})
                args["command"] = command
                return msgspec.structs.replace(call, name=name[:i], arguments=args)
        return None

    def _unknown_text(self, name: str) -> str:
        names = [SHED_NAME, *self._tools]
        close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
        text = f"unknown tool {name!r}"
        if close:
            text += f"; did you mean: {', '.join(close)}?"
        return text + f" Call {SHED_NAME} with a description of what you need to find tools."

    # -- search ----------------------------------------------------------------------------------

    def search(self, description: str, limit: int = DEFAULT_LIMIT) -> list[ShedHit]:
        """The tools best matching ``description`` (see the module docstring), not activated.
        Pinned tools are not returned (they are always declared)."""
        names = [n for n in self._tools if n not in self.pinned]
        if not description.strip():
            return [self._entry(n)[0] for n in sorted(names)]
        order: list[str] = []
        if self.shed.embedder is not None and names:
            order = self._semantic(description, names, limit)
        if len(order) < limit:
            taken = set(order)
            query = frozenset(_words(description))
            exact = description.strip().lower()
            scored = [(self._score(query, exact, n), n) for n in names if n not in taken]
            scored = [(s, n) for s, n in scored if s > 0]
            scored.sort(key=lambda sn: (-sn[0], sn[1]))
            order += [n for _, n in scored[: limit - len(order)]]
        return [self._entry(n)[0] for n in order]

    def _semantic(self, description: str, names: list[str], limit: int) -> list[str]:
        import numpy as np

        index = self._index
        if index is None or index[0] != names:
            texts = [f"{h.name}: {h.description}" for h in (self._entry(n)[0] for n in names)]
            index = (names, self.shed._embed(texts))
            self._index = index
        query = self.shed._embed([description])[0]
        sims = index[1] @ query
        ranked = sorted(range(len(names)), key=lambda i: (-float(sims[i]), names[i]))
        return [
            names[i]
            for i in ranked[:limit]
            if float(sims[i]) >= self.shed.min_similarity and np.isfinite(sims[i])
        ]

    def _keyword_score(self, description: str, name: str) -> float:
        """The keyword score of tool ``name`` for ``description`` (see the module docstring)."""
        return self._score(frozenset(_words(description)), description.strip().lower(), name)

    def _score(self, query: frozenset[str], exact: str, name: str) -> float:
        if not query:
            return 0.0
        hit, name_words, cat_words, desc_words = self._entry(name)
        score = 3.0 * len(query & name_words) + 2.0 * len(query & cat_words) + 1.0 * len(query & desc_words)
        if exact == hit.name.lower():
            score += 10.0
        return score


class _ShedTool:
    """The ``shed`` meta-tool of one registry."""

    timeout: float | None = None
    sequential = False

    def __init__(self, registry: ShedRegistry) -> None:
        self.registry = registry

    @property
    def declaration(self) -> Tool:
        return SHED_TOOL

    def run(self, definition: ToolDefinition, arguments: dict[str, Any]) -> str:
        description = str(arguments.get("description", ""))
        limit = int(arguments.get("limit", DEFAULT_LIMIT))
        hits = self.registry.search(description, limit)
        if not hits:  # a bare ``[]`` told the model nothing about what to do next
            reg = self.registry
            findable = sum(1 for n in reg._tools if n not in reg.pinned)
            return (
                f"no tool matches {description!r} ({findable} tools can be found): describe the task "
                f"in other words, or call {SHED_NAME} with an empty description to list every tool"
            )
        self.registry.activate(*(h.name for h in hits))
        active = set(self.registry.active())
        left = [h for h in hits if h.name not in active]
        if left:  # on_cap="refuse": what did not fit is said, not silently dropped
            kept = [h for h in hits if h.name in active]
            reason = (
                f"{len(left)} tool(s) were not activated: at most {self.registry.max_declared} tools may be "
                "declared at once and the active ones are in use; call fewer tools or ask for fewer hits"
            )
            return msgspec.json.encode(_Capped(kept, [h.name for h in left], reason)).decode()
        return msgspec.json.encode(hits).decode()


class _Capped(msgspec.Struct, frozen=True):
    """A ``shed`` result when the cap refused some hits (``on_cap="refuse"``)."""

    activated: list[ShedHit]
    refused: list[str]
    reason: str
