"""Identifiers: SCRU128 ids, time-ordered and 25 characters long.

Every message has an ``id`` (docs/concepts.md: Messages) made by
``foundation_compact::ids::new_scru128()``. Here an id is a plain ``str`` holding the
canonical 25-character base-36 form, e.g. ``"03hbt73h1zzmii7zf3sugzw4a"``: ids sort in the
order they were made, so they double as a creation order within one process.

The generator follows the SCRU128 specification (https://github.com/scru128/spec): a 48-bit
millisecond timestamp, a 24-bit ``counter_hi`` renewed at random every second, a 24-bit
``counter_lo`` started at random every millisecond and incremented within it, and 32 bits of
fresh entropy per id, all random bits from the operating system's CSPRNG (``os.urandom``, read
in blocks). A clock that goes back by less than ten seconds keeps the previous timestamp (ids
stay increasing); further back, the generator restarts from the new time, as the reference
implementation does.
"""

from __future__ import annotations

import os
import re
import threading
import time
from array import array
from collections.abc import Callable

__all__ = ["Id", "is_scru128", "new_call_id", "new_scru128"]

Id = str
"""A SCRU128 id as its 25-character lowercase base-36 string."""

_SCRU128 = re.compile(r"^[0-9a-z]{25}$")

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_TRIPLES: list[str] = []
"""Every 3-digit base-36 string, in order (filled with the first id)."""

_B12 = 36**12
_B6 = 36**6
_ROLLBACK_MS = 10_000
"""How far back (milliseconds) the clock may go before the generator restarts from it."""


def base36_25(value: int) -> str:
    """``value`` (0 <= value < 2**128) as 25 lowercase base-36 digits, zero-padded: the
    canonical SCRU128 string (https://github.com/scru128/spec), three digits per division."""
    t = _TRIPLES or _fill_triples()
    hi, lo = divmod(value, _B12)  # both halves are small ints
    return _head13(hi, t) + _tail12(lo, t)


def _head13(hi: int, t: list[str]) -> str:
    hi, e = divmod(hi, 46656)  # 36**3
    hi, f = divmod(hi, 46656)
    hi, g = divmod(hi, 46656)
    hi, h = divmod(hi, 46656)
    return f"{_DIGITS[hi]}{t[h]}{t[g]}{t[f]}{t[e]}"


def _tail12(lo: int, t: list[str]) -> str:
    x, y = divmod(lo, _B6)
    a, b = divmod(x, 46656)
    c, d = divmod(y, 46656)
    return f"{t[a]}{t[b]}{t[c]}{t[d]}"


def _fill_triples() -> list[str]:
    _TRIPLES.extend(x + y + z for x in _DIGITS for y in _DIGITS for z in _DIGITS)
    return _TRIPLES


def _head(base: int) -> tuple[str, int]:
    """For the ids ``base + low`` (``low`` < 2**56 < 36**12): their first 13 digits while
    ``rest + low`` < 36**12 (past that, the next 13-digit number), and ``rest``."""
    q, rest = divmod(base, _B12)
    return _head13(q, _TRIPLES or _fill_triples()), rest


