"""Small rules the phases apply: vacuous answers, rate-limit errors, per-model circuit breakers."""

from __future__ import annotations

import string
import time

import msgspec

__all__ = ["CircuitBreaker", "is_rate_limit", "is_vacuous"]

_VACUOUS = string.punctuation + string.whitespace + "\u2026\u00a0"
_RATE = ("429", "rate limit", "rate_limit", "ratelimit", "too many requests", "rate-limit")


def is_vacuous(text: str) -> bool:
    """True for an empty or punctuation-only answer (retried once, see ``docs/turn-loop.md``)."""
    return not text.strip(_VACUOUS)


def is_rate_limit(detail: str | None) -> bool:
    """True when a provider error text reports a rate limit (HTTP 429, "rate limit", "too many
    requests"); a rate limit is not a context overflow.
    See https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/429."""
    if not detail:
        return False
    low = detail.lower()
    return any(k in low for k in _RATE)


class CircuitBreaker(msgspec.Struct, gc=False):
    """Per-model breakers: a model that hit a rate limit is skipped for ``cooldown`` seconds.
    Holds only numbers: untracked by the cycle collector (``gc=False``)."""

    cooldown: float = 30.0
    _open_until: dict[int, float] = msgspec.field(default_factory=dict)

    def trip(self, index: int) -> None:
        """Open the breaker of model ``index``."""
        self._open_until[index] = time.monotonic() + self.cooldown

    def available(self, index: int) -> bool:
        """True when model ``index`` may be called."""
        until = self._open_until.get(index)
        return until is None or time.monotonic() >= until

    def pick(self, count: int) -> int | None:
        """The first available model index, or ``None``."""
        if not self._open_until:
            return 0 if count else None
        for i in range(count):
            if self.available(i):
                return i
        return None
