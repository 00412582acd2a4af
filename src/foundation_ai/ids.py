"""Identifiers: SCRU128 ids, time-ordered and 25 characters long.

Every message has an ``id`` (docs/concepts.md: Messages) made by
``foundation_compact::ids::new_scru128()``. Here an id is a plain ``str`` holding the
canonical 25-character base-36 form, e.g. ``"03hbt73h1zzmii7zf3sugzw4a"``: ids sort in the
order they were made, so they double as a creation order within one process.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

__all__ = ["Id", "is_scru128", "new_call_id", "new_scru128"]

Id = str
"""A SCRU128 id as its 25-character lowercase base-36 string."""

_SCRU128 = re.compile(r"^[0-9a-z]{25}$")


_new_string: Callable[[], str] | None = None

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_TRIPLES: list[str] = []
"""Every 3-digit base-36 string, in order (filled with the first id)."""


def base36_25(value: int) -> str:
    """``value`` (0 <= value < 2**128) as 25 lowercase base-36 digits, zero-padded: the
    canonical SCRU128 string (https://github.com/scru128/spec), three digits per division."""
    t = _TRIPLES or _fill_triples()
    hi, lo = divmod(value, 4738381338321616896)  # 36**12: both halves are small ints
    lo, a = divmod(lo, 46656)  # 36**3
    lo, b = divmod(lo, 46656)
    lo, c = divmod(lo, 46656)
    hi, e = divmod(hi, 46656)
    hi, f = divmod(hi, 46656)
    hi, g = divmod(hi, 46656)
    hi, h = divmod(hi, 46656)
    return _DIGITS[hi] + t[h] + t[g] + t[f] + t[e] + t[lo] + t[c] + t[b] + t[a]


def _fill_triples() -> list[str]:
    _TRIPLES.extend(x + y + z for x in _DIGITS for y in _DIGITS for z in _DIGITS)
    return _TRIPLES


def _generator() -> Callable[[], str]:
    # scru128 (and the secrets/hmac modules it pulls in) load on the first id, not at import:
    # `import foundation_ai` stays fast. Its generator makes the ids (timestamp, counters,
    # entropy); formatting them is ours, about 3x faster than its ``str()``.
    global _new_string
    if _new_string is None:
        import scru128

        new = scru128.new

        def new_string() -> str:
            return base36_25(int(new()))

        _new_string = new_string
    return _new_string


def new_scru128() -> Id:
    """Return a fresh SCRU128 id (25 lowercase base-36 characters), time-ordered."""
    value: str = (_new_string or _generator())()
    return value


def is_scru128(value: str) -> bool:
    """True when ``value`` has the shape of a canonical SCRU128 string (25 chars of ``0-9a-z``)."""
    return bool(_SCRU128.match(value))


def new_call_id(prefix: str = "call_") -> str:
    """Return a fresh, globally unique tool-call id such as ``"call_3f9c…"``.

    Used when a provider sends a tool call with no id or an empty one:
    the generated id is then used for the call's result too.
    """
    return prefix + os.urandom(12).hex()
