"""The built-in memory tools: ``memory`` (add / remove / replace working-memory facts) and
``search_context`` (recall older parts of the session). See ``docs/memory.md``.

Both work on a :class:`MemoryHost`: something that holds the current facts, writes a new
``WorkingMemory`` version, and searches (the session's ``MemoryManager``).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from ..types import MemoryFact

__all__ = ["MemoryHost", "memory_tool", "search_context_tool"]


class MemoryHost(Protocol):
    """What the tools need: ``facts()`` (current facts), ``write_facts(facts)`` (persist a new
    ``WorkingMemory`` with ``version`` + 1 and return the version), ``source_id()`` (the id
    of the message that prompted the write, or ``None``), ``recall(query, mode, limit)``
    (hits as ``(kind, text)``)."""

    def facts(self) -> list[MemoryFact]: ...

    def write_facts(self, facts: list[MemoryFact]) -> int: ...

    def source_id(self) -> str | None: ...

    def recall(self, query: str, mode: str, limit: int) -> list[tuple[str, str]]: ...


def _find(facts: list[MemoryFact], key: str) -> int | None:
    key = key.strip()
    for i, f in enumerate(facts):
        if f.id == key:
            return i
    low = key.lower()
    for i, f in enumerate(facts):
        if f.content.strip().lower() == low:
            return i
    matches = [i for i, f in enumerate(facts) if low and low in f.content.lower()]
    return matches[0] if len(matches) == 1 else None


def memory_tool(host: MemoryHost) -> Any:
    """``Tool.MultiCommands("memory", add / remove / replace)`` over ``host``.

    - ``add(fact, confidence=1.0)``: append a fact.
    - ``remove(fact)``: drop the fact with this id, this exact text, or the only fact containing
      this text.
    - ``replace(fact, new_fact, confidence=1.0)``: change one fact (found like ``remove``).

    Each successful command writes a new ``WorkingMemory`` version (previous + 1). A fact that
    cannot be found makes the call fail with a message the model sees.
    """
    from ..agentic.tools import MultiCommandTool, tool

    @tool(name="add", inline=True)
    def add(fact: str, confidence: float = 1.0) -> str:
        """Remember a fact about the user or the task for the rest of the session.

        Args:
            fact: The fact, one short self-contained sentence.
            confidence: How sure you are, 0.0 to 1.0.
        """
        if not fact.strip():
            raise ValueError("the fact is empty")
        if not 0.0 <= confidence <= 1.0:
            raise ValueError("confidence must be between 0.0 and 1.0")
        facts = host.facts()
        new = MemoryFact(content=fact.strip(), confidence=confidence, source=host.source_id())
        version = host.write_facts([*facts, new])
        return f"remembered (fact id {new.id}, working memory version {version})"

    @tool(name="remove", inline=True)
    def remove(fact: str) -> str:
        """Forget a fact that is no longer true or useful.

        Args:
            fact: The fact's id, or its text.
        """
        facts = host.facts()
        i = _find(facts, fact)
        if i is None:
            raise ValueError(f"no single fact matches {fact!r}")
        gone = facts.pop(i)
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
        if not new_fact.strip():
            raise ValueError("the new fact is empty")
        if not 0.0 <= confidence <= 1.0:
            raise ValueError("confidence must be between 0.0 and 1.0")
        facts = host.facts()
        i = _find(facts, fact)
        if i is None:
            raise ValueError(f"no single fact matches {fact!r}")
        facts[i] = MemoryFact(content=new_fact.strip(), confidence=confidence, source=host.source_id())
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
        return "\n".join(f"- ({kind}) {text}" for kind, text in hits)

    return search_context
