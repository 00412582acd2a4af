"""One-line reports after a turn, shared by ``run`` and ``chat``: the failure line and the
usage line."""

from __future__ import annotations

from typing import Any

from ..backends._http import mask_url
from .model_choice import ModelChoice
from .render import format_usage

__all__ = ["failure_message", "usage_line"]


def failure_message(error: Any, choice: ModelChoice) -> str:
    """One line for a failed turn: the ``AgenticError`` message, with the server named when it
    could not be reached. The text is the server's: print it through
    :func:`~foundation_ai._cli.status.error_line` or the renderer, which escape control
    characters."""
    message = " ".join(str(getattr(error, "message", error)).split()) or "the turn failed"
    if "connection failed" in message or "ConnectError" in message:
        where = mask_url(choice.base_url) if choice.base_url else f"the {choice.kind} API"
        return f"cannot reach {where}: {message}"
    return message


def usage_line(summary: Any, choice: ModelChoice, model: Any = None) -> str:
    """The line printed after each turn: tokens in/out and cost (USD): ``$0 (local)`` for
    in-process models, ``n/a`` when nothing was charged and ``model``'s descriptor knows no price
    (e.g. an unknown model behind ``--base-url``)."""
    u = summary.usage
    if choice.kind in ("local", "gguf", "hf"):
        return format_usage(u.input, u.output, None, u.cache_read, u.cache_write, local=True)
    descriptor = getattr(model, "descriptor", None)
    unpriced = descriptor is not None and getattr(descriptor, "input_price", None) is None
    cost = None if (unpriced and not u.cost_usd) else u.cost_usd
    return format_usage(u.input, u.output, cost, u.cache_read, u.cache_write)
