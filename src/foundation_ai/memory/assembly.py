"""Context assembly: the messages one request carries, built before each generation.

Order (``docs/memory.md``): the system prompt (sent apart, counted in ``fixed_tokens``), then
system-role blocks — ``[working_memory]`` (one line per fact), ``[reflection]`` (the latest
reflection), ``[observation]`` (observations newer than it), ``[recalled]`` (memories retrieved
for the current prompt, minus what the request already carries) — then the most recent
messages that fit. Every remembered text in a block is one JSON string literal
(:func:`~foundation_ai.memory.state.quoted`): newlines and quotes inside it are escaped, so no
fact, observation or retrieved text can end its item or open a block of its own.

Pressure: the request may use ``pressure`` (default 0.8) of the model's window. When the whole
history does not fit, the oldest **whole exchanges** are left out of the request (an exchange
starts at a user-side message with no tool call awaiting its result, so a call is never
separated from its result); their content is represented by the observation and reflection
blocks. If the current turn alone does not fit, its oldest rounds are left out, keeping its
prompt. The stored history is never changed: only the request is. What still does not fit is
sent anyway (the session's memory manager first checks it against the whole window, see
``MemoryManager.assemble_for``); the loop's overflow recovery after a provider error stays the
last resort.

Everything here is a pure function of its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ..types import AssistantMessage, Messages, ToolCall, ToolResultMessage, UserMessage
from .state import MemoryState, fact_line, quoted
from .tokens import MessageTokens

__all__ = ["AssembledContext", "Recalled", "assemble_context", "fit_lines"]


class Recalled(msgspec.Struct, frozen=True, kw_only=True):
    """A memory retrieved for the current prompt: the stored item's ``id`` (a message id or a
    memory entry id), its ``text``, ``kind`` (``"message"``, ``"observation"``, ``"reflection"``,
    ``"fact"``) and ``score`` (higher is better)."""

    id: str
    text: str
    kind: str = "message"
    score: float = 0.0


class AssembledContext(msgspec.Struct, kw_only=True):
    """The result of :func:`assemble_context`.

    Attributes:
        messages: what the request carries, oldest first (memory blocks first).
        tokens: estimated tokens of the whole request, ``fixed_tokens`` included.
        limit: the token budget (``pressure`` x ``window``).
        start: index in the history of the first message carried before the current turn.
        cut: ``(head_end, round_start)`` when older rounds of the current turn were left out.
        dropped: history messages left out of the request.
        dropped_ids: their ids.
        recalled: the recalled memories carried.
        blocks: how many memory blocks lead ``messages``.
        block_tokens: the tokens those blocks take (the rest of ``tokens`` is what no
            assembly can leave out: ``fixed_tokens`` and the kept part of the current turn).
    """

    messages: list[Any]
    tokens: int
    limit: int
    start: int
    cut: tuple[int, int] | None = None
    dropped: int = 0
    dropped_ids: list[str] = msgspec.field(default_factory=list)
    recalled: list[Recalled] = msgspec.field(default_factory=list)
    blocks: int = 0
    block_tokens: int = 0

    @property
    def compressed(self) -> bool:
        """True when some history was left out."""
        return self.dropped > 0


def fit_lines(header: str, lines: Sequence[str], max_tokens: int, tokens: MessageTokens) -> str | None:
    """``header`` and the first ``lines`` that fit in ``max_tokens`` (message overhead
    included), or ``None`` when not even one fits."""
    used = tokens.text(header)
    kept: list[str] = []
    for line in lines:
        cost = tokens.counter.count(line) + 1
        if used + cost > max_tokens:
            break
        kept.append(line)
        used += cost
    if not kept:
        return None
    return header + "\n" + "\n".join(kept)


def _block(text: str) -> Messages:
    return Messages.system(text)


def _round_starts(history: Sequence[Messages], begin: int) -> list[int]:
    starts: list[int] = []
    open_calls: set[str] = set()
    for i in range(begin, len(history)):
        m = history[i]
        if (
            i > begin
            and not open_calls
            and not isinstance(m, ToolResultMessage)
            and isinstance(history[i - 1], ToolResultMessage | UserMessage)
        ):
            starts.append(i)
        if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall):
            open_calls.add(m.content.id)
        elif isinstance(m, ToolResultMessage):
            open_calls.discard(m.tool_call_id)
    return starts


def _memory_blocks(state: MemoryState, tokens: MessageTokens, block_room: int) -> tuple[list[Messages], int]:
    """The working-memory, reflection and observation blocks that fit in ``block_room``
    tokens, and the tokens they take."""
    blocks: list[Messages] = []
    used = 0
    if state.facts:
        lines = [fact_line(f) for f in reversed(state.facts)]  # newest first when cut
        text = fit_lines("[working_memory]", lines, max(block_room // 2, 1), tokens)
        if text:
            blocks.append(_block(text))
            used += tokens.text(text)
    ref = state.reflection_block()
    if ref:
        text = fit_lines("[reflection]", ref.split("\n")[1:], max((block_room - used) // 2, 1), tokens)
        if text:
            blocks.append(_block(text))
            used += tokens.text(text)
    obs = state.observation_block(max(block_room - used - 8, 0))
    if obs:
        cost = tokens.text(obs)
        if used + cost <= block_room:
            blocks.append(_block(obs))
            used += cost
    return blocks, used


def _history_start(
    history: Sequence[Messages], tokens: MessageTokens, keep_from: int, min_start: int, room: int
) -> tuple[int, int]:
    """``(start, tokens)``: the earliest index from which the newest whole exchanges fit in
    ``room`` (the current turn, from ``keep_from``, always counted), and what they take."""
    n = len(history)
    used = 0
    start = n
    start_used = 0
    pending: set[str] = set()
    for j in range(n - 1, min_start - 1, -1):
        m = history[j]
        used += tokens(m)
        if isinstance(m, ToolResultMessage):
            pending.add(m.tool_call_id)
        elif isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall):
            pending.discard(m.content.id)
        if j > keep_from:
            continue  # inside the current turn: always kept unless rounds are cut below
        if used > room and j < keep_from:
            break
        if j in (keep_from, min_start) or (isinstance(m, UserMessage) and not pending):
            start, start_used = j, used
    if start > keep_from:  # (only when keep_from == n: nothing in this turn yet)
        return n, 0
    return start, start_used


def _cut_rounds(
    history: Sequence[Messages], tokens: MessageTokens, keep_from: int, head: int, room: int
) -> tuple[int, list[Messages], int] | None:
    """When the current turn alone does not fit in ``room``: ``(round_start, kept, tokens)``
    keeping its prompt (``keep_from:head``) and the latest rounds that fit (at least the last
    one); ``None`` when the turn has no round to cut at."""
    prompt = list(history[keep_from:head])
    p_used = sum(tokens(m) for m in prompt)
    rounds = _round_starts(history, head)
    if not rounds:
        return None
    chosen = next((r for r in rounds if p_used + sum(tokens(m) for m in history[r:]) <= room), rounds[-1])
    return chosen, prompt + list(history[chosen:]), p_used + sum(tokens(m) for m in history[chosen:])


def _recall_block(
    recalled: Sequence[Recalled], kept_ids: set[str], room: int, tokens: MessageTokens
) -> tuple[str | None, list[Recalled]]:
    """The text of the ``[recalled]`` block of what the request does not already carry,
    fitted in ``room`` tokens, and the memories it holds."""
    lines: list[str] = []
    carried: list[Recalled] = []
    for item in recalled:
        if item.id not in kept_ids:
            lines.append(f"- ({item.kind}) {quoted(item.text)}")
            carried.append(item)
    text = fit_lines("[recalled]", lines, room, tokens) if lines else None
    if not text:
        return None, []
    return text, carried[: text.count("\n")]


def assemble_context(
    history: Sequence[Messages],
    *,
    state: MemoryState | None,
    tokens: MessageTokens,
    window: int,
    keep_from: int,
    head_end: int | None = None,
    recalled: Sequence[Recalled] = (),
    pressure: float = 0.8,
    fixed_tokens: int = 0,
    min_start: int = 0,
    block_share: float = 0.35,
    recall_tokens: int = 512,
) -> AssembledContext:
    """Build the request messages (see the module docstring).

    Args:
        history: the whole conversation, oldest first (never modified).
        state: the session's memory (``None``: no memory blocks).
        tokens: message token counts.
        window: the model's context window, tokens.
        keep_from: index of the current turn's first message (kept whatever the pressure).
        head_end: index after the current turn's prompt (default ``keep_from + 1``).
        recalled: retrieved memories, best first.
        pressure: share of ``window`` a request may use (0 < pressure <= 1).
        fixed_tokens: tokens of what rides beside the messages (system prompt, tool
            declarations, the reserve for the answer).
        min_start: never carry messages before this index (after an overflow trim).
        block_share: the share of the budget memory blocks may take together.
        recall_tokens: the most tokens the ``[recalled]`` block may take.

    Raises:
        ValueError: ``pressure`` outside (0, 1] or ``window`` < 1.
    """
    if not 0.0 < pressure <= 1.0:
        raise ValueError(f"pressure must be in (0, 1], got {pressure}")
    if window < 1:
        raise ValueError(f"window must be positive, got {window}")
    n = len(history)
    keep_from = min(max(keep_from, min_start), n)
    head = min(max(head_end if head_end is not None else keep_from + 1, keep_from), n)
    limit = int(window * pressure)
    room = max(limit - fixed_tokens, 0)
    block_room = int(room * block_share)
    blocks, block_tokens = _memory_blocks(state, tokens, block_room) if state is not None else ([], 0)
    recall_room = min(recall_tokens, max(block_room - block_tokens, 0)) if recalled else 0
    hist_room = room - block_tokens - recall_room

    start, start_used = _history_start(history, tokens, keep_from, min_start, hist_room)
    kept_turn = list(history[start:])
    cut: tuple[int, int] | None = None
    if start_used > hist_room and keep_from < n:
        trimmed = _cut_rounds(history, tokens, keep_from, head, hist_room)
        if trimmed is not None:
            chosen, kept_turn, start_used = trimmed
            cut, start = (head, chosen), keep_from
    dropped_ids = [m.id for m in history[min_start:start]]
    if cut is not None:
        dropped_ids += [m.id for m in history[cut[0] : cut[1]]]

    carried: list[Recalled] = []
    if recalled and recall_room > 0:
        text, carried = _recall_block(recalled, {m.id for m in kept_turn}, recall_room, tokens)
        if text is not None:
            blocks.append(_block(text))
            block_tokens += tokens.text(text)
    return AssembledContext(
        messages=blocks + kept_turn,
        tokens=fixed_tokens + block_tokens + start_used,
        limit=limit,
        start=start,
        cut=cut,
        dropped=len(dropped_ids),
        dropped_ids=dropped_ids,
        recalled=carried,
        blocks=len(blocks),
        block_tokens=block_tokens,
    )
