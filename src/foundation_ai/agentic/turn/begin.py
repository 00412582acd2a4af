"""Phases ``open`` and ``prompt``: start the turn and persist what it answers."""

from __future__ import annotations

import asyncio

from ...types import AgentProgress, AssistantMessage, Messages, SessionRecord, Stream, ToolCall, UserMessage
from .hooks import Phase
from .host import TurnHost
from .persist import persist
from .state import TurnState

__all__ = ["open_turn", "persist_prompt"]


def open_turn(host: TurnHost, state: TurnState) -> Phase:
    """Bind steering to the running event loop, start the ledger's turn, note where the turn
    starts in the conversation. Emits ``Stream.Init`` and ``AgentProgress.Initializing``.
    Next: ``prompt``."""
    host.steering.bind(asyncio.get_running_loop())
    host.ledger.start_turn()
    state.keep_from = state.head_end = len(host.messages)
    if state.resuming:  # the paused response belongs to this turn (its calls get results here)
        ids = {c.id for c in state.calls}
        first = next(
            (
                i
                for i, m in enumerate(host.messages)
                if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall) and m.content.id in ids
            ),
            None,
        )
        if first is not None:
            state.keep_from = state.head_end = first
    if state.emit:
        state.out += (Stream.Init(), Stream.Pending(AgentProgress.Initializing(step="turn")))
    return Phase.PROMPT


def persist_prompt(host: TurnHost, state: TurnState) -> Phase:
    """Persist the prompt and any follow-ups queued before the turn (they end the turn's head,
    which context trimming never drops). Emits a ``Conversation`` per message (streaming only).
    Next: ``drain_steering``."""
    queued: list[Messages] = []
    for p in state.prompts:  # a loop: no comprehension frame for the usual one prompt
        queued.append(p if type(p) is UserMessage or isinstance(p, Messages) else Messages.coerce(p))
    steering = host.steering
    if not steering.idle():  # follow-ups queued before the turn (idle: none, no list to make)
        queued += steering.take_follow_ups()
    persist(host, state, queued)
    state.head_end = state.keep_from + len(queued)
    if state.emit:
        state.out += [Stream.Next(SessionRecord.Conversation(message=m)) for m in queued]
    return Phase.DRAIN_STEERING
