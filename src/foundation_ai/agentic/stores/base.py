"""The ``SessionStore`` protocol, session metadata, and rebuilding a conversation from records.

A store keeps, per session, its records (append-only) and one metadata row
(:class:`SessionMeta`: created, updated, model, message count, title, system prompt, tool names)
updated in the same transaction as each ``append``, so listing sessions never decodes messages.
Every store method may raise :class:`~foundation_ai.agentic.errors.StoreError` when the storage
fails (a lock held too long, a full disk) and
:class:`~foundation_ai.agentic.errors.SessionClosedError` once closed; a failed ``append`` wrote
nothing, so the caller may send the same batch again. Async callers use :func:`aappend`,
:func:`aload`, :func:`alist_sessions` and :func:`asession_meta`, which run a store's blocking
I/O off the event loop (a store may provide its own ``aappend`` … methods).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

import msgspec

from ...errors import FoundationAIError
from ...types import (
    AssistantMessage,
    Messages,
    SessionRecord,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    from_json,
)
from ...types._text import scrub_surrogates
from ...types.serialization import MAX_NESTING, nesting_exceeds
from ..errors import CorruptRecordError, StoreError

__all__ = [
    "decode_records",
    "SessionHeader",
    "SessionMeta",
    "SessionStore",
    "aappend",
    "alist_sessions",
    "aload",
    "asession_meta",
    "check_loadable",
    "encode_records",
    "conversation_of",
    "meta_delta",
    "pair_results",
    "paused_gc",
    "public_base_url",
    "takes_header",
    "title_of",
]

TITLE_CHARS = 80
"""A session's title is the first line of its first user text, cut to this many characters."""


