"""The range rules of the CLI's numeric settings, in one place: the command-line options
(:mod:`foundation_ai._cli.parser`) and ``config.toml`` (:mod:`foundation_ai._cli.config`) both
check their values here, so ``--temperature -3`` and ``temperature = -3`` are refused alike.

Each checker takes the value as given (the option's text, or the TOML value) and returns it
converted, or raises ``ValueError`` whose message says what is expected (``"must be a number
>= 0, got -3"``); the callers add the option or the file and key to it.
"""

from __future__ import annotations

import math

__all__ = ["max_tokens", "positive_int", "seconds", "temperature"]


def positive_int(value: object) -> int:
    """``value`` (an ``int`` or its decimal text) as an integer > 0.

    Raises:
        ValueError: not an integer (``True``/``False`` and floats are not), or not > 0.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"must be a positive integer, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"must be a positive integer, got {value!r}") from None
    if number <= 0:
        raise ValueError(f"must be a positive integer, got {number}")
    return number


max_tokens = positive_int
"""``--max-tokens`` / ``max_tokens``: output tokens per generation, an integer > 0."""


def _number(value: object, *, minimum: float, inclusive: bool, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"must be {what}, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"must be {what}, got {value!r}") from None
    if not math.isfinite(number) or number < minimum or (number == minimum and not inclusive):
        raise ValueError(f"must be {what}, got {value}")
    return number


def temperature(value: object) -> float:
    """``--temperature`` / ``temperature``: a finite number >= 0 (the providers' own upper
    limits, 2 for OpenAI and 1 for Anthropic, are left to them: see
    https://platform.openai.com/docs/api-reference/chat/create and
    https://docs.anthropic.com/en/api/messages).

    Raises:
        ValueError: not a number, negative, infinite or NaN.
    """
    return _number(value, minimum=0.0, inclusive=True, what="a number >= 0")


def seconds(value: object) -> float:
    """A duration in seconds: a finite number > 0.

    Raises:
        ValueError: not a number, not > 0, infinite or NaN.
    """
    return _number(value, minimum=0.0, inclusive=False, what="a number of seconds > 0")
