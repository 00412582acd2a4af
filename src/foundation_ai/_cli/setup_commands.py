"""``foundation-ai models`` and ``foundation-ai keys``: what can be used, and storing API keys.

``models`` lists the bundled model, the config file's default model (with its ``base_url``),
the saved aliases (``aliases set``, with their servers), and the models of every
provider whose key is available (environment or ``keys.json``; ``--all``: every provider), with
the provider, the context window (tokens) and prices in USD per million tokens from the
``genai-prices`` table (https://github.com/pydantic/genai-prices).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..errors import ConfigurationError
from .config import KEY_ENV, key_for, keys_path, load_config, read_keys, write_key
from .model_choice import parse_model_spec
from .safe_text import visible_line
from .status import EXIT_OK

__all__ = ["ModelRow", "cmd_keys", "cmd_models", "model_rows"]

_PRICE_PROVIDERS = {"openai": "openai", "anthropic": "anthropic"}
"""Key name -> genai-prices provider id."""


@dataclass(frozen=True)
class ModelRow:
    """One line of ``foundation-ai models``."""

    model: str
    """What to pass to ``--model``."""
    provider: str
    context_window: int | None
    """Tokens (prompt + output), when known."""
    input_price: float | None
    """USD per million input tokens (``0.0`` for in-process models, ``None`` when unknown)."""
    output_price: float | None
    """USD per million output tokens."""
    source: str
    """Why it is listed: ``bundled``, ``config``, ``key: env OPENAI_API_KEY``, ``all``."""


def _price(value: Any) -> float | None:
    if value is None:
        return None
    base = getattr(value, "base", value)  # tiered prices -> the base tier
    try:
        return float(base)
    except (TypeError, ValueError):
        return None


def _prices(info: Any) -> tuple[float | None, float | None]:
    prices = info.prices
    if isinstance(prices, list):  # conditional prices: the first (current) one
        prices = prices[0].prices if prices else None
    if prices is None:
        return None, None
    return _price(getattr(prices, "input_mtok", None)), _price(getattr(prices, "output_mtok", None))


def _provider_models(provider_id: str) -> list[Any]:
    from genai_prices import data

    for p in data.providers:
        if p.id == provider_id:
            return [m for m in p.models if not getattr(m, "deprecated", False)]
    return []


def _lookup(provider_id: str, name: str) -> Any:
    for m in _provider_models(provider_id):
        if m.id == name:
            return m
    return None


def _bundled() -> ModelRow:
    try:
        from ..backends._llamacpp import DEFAULT_N_CTX

        n_ctx: int | None = DEFAULT_N_CTX
    except ImportError:
        n_ctx = None
    return ModelRow("local", "llama.cpp in-process (SmolLM2-135M-Instruct)", n_ctx, 0.0, 0.0, "bundled")


def _row(spec: str, source: str) -> ModelRow:
    choice = parse_model_spec(spec)
    if choice.kind == "local":
        return _bundled()
    if choice.kind == "gguf":
        return ModelRow(spec, "llama.cpp in-process", None, 0.0, 0.0, source)
    if choice.kind == "hf":
        return ModelRow(spec, "transformers in-process", None, 0.0, 0.0, source)
    provider = "anthropic" if choice.kind == "anthropic" else "openai"
    info = _lookup(provider, choice.name)
    inp, out = _prices(info) if info is not None else (None, None)
    window = getattr(info, "context_window", None) if info is not None else None
    return ModelRow(spec, provider, window, inp, out, source)


def model_rows(*, everything: bool = False, config_path: str | None = None) -> list[ModelRow]:
    """The rows of ``foundation-ai models`` (see the module docstring).

    Raises:
        ConfigurationError: an invalid config file or config model.
    """
    rows = [_bundled()]
    config = load_config(config_path)
    if config.model and parse_model_spec(config.model).kind != "local":
        at = f" at {config.base_url}" if config.base_url else ""
        rows.append(_row(config.model, f"config{at}"))
    from .saved import read_saved

    for name, entry in sorted(read_saved("aliases").items()):  # `aliases set NAME MODEL`
        target = _row(str(entry.get("model")), "alias")
        at = f" at {entry['base_url']}" if entry.get("base_url") else ""
        rows.append(replace(target, model=name, source=f"alias of {entry.get('model')}{at}"))
    for name, provider_id in _PRICE_PROVIDERS.items():
        key, where = key_for(name)
        if key is None and not everything:
            continue
        source = f"key: {where}" if key is not None else "all"
        for m in _provider_models(provider_id):
            inp, out = _prices(m)
            rows.append(ModelRow(f"{name}:{m.id}", provider_id, m.context_window, inp, out, source))
    return rows


def _money(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}"


def cmd_models(args: argparse.Namespace) -> int:
    """``foundation-ai models [--all] [--json]``."""
    rows = model_rows(everything=args.all, config_path=args.config)
    if args.json:
        for r in rows:
            sys.stdout.write(json.dumps(asdict(r)) + "\n")
        return EXIT_OK
    width = max(len(r.model) for r in rows)
    print(
        f"{'MODEL':<{width}}  {'CONTEXT':>9}  {'IN $/MTOK':>9}  {'OUT $/MTOK':>10}  PROVIDER · LISTED BECAUSE"
    )
    for r in rows:
        ctx = f"{r.context_window:,}" if r.context_window else "-"
        print(
            f"{visible_line(r.model):<{width}}  {ctx:>9}  {_money(r.input_price):>9}  "
            f"{_money(r.output_price):>10}  {r.provider} · {r.source}"
        )
    if not args.all and not any(r.source.startswith("key:") for r in rows):
        print(
            "(no API key found: `foundation-ai keys set openai` or export OPENAI_API_KEY; --all lists every model)"
        )
    return EXIT_OK


def _read_secret(stdin: Any) -> str:
    if stdin.isatty():
        import getpass

        return getpass.getpass("Enter key: ")
    return str(stdin.readline())


def cmd_keys(args: argparse.Namespace) -> int:
    """``foundation-ai keys set PROVIDER`` / ``keys list`` / ``keys path`` (see
    :mod:`foundation_ai._cli.config`). Key values are never printed.

    Raises:
        ConfigurationError: a name that is not a known provider (``openai``, ``anthropic``: the
            keys the ``--model`` providers use), an empty key, an unreadable or unwritable keys
            file.
    """
    if args.keys_command == "path":
        print(keys_path())
        return EXIT_OK
    if args.keys_command == "set":
        if args.name not in KEY_ENV:  # a key under another name would never be used
            raise ConfigurationError(
                f"unknown provider {visible_line(args.name)!r} for `keys set` "
                f"(known: {', '.join(sorted(KEY_ENV))})"
            )
        value = args.value if args.value is not None else _read_secret(sys.stdin)
        path = write_key(args.name, value)
        print(f"stored the {args.name} key in {path} (readable only by you)", file=sys.stderr)
        if args.name in KEY_ENV:
            print(f"(the environment variable {KEY_ENV[args.name]}, when set, wins over it)", file=sys.stderr)
        return EXIT_OK
    stored = read_keys()
    names = sorted(set(stored) | set(KEY_ENV))
    for name in names:
        _, where = key_for(name)
        note = " (also in keys.json)" if name in stored and where.startswith("env") else ""
        if name not in KEY_ENV:
            where = "keys.json"
        print(f"{visible_line(name):<12}  {where}{note}")
    return EXIT_OK
