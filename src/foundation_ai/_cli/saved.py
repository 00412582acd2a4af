"""Saved model aliases and system-prompt templates, as ``llm`` keeps them
(https://llm.datasette.io/en/stable/aliases.html, https://llm.datasette.io/en/stable/templates.html).

- ``foundation-ai aliases set NAME MODEL [--base-url URL]`` / ``list`` / ``remove NAME``: ``-m NAME``
  then means ``-m MODEL`` (with that base URL unless ``--base-url`` is given);
- ``foundation-ai templates set NAME TEXT`` / ``list`` / ``show NAME`` / ``remove NAME``:
  ``-t NAME`` on ``run`` and ``chat`` uses TEXT as the system prompt (``-s`` wins over it).

Both are JSON objects beside ``config.toml`` (``aliases.json``, ``templates.json`` in the user
config directory, :func:`foundation_ai._cli.config.config_dir`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from .config import config_dir
from .safe_text import visible_line
from .status import EXIT_OK

__all__ = ["add_saved_commands", "apply_saved", "cmd_aliases", "cmd_templates", "read_saved"]


def _path(kind: str) -> Path:
    return config_dir() / f"{kind}.json"


def read_saved(kind: str) -> dict[str, Any]:
    """The saved ``aliases`` or ``templates`` (``{}`` when the file does not exist).

    Raises:
        ConfigurationError: the file is not a JSON object.
    """
    path = _path(kind)
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path}: expected a JSON object")
    return data


def _write(kind: str, data: dict[str, Any]) -> Path:
    path = _path(kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
    os.replace(tmp, path)
    return path


def _check_name(name: str) -> str:
    name = name.strip()
    if not name or any(c.isspace() for c in name) or ":" in name:
        raise ConfigurationError(f"invalid name {name!r}: one word, no ':' (model strings use it)")
    return name


def apply_saved(args: argparse.Namespace) -> None:
    """Resolve ``-m ALIAS`` and ``-t TEMPLATE`` in ``args`` (in place).

    Raises:
        ConfigurationError: an unknown template name.
    """
    if args.model is not None:
        alias = read_saved("aliases").get(args.model)
        if isinstance(alias, dict):
            args.model = alias["model"]
            if args.base_url is None and alias.get("base_url"):
                from .model_choice import check_base_url

                args.base_url = check_base_url(alias["base_url"])
    name = getattr(args, "template", None)
    if name is not None:
        templates = read_saved("templates")
        if name not in templates:
            known = ", ".join(sorted(templates)) or "none saved"
            raise ConfigurationError(f"no template {name!r} ({known}; save one with: templates set)")
        if args.system is None:
            args.system = templates[name]


def cmd_aliases(args: argparse.Namespace) -> int:
    """``foundation-ai aliases set NAME MODEL [--base-url URL] | list | remove NAME | path``.

    Raises:
        ConfigurationError: an invalid name or model string, an unknown name to remove.
    """
    aliases = read_saved("aliases")
    if args.action == "path":
        print(_path("aliases"))
    elif args.action == "set":
        from .model_choice import check_base_url, parse_model_spec

        parse_model_spec(args.model, args.base_url)  # a bad model string is refused now
        entry = {"model": args.model}
        if args.base_url:
            entry["base_url"] = check_base_url(args.base_url)
        aliases[_check_name(args.name)] = entry
        print(f"saved alias {args.name} -> {args.model} in {_write('aliases', aliases)}", file=sys.stderr)
    elif args.action == "remove":
        if aliases.pop(args.name, None) is None:
            raise ConfigurationError(f"no alias {args.name!r}")
        _write("aliases", aliases)
    else:
        for name, entry in sorted(aliases.items()):
            at = f" at {entry['base_url']}" if entry.get("base_url") else ""
            print(visible_line(f"{name}: {entry.get('model')}{at}"))
    return EXIT_OK


def cmd_templates(args: argparse.Namespace) -> int:
    """``foundation-ai templates set NAME TEXT | list | show NAME | remove NAME | path``.

    Raises:
        ConfigurationError: an invalid name, an empty text, an unknown name.
    """
    templates = read_saved("templates")
    if args.action == "path":
        print(_path("templates"))
    elif args.action == "set":
        if not args.text.strip():
            raise ConfigurationError("the template text is empty")
        templates[_check_name(args.name)] = args.text
        print(f"saved template {args.name} in {_write('templates', templates)}", file=sys.stderr)
    elif args.action in ("show", "remove"):
        if args.name not in templates:
            raise ConfigurationError(f"no template {args.name!r}")
        if args.action == "show":
            print(templates[args.name])
        else:
            del templates[args.name]
            _write("templates", templates)
    else:
        for name, text in sorted(templates.items()):
            print(visible_line(f"{name}: {' '.join(str(text).split())}"))
    return EXIT_OK


def add_saved_commands(sub: Any) -> None:
    """Add ``aliases`` and ``templates`` to ``sub`` (an argparse subparsers action)."""
    a = sub.add_parser("aliases", help="short names for model strings (-m NAME)", description=__doc__)
    asub = a.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = asub.add_parser("set", help="save NAME for MODEL")
    s.add_argument("name", metavar="NAME")
    s.add_argument("model", metavar="MODEL", help="a --model string (openai:NAME, gguf:PATH, ...)")
    s.add_argument("--base-url", metavar="URL", help="the server of MODEL")
    asub.add_parser("list", help="the saved aliases")
    asub.add_parser("remove", help="forget an alias").add_argument("name", metavar="NAME")
    asub.add_parser("path", help="the aliases file")
    t = sub.add_parser("templates", help="saved system prompts (-t NAME)", description=__doc__)
    tsub = t.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = tsub.add_parser("set", help="save TEXT as NAME")
    s.add_argument("name", metavar="NAME")
    s.add_argument("text", metavar="TEXT", help="the system prompt")
    tsub.add_parser("list", help="the saved templates")
    tsub.add_parser("show", help="print a template").add_argument("name", metavar="NAME")
    tsub.add_parser("remove", help="forget a template").add_argument("name", metavar="NAME")
    tsub.add_parser("path", help="the templates file")
