"""The context window of a session: what part of the conversation a request carries.

History goes to the model oldest-first (wire-notes section 7). On a context overflow the loop
drops the **oldest whole exchanges**: an exchange starts at a user-side message before which
every tool call has its result, so a tool call is never separated from its result or from the
thinking and text of its generation (cases C28, C40).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..types import AssistantMessage, Messages, TextContent, ToolCall, ToolResultMessage, UserMessage

__all__ = ["dangling_calls", "exchange_starts", "interrupted_results", "next_trim_start"]


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
