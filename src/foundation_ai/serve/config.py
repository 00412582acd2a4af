"""What a server serves: agents (model, system prompt, tools) and request limits.

    from foundation_ai.serve import Agent, Limits, ServeConfig, create_app
    app = create_app(ServeConfig(agents=[Agent("helper", model="local", system_prompt="Be brief.")]))

See ``docs/serve.md``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ..types import ModelParams

__all__ = ["Agent", "Limits", "ServeConfig", "load_agents"]


@dataclass
class Agent:
    """One configured agent: the ``model`` field of a request names it.

    Args:
        name: the name clients send as ``model`` (``GET /v1/models`` lists it).
        model: a ``Model``, or a model string (``"local"``, ``"openai:gpt-4o-mini"``, ...; see
            ``docs/models.md``), resolved once on first use and shared by its sessions.
        system_prompt: the agent's instructions.
        tools: tools for ``AgentSession.with_tools`` (they run in the server process).
        params: sampling parameters for every generation.
        description: shown by ``GET /v1/models``.
        requires_approval: which tool calls wait for a person's approval: ``None`` (default)
            the tools marked ``requires_approval`` (``docs/tools.md``; the ``"shell"`` tool set
            of an agents file is marked); a list of tool names: those and the marked ones;
            ``True``: every tool; ``False``: none (marked tools run without asking). A call
            that asks pauses the turn until a client approves or denies it through
            ``/v1/sessions/{id}/approvals`` (``docs/serve.md``).

    Raises:
        ConfigurationError: ``requires_approval`` names a tool the agent does not have.
    """

    name: str
    model: Any = "local"
    system_prompt: str | None = None
    tools: list[Any] = field(default_factory=list)
    params: ModelParams | None = None
    description: str = ""
    requires_approval: bool | list[str] | None = None
    _resolved: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        names = self.requires_approval
        if names is None or isinstance(names, bool):
            return
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigurationError(
                f"agent {self.name!r}: requires_approval must be true, false or a list of tool names"
            )
        from ..agentic.tools import ToolRegistry

        known = set(ToolRegistry(self.tools).names())
        unknown = sorted(set(names) - known)
        if unknown:
            raise ConfigurationError(
                f"agent {self.name!r}: requires_approval names unknown tools {unknown} "
                f"(its tools: {sorted(known)})"
            )

    def can_use_tool(self) -> Any:
        """The ``can_use_tool`` hook (``AgentSessionBuilder.with_can_use_tool``) answering
        ``Ask`` for the calls ``requires_approval`` selects and ``Allow`` for the rest; ``None``
        for ``requires_approval=None`` (no hook: marked tools ask, the library default)."""
        rule = self.requires_approval
        if rule is None:
            return None
        from ..agentic.toolsets.approval import Allow, Ask

        names = set(rule) if isinstance(rule, list) else set()

        def can_use_tool(call: Any, context: Any) -> Any:
            if rule is True or call.name in names or (rule is not False and context.requires_approval):
                return Ask(f"run {call.name}?")
            return Allow()

        return can_use_tool

    def resolved_model(self) -> Any:
        """The ``Model`` (a model string is resolved once).

        Raises:
            ConfigurationError: the model string is invalid.
        """
        if self._resolved is None:
            if isinstance(self.model, str):
                from .._model_string import model as make

                self._resolved = make(self.model)
            else:
                self._resolved = self.model
        return self._resolved


@dataclass
class Limits:
    """Per-request and per-key limits (a request over a limit gets a JSON error, nothing runs).

    Attributes:
        max_body_bytes: request body size (413 above it).
        max_messages: messages (Chat) or input items (Responses) per request (400 above it).
        max_turns_per_key: turns running at once per API key (429 above it).
        max_text_chars: characters of one steering or prompt text (400 above it).
        header_timeout: seconds a connection gets to send a request's complete headers (its
            first byte on); then it is closed (``408``). nginx's ``client_header_timeout`` is 60.
        max_connections: open connections; the next one is answered ``503`` (code
            ``too_many_connections``) and closed. ``None``: 2048, or three quarters of the
            process's file limit when that is lower.
        max_header_bytes: bytes of a request's line and headers (``431`` above it; nginx's
            ``large_client_header_buffers`` default is 4 x 8 KiB).
        max_headers: header lines of a request (``431`` above it; Apache's
            ``LimitRequestFields`` is 100).
        idle_sessions_per_key: finished sessions and turns a key keeps in process memory (the
            least recently used beyond it leave memory; they stay in the store and are resumed
            from it when used again).
    """

    max_body_bytes: int = 1_000_000
    max_messages: int = 500
    max_turns_per_key: int = 4
    max_text_chars: int = 200_000
    header_timeout: float = 10.0
    max_connections: int | None = None
    max_header_bytes: int = 32_768
    max_headers: int = 100
    idle_sessions_per_key: int = 8


@dataclass
class ServeConfig:
    """A server: its agents, where sessions live, limits and authentication.

    Args:
        agents: at least one :class:`Agent` (names unique).
        store: a ``SessionStore`` (default: ``SqliteSessionStore(data_dir/"serve-sessions.sqlite3")``).
        data_dir: where the default store and the session index live (default: the user data
            directory, ``platformdirs``).
        keys: a :class:`~foundation_ai.serve.keys.KeyStore`; ``None`` with ``no_auth=True`` only.
        no_auth: accept requests without a key (every request acts as key ``"local"``); the CLI
            allows it on loopback binds only.
        limits: :class:`Limits`.
        shared: a :class:`~foundation_ai.serve.shared.SharedServe`: serve from several
            processes sharing one PostgreSQL (sessions, keys, running turns; turns run as
            durable turns). ``store`` and ``data_dir`` are then unused. See ``docs/serve.md``.
        allowed_hosts: the ``Host`` names answered (others get ``421``; ``serve/guard.py``).
            ``None`` (default): with ``no_auth`` the loopback names only, else every host.
        allow_origins: browser origins (``scheme://host[:port]``) allowed to send
            state-changing requests and get CORS headers, besides the server's own origin.
        secrets: texts masked as ``[REDACTED]`` in everything the server serves and stores
            (answers, tool results, events, session records). ``None`` (default): the values
            of the environment variables named ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET`` and
            ``*_PASSWORD`` of 8 characters or more (provider keys) and the agents' models'
            ``api_key``.

    Raises:
        ConfigurationError: no agents, duplicate names, neither keys nor ``no_auth``, or an
            ``allow_origins`` entry that is not an ``http(s)://host[:port]`` origin.
    """

    agents: list[Agent]
    store: Any = None
    data_dir: str | os.PathLike[str] | None = None
    keys: Any = None
    no_auth: bool = False
    limits: Limits = field(default_factory=Limits)
    shared: Any = None
    allowed_hosts: list[str] | None = None
    allow_origins: list[str] = field(default_factory=list)
    secrets: list[str] | None = None

    def __post_init__(self) -> None:
        if not self.agents:
            raise ConfigurationError("serve needs at least one agent")
        names = [a.name for a in self.agents]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"agent names must be unique: {names}")
        if self.keys is None and not self.no_auth:
            raise ConfigurationError("serve needs API keys (a KeyStore) or no_auth=True")
        from .guard import normalize_origin

        for o in self.allow_origins:
            try:
                normalize_origin(o)
            except ValueError as exc:
                raise ConfigurationError(f"allow_origins: {exc}") from None

    def hosts(self) -> list[str] | None:
        """The effective ``Host`` allow-list (see ``allowed_hosts``)."""
        if self.allowed_hosts is not None:
            return list(self.allowed_hosts)
        return ["loopback"] if self.no_auth else None

    def secret_texts(self) -> list[str]:
        """The effective :attr:`secrets`, longest first (a secret containing another is
        masked whole)."""
        if self.secrets is not None:
            found = {s for s in self.secrets if s}
        else:
            ends = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
            found = {v for k, v in os.environ.items() if k.upper().endswith(ends) and len(v) >= 8}
            for a in self.agents:
                model = a._resolved if a._resolved is not None else a.model
                for holder in (model, getattr(model, "options", None)):
                    key = getattr(holder, "api_key", None)
                    if isinstance(key, str) and len(key) >= 8:
                        found.add(key)
        return sorted(found, key=len, reverse=True)

    def data_path(self) -> Path:
        """The data directory (created)."""
        if self.data_dir is not None:
            p = Path(self.data_dir)
        else:
            import platformdirs

            p = Path(platformdirs.user_data_dir("foundation-ai", appauthor=False))
        from .._private import private_dir

        return private_dir(p)  # 0700 when made here: it holds the session databases


def load_agents(path: str | os.PathLike[str]) -> list[Agent]:
    """Agents from a TOML file::

        [agents.helper]
        model = "local"               # a model string (docs/models.md)
        system_prompt = "Be brief."
        description = "a small helper"
        tools = ["files"]             # built-in tool sets: "files", "shell", or "module:name"
        root = "./workspace"          # where the files/shell tools work
        requires_approval = ["write_file"]  # calls waiting for approval: these tools and "shell"
                                            # (true: every tool; false: none, not even "shell")

    Raises:
        ConfigurationError: the file is unreadable, not TOML, or an agent entry is invalid.
    """
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"cannot read agents file {path}: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise ConfigurationError(f"cannot read agents file {path}: nested too deeply to parse") from None
    table = data.get("agents")
    if not isinstance(table, dict) or not table:
        raise ConfigurationError(f"{path}: no [agents.NAME] tables")
    out = []
    for name, spec in table.items():
        if not isinstance(spec, dict):
            raise ConfigurationError(f"{path}: agents.{name} must be a table")
        unknown = set(spec) - {"model", "system_prompt", "description", "tools", "root", "requires_approval"}
        if unknown:
            raise ConfigurationError(f"{path}: agents.{name}: unknown keys {sorted(unknown)}")
        out.append(
            Agent(
                name=name,
                model=str(spec.get("model", "local")),
                system_prompt=spec.get("system_prompt"),
                description=str(spec.get("description", "")),
                tools=_builtin_tools(spec.get("tools", []), spec.get("root"), f"{path}: agents.{name}"),
                requires_approval=spec.get("requires_approval"),
            )
        )
    return out


def _builtin_tools(names: Any, root: Any, where: str) -> list[Any]:
    if not isinstance(names, list):
        raise ConfigurationError(f"{where}: tools must be a list of names")
    from ..agentic.toolsets.builtin import files_tools, shell_tools

    if root is not None:
        if not isinstance(root, str):
            raise ConfigurationError(f"{where}: root must be a path (a string)")
        if not os.path.isdir(root):
            raise ConfigurationError(f"{where}: root {root!r} is not a directory")
    tools: list[Any] = []
    for n in names:
        if n == "files":
            tools.extend(files_tools(root))
        elif n == "shell":  # commands run on the server: they wait for approval by default
            from ..agentic.toolsets.approval import mark_requires_approval

            tools.extend(mark_requires_approval(t) for t in shell_tools(root))
        elif isinstance(n, str) and ":" in n:
            tools.extend(_imported_tools(n, where))
        else:
            raise ConfigurationError(f"{where}: unknown tool set {n!r} (known: files, shell, module:name)")
    return tools


def _imported_tools(spec: str, where: str) -> list[Any]:
    """``"package.module:name"``: a tool (``@tool``) or a list of tools of an importable module."""
    import importlib

    mod_name, _, attr = spec.partition(":")
    try:
        value = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(f"{where}: cannot import the tools {spec!r}: {exc}") from None
    return list(value) if isinstance(value, list | tuple) else [value]
