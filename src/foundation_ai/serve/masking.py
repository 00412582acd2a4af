"""Masking configured secrets (provider API keys, ...) in everything the server serves and
stores: a model may echo a key it saw (in a tool result, an error, its prompt) in its answer.
See ``docs/serve.md`` (Secrets) and ``ServeConfig.secrets``.

- :class:`SecretMask` replaces every occurrence of a secret by ``[REDACTED]`` in a text, JSON
  bytes, a ``TurnEvent`` or a ``SessionRecord``;
- :class:`TextMasker` does it for text arriving in pieces (a streamed answer): it holds back
  the end of the text while it could be the start of a secret, so a secret split over two
  pieces is masked too;
- :class:`EventMasker` does it for the ``TurnEvent``s of one turn;
- :class:`MaskingStore` wraps a ``SessionStore``: records are masked before they are written.

A secret split over two separate outputs (the end of one answer and the start of the next, or
a tool result and the answer after it) is masked too: an output that ends with the start of a
secret, or begins with the end of one, has that fragment masked when it is at least
:meth:`SecretMask.fragment` characters long (a quarter of the secret, and at least 6), so at
most a quarter of a secret can show, split that way.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import msgspec

from ..types import SessionRecord, from_json, to_json

__all__ = ["MASK", "EventMasker", "MaskingStore", "SecretMask", "TextMasker"]

MASK = "[REDACTED]"


class SecretMask:
    """The secrets to mask (empty texts ignored; the longest matched first).

    Args:
        secrets: the texts to mask.
    """

    def __init__(self, secrets: Sequence[str]) -> None:
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self.longest = max((len(s) for s in self.secrets), default=0)
        self._re = re.compile("|".join(map(re.escape, self.secrets))) if self.secrets else None
        self._bytes = [s.encode() for s in self.secrets]
        self._starts = frozenset(s[0] for s in self.secrets)
        # the first and last characters of the shortest fragment masked at an output's edges
        self._marks = [
            m for s in self.secrets for m in (s[: self.fragment(s)].encode(), s[-self.fragment(s) :].encode())
        ]

    @staticmethod
    def fragment(secret: str) -> int:
        """The length from which a piece of ``secret`` at the start or end of an output is
        masked: a quarter of the secret, at least 6 characters (never more than the secret)."""
        return min(len(secret), max(6, len(secret) // 4))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by :data:`MASK`."""
        return self._re.sub(MASK, text) if self._re is not None else text

    def edges(self, text: str, *, head: bool = True, tail: bool = True) -> str:
        """``text`` with a start that is the end of a secret, and an end that is the start of
        one, replaced by :data:`MASK` when :meth:`fragment` characters long or more (the
        secret's other part is in another output); ``head``/``tail`` False: not that edge."""
        if not self.secrets or not text:
            return text
        first = last = 0
        for s in self.secrets:
            least = self.fragment(s)
            for k in range(min(len(s) - 1, len(text)), least - 1, -1):
                if head and k > first and text.startswith(s[-k:]):
                    first = k
                if tail and k > last and text.endswith(s[:k]):
                    last = k
        if first + last >= len(text) and (first or last):  # the fragments cover the whole text
            return MASK
        if last:
            text = text[: len(text) - last] + MASK
        if first:
            text = MASK + text[first:]
        return text

    def whole(self, text: str) -> str:
        """A complete output ``text`` masked: every secret (:meth:`text`), then its
        :meth:`edges`."""
        return self.edges(self.text(text))

    def found_in(self, data: bytes) -> bool:
        """True when the UTF-8 ``data`` holds a secret (a secret of JSON-safe characters, like
        every API key, appears unescaped in JSON)."""
        return any(b in data for b in self._bytes)

    def value(self, value: Any, kind: Any) -> Any:
        """A msgspec value (a ``TurnEvent``, a ``SessionRecord``) with the secrets masked in all
        its texts: re-read from its masked JSON, unchanged (the same object) when it holds
        none."""
        if self._re is None:
            return value
        masked = self._masked_json(to_json(value))
        return value if masked is None else from_json(masked, kind)

    def json(self, raw: str) -> str:
        """A JSON text (a DBOS step's record) with the secrets masked in all its strings, each
        as a complete output (:meth:`whole`: a secret's start or end at a string's edge
        too); ``raw`` itself when it holds no secret nor a fragment of one."""
        if self._re is None:
            return raw
        masked = self._masked_json(raw.encode())
        return raw if masked is None else masked.decode()

    def _masked_json(self, data: bytes) -> bytes | None:
        """The JSON ``data`` with every secret masked, then each string's :meth:`edges`;
        ``None`` when it holds no secret nor a fragment of one (nothing to mask)."""
        if not any(m in data for m in self._marks):
            return None
        tree = msgspec.json.decode(self.text(data.decode()).encode())
        return msgspec.json.encode(self._walk(tree))

    def _walk(self, node: Any) -> Any:
        if isinstance(node, str):
            return self.edges(node)
        if isinstance(node, list):
            return [self._walk(x) for x in node]
        if isinstance(node, dict):
            return {k: self._walk(v) for k, v in node.items()}
        return node

    def masker(self) -> TextMasker:
        """A :class:`TextMasker` for one streamed text."""
        return TextMasker(self)


