"""The only code of the turn loop that writes to the session store.

The phases record what they persist in memory at once (the conversation, ``state.records``) and
queue the records on the session (``host.pending_records``); the driver writes the queue with
:func:`flush` after each phase, on the store's own worker thread (``aappend``), so a slow or
locked store never blocks the event loop. One ``flush`` is one ``append``: all of the queue or
nothing. When it fails (:class:`~foundation_ai.agentic.errors.StoreError`) the records stay
queued, the turn ends as failed (kind ``"store"``) and the next turn (or ``flush``) writes them
first: what the store holds is always a prefix of what the session holds in memory, in order.
Each write carries the session's :class:`~foundation_ai.agentic.stores.SessionHeader` (model
string, system prompt, tool names) when it changed since the last write.

Idempotent on replay: a durable runner that runs a turn again after a crash (see
``docs/turn-loop.md``, "Step runner") sets ``host.replay`` to a :class:`Replay` holding what the
interrupted run already stored; the same messages (same id, equal value) and the ``Summary`` are
then taken from it instead of being written twice. Without ``host.replay`` nothing changes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ...types import Messages, SessionRecord, ToolCall
from ..errors import StoreError
from ..stores import aappend
from ..stores.base import takes_header
from ..tools import MAX_ARGUMENT_NESTING, nested_deeper_than
from .host import TurnHost
from .state import TurnState, fail

__all__ = [
    "Replay",
    "flush",
    "flush_blocking",
    "persist",
    "persist_records",
    "persist_summary",
    "storable",
    "store_failed",
    "write_now",
]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Replay:
    """What an interrupted run of the same turn already stored (set as ``host.replay``).

    ``messages``: the conversation messages stored by that run, by id; ``summary``: its stored
    ``Summary`` (``None``: not reached). :func:`persist` skips a message equal to the stored
    one with its id (it still joins the conversation and the turn's records);
    :func:`persist_summary` skips the write when ``summary`` is set.
    """

    messages: dict[str, Messages] = field(default_factory=dict)
    summary: SessionRecord | None = None


def _not_stored(replay: Replay, msgs: Sequence[Messages]) -> list[Messages]:
    fresh = []
    for m in msgs:
        if replay.messages.get(m.id) == m:
            del replay.messages[m.id]
        else:
            fresh.append(m)
    return fresh


_CONVERSATION = SessionRecord.Conversation


def storable(m: Messages) -> Messages:
    """``m`` as it can be stored and loaded again: a tool call whose arguments nest deeper than
    :data:`~foundation_ai.agentic.tools.MAX_ARGUMENT_NESTING` (the loop refuses to run it) keeps
    them as JSON text in ``raw_arguments`` (``arguments=None``), so its record stays within the
    JSON format's nesting limit (``docs/json-format.md``, "Limits") and loads beside the error
    result of the call. Any other message is returned as is."""
    c = getattr(m, "content", None)
    if (
        type(c) is not ToolCall
        or c.arguments is None
        or not nested_deeper_than(c.arguments, MAX_ARGUMENT_NESTING)
    ):
        return m
    text = _json_text(c.arguments)
    return msgspec.structs.replace(m, content=msgspec.structs.replace(c, arguments=None, raw_arguments=text))


def _json_text(value: Any) -> str:
    """``value`` (decoded JSON: dicts, lists, scalars) as compact JSON text, built with an
    explicit stack: arguments nested ~1,000 levels deep are past any recursive encoder's limit
    (msgspec's and the standard library's raise ``RecursionError`` there). Scalars and keys are
    encoded by msgspec."""
    enc = msgspec.json.encode
    out: list[bytes] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is bytes:  # a piece of punctuation queued below
            out.append(item)
        elif isinstance(item, dict):
            out.append(b"{")
            parts: list[Any] = []
            for i, (k, v) in enumerate(item.items()):
                parts += [b"," if i else b"", enc(str(k)) + b":", v]
            stack += [b"}", *reversed(parts)]
        elif isinstance(item, list | tuple):
            out.append(b"[")
            parts = []
            for i, v in enumerate(item):
                parts += [b"," if i else b"", v]
            stack += [b"]", *reversed(parts)]
        else:
            out.append(enc(item))
    return b"".join(out).decode()


def persist(host: TurnHost, state: TurnState, msgs: Sequence[Messages]) -> None:
    """Append ``msgs`` to the conversation and to ``state.records`` (as ``Conversation``), and
    queue them for the store (written by the driver's next :func:`flush`); each message as
    :func:`storable` makes it."""
    for m in msgs:
        if type(getattr(m, "content", None)) is ToolCall and storable(m) is not m:
            msgs = [storable(x) for x in msgs]
            break
    if len(msgs) == 1:  # the usual case: one message
        recs = [_CONVERSATION(message=msgs[0])]
    elif not msgs:
        return
    else:
        recs = []
        for m in msgs:  # a loop: no comprehension frame for the usual two or three messages
            recs.append(_CONVERSATION(message=m))
    host.messages.extend(msgs)
    state.records.extend(recs)
    state.persisted += len(msgs)
    replay: Replay | None = getattr(host, "replay", None)
    if replay is not None and replay.messages:
        recs = [_CONVERSATION(message=m) for m in _not_stored(replay, msgs)]
    host.pending_records.extend(recs)


def persist_summary(host: TurnHost, state: TurnState) -> SessionRecord:
    """Queue the turn's ``Summary`` (messages persisted, cumulative usage, the calls it paused
    on) for the store and return it; it is not added to ``state.records`` (the caller places it)."""
    summary = SessionRecord.Summary(
        message_count=state.persisted,
        usage=host.ledger.snapshot(),
        awaiting_approval=[c.id for c in state.awaiting] if state.awaiting else [],
    )
    state.snapshot = summary.usage
    replay: Replay | None = getattr(host, "replay", None)
    if replay is not None and replay.summary is not None:
        replay.summary = None  # stored by the interrupted run
        return summary
    host.pending_records.append(summary)
    return summary


def persist_records(host: TurnHost, state: TurnState, records: Sequence[SessionRecord]) -> None:
    """Queue other records of the turn (e.g. ``WorkingMemory``, ``Observation``,
    ``Reflection``) for the store and add them to ``state.records``. ``Conversation`` records go
    through :func:`persist` (it keeps the conversation in step); ``Summary`` through
    :func:`persist_summary`.

    Raises:
        ValueError: a ``Conversation`` or ``Summary`` record (nothing is stored).
    """
    for r in records:
        if isinstance(r, SessionRecord.Conversation | SessionRecord.Summary):
            raise ValueError(f"persist_records takes no {type(r).__name__} (use persist / persist_summary)")
    if records:
        state.records.extend(records)
        host.pending_records.extend(records)


def _batch(host: TurnHost) -> tuple[list[SessionRecord], object]:
    header = host.session_header()
    stored = host.stored_header
    return host.pending_records.copy(), (None if header is stored or header == stored else header)


def _written(host: TurnHost, count: int, header: object) -> None:
    pending = host.pending_records
    if count == len(pending):
        pending.clear()
    else:
        del pending[:count]
    if header is not None:
        host.stored_header = header  # type: ignore[assignment]


async def flush(host: TurnHost) -> None:
    """Write every queued record (and the header when it changed) in one ``append``, off the
    event loop (a ``nonblocking`` store, e.g. the in-memory one: :func:`write_now`, no thread
    hop). Nothing to write: returns at once.

    Raises:
        StoreError: the store failed; the records stay queued (nothing was written).
    """
    if not host.pending_records:
        return  # the header travels with records: a session is only stored once it has some
    store = host.store
    if getattr(store, "nonblocking", False):
        write_now(host)
        return
    batch, header = _batch(host)
    await aappend(store, host.session_id, batch, header)  # type: ignore[arg-type]
    _written(host, len(batch), header)


def write_now(host: TurnHost) -> None:
    """:func:`flush` to a ``nonblocking`` store (its ``append`` never waits for I/O), called
    on the event loop; queued records only (the caller checked ``host.pending_records``).

    Raises:
        StoreError: the store failed; the records stay queued (nothing was written).
    """
    pending = host.pending_records
    batch = pending.copy()
    stored = host.stored_header
    cached = getattr(host, "_header", None)  # ``session_header()``'s cache, its usual answer inlined
    if (
        cached is not None
        and cached[4] is stored
        and cached[0] is host.models[0]
        and cached[1] is host.system_prompt
        and cached[2] is (registry := host.registry)
        and cached[3] == registry.version
    ):
        host.store.append(host.session_id, batch, None)  # unchanged since it was stored
    else:
        header = host.session_header()
        if header is stored or header == stored:
            host.store.append(host.session_id, batch, None)
        else:
            host.store.append(host.session_id, batch, header)
            host.stored_header = header
    if len(batch) == len(pending):
        pending.clear()
    else:
        del pending[: len(batch)]


def flush_blocking(host: TurnHost) -> None:
    """:func:`flush` from code that cannot await (a turn being abandoned); a failure is logged
    and the records stay queued for the next turn."""
    if not host.pending_records:
        return
    batch, header = _batch(host)
    try:
        if header is not None and takes_header(host.store):
            host.store.append(host.session_id, batch, header)  # type: ignore[arg-type]
        else:
            host.store.append(host.session_id, batch)
    except Exception:
        log.warning("session %s: could not store the end of the turn", host.session_id, exc_info=True)
        return
    _written(host, len(batch), header)


def store_failed(state: TurnState, exc: StoreError) -> None:
    """End the turn as failed because the store could not be written (kind ``"store"``)."""
    fail(state, "store", f"the session store could not be written: {exc}", retryable=exc.retryable)
