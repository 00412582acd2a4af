"""The ``Stream`` contract (docs/concepts.md: The stream contract) and ``ModelState``.

``Stream[D, P]`` is what every streaming call yields:

| item | meaning |
|---|---|
| ``Stream.Init()`` | started |
| ``Stream.Pending(value: P)`` | progress, no data |
| ``Stream.Next(value: D)`` | a data item |
| ``Stream.Spread(value: list[D])`` | several items at once |
| ``Stream.Wait()``, ``Stream.Delayed(value: seconds)``, ``Stream.Ignore()`` | scheduling signals: skip |

At the model level ``D = Messages`` and ``P = ModelState``; at the agent level
``D = SessionRecord`` and ``P = AgentProgress``. A payload is in ``.value``::

    for item in model.stream(interaction):
        match item:
            case Stream.Next(value=message): ...
            case Stream.Pending(value=ModelState.Error(message=text)): ...
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

import msgspec

from .usage import UsageReport

__all__ = ["ModelState", "Stream"]

D = TypeVar("D")
P = TypeVar("P")


class Stream(msgspec.Struct, Generic[D, P], frozen=True, tag_field="type"):
    """One item of a stream (docs/concepts.md: The stream contract). See the module docstring."""

    Init: ClassVar[type[_Init[Any, Any]]]
    Pending: ClassVar[type[_Pending[Any, Any]]]
    Next: ClassVar[type[_Next[Any, Any]]]
    Spread: ClassVar[type[_Spread[Any, Any]]]
    Wait: ClassVar[type[_Wait[Any, Any]]]
    Delayed: ClassVar[type[_Delayed[Any, Any]]]
    Ignore: ClassVar[type[_Ignore[Any, Any]]]

    def is_scheduling(self) -> bool:
        """True for ``Wait``, ``Delayed`` and ``Ignore``: consumers skip these."""
        return isinstance(self, _Wait | _Delayed | _Ignore)


class _Init(Stream[D, P], tag="init", frozen=True):
    """``Stream.Init()``: the stream started. JSON ``{"type": "init"}``."""


class _Pending(Stream[D, P], tag="pending", frozen=True):
    """``Stream.Pending(value)``: progress (``P``), no data. JSON tag ``"pending"``."""

    value: P


class _Next(Stream[D, P], tag="next", frozen=True):
    """``Stream.Next(value)``: one data item (``D``). JSON tag ``"next"``."""

    value: D


class _Spread(Stream[D, P], tag="spread", frozen=True):
    """``Stream.Spread(value)``: several data items at once (``list[D]``). JSON tag ``"spread"``."""

    value: list[D]


class _Wait(Stream[D, P], tag="wait", frozen=True):
    """``Stream.Wait()``: a scheduling signal; skip it. JSON tag ``"wait"``."""


class _Delayed(Stream[D, P], tag="delayed", frozen=True):
    """``Stream.Delayed(value)``: a scheduling signal with a delay in seconds; skip it. JSON tag ``"delayed"``."""

    value: float
    """Seconds until the producer expects to have more."""


class _Ignore(Stream[D, P], tag="ignore", frozen=True):
    """``Stream.Ignore()``: a scheduling signal; skip it. JSON tag ``"ignore"``."""


for _attr, _cls in (
    ("Init", _Init),
    ("Pending", _Pending),
    ("Next", _Next),
    ("Spread", _Spread),
    ("Wait", _Wait),
    ("Delayed", _Delayed),
    ("Ignore", _Ignore),
):
    setattr(Stream, _attr, _cls)
    _cls.__qualname__ = _cls.__name__ = f"Stream.{_attr}"


class ModelState(msgspec.Struct, frozen=True, tag_field="type"):
    """Progress of a model call (the ``P`` of ``Model.stream``, docs/concepts.md: The stream contract).

    ``GeneratingTokens(usage)`` (cumulative usage when known), ``GeneratingEmbeddings()``,
    ``Finished()``, ``Error(message)``. Every backend failure is an ``Error`` (or an Assistant
    message with ``StopReason.Error``), never a silent ``Finished``.
    """

    GeneratingTokens: ClassVar[type[_GeneratingTokens]]
    GeneratingEmbeddings: ClassVar[type[_GeneratingEmbeddings]]
    Finished: ClassVar[type[_Finished]]
    Error: ClassVar[type[_StateError]]


class _GeneratingTokens(ModelState, tag="generating_tokens", frozen=True):
    """``ModelState.GeneratingTokens(usage=None)``: tokens are being generated; cumulative usage when known."""

    usage: UsageReport | None = None


class _GeneratingEmbeddings(ModelState, tag="generating_embeddings", frozen=True):
    """``ModelState.GeneratingEmbeddings()``: embeddings are being computed."""


class _Finished(ModelState, tag="finished", frozen=True):
    """``ModelState.Finished()``: the model call completed."""


class _StateError(ModelState, tag="error", frozen=True):
    """``ModelState.Error(message)``: the model call failed with ``message``."""

    message: str


for _attr, _cls2 in (
    ("GeneratingTokens", _GeneratingTokens),
    ("GeneratingEmbeddings", _GeneratingEmbeddings),
    ("Finished", _Finished),
    ("Error", _StateError),
):
    setattr(ModelState, _attr, _cls2)
    _cls2.__qualname__ = _cls2.__name__ = f"ModelState.{_attr}"
ModelStateT = _GeneratingTokens | _GeneratingEmbeddings | _Finished | _StateError
"""The decodable union of ``ModelState`` variants."""


def stream_union(data: Any, progress: Any) -> Any:
    """The decodable union type of ``Stream[data, progress]`` (for ``from_json``)."""
    return (
        _Init[data, progress]
        | _Pending[data, progress]
        | _Next[data, progress]
        | _Spread[data, progress]
        | _Wait[data, progress]
        | _Delayed[data, progress]
        | _Ignore[data, progress]
    )
