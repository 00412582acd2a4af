"""Identifiers: SCRU128 ids, time-ordered and 25 characters long.

The seed (section 1) gives every message an ``id`` made by
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


def _generator() -> Callable[[], str]:
    # scru128 (and the secrets/hmac modules it pulls in) load on the first id, not at import:
    # `import foundation_ai` stays fast.
    global _new_string
    if _new_string is None:
        import scru128

        _new_string = scru128.new_string
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

    Used when a provider sends a tool call with no id or an empty one (wire cases C41, C43):
    the generated id is then used for the call's result too.
    """
    return prefix + os.urandom(12).hex()