class TextMasker:
    """Masks secrets in a text that arrives in pieces: :meth:`feed` returns what can be shown
    now, :meth:`flush` the rest at the text's end."""

    def __init__(self, mask: SecretMask) -> None:
        self.mask = mask
        self._held = ""
        self._fresh = True  # the text's start could still be the end of a secret

    def feed(self, piece: str) -> str:
        """The part of the text so far that cannot become part of a secret any more, masked."""
        buf = self._held + piece
        pattern = self.mask._re
        if pattern is None:
            return buf
        if self._fresh:  # hold the start while it could grow into the end of a secret
            if len(buf) < self.mask.longest and any(buf in s for s in self.mask.secrets):
                self._held = buf
                return ""
            self._fresh = False
            buf = self.mask.edges(buf, tail=False)  # its start only (its end may go on)
        last_end = 0
        for m in pattern.finditer(buf):
            last_end = m.end()
        keep = 0
        starts = self.mask._starts
        for k in range(min(len(buf) - last_end, self.mask.longest - 1), 0, -1):
            if buf[-k] not in starts:
                continue
            tail = buf[-k:]
            if any(s.startswith(tail) for s in self.mask.secrets):
                keep = k
                break
        self._held = buf[len(buf) - keep :]
        return self.mask.text(buf[: len(buf) - keep])

    def flush(self) -> str:
        """What :meth:`feed` held back (no whole secret), at the end of the text."""
        rest, self._held = self._held, ""
        fresh, self._fresh = self._fresh, True
        return self.mask.edges(self.mask.text(rest), head=fresh)


class EventMasker:
    """Masks the ``TurnEvent``s of one turn as they come: a text or thinking piece may be held
    back while its end could begin a secret (released with the next piece, or at the end of its
    output); every other event is masked whole (:meth:`SecretMask.value`).

    Args:
        mask: the secrets.
    """

    def __init__(self, mask: SecretMask) -> None:
        self.mask = mask
        self._masker = mask.masker()
        self._held: Any = None

    def feed(self, ev: Any) -> list[Any]:
        """The events to publish now for ``ev`` (maybe none, maybe a held piece first)."""
        from ..agentic import TurnEvent

        if isinstance(ev, TurnEvent.Text | TurnEvent.Thinking):
            h = self._held
            same = h is not None and type(h) is type(ev) and h.message_id == ev.message_id
            out = [] if same else self.flush()
            self._held = ev
            shown = self._masker.feed(ev.text)
            if shown:
                out.append(msgspec.structs.replace(ev, text=shown))
            return out
        return [*self.flush(), self.mask.value(ev, type(ev))]

    def flush(self) -> list[Any]:
        """What is held back of the current output (its end), as one last piece."""
        h, self._held = self._held, None
        if h is None:
            return []
        rest = self._masker.flush()
        return [msgspec.structs.replace(h, text=rest)] if rest else []


class MaskingStore:
    """A ``SessionStore`` whose ``append``/``aappend`` mask the records first; every other
    method is the wrapped store's.

    Args:
        inner: the store.
        mask: the secrets.
    """

    def __init__(self, inner: Any, mask: SecretMask) -> None:
        self.inner = inner
        self.mask = mask

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _masked(self, records: Sequence[SessionRecord]) -> list[SessionRecord]:
        return [self.mask.value(r, type(r)) for r in records]

    def append(self, session_id: str, records: Sequence[SessionRecord], header: Any = None) -> None:
        """``inner.append`` of the masked records."""
        if header is None:
            self.inner.append(session_id, self._masked(records))
        else:
            self.inner.append(session_id, self._masked(records), header)

    async def aappend(self, session_id: str, records: Sequence[SessionRecord], header: Any = None) -> None:
        """``inner.aappend`` (or ``append`` in a thread) of the masked records."""
        own = getattr(self.inner, "aappend", None)
        masked = self._masked(records)
        args = (session_id, masked) if header is None else (session_id, masked, header)
        if own is not None:
            await own(*args)
        else:
            await asyncio.to_thread(self.inner.append, *args)
