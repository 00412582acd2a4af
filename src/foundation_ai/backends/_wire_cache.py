"""The per-session cache of a history's encoded wire form, shared by the HTTP backends.

A stored history only grows (messages are immutable and appended), so the wire form of its
older part does not change from one request to the next. Each backend keeps, per session, the
encoded wire items (``msgspec.Raw``) of a prefix of the history that can no longer change, the
sanitation id mapping after that prefix (``docs/sanitation.md``) and whatever state its mapping
carries across the prefix's end; a request then maps and encodes only the messages after the
prefix. The body is encoded with ``msgspec.json.encode``, which writes ``Raw`` items as they are:
the bytes are those of the request mapped from the whole history (each backend's tests check
this byte for byte on random histories).

:class:`PrefixCache` is the shared part: a least-recently-used table of :class:`Prefix` entries
keyed by the history's first message id and the mapping's other inputs. An entry is lent to one
request at a time (:meth:`PrefixCache.take` removes it, :meth:`PrefixCache.keep` puts it back),
so two requests of one session never write to one entry; the other request maps afresh.

The encoded items of a long prefix are packed: every :data:`PACK` of them become one ``Raw``
holding their JSON texts joined by commas. ``msgspec.json.encode`` writes a list item by item
with a comma between them and a ``Raw`` verbatim, so a packed run encodes to the very bytes of
its items, while the encoder walks a few hundred items rather than one per message (at 40,000
messages the body is encoded about 3x faster). The newest :data:`PACK` items or more are always
left one per item, so a backend may still read the last ones back.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any, Generic, TypeVar

import msgspec

from ._sanitize import IdMapping

__all__ = ["PACK", "Prefix", "PrefixCache", "encode_raw"]

PACK = 256
"""How many encoded items :meth:`Prefix.extend_wire` joins into one packed ``Raw``."""


def encode_raw(items: Sequence[Any]) -> list[msgspec.Raw]:
    """Each item (a JSON-ready value) encoded once, as ``msgspec.Raw``."""
    encode = msgspec.json.encode
    return [msgspec.Raw(encode(it)) for it in items]


class Prefix:
    """A cached history prefix: the messages it covers (``messages``, a copy of the history's
    first ``len(messages)`` items), their encoded wire items (``wire``) and the sanitation id
    mapping after them (``ids``). Backends subclass it to add the state their mapping carries
    over the prefix's end."""

    __slots__ = ("_loose", "ids", "messages", "wire")

    def __init__(self, id_max: int) -> None:
        self.messages: list[Any] = []
        self.wire: list[msgspec.Raw] = []
        self.ids = IdMapping(id_max)
        self._loose = 0  # the newest items of ``wire`` that are one item each

    def extend_wire(self, items: Sequence[Any]) -> None:
        """Append ``items`` (JSON-ready values) to ``wire``, each encoded once; once
        ``2 * PACK`` items are unpacked, the oldest ``PACK`` of them are joined into one packed
        ``Raw`` (see the module docstring): ``wire`` encodes, as a list, to the same bytes."""
        wire = self.wire
        wire += encode_raw(items)
        loose = self._loose + len(items)
        while loose >= 2 * PACK:
            first = len(wire) - loose
            wire[first : first + PACK] = [msgspec.Raw(b",".join(wire[first : first + PACK]))]
            loose -= PACK
        self._loose = loose

    def extend_messages(self, history: Sequence[Any], cut: int) -> None:
        """Cover ``history[:cut]`` (which starts with ``messages``): only the new messages are
        copied, not the whole prefix again."""
        self.messages += history[len(self.messages) : cut]


P = TypeVar("P", bound=Prefix)


class PrefixCache(Generic[P]):
    """Up to ``size`` :class:`Prefix` entries (least recently used dropped), thread-safe.

    Keys are tuples starting with the first message's id (a session's history keeps its first
    message) followed by the mapping's other inputs (model-dependent switches, the target server).
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._entries: OrderedDict[Hashable, P] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: Hashable, history: Sequence[Any]) -> P | None:
        """The entry of ``key``, removed from the table (the caller owns it until
        :meth:`keep`), when ``history`` starts with the entry's messages (the same objects, or
        equal ones); ``None`` otherwise (a stale entry is dropped)."""
        with self._lock:
            entry = self._entries.pop(key, None)
        if entry is None:
            return None
        k = len(entry.messages)
        if len(history) < k or history[:k] != entry.messages:
            return None
        return entry

    def keep(self, key: Hashable, entry: P) -> None:
        """Put ``entry`` (back) under ``key`` as the most recently used."""
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
