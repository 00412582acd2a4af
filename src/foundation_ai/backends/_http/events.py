"""What the streaming functions yield (:class:`SseEvent`), the check that an answer is an event stream,
and the :class:`Timer` that turns first-output and end times into ``GenerationMetadata.Timing``.
"""

from __future__ import annotations

import time

import httpx2
import msgspec

from ...types import (
    GenerationMetadata,
)
from .failures import HttpStreamError
from .options import HttpOptions

__all__ = ["MAX_EVENT_BYTES", "SseEvent", "Timer"]

MAX_EVENT_BYTES = 64 * 1024 * 1024
"""The largest server-sent event read (bytes, 64 MiB): a larger one ends the stream with a
``WireError`` (httpx2's ``SSEError``). Image events of the Responses API reach a few MB, so the
httpx2 default (1 MiB) is too small; a bound still keeps a hostile server from filling memory."""


class SseEvent(msgspec.Struct, frozen=True, gc=False):
    """One server-sent event: ``event`` name (``"message"`` when absent; ``"json"`` for a whole
    JSON response) and its ``data`` text."""

    event: str
    data: str


def _check_event_stream(resp: httpx2.Response, opts: HttpOptions) -> None:
    ctype = resp.headers.get("content-type", "")
    if ctype and "event-stream" not in ctype and not ctype.startswith("text/plain"):
        raise HttpStreamError(
            opts.redact(f"unexpected content type {ctype!r} (expected text/event-stream)"),
            status_code=resp.status_code,
        )


class Timer(msgspec.Struct, gc=False):
    """Wall-clock timing of one generation (``time.perf_counter``; seconds).

    ``start()`` when the request is sent, ``first()`` at the first output (idempotent),
    ``metadata(output_tokens)`` for the ``GenerationMetadata.Timing`` to attach. Holds two
    floats: not tracked by the cycle collector (msgspec ``gc=False``).
    """

    t0: float = msgspec.field(default_factory=time.perf_counter)
    t_first: float | None = None

    def start(self) -> None:
        """Restart the clock (call right before sending the request)."""
        self.t0 = time.perf_counter()
        self.t_first = None

    def first(self) -> None:
        """Mark the first output token (only the first call counts)."""
        if self.t_first is None:
            self.t_first = time.perf_counter()

    def metadata(self, output_tokens: float | None) -> GenerationMetadata:
        """``GenerationMetadata.Timing``: time to first token, output tokens per second after the
        first token (``None`` when unknown or no time elapsed), total duration."""
        now = time.perf_counter()
        ttft = None if self.t_first is None else self.t_first - self.t0
        tps = None
        if self.t_first is not None and output_tokens:
            gen = now - self.t_first
            if gen > 0:
                tps = float(output_tokens) / gen
        return GenerationMetadata.Timing(
            time_to_first_token=ttft, tokens_per_second=tps, duration=now - self.t0
        )
