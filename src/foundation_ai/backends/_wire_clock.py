"""The clock of streamed chunks' timestamps (:class:`ChunkClock`).

Every chunk of a stream is a ``Messages.Assistant`` whose ``timestamp`` is when it was produced
(UTC). Reading the wall clock as a timezone-aware ``datetime`` (``datetime.now(UTC)``) costs
about as much as building the message itself, once per streamed token; a parser's
:class:`ChunkClock` reads it at most once per :data:`RESOLUTION` of monotonic time and gives
the chunks made in between that same ``datetime``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from time import monotonic

__all__ = ["RESOLUTION", "ChunkClock"]

RESOLUTION = 0.001
"""Seconds (1 ms) a wall-clock reading is reused for: a chunk's timestamp is at most this much
before the moment it was made, never after it, and never before the clock's first reading (a
clock is made per stream). SCRU128 message ids carry the same millisecond resolution."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ChunkClock:
    """UTC timestamps for one stream's chunks (see the module docstring): :meth:`now`."""

    __slots__ = ("_due", "_now")

    def __init__(self) -> None:
        self._due = -math.inf  # the first call reads the clock
        self._now = _EPOCH

    def now(self) -> datetime:
        """The current UTC time, to :data:`RESOLUTION` (a timezone-aware ``datetime``)."""
        t = monotonic()
        if t >= self._due:
            self._now = datetime.now(UTC)
            self._due = t + RESOLUTION
        return self._now