def _generator() -> tuple[Callable[[], str], Callable[[], None]]:
    """``(next_id, reset)``: the process's SCRU128 generator (thread-safe) and the reset a
    forked child runs (it must not repeat its parent's counters and entropy)."""
    timestamp = counter_hi = ts_counter_hi = 0
    block = -1  # (timestamp << 24 | counter_hi) that ``head`` and ``rest`` belong to
    head, rest = "", 0
    # ``mark`` is ``rest + (counter_lo << 32)``: the low 12 digits' value of the last id without
    # its entropy; ``limit`` is that value at the highest ``counter_lo`` (0xFFFFFF)
    mark = limit = 0
    pool = array("I")  # random 32-bit words from the OS CSPRNG, taken from the end
    lock = threading.Lock()
    acquire, release = lock.acquire, lock.release
    time_ns, urandom, t = time.time_ns, os.urandom, _TRIPLES or _fill_triples()

    def next_id() -> str:
        """Return a fresh SCRU128 id (25 lowercase base-36 characters): time-ordered, each one
        greater than the one made before it in this process."""
        nonlocal mark
        acquire()  # ``acquire``/``release`` rather than ``with``: fewer instructions
        try:
            if (now := time_ns() // 1_000_000) == timestamp and mark < limit and pool:
                # the same millisecond: the next counter_lo (``mark`` steps by 1 << 32);
                # ``counter_hi`` (renewed at most once a second, checked by the id before this
                # one) and the head stay
                mark += 4294967296
                low = mark + pool.pop()
                first = head
            else:
                first, low = slow(now)
        finally:
            release()
        if low >= _B12:  # rare: the id crosses into the next 13-digit head
            first = _head13(int(first, 36) + 1, t)
            low -= _B12
        # three digits at a time by a one-limb divisor (36**3 < 2**30: CPython's fast path)
        q, d = divmod(low, 46656)
        q, c = divmod(q, 46656)
        a, b = divmod(q, 46656)
        return f"{first}{t[a]}{t[b]}{t[c]}{t[d]}"

    def slow(now: int) -> tuple[str, int]:
        """Every other case (a new millisecond, counters to renew, the pool to refill), under
        the lock: ``(head, low)`` of the next id."""
        nonlocal timestamp, counter_hi, ts_counter_hi, block, head, rest, mark, limit
        counter_lo = (mark - rest) >> 32
        if len(pool) < 3:
            pool.frombytes(urandom(1024))
        if now > timestamp:
            timestamp = now
            counter_lo = pool.pop() >> 8
        elif now + _ROLLBACK_MS >= timestamp:
            counter_lo += 1  # the same millisecond (or a small clock rollback)
            if counter_lo > 0xFFFFFF:
                counter_lo = 0
                counter_hi += 1
                if counter_hi > 0xFFFFFF:
                    counter_hi = 0
                    timestamp += 1  # counters exhausted: borrow the next millisecond
                    counter_lo = pool.pop() >> 8
        else:  # the clock went far back: start again from it
            timestamp = now
            ts_counter_hi = 0
            counter_lo = pool.pop() >> 8
        if timestamp - ts_counter_hi >= 1000 or ts_counter_hi < 1:
            ts_counter_hi = timestamp
            counter_hi = pool.pop() >> 8
        if (timestamp << 24 | counter_hi) != block:
            block = timestamp << 24 | counter_hi
            head, rest = _head(block << 56)
        mark = rest + (counter_lo << 32)
        limit = rest + (0xFFFFFF << 32)
        return head, mark + pool.pop()

    def reset() -> None:
        nonlocal timestamp, counter_hi, ts_counter_hi, block, mark, limit, rest, lock, acquire, release
        timestamp = counter_hi = ts_counter_hi = mark = limit = rest = 0
        block, lock = -1, threading.Lock()
        acquire, release = lock.acquire, lock.release
        del pool[:]

    return next_id, reset


_next, _reset = _generator()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset)


new_scru128: Callable[[], Id] = _next
"""``new_scru128()``: a fresh SCRU128 id (25 lowercase base-36 characters): time-ordered,
each one greater than the one made before it in this process (the generator itself: no extra
call per id)."""


def is_scru128(value: str) -> bool:
    """True when ``value`` has the shape of a canonical SCRU128 string (25 chars of ``0-9a-z``)."""
    return bool(_SCRU128.match(value))


def new_call_id(prefix: str = "call_") -> str:
    """Return a fresh, globally unique tool-call id such as ``"call_3f9c…"``.

    Used when a provider sends a tool call with no id or an empty one:
    the generated id is then used for the call's result too.
    """
    return prefix + os.urandom(12).hex()
