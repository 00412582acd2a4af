"""Before sending: make a stored history acceptable to one provider (``docs/sanitation.md``).

A history may hold what one provider produced and another rejects: a 46-character call id from
vLLM (OpenAI allows 40), ids with ``.`` or ``:`` (Anthropic allows ``[a-zA-Z0-9_-]``), empty or
repeated ids, arguments that never parsed, whitespace-only text, reasoning for a model that takes
none. :func:`sanitize_history` is the ONE step each HTTP backend runs over
``ModelInteraction.messages`` before mapping them to its wire format. It returns new messages
and never changes the ones given (what is stored stays as the model produced it).

The rules (each provider's :class:`WireRules`):

- **Tool-call ids**, call and result alike: an id that is empty, too long or outside
  ``[a-zA-Z0-9_-]`` is replaced deterministically (the same history always gives the same
  request, and earlier ids never change as the history grows): invalid characters become ``_``,
  the head is cut and ``_`` + a 10-hex-digit SHA-256 digest of the original id is appended, so
  the whole fits the provider's maximum. Empty ids get ``call_empty_<n>``. Every call gets an id
  unique in the request (a repeated id gets ``_2``, ``_3``...); a result goes to the earliest
  unanswered call with its original id (so two calls and two results with ``""`` pair by
  position), else to the latest call with that id.
- **Tool names** in the history: outside ``[a-zA-Z0-9_-]{1,64}`` -> invalid characters become
  ``_``, cut at 64; empty -> ``unnamed_tool``.
- **Arguments that never parsed** (``arguments`` is ``None``): sent as ``{}`` (the tool result
  already told the model its call was malformed; a raw ``"{"`` makes servers fail every later
  request).
- **Blank text** (Anthropic): assistant and user text that is empty or only whitespace is left
  out, and a tool result's whitespace-only text becomes empty. (The Anthropic mapper also
  strips trailing whitespace from a request that ends in assistant text, a prefill.)
- **Reasoning / thinking**: dropped when ``keep_thinking`` is false (the target model takes
  none, or the wire format has no field for it). Signatures are still only replayed to the
  provider that issued them (the mappers check the message's ``provider``).
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

import msgspec

from ..types import (
    AssistantMessage,
    MessageRole,
    Messages,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "ANTHROPIC",
    "IdMapping",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "WireRules",
    "anthropic_accepts_thinking",
    "fit_id",
    "mergeable_users",
    "sanitize_history",
]

_SAFE = re.compile(r"[^a-zA-Z0-9_-]")
_NAME_MAX = 64


@dataclass(frozen=True)
class WireRules:
    """What one provider accepts in a replayed history.

    Attributes:
        provider: a display name.
        id_max: the longest tool-call id accepted (characters).
        blank_text_rejected: empty / whitespace-only text blocks are rejected (Anthropic).
        source: the public document the rules come from.
    """

    provider: str
    id_max: int
    blank_text_rejected: bool
    source: str


OPENAI_CHAT = WireRules(
    "OpenAI Chat Completions",
    id_max=40,
    blank_text_rejected=False,
    source="https://platform.openai.com/docs/api-reference/chat/create",
)
"""``tool_calls[].id`` at most 40 characters (OpenAI answers ``string_above_max_length``); the
same ``[a-zA-Z0-9_-]`` characters as the other providers, so any compatible server takes them."""

OPENAI_RESPONSES = WireRules(
    "OpenAI Responses",
    id_max=64,
    blank_text_rejected=False,
    source="https://platform.openai.com/docs/api-reference/responses/create",
)
"""``input[].call_id`` at most 64 characters."""

ANTHROPIC = WireRules(
    "Anthropic Messages",
    id_max=64,
    blank_text_rejected=True,
    source="https://docs.anthropic.com/en/api/messages",
)
"""``tool_use.id`` must match ``^[a-zA-Z0-9_-]+$`` (64 is our cap: no maximum is documented);
text blocks must contain non-whitespace text; the final assistant content cannot end with
whitespace."""


_NO_THINKING = re.compile(r"^claude-(instant|2|3-(opus|sonnet|haiku)|3-5-)", re.IGNORECASE)


def anthropic_accepts_thinking(model: str) -> bool:
    """False for Claude models without extended thinking (Claude 2, Claude 3 and 3.5 families;
    https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking lists the models
    that support it), True otherwise (3.7, 4.x and unknown names)."""
    return _NO_THINKING.match(model.rsplit("/", 1)[-1]) is None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def fit_id(raw: str, id_max: int) -> str:
    """``raw`` if it is a non-empty id of at most ``id_max`` (>= 16) characters from
    ``[a-zA-Z0-9_-]``; else a deterministic replacement within those bounds: invalid characters
    -> ``_``, the head cut, ``_`` + a SHA-256 digest of ``raw`` appended (``""`` ->
    ``"call_<digest>"``)."""
    if raw and len(raw) <= id_max and _SAFE.search(raw) is None:
        return raw
    tail = "_" + _digest(raw)
    head = _SAFE.sub("_", raw)[: id_max - len(tail)] or "call"
    return head + tail


def _fit_name(name: str) -> str:
    if name and len(name) <= _NAME_MAX and _SAFE.search(name) is None:
        return name
    return _SAFE.sub("_", name)[:_NAME_MAX] or "unnamed_tool"


def _unique(candidate: str, used: _Used, id_max: int) -> str:
    n = 2
    found = candidate
    while found in used:
        suffix = f"_{n}"
        found = candidate[: id_max - len(suffix)] + suffix
        n += 1
    return found


def _blank(text: str) -> bool:
    return not text.strip()


class _Used:
    """The ids already given in a request: a set of its own over an optional frozen parent."""

    def __init__(self, parent: _Used | None = None) -> None:
        self.own: set[str] = set()
        self.parent = parent

    def __contains__(self, item: object) -> bool:
        return item in self.own or (self.parent is not None and item in self.parent)

    def add(self, item: str) -> None:
        self.own.add(item)


class IdMapping:
    """The tool-call id mapping of one request (see the module docstring), carried across
    :func:`sanitize_history` calls over consecutive slices of one history, so a backend can
    sanitize only the messages it has not seen (``child()``: a copy-on-write view that leaves
    this mapping unchanged)."""

    def __init__(self, id_max: int, parent: IdMapping | None = None) -> None:
        self.id_max = id_max
        self.parent = parent
        self.used: _Used = _Used(parent.used if parent is not None else None)
        self.pending: dict[str, deque[str]] = {}
        self.latest: dict[str, str] = {}
        self.empties: int = parent.empties if parent is not None else 0

    def child(self) -> IdMapping:
        """A mapping that reads this one and writes only to itself."""
        return IdMapping(self.id_max, self)

    def commit(self) -> None:
        """Write this mapping's changes into its parent (made by :meth:`child`), as if the
        messages sanitized through this mapping had been sanitized through the parent.

        Raises:
            ValueError: this mapping has no parent.
        """
        parent = self.parent
        if parent is None:
            raise ValueError("only a child mapping can be committed into its parent")
        parent.used.own |= self.used.own
        for raw, queue in self.pending.items():
            if queue or parent.parent is not None:
                parent.pending[raw] = queue
            else:  # in a mapping without parent, an emptied queue is no queue
                parent.pending.pop(raw, None)
        parent.latest.update(self.latest)
        parent.empties = self.empties

    def _queue(self, raw: str) -> deque[str] | None:
        queue = self.pending.get(raw)
        if queue is None and self.parent is not None:
            inherited = self.parent._queue(raw)
            if inherited is not None:
                queue = self.pending[raw] = deque(inherited)
        return queue

    def _latest(self, raw: str) -> str | None:
        found = self.latest.get(raw)
        if found is None and self.parent is not None:
            return self.parent._latest(raw)
        return found

    def _empty(self) -> str:
        found = _unique(f"call_empty_{self.empties}", self.used, self.id_max)
        self.empties += 1
        return found

    def call(self, raw: str) -> str:
        found = _unique(fit_id(raw, self.id_max) if raw else self._empty(), self.used, self.id_max)
        self.used.add(found)
        queue = self._queue(raw)
        if queue is None:
            queue = self.pending[raw] = deque()
        queue.append(found)
        self.latest[raw] = found
        return found

    def result(self, raw: str) -> str:
        queue = self._queue(raw)
        if queue:
            found = queue.popleft()
            if not queue and self.parent is None:
                del self.pending[raw]  # the same as an empty queue, without its memory
            return found
        latest = self._latest(raw)
        if latest is not None:
            return latest
        return fit_id(raw, self.id_max) if raw else self._empty()


def sanitize_history(
    messages: list[Messages] | list[object],
    rules: WireRules,
    *,
    keep_thinking: bool = True,
    ids: IdMapping | None = None,
    sources: list[int] | None = None,
) -> list[Messages]:
    """The messages of a history made acceptable to ``rules.provider`` (see the module
    docstring): new objects where something changed, the given ones otherwise. Never raises
    and never changes its input.

    Args:
        messages: the conversation, oldest first (objects that are not messages are dropped).
        rules: the provider's :class:`WireRules`.
        keep_thinking: keep ``ThinkingContent`` outputs (the mapper still decides per provider
            and signature); false when the target model takes no reasoning.
        ids: the id mapping of the messages before ``messages`` in the same request (it is
            updated); default: a fresh one (``messages`` is the whole history).
        sources: when given, receives for each message returned its index in ``messages``.
    """
    out: list[Messages] = []
    if ids is None:
        ids = IdMapping(rules.id_max)
    blank_rule = rules.blank_text_rejected
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            c = m.content
            if isinstance(c, ToolCall):
                new_id = ids.call(c.id)
                name = _fit_name(c.name)
                if new_id != c.id or name != c.name or c.arguments is None:
                    args = c.arguments if c.arguments is not None else {}
                    fixed = msgspec.structs.replace(
                        c, id=new_id, name=name, arguments=args, raw_arguments=None
                    )
                    m = msgspec.structs.replace(m, content=fixed)
            elif isinstance(c, ThinkingContent):
                if not keep_thinking:
                    continue
            elif isinstance(c, TextContent) and blank_rule and _blank(c.content):
                continue
            out.append(m)
            if sources is not None:
                sources.append(i)
        elif isinstance(m, ToolResultMessage):
            new_id = ids.result(m.tool_call_id)
            rc = m.content
            if blank_rule and isinstance(rc, TextContent) and rc.content and _blank(rc.content):
                rc = msgspec.structs.replace(rc, content="")
            if new_id != m.tool_call_id or rc is not m.content:
                m = msgspec.structs.replace(m, tool_call_id=new_id, content=rc)
            out.append(m)
            if sources is not None:
                sources.append(i)
        elif isinstance(m, UserMessage):
            uc = m.content
            if blank_rule and isinstance(uc, TextContent) and _blank(uc.content):
                continue
            out.append(m)
            if sources is not None:
                sources.append(i)
    return out


def mergeable_users(before: Any, after: Any) -> bool:
    """True when ``after`` may be mapped into the same user message as ``before`` (both user
    messages of the user's role): a cached wire prefix that ends on ``before`` cannot be
    extended by mapping ``after`` on its own."""
    return (
        isinstance(before, UserMessage)
        and isinstance(after, UserMessage)
        and before.role == MessageRole.User
        and after.role == MessageRole.User
    )
