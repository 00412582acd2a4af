"""The context window of a session: what part of the conversation a request carries.

History goes to the model oldest-first (``docs/turn-loop.md``). On a context overflow the loop
drops the **oldest whole exchanges**: an exchange starts at a user-side message before which
every tool call has its result, so a tool call is never separated from its result or from the
thinking and text of its generation (providers reject a tool result without its call).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..types import AssistantMessage, Messages, TextContent, ToolCall, ToolResultMessage, UserMessage

__all__ = [
    "dangling_calls",
    "exchange_starts",
    "interrupted_results",
    "next_round_cut",
    "next_trim_start",
    "round_starts",
    "trimmed_window",
    "window",
]


def exchange_starts(messages: Sequence[Messages]) -> list[int]:
    """Indices where an exchange starts: a ``Messages.User`` with no tool call still awaiting
    its result before it."""
    starts: list[int] = []
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        if isinstance(m, UserMessage):
            if not open_calls:
                starts.append(i)
        elif isinstance(m, AssistantMessage):
            if isinstance(m.content, ToolCall):
                open_calls.add(m.content.id)
        elif isinstance(m, ToolResultMessage):
            open_calls.discard(m.tool_call_id)
    return starts


def next_trim_start(messages: Sequence[Messages], start: int, keep_from: int) -> int | None:
    """The next context start after dropping the oldest exchange of ``messages[start:]``, never
    past ``keep_from`` (the current turn's prompt); ``None`` when nothing more can be dropped."""
    for s in exchange_starts(messages):
        if start < s <= keep_from:
            return s
    return None


def round_starts(messages: Sequence[Messages], begin: int) -> list[int]:
    """Indices after ``begin`` where a new round of the current turn starts: a message that is
    not a tool result, following a tool result or a user message, with every earlier call of
    the turn answered. A round is a generation (thinking, text, calls) plus its results."""
    starts: list[int] = []
    open_calls: set[str] = set()
    for i in range(begin, len(messages)):
        m = messages[i]
        if i > begin and not open_calls and not isinstance(m, ToolResultMessage):
            prev = messages[i - 1]
            if isinstance(prev, ToolResultMessage | UserMessage):
                starts.append(i)
        if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall):
            open_calls.add(m.content.id)
        elif isinstance(m, ToolResultMessage):
            open_calls.discard(m.tool_call_id)
    return starts


def next_round_cut(messages: Sequence[Messages], head_end: int, cut: int) -> int | None:
    """The next cut inside the current turn: drop its oldest remaining round, keeping the
    prompt (``messages[:head_end]``) and at least the latest round; ``None`` when only one round
    is left."""
    starts = round_starts(messages, head_end)
    later = [s for s in starts if s > cut]
    return later[0] if later else None


def dangling_calls(messages: Sequence[Messages]) -> list[ToolCall]:
    """Tool calls with no result after them, in order (after a crash mid-turn)."""
    calls: dict[str, ToolCall] = {}
    for m in messages:
        if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall):
            calls[m.content.id] = m.content
        elif isinstance(m, ToolResultMessage):
            calls.pop(m.tool_call_id, None)
    return list(calls.values())


def interrupted_results(calls: Sequence[ToolCall], why: str) -> list[ToolResultMessage]:
    """Error results for calls that never finished (steering, abort, a crash)."""
    return [
        Messages.ToolResult(
            tool_call_id=c.id,
            name=c.name,
            content=TextContent(f"Error: interrupted ({why}); the tool did not finish"),
            error_detail=f"interrupted: {why}",
        )
        for c in calls
    ]


def window(messages: list[Messages], start: int, cut: tuple[int, int] | None) -> list[Messages]:
    """The messages a request carries, oldest first: ``messages[start:]``, or after a cut inside
    the running turn ``messages[start:cut[0]] + messages[cut[1]:]`` (its prompt, then its latest
    rounds)."""
    if cut is None:
        return messages[start:]
    return messages[start : cut[0]] + messages[cut[1] :]


def trimmed_window(
    messages: Sequence[Messages], start: int, cut: tuple[int, int] | None, keep_from: int, head_end: int
) -> tuple[int, tuple[int, int] | None] | None:
    """The window ``(start, cut)`` after dropping the oldest whole exchange before the current
    turn (which starts at ``keep_from``), else the oldest round of the current turn, keeping
    its prompt (``messages[keep_from:head_end]``); ``None`` when nothing more can be dropped."""
    nxt = next_trim_start(messages, start, keep_from)
    if nxt is not None:
        return nxt, cut
    rounds = next_round_cut(messages, head_end, cut[1] if cut else head_end)
    if rounds is None:
        return None
    return start, (head_end, rounds)
