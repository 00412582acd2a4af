"""Masking configured secrets (provider API keys, ...) in everything the server serves and
stores: a model may echo a key it saw (in a tool result, an error, its prompt) in its answer.
See ``docs/serve.md`` (Secrets) and ``ServeConfig.secrets``.

- :class:`SecretMask` replaces every occurrence of a secret by ``[REDACTED]`` in a text, JSON
  bytes, a ``TurnEvent`` or a ``SessionRecord``;
- :class:`TextMasker` does it for text arriving in pieces (a streamed answer): it holds back
  the end of the text while it could be the start of a secret, so a secret split over two
  pieces is masked too;
- :class:`MaskingStore` wraps a ``SessionStore``: records are masked before they are written.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

from ..types import SessionRecord, from_json, to_json

__all__ = ["MASK", "MaskingStore", "SecretMask", "TextMasker"]

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

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by :data:`MASK`."""
        return self._re.sub(MASK, text) if self._re is not None else text

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
        data = to_json(value)
        if not self.found_in(data):
            return value
        return from_json(self.text(data.decode()).encode(), kind)

    def masker(self) -> TextMasker:
        """A :class:`TextMasker` for one streamed text."""
        return TextMasker(self)


class TextMasker:
    """Masks secrets in a text that arrives in pieces: :meth:`feed` returns what can be shown
    now, :meth:`flush` the rest at the text's end."""

    def __init__(self, mask: SecretMask) -> None:
        self.mask = mask
        self._held = ""

    def feed(self, piece: str) -> str:
        """The part of the text so far that cannot become part of a secret any more, masked."""
        buf = self._held + piece
        pattern = self.mask._re
        if pattern is None:
            return buf
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
        return self.mask.text(rest)


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
