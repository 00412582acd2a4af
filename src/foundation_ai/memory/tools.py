"""The built-in memory tools: ``memory`` (add / remove / replace working-memory facts) and
``search_context`` (recall older parts of the session). See ``docs/memory.md``.

Both work on a :class:`MemoryHost`: something that holds the current facts, writes a new
``WorkingMemory`` version, and searches (the session's ``MemoryManager``).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from ..types import MemoryFact

__all__ = ["MAX_FACT_CHARS", "MemoryHost", "memory_tool", "search_context_tool"]

MAX_FACT_CHARS = 1_000
"""The longest fact the ``memory`` tool stores, in characters (after stripping): a fact is one
short sentence shown in every request; longer text belongs in the conversation, where
``search_context`` finds it (``docs/memory.md``)."""


class MemoryHost(Protocol):
    """What the tools need: ``facts()`` (current facts), ``write_facts(facts)`` (persist a new
    ``WorkingMemory`` with ``version`` + 1 and return the version), ``source_id()`` (the id
    of the message that prompted the write, or ``None``), ``recall(query, mode, limit)``
    (hits as ``(kind, text)``)."""

    def facts(self) -> list[MemoryFact]: ...

    def write_facts(self, facts: list[MemoryFact]) -> int: ...

    def source_id(self) -> str | None: ...

    def recall(self, query: str, mode: str, limit: int) -> list[tuple[str, str]]: ...


def _same(a: str, b: str) -> bool:
    """The same fact text: equal once stripped, ignoring case."""
    return a.strip().lower() == b.strip().lower()


def _find(facts: list[MemoryFact], key: str) -> int:
    """The index of the fact with id ``key``, else text ``key`` (ignoring case), else the only
    fact containing ``key``.

    Raises:
        ValueError: no fact, or several, match (the message lists the candidates' ids).
    """
    key = key.strip()
    for i, f in enumerate(facts):
        if f.id == key:
            return i
    for i, f in enumerate(facts):
        if _same(f.content, key):
            return i
    low = key.lower()
    matches = [i for i, f in enumerate(facts) if low and low in f.content.lower()]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ValueError(f"no single fact matches {key!r}")
    ids = ", ".join(f"{facts[i].id} ({facts[i].content[:60]!r})" for i in matches[:5])
    raise ValueError(
        f"no single fact matches {key!r}: {len(matches)} facts contain it; name one by its id: {ids}"
    )


def _checked(fact: str, what: str) -> str:
    """``fact`` stripped, or ``ValueError`` when it is empty or longer than MAX_FACT_CHARS."""
    text = fact.strip()
    if not text:
        raise ValueError(f"the {what} is empty")
    if len(text) > MAX_FACT_CHARS:
        raise ValueError(
            f"the {what} is {len(text):,} characters; a fact holds at most {MAX_FACT_CHARS:,} "
            "(one short sentence): keep the gist, the full text stays findable with search_context"
        )
    return text


def memory_tool(host: MemoryHost) -> Any:
    """``Tool.MultiCommands("memory", add / remove / replace)`` over ``host``.

    - ``add(fact, confidence=1.0)``: append a fact; a fact already remembered (the same text,
      ignoring case and surrounding spaces) is not added again: the tool says so and writes
      nothing.
    - ``remove(fact)``: drop the fact with this id, this exact text, or the only fact containing
      this text.
    - ``replace(fact, new_fact, confidence=1.0)``: change one fact (found like ``remove``).

    Each command that changes the facts writes a new ``WorkingMemory`` version (previous + 1).
    A fact that cannot be found (or is ambiguous: the candidates' ids are listed), an empty
    fact, a fact over :data:`MAX_FACT_CHARS` characters, a replacement that duplicates another
    fact or a confidence outside 0..1 makes the call fail with a message the model sees;
    nothing is written.
    """
    from ..agentic.tools import MultiCommandTool, tool

    @tool(name="add", inline=True)
    def add(fact: str, confidence: float = 1.0) -> str:
        """Remember a fact about the user or the task for the rest of the session.

        Args:
            fact: The fact, one short self-contained sentence.
            confidence: How sure you are, 0.0 to 1.0.
        """
        text = _checked(fact, "fact")
        if not 0.0 <= confidence <= 1.0:
            raise ValueError("confidence must be between 0.0 and 1.0")
        facts = host.facts()
        for f in facts:
            if _same(f.content, text):
                return f"already remembered (fact id {f.id}); nothing added"
        new = MemoryFact(content=text, confidence=confidence, source=host.source_id())
        version = host.write_facts([*facts, new])
        return f"remembered (fact id {new.id}, working memory version {version})"

    @tool(name="remove", inline=True)
    def remove(fact: str) -> str:
        """Forget a fact that is no longer true or useful.

        Args:
            fact: The fact's id, or its text.
        """
        facts = host.facts()
        gone = facts.pop(_find(facts, fact))
        version = host.write_facts(facts)
        return f"forgot {gone.content!r} (working memory version {version})"

    @tool(name="replace", inline=True)
    def replace(fact: str, new_fact: str, confidence: float = 1.0) -> str:
        """Correct a remembered fact.

        Args:
            fact: The old fact's id, or its text.
            new_fact: The corrected fact.
            confidence: How sure you are, 0.0 to 1.0.
        """
        text = _checked(new_fact, "new fact")
        if not 0.0 <= confidence <= 1.0:
            raise ValueError("confidence must be between 0.0 and 1.0")
        facts = host.facts()
        i = _find(facts, fact)
        twin = next((f for j, f in enumerate(facts) if j != i and _same(f.content, text)), None)
        if twin is not None:
            raise ValueError(
                f"the new fact is already remembered (fact id {twin.id}): remove this one instead"
            )
        facts[i] = MemoryFact(content=text, confidence=confidence, source=host.source_id())
        version = host.write_facts(facts)
        return f"replaced (fact id {facts[i].id}, working memory version {version})"

    return MultiCommandTool(
        "memory",
        [add, remove, replace],
        description="Your working memory: facts about the user and the task kept for the whole "
        "session (shown to you as [working_memory]). Commands: add, remove, replace.",
        sequential=True,
    )


def search_context_tool(host: MemoryHost) -> Any:
    """The ``search_context(query, mode="hybrid", limit=5)`` tool: recall older messages,
    observations and reflections of this session (modes ``semantic``, ``keyword``,
    ``hybrid``)."""
    from ..agentic.tools import tool

    @tool(name="search_context", timeout=30.0)
    def search_context(
        query: str, mode: Literal["semantic", "keyword", "hybrid"] = "hybrid", limit: int = 5
    ) -> str:
        """Search earlier parts of this conversation (messages, observations, reflections).

        Args:
            query: What to look for.
            mode: semantic (by meaning), keyword (by words) or hybrid (both).
            limit: How many results, 1 to 20.
        """
        n = max(1, min(int(limit), 20))
        hits = host.recall(query, mode, n)
        if not hits:
            return "nothing found"
        from .state import quoted

        return "\n".join(f"- ({kind}) {quoted(text)}" for kind, text in hits)

    return search_context
