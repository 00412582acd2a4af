"""Token costs from the ``genai-prices`` price table (https://github.com/pydantic/genai-prices; docs/concepts.md: Requests, parameters and usage).

``genai-prices`` is imported on first use (it takes ~0.25 s to import) and every lookup is
cached per (model, provider, api url), including misses. Amounts are USD; status
``Estimated`` when the model is in the table, ``Unknown`` (all amounts 0) otherwise::

    cost = cost_of("gpt-4o-mini", UsageReport.of(input=800, output=100, cache_read=200),
                   provider_id="openai")
    cost.total, cost.status  # (0.000195, CostStatus.Estimated)
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from .types import CostStatus, UsageCosting, UsageReport

__all__ = ["ModelPrices", "cost_of", "model_prices", "priced"]

_UNKNOWN = UsageCosting()


class ModelPrices:
    """Base-tier prices of one model in USD per million tokens (``None`` when not listed)."""

    __slots__ = ("cache_read", "cache_write", "input", "output")

    def __init__(
        self, input: float | None, output: float | None, cache_read: float | None, cache_write: float | None
    ) -> None:
        self.input = input
        self.output = output
        self.cache_read = cache_read
        self.cache_write = cache_write

    def __repr__(self) -> str:
        return f"ModelPrices(input={self.input}, output={self.output}, cache_read={self.cache_read}, cache_write={self.cache_write})"


@functools.lru_cache(maxsize=1)
def _genai() -> Any:
    import genai_prices

    return genai_prices


@functools.lru_cache(maxsize=512)
def _lookup(model: str, provider_id: str | None, api_url: str | None) -> Any:
    """The genai-prices ``ModelPrice`` of a model, or ``None`` when unknown (cached)."""
    gp = _genai()
    try:
        calc = gp.calc_price(
            gp.Usage(input_tokens=0, output_tokens=0),
            model_ref=model,
            provider_id=provider_id,
            provider_api_url=api_url,
        )
    except (LookupError, ValueError):
        if provider_id is None and api_url is None:
            return None
        return _lookup(model, None, None) if api_url is None else _lookup(model, provider_id, None)
    return calc.model_price


def _per_mtok(value: Any) -> float | None:
    if value is None:
        return None
    base = getattr(value, "base", value)  # TieredPrices -> its base tier
    try:
        return float(base)
    except (TypeError, ValueError):
        return None


def model_prices(
    model: str, *, provider_id: str | None = None, api_url: str | None = None
) -> ModelPrices | None:
    """Base-tier USD-per-million-token prices of ``model``, or ``None`` when genai-prices does not
    know it. ``provider_id`` (``"openai"``, ``"anthropic"``, …) or ``api_url`` (a base URL such
    as ``https://openrouter.ai/api/v1``) narrows the provider; without them any provider listing
    the model matches."""
    mp = _lookup(model, provider_id, api_url)
    if mp is None:
        return None
    return ModelPrices(
        _per_mtok(getattr(mp, "input_mtok", None)),
        _per_mtok(getattr(mp, "output_mtok", None)),
        _per_mtok(getattr(mp, "cache_read_mtok", None)),
        _per_mtok(getattr(mp, "cache_write_mtok", None)),
    )


@functools.lru_cache(maxsize=1024)
def _cost(
    model: str, provider_id: str | None, api_url: str | None, inp: float, out: float, cr: float, cw: float
) -> UsageCosting:
    mp = _lookup(model, provider_id, api_url)
    if mp is None:
        return _UNKNOWN
    gp = _genai()
    i, o, r, w = int(inp), int(out), int(cr), int(cw)
    full = mp.calc_price(
        gp.Usage(input_tokens=i + r + w, output_tokens=o, cache_read_tokens=r, cache_write_tokens=w)
    )
    read = float(mp.calc_price(gp.Usage(input_tokens=r, cache_read_tokens=r))["input_price"]) if r else 0.0
    write = float(mp.calc_price(gp.Usage(input_tokens=w, cache_write_tokens=w))["input_price"]) if w else 0.0
    input_total = float(full["input_price"])
    output = float(full["output_price"])
    return UsageCosting(
        input=max(input_total - read - write, 0.0),
        output=output,
        cache_read=read,
        cache_write=write,
        total=float(full["total_price"]),
        status=CostStatus.Estimated,
    )


def cost_of(
    model: str, usage: UsageReport, *, provider_id: str | None = None, api_url: str | None = None
) -> UsageCosting:
    """The USD cost of ``usage`` (our counts: ``input`` excludes cache reads and writes) for
    ``model``; ``Unknown`` with zero amounts when the model is not in the table. Never raises
    for an unknown model. Results are cached per distinct usage."""
    try:
        return _cost(
            model, provider_id, api_url, usage.input, usage.output, usage.cache_read, usage.cache_write
        )
    except Exception:  # a price-table quirk must never break a generation
        return _UNKNOWN


def priced(model: str, usage: UsageReport, price_key: tuple[str | None, str | None] | None) -> UsageReport:
    """``usage`` with its ``cost`` set by :func:`cost_of`, looked up by ``price_key``
    (genai-prices provider id, API URL); ``usage`` unchanged when ``price_key`` is None (a
    local server, nothing we can price)."""
    if price_key is None:
        return usage
    cost = cost_of(model, usage, provider_id=price_key[0], api_url=price_key[1])
    return msgspec.structs.replace(usage, cost=cost)
