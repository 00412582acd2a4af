"""Listing stored sessions for ``foundation-ai sessions`` and finding one by id or prefix.

A store with session metadata (``list_sessions``: the SQLite, in-memory and Postgres stores)
is listed from that table alone, without decoding any record: the message count, the title
(first line of the first user text) and the update time written with each append. A store
without it is described from its records: the message count is the size of the rebuilt
conversation (``conversation_of``), the first prompt is the first human message, and the update
time is the newest message time (message ids are SCRU128, which carry their creation time in
milliseconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import scru128

from ..errors import ConfigurationError
from ..types import AssistantMessage, MessageRole, TextContent, ToolResultMessage, UserMessage

__all__ = ["SessionInfo", "describe_session", "describe_sessions", "resolve_session_id", "search_sessions"]


@dataclass(frozen=True)
class SessionInfo:
    """One row of the session list.

    Attributes:
        session_id: the id to pass to ``--session`` / ``show``.
        updated: when the newest message was made (UTC), ``None`` for an empty session.
        message_count: messages in the rebuilt conversation (prompts, outputs, tool results).
        first_prompt: the first human prompt, on one line (``""`` when none).
    """

    session_id: str
    updated: datetime | None
    message_count: int
    first_prompt: str

    @property
    def updated_text(self) -> str:
        """``"2026-11-29 22:41:07"`` (UTC) or ``"-"``."""
        return self.updated.strftime("%Y-%m-%d %H:%M:%S") if self.updated else "-"


def _time_of(message: Any) -> datetime | None:
    if isinstance(message, AssistantMessage | ToolResultMessage):
        return message.timestamp
    try:
        ms = scru128.Scru128Id.from_str(message.id).timestamp
    except Exception:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC)


def describe_session(store: Any, session_id: str) -> SessionInfo:
    """Summarise one stored session (see the module docstring)."""
    from ..agentic.stores import conversation_of

    messages = conversation_of(store.load(session_id))
    first = ""
    for m in messages:
        if isinstance(m, UserMessage) and m.role == MessageRole.User and isinstance(m.content, TextContent):
            first = " ".join(m.content.content.split())
            break
    times = [t for t in (_time_of(m) for m in messages) if t is not None]
    return SessionInfo(session_id, max(times) if times else None, len(messages), first)


def describe_sessions(store: Any, limit: int | None = None) -> list[SessionInfo]:
    """The newest ``limit`` sessions (all when ``None``), most recently updated first (from the
    store's metadata table when it has one: no record is decoded)."""
    if callable(getattr(store, "list_sessions", None)):
        return [
            SessionInfo(
                m.session_id,
                datetime.fromtimestamp(m.updated, UTC) if m.updated else None,
                m.message_count,
                " ".join((m.title or "").split()),
            )
            for m in store.list_sessions(limit)
        ]
    ids = list(store.sessions())
    infos = [describe_session(store, sid) for sid in reversed(ids)]
    floor = datetime.min.replace(tzinfo=UTC)
    infos.sort(key=lambda i: i.updated or floor, reverse=True)
    return infos[:limit] if limit is not None else infos


def _texts(message: Any) -> list[str]:
    """The prompt or answer text of a user or assistant message (``[]`` for the rest)."""
    if isinstance(message, UserMessage | AssistantMessage) and isinstance(message.content, TextContent):
        return [message.content.content]
    return []


def search_sessions(store: Any, query: str, limit: int | None = None) -> list[SessionInfo]:
    """The sessions (newest first, at most ``limit``) one of whose prompts or answers contains
    ``query``, compared case-insensitively (``str.casefold``). Every session is loaded: a scan,
    fine for a personal store of thousands of sessions."""
    from ..agentic.stores import conversation_of

    needle = query.casefold()
    found = []
    for info in describe_sessions(store):
        messages = conversation_of(store.load(info.session_id))
        if any(needle in t.casefold() for m in messages for t in _texts(m)):
            found.append(info)
            if limit is not None and len(found) >= limit:
                break
    return found


MAX_CANDIDATES = 10
"""Candidates named in the error for an ambiguous id prefix."""


def resolve_session_id(store: Any, text: str) -> str:
    """The stored session id equal to ``text`` or, failing that, the only one starting with it.

    Raises:
        ConfigurationError: no session matches, or the prefix is ambiguous (the message lists
            the matching ids, up to :data:`MAX_CANDIDATES`).
    """
    text = text.strip()
    ids: list[str] = list(store.sessions())
    if text in ids:
        return text
    matches = [i for i in ids if text and i.startswith(text)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ConfigurationError(f"no stored session {text!r} (list them with: foundation-ai sessions)")
    shown = ", ".join(sorted(matches)[:MAX_CANDIDATES])
    more = f" and {len(matches) - MAX_CANDIDATES} more" if len(matches) > MAX_CANDIDATES else ""
    raise ConfigurationError(
        f"session prefix {text!r} is ambiguous ({len(matches)} sessions match: {shown}{more}); "
        "give more characters"
    )
