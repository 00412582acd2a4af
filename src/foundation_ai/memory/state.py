"""``MemoryState``: the current memory of a session, rebuilt from its records.

The session log is the source of truth. Replaying it in order gives:

- the latest ``WorkingMemory`` (a higher ``version`` supersedes a lower one);
- every ``Observation`` in order, and which messages each one covers (the conversation
  messages logged before it);
- the latest ``Reflection`` and the observations logged after it;
- the trigger counters: conversation tokens since the last observation, observation tokens
  since the last reflection.

So ``resume`` restores memory exactly: the records are the ones written, and the counters are
recomputed from them. See ``docs/memory.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..types import MemoryFact, Messages, SessionRecord
from .tokens import MessageTokens

__all__ = ["MemoryState", "fact_line", "observation_text", "quoted", "reflection_text"]

_LINE_BREAKS = str.maketrans({"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def quoted(text: str) -> str:
    """``text`` as one JSON string literal on one line: quotes, backslashes and control
    characters escaped (RFC 8259, section 7), and the Unicode line breaks JSON leaves raw
    (U+0085, U+2028, U+2029) escaped too. Memory blocks render every remembered text this way,
    so a fact, an observation or a retrieved text can never start a line of its own: it cannot
    forge a ``[reflection]`` block, a "SYSTEM:" line or the end of its item (docs/memory.md,
    "Context assembly")."""
    return json.dumps(text, ensure_ascii=False).translate(_LINE_BREAKS)


def observation_text(rec: Any) -> str:
    """One line per entry of an ``Observation`` record: ``- (question) "content"`` (the
    scope, when set, first: ``- ["scope"] "content"``); texts are :func:`quoted`."""
    lines = []
    for e in rec.observations:
        tag = "(question) " if e.type == "question" else ""
        scope = f"[{quoted(e.scope)}] " if e.scope else ""
        lines.append(f"- {scope}{tag}{quoted(e.content)}")
    return "\n".join(lines)


def reflection_text(rec: Any) -> str:
    """One line per entry of a ``Reflection`` record, most important first:
    ``- "content" (importance 0.9)`` (texts :func:`quoted`)."""
    entries = sorted(rec.reflections, key=lambda e: -e.importance)
    return "\n".join(f"- {quoted(e.content)} (importance {e.importance:.1f})" for e in entries)


def fact_line(fact: MemoryFact) -> str:
    """One working-memory line: ``- "content" (id <fact id>)`` (the text :func:`quoted`)."""
    return f"- {quoted(fact.content)} (id {fact.id})"


class MemoryState:
    """The memory tiers of one session and the counters that drive the triggers.

    Attributes:
        working: the latest ``SessionRecord.WorkingMemory`` or ``None``.
        observations: every ``SessionRecord.Observation``, oldest first.
        reflection: the latest ``SessionRecord.Reflection`` or ``None``.
        observations_since_reflection: the observations logged after ``reflection``.
        unobserved: the conversation messages logged since the last observation (what the next
            observation pass reads), retracted ones left out.
        observed_ids: ids of the messages covered by an observation.
        tokens_since_observation: conversation tokens logged since the last observation.
        observation_tokens_since_reflection: observation tokens logged since the last reflection.
    """

    def __init__(self, tokens: MessageTokens) -> None:
        self.tokens = tokens
        self.working: Any = None
        self.observations: list[Any] = []
        self.reflection: Any = None
        self.observations_since_reflection: list[Any] = []
        self.unobserved: list[Messages] = []
        self.observed_ids: set[str] = set()
        self.tokens_since_observation = 0
        self.observation_tokens_since_reflection = 0
        self._rendered: dict[str, tuple[str, int]] = {}

    def rendered(self, rec: Any) -> tuple[str, int]:
        """``(observation_text(rec), its tokens)``, memoised by record id."""
        got = self._rendered.get(rec.id)
        if got is None:
            text = observation_text(rec)
            got = (text, self.tokens.counter.count(text))
            self._rendered[rec.id] = got
        return got

    @classmethod
    def from_records(cls, records: Iterable[SessionRecord], tokens: MessageTokens) -> MemoryState:
        """Replay a session's records (see the module docstring)."""
        state = cls(tokens)
        for r in records:
            state.apply(r)
        return state

    def apply(self, r: SessionRecord) -> None:
        """Take one record into account, in log order."""
        if isinstance(r, SessionRecord.Conversation):
            self.unobserved.append(r.message)
            self.tokens_since_observation += self.tokens(r.message)
        elif isinstance(r, SessionRecord.Retracted):
            gone = set(r.message_ids)
            if gone:
                kept = [m for m in self.unobserved if m.id not in gone]
                for m in self.unobserved:
                    if m.id in gone:
                        self.tokens_since_observation -= self.tokens(m)
                self.unobserved = kept
        elif isinstance(r, SessionRecord.WorkingMemory):
            if self.working is None or r.version >= self.working.version:
                self.working = r
        elif isinstance(r, SessionRecord.Observation):
            self.observations.append(r)
            self.observations_since_reflection.append(r)
            self.observed_ids.update(m.id for m in self.unobserved)
            self.unobserved = []
            self.tokens_since_observation = 0
            self.observation_tokens_since_reflection += r.token_count
        elif isinstance(r, SessionRecord.Reflection):
            self.reflection = r
            self.observations_since_reflection = []
            self.observation_tokens_since_reflection = 0

    @property
    def facts(self) -> list[MemoryFact]:
        """The current working-memory facts."""
        return list(self.working.facts) if self.working is not None else []

    @property
    def version(self) -> int:
        """The current working-memory version (0 when none was written)."""
        return int(self.working.version) if self.working is not None else 0

    def working_block(self) -> str | None:
        """``[working_memory]`` and one line per fact, or ``None`` without facts."""
        facts = self.facts
        if not facts:
            return None
        return "[working_memory]\n" + "\n".join(fact_line(f) for f in facts)

    def reflection_block(self) -> str | None:
        """``[reflection]`` and the latest reflection's entries, or ``None``."""
        if self.reflection is None or not self.reflection.reflections:
            return None
        return "[reflection]\n" + reflection_text(self.reflection)

    def observation_block(self, max_tokens: int | None = None) -> str | None:
        """``[observation]`` and the entries of observations newer than the reflection (the
        newest kept when ``max_tokens`` is exceeded), or ``None``."""
        recs = self.observations_since_reflection
        if not recs:
            return None
        lines: list[str] = []
        used = 0
        for rec in reversed(recs):
            text, cost = self.rendered(rec)
            if max_tokens is not None and lines and used + cost > max_tokens:
                break
            if max_tokens is not None and cost > max_tokens:
                continue
            lines.append(text)
            used += cost
        if not lines:
            return None
        return "[observation]\n" + "\n".join(reversed(lines))
