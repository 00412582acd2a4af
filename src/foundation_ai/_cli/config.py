"""The user's CLI configuration: ``config.toml`` (defaults) and ``keys.json`` (API keys).

Both live in the user config directory, ``platformdirs.user_config_dir("foundation-ai")``
(on Linux ``$XDG_CONFIG_HOME/foundation-ai``, by default ``~/.config/foundation-ai``).

``config.toml`` sets defaults for options not given on the command line::

    model = "openai:gpt-4o-mini"     # --model
    system = "Answer briefly."       # --system
    tools = ["files"]                # --tools (a list, or "files,shell")
    mcp = ["python my_server.py"]    # --mcp (commands over stdio, or http(s) URLs)
    base_url = "http://127.0.0.1:8080/v1"   # --base-url
    temperature = 0.2                # --temperature (a number >= 0)
    max_tokens = 512                 # --max-tokens (an integer > 0)

``keys.json`` maps a provider name (``openai``, ``anthropic``) to its key; it is created
readable and writable only by the user (mode 0600) and rewritten atomically. A key in the
environment (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``) wins over a stored one; ``--key`` wins
over both.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from . import option_values

__all__ = [
    "KEY_ENV",
    "Config",
    "config_dir",
    "key_for",
    "keys_path",
    "load_config",
    "read_keys",
    "write_key",
]

APP = "foundation-ai"

KEY_ENV: dict[str, str] = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
"""Key name -> the environment variable that wins over it."""

PROVIDER_KEY: dict[str, str] = {"openai": "openai", "responses": "openai", "anthropic": "anthropic"}
"""``--model`` prefix -> the key name it uses."""


def config_dir() -> Path:
    """The user config directory of the CLI (not created)."""
    import platformdirs

    return Path(platformdirs.user_config_dir(APP, appauthor=False))


@dataclass(frozen=True)
class Config:
    """Defaults read from ``config.toml`` (``None``: not set)."""

    model: str | None = None
    system: str | None = None
    tools: tuple[str, ...] = ()
    mcp: tuple[str, ...] = ()
    """MCP servers whose tools to offer (``--mcp``): commands or http(s) URLs."""
    base_url: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    path: Path | None = None
    """The file read (``None`` when there was none)."""


_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "system": (str,),
    "tools": (list, str),
    "mcp": (list, str),
    "base_url": (str,),
    "temperature": (int, float),
    "max_tokens": (int,),
}


_RANGES: dict[str, Callable[[object], Any]] = {
    "temperature": option_values.temperature,
    "max_tokens": option_values.max_tokens,
}
"""Settings whose values are range-checked, with the rule ``--temperature`` and
``--max-tokens`` use (:mod:`foundation_ai._cli.option_values`)."""


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Read ``config.toml`` (``path``, default: in :func:`config_dir`). A missing default file
    is an empty config.

    Raises:
        ConfigurationError: ``path`` given but missing, invalid TOML (or TOML nested too deeply
            for the parser, e.g. a 5,000-deep array), an unknown key, a value
            of the wrong type, or one out of range (``temperature`` < 0, ``max_tokens`` < 1: the
            rules of ``--temperature`` and ``--max-tokens``); the message names the file and the
            key.
    """
    file = Path(path) if path is not None else config_dir() / "config.toml"
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        if path is not None:
            raise ConfigurationError(f"no such config file: {file}") from None
        return Config()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read the config file {file}: {exc}") from None
    import tomllib  # only when there is a file to parse

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"cannot read the config file {file}: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise ConfigurationError(
            f"cannot read the config file {file}: arrays or tables nested too deeply to parse"
        ) from None
    values: dict[str, Any] = {}
    for key, value in data.items():
        kinds = _TYPES.get(key)
        if kinds is None:
            raise ConfigurationError(f"{file}: unknown setting {key!r} (known: {', '.join(_TYPES)})")
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise ConfigurationError(f"{file}: {key} has the wrong type ({type(value).__name__})")
        values[key] = value
    tools = values.pop("tools", ())
    if isinstance(tools, str):
        tools = [t.strip() for t in tools.split(",") if t.strip()]
    if not all(isinstance(t, str) and t in ("files", "shell") for t in tools):
        raise ConfigurationError(f"{file}: tools must name files and/or shell, got {tools!r}")
    mcp = values.pop("mcp", ())
    if isinstance(mcp, str):
        mcp = [mcp]
    if not all(isinstance(m, str) and m.strip() for m in mcp):
        raise ConfigurationError(f"{file}: mcp must be a list of commands or URLs, got {mcp!r}")
    values["mcp"] = tuple(mcp)
    for key, rule in _RANGES.items():  # the same rules as the command-line options
        if key in values:
            try:
                values[key] = rule(values[key])
            except ValueError as exc:
                raise ConfigurationError(f"{file}: {key} {exc}") from None
    return Config(tools=tuple(tools), path=file, **values)


def keys_path() -> Path:
    """The keys file: ``keys.json`` in :func:`config_dir`."""
    return config_dir() / "keys.json"


def read_keys(path: Path | None = None) -> dict[str, str]:
    """The stored keys (name -> key); ``{}`` when there is no file.

    Raises:
        ConfigurationError: the file is not a JSON object of strings.
    """
    file = path or keys_path()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the keys file {file}: {exc}") from None
    except RecursionError:
        raise ConfigurationError(f"cannot read the keys file {file}: JSON nested too deeply") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ConfigurationError(f"the keys file {file} is not a JSON object of strings")
    return {str(k): v for k, v in data.items()}


def write_key(name: str, key: str, path: Path | None = None) -> Path:
    """Store ``key`` under ``name`` in the keys file, created with mode 0600 (its directory
    0700 when created) and replaced atomically; returns the file's path.

    Raises:
        ConfigurationError: an empty name or key, or the file cannot be written.
    """
    name, key = name.strip(), key.strip()
    if not name or not key:
        raise ConfigurationError("a key needs a name and a non-empty value")
    file = path or keys_path()
    keys = read_keys(file)
    keys[name] = key
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    try:
        file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o600)
            json.dump(keys, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, file)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigurationError(f"cannot write the keys file {file}: {exc}") from None
    return file


def key_for(
    name: str, env: Mapping[str, str] | None = None, path: Path | None = None
) -> tuple[str | None, str]:
    """The key for ``name`` (``openai``, ``anthropic``) and where it came from: the environment
    variable first (``"env OPENAI_API_KEY"``), then the keys file (``"keys.json"``); ``(None,
    "not set")`` when neither has one."""
    env = os.environ if env is None else env
    var = KEY_ENV.get(name)
    if var and env.get(var):
        return env[var], f"env {var}"
    stored = read_keys(path).get(name)
    if stored:
        return stored, "keys.json"
    return None, "not set"