class SessionHeader(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What a session declares about itself, stored with its records (latest value wins).

    Attributes:
        model: the primary model as a model string (``"openai:gpt-4o-mini"``,
            ``"llamacpp:SmolLM2-135M"``; ``provider:name``), or ``None``.
        system_prompt: the system prompt, or ``None``.
        tools: the function names of the session's tools, in registration order.
        base_url: the server the model is reached at when it is not the provider's own host
            (``"http://127.0.0.1:8080/v1"``), without user name, password, query or fragment
            (:func:`public_base_url`), so a resumed session talks to the same server; ``None``
            for the provider's own host or an in-process model.
    """

    model: str | None = None
    system_prompt: str | None = None
    tools: tuple[str, ...] = ()
    base_url: str | None = None


class SessionMeta(msgspec.Struct, frozen=True, gc=False):
    """One session's metadata row, as ``list_sessions`` and ``session_meta`` return it.

    Attributes:
        session_id: the id.
        created: when the first record was stored (Unix time, seconds).
        updated: when the last batch was stored (Unix time, seconds).
        message_count: ``Conversation`` records stored (a message each; a ``Retracted`` record
            does not lower it).
        title: the first line of the first user text (at most 80 characters), or ``None``.
        model, system_prompt, tools, base_url: the latest :class:`SessionHeader` stored
            (``None`` / ``()`` when the writer gave none, e.g. sessions written before metadata
            existed).

    Fields are also positional, in this order. Instances are not tracked by Python's cyclic
    garbage collector (they hold only strings, numbers and a tuple of strings), so listing
    10,000 sessions adds no collector work.
    """

    session_id: str
    created: float
    updated: float
    message_count: int = 0
    title: str | None = None
    model: str | None = None
    system_prompt: str | None = None
    tools: tuple[str, ...] = ()
    base_url: str | None = None


def public_base_url(url: str | None) -> str | None:
    """``url`` without what may be secret: the user name and password, the query and the
    fragment (``"https://u:pw@host:8443/v1?key=k"`` -> ``"https://host:8443/v1"``); ``None``
    for ``None``, an empty text or a text that is not an absolute URL."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
        _ = parts.port
    except ValueError:
        return None
    host = parts.netloc.rpartition("@")[2]
    if not parts.scheme or not host:
        return None
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@runtime_checkable
class SessionStore(Protocol):
    """Persists session records and their metadata.

    ``append`` writes a batch atomically (all or nothing) together with the session's metadata
    row (``header``, when given, replaces the stored model / system prompt / tools), and skips
    records whose ``persistable`` is false (``FailedAction``); ``load`` returns a session's records
    in the order appended (``[]`` for an unknown id); ``sessions`` lists ids, oldest first;
    ``list_sessions`` lists metadata rows, most recently updated first, without decoding any
    record; ``session_meta`` is one row or ``None``; ``delete_session`` removes a session's
    records and metadata row (True when it had any) so that its text is no longer in the
    store's files (``load`` gives ``[]`` afterwards). The contract is tested for every store in
    ``tests/test_store_contract.py``. A store whose methods never wait for I/O may set a class
    attribute ``nonblocking = True``: the turn loop then calls ``append`` on the event loop
    instead of through ``aappend``.
    """

    def append(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None: ...

    def load(self, session_id: str) -> list[SessionRecord]: ...

    def sessions(self) -> list[str]: ...

    def list_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionMeta]: ...

    def session_meta(self, session_id: str) -> SessionMeta | None: ...

    def delete_session(self, session_id: str) -> bool: ...

    def close(self) -> None: ...


def title_of(records: Iterable[SessionRecord]) -> str | None:
    """The title a batch gives a session: the first line of its first user text, cut to
    :data:`TITLE_CHARS` characters (``None`` when the batch holds no user text); a lone
    surrogate becomes U+FFFD (docs/json-format.md, "Text")."""
    for r in records:
        if type(r) is SessionRecord.Conversation:
            m = r.message
            if isinstance(m, UserMessage) and isinstance(m.content, TextContent):
                line = m.content.content.strip().split("\n", 1)[0].strip()
                if line:
                    return scrub_surrogates(line[:TITLE_CHARS])
    return None


def encode_records(records: Sequence[SessionRecord], where: str) -> list[bytes]:
    """The records' JSON bodies (``to_json``), for a store's ``append``, checked by
    :func:`check_loadable`.

    Raises:
        StoreError: not retryable; a record nested too deeply to encode or to load again.
    """
    from ...types import to_json

    try:
        bodies = [to_json(r) for r in records]
    except RecursionError:  # nested past the encoder's own depth (~1,000 levels)
        raise StoreError(
            f"a record of the batch nests arrays/objects deeper than {MAX_NESTING} levels: it could "
            "not be loaded again, so nothing of the batch was written",
            path=where,
        ) from None
    check_loadable(bodies, records, where)
    return bodies


def check_loadable(bodies: Sequence[bytes], records: Sequence[SessionRecord], where: str) -> None:
    """Refuse a batch a store could write but never load again: a record whose JSON nests
    arrays/objects deeper than the format's limit (``MAX_NESTING``, ``docs/json-format.md``,
    "Limits"), which ``load`` would skip as undecodable. A store applies the same limit at
    write as at load; nothing of the batch is written. (The turn loop never sends one: it
    keeps too-deep tool arguments as text, ``agentic/turn/persist.py``.)

    Raises:
        StoreError: not retryable; the message names the record (its kind and id).
    """
    for body, rec in zip(bodies, records, strict=True):
        if nesting_exceeds(body):
            msg = getattr(rec, "message", None)
            who = f"message {msg.id}" if msg is not None else f"record {getattr(rec, 'id', '?')}"
            raise StoreError(
                f"the {rec.__struct_config__.tag} record of {who} nests arrays/objects deeper than "
                f"{MAX_NESTING} levels: it could not be loaded again, so nothing of the batch was "
                "written",
                path=where,
            )


def meta_delta(records: Sequence[SessionRecord]) -> tuple[int, str | None]:
    """(messages added, title) for a batch being appended."""
    count = sum(1 for r in records if type(r) is SessionRecord.Conversation)
    return count, title_of(records)


_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_resume = False


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a bulk result is decoded (thousands of new
    small objects would otherwise trigger collections that walk the whole heap, several times per
    decode); the collector is re-enabled on exit, from any thread, only when it was enabled before
    the first of overlapping pauses (a caller's own ``gc.disable()`` is kept). Reference counting
    still frees everything as usual. Use it around CPU work only, never around I/O waits.
    See https://docs.python.org/3/library/gc.html#gc.disable.
    """
    global _gc_pausers, _gc_resume
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_resume:
                gc.enable()


def decode_records(
    session_id: str,
    joined: tuple[int, bytes] | None,
    rows: Callable[[], Iterable[tuple[Any, Any]]],
    corrupt: dict[str, list[int]],
    *,
    strict: bool,
    log: logging.Logger,
) -> list[SessionRecord]:
    """A stored session's records, decoded the way every SQL store does it (SQLite, PostgreSQL).

    ``joined``: the number of rows and their bodies joined into one JSON array (decoded at
    once: the fast path), or ``None`` when the store could not join them; ``rows()``: the
    ``(seq, body)`` rows in order, read only when the fast path fails (a bad row), then decoded
    one by one. A row that does not decode is skipped with a warning on ``log`` and its ``seq``
    kept in ``corrupt[session_id]`` (cleared when every row decodes).

    Raises:
        CorruptRecordError: ``strict`` and at least one row does not decode.
    """
    if joined is not None:
        count, data = joined
        if not count:
            corrupt.pop(session_id, None)
            return []
        try:  # fast path: one decode of every record
            with paused_gc():
                out: list[SessionRecord] = from_json(data, list[SessionRecord])
            if len(out) == count:
                corrupt.pop(session_id, None)
                return out
        except FoundationAIError:  # a bad row: decode them one by one below
            pass
    out = []
    bad: list[int] = []
    detail = ""
    with paused_gc():
        for seq, body in rows():
            try:
                out.append(from_json(body if isinstance(body, bytes | str) else bytes(body), SessionRecord))
            except (FoundationAIError, TypeError) as exc:
                bad.append(int(seq))
                detail = detail or str(exc)
    if not bad:
        corrupt.pop(session_id, None)
        return out
    corrupt[session_id] = bad
    if strict:
        raise CorruptRecordError(session_id, bad, detail)
    log.warning(
        "session %s: skipped %d undecodable stored record(s) (seq %s): %s", session_id, len(bad), bad, detail
    )
    return out


def takes_header(store: Any) -> bool:
    """True when ``store.append`` accepts a ``header`` (stores written before metadata existed
    take ``(session_id, records)`` only; they are still usable, without metadata)."""
    kind = type(store)
    known = _TAKES_HEADER.get(kind)
    if known is None:
        try:
            params = inspect.signature(store.append).parameters
            known = (
                "header" in params
                or any(p.kind is p.VAR_POSITIONAL for p in params.values())
                or len(params) >= 3
            )
        except (TypeError, ValueError):
            known = False
        _TAKES_HEADER[kind] = known
    return known


_TAKES_HEADER: dict[type, bool] = {}


async def _call(store: Any, name: str, *args: Any) -> Any:
    own = getattr(store, "a" + name, None)
    if own is not None:
        return await own(*args)
    return await asyncio.to_thread(getattr(store, name), *args)


async def aappend(
    store: SessionStore,
    session_id: str,
    records: Sequence[SessionRecord],
    header: SessionHeader | None = None,
) -> None:
    """``store.append`` without blocking the event loop (the store's own ``aappend`` when it has
    one, else a worker thread). Raises what ``append`` raises."""
    if header is None or not takes_header(store):
        await _call(store, "append", session_id, records)
    else:
        await _call(store, "append", session_id, records, header)


async def aload(store: SessionStore, session_id: str) -> list[SessionRecord]:
    """``store.load`` without blocking the event loop."""
    out: list[SessionRecord] = await _call(store, "load", session_id)
    return out


async def alist_sessions(store: SessionStore, limit: int | None = None, offset: int = 0) -> list[SessionMeta]:
    """``store.list_sessions`` without blocking the event loop."""
    out: list[SessionMeta] = await _call(store, "list_sessions", limit, offset)
    return out


async def asession_meta(store: SessionStore, session_id: str) -> SessionMeta | None:
    """``store.session_meta`` without blocking the event loop."""
    out: SessionMeta | None = await _call(store, "session_meta", session_id)
    return out


def conversation_of(records: Iterable[SessionRecord]) -> list[Messages]:
    """The conversation the records describe, oldest first: every ``Conversation`` message,
    in order, except those a ``Retracted`` record names (a message id appears once; a later
    record for the same id replaces the earlier one in place), each tool result right after the
    calls of its response (:func:`pair_results`)."""
    order: list[str] = []
    msgs: dict[str, Messages] = {}
    retracted: set[str] = set()
    for r in records:
        if isinstance(r, SessionRecord.Conversation):
            m = r.message
            if m.id not in msgs:
                order.append(m.id)
            msgs[m.id] = m
        elif isinstance(r, SessionRecord.Retracted):
            retracted.update(r.message_ids)
    return pair_results([msgs[i] for i in order if i not in retracted])


_PLACEHOLDER = "interrupted: the process stopped"
"""The ``error_detail`` of the result a resume gives a call whose run it did not see end."""


def pair_results(conv: list[Messages]) -> list[Messages]:
    """``conv`` with each tool result moved right after the calls of its response, whatever
    was stored between them (another writer's messages, e.g. a second process's turn on the
    same session before leases existed): the model is shown the real result next to its call,
    never "not run" plus a stray result. A call with two results keeps the real one, not the
    placeholder a resume stored for it (``error_detail`` "interrupted: the process stopped").
    A result whose call is not in ``conv`` stays where it is. Returns ``conv`` itself when every
    result is already in place (the usual case: one pass, no copy)."""
    calls: set[str] = set()
    block: set[str] = set()  # the calls of the response being answered
    in_place = True
    for m in conv:
        if isinstance(m, AssistantMessage):
            if isinstance(m.content, ToolCall):
                calls.add(m.content.id)
                block.add(m.content.id)
        elif isinstance(m, ToolResultMessage):
            if m.tool_call_id in calls and m.tool_call_id not in block:
                in_place = False
                break
            block.discard(m.tool_call_id)
        else:
            block = set()
    if in_place:
        return conv
    best: dict[str, ToolResultMessage] = {}
    for m in conv:
        if isinstance(m, ToolResultMessage) and m.tool_call_id in calls:
            have = best.get(m.tool_call_id)
            if have is None or (have.error_detail == _PLACEHOLDER and m.error_detail != _PLACEHOLDER):
                best[m.tool_call_id] = m
    out: list[Messages] = []
    pending: list[str] = []  # call ids of the response being read
    for k, m in enumerate(conv):
        if isinstance(m, ToolResultMessage) and m.tool_call_id in calls:
            continue  # placed after its response below
        out.append(m)
        if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall):
            pending.append(m.content.id)
        nxt = conv[k + 1] if k + 1 < len(conv) else None
        if pending and not isinstance(nxt, AssistantMessage):  # the response ends here
            out += [best[c] for c in pending if c in best]
            pending = []
    return out
