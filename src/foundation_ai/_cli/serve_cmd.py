"""``foundation-ai serve``: run agents behind an OpenAI-compatible HTTP API with a web chat, and
``foundation-ai serve keys create|list|revoke`` to manage its API keys (``docs/serve.md``).

    foundation-ai serve keys create --label ci        prints the key once (stored hashed)
    foundation-ai serve                               127.0.0.1:8000, keys required
    foundation-ai serve --no-auth                     loopback only: no keys
    foundation-ai serve --agents agents.toml --host 0.0.0.0 --port 8080
    foundation-ai serve --db postgresql://...       one of several processes sharing sessions
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from .safe_text import visible_line

__all__ = ["add_serve_parser", "cmd_serve"]


def _port(text: str) -> int:
    """argparse type for ``--port``: a whole number in 0..65535 (0: any free port)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0..65535, got {v}")
    return v


# Bidirectional formatting characters (Unicode UAX #9) that reorder what a terminal shows.
def add_serve_parser(sub: Any) -> None:
    """Register ``serve`` (and ``serve keys ...``) on the CLI's subparsers."""
    p = sub.add_parser(
        "serve",
        help="serve agents over an OpenAI-compatible HTTP API and a web chat",
        description="Serve agents over HTTP: POST /v1/chat/completions, /v1/responses, the sessions "
        "API and a web chat at /. Requests need an API key (serve keys create) unless --no-auth "
        "(loopback binds only).",
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port (default 8000; 0: any free port)")
    p.add_argument("--agents", metavar="FILE", help="a TOML file of [agents.NAME] tables (docs/serve.md)")
    p.add_argument(
        "--model", "-m", default="local", help="without --agents: the agent's model string (default: local)"
    )
    p.add_argument(
        "--name", default="assistant", help="without --agents: the agent's name (default: assistant)"
    )
    p.add_argument("--system", help="without --agents: the agent's system prompt")
    p.add_argument(
        "--keys", metavar="FILE", help="the API key file (default: serve-keys.json in the user data dir)"
    )
    p.add_argument("--data-dir", metavar="DIR", help="where sessions are stored (default: the user data dir)")
    p.add_argument(
        "--no-auth", action="store_true", help="accept requests without a key (loopback binds only)"
    )
    p.add_argument(
        "--max-body-bytes", type=int, default=1_000_000, help="request body limit (default 1000000)"
    )
    p.add_argument("--max-messages", type=int, default=500, help="messages per request (default 500)")
    p.add_argument(
        "--max-turns-per-key", type=int, default=4, help="turns running at once per key (default 4)"
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a Host name this server answers (repeatable; '*': any; '.example.com': a domain and "
        "its subdomains); others get 421. Default: loopback names with --no-auth, else any",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin (http://host:port) allowed to send requests, with CORS headers "
        "(repeatable; default: only the server's own pages)",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds a connection gets to send complete request headers (default 10)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="open connections; more are refused with 503 (default: 2048 or 3/4 of the file limit)",
    )
    p.add_argument(
        "--db",
        metavar="URL",
        help="postgresql://...: share sessions, keys and running turns with every serve process "
        "using this database (turns run as durable turns; docs/serve.md)",
    )
    p.add_argument("--queue", metavar="NAME", help="with --db: the DBOS queue (default foundation_ai_serve)")
    p.add_argument(
        "--executor-id", metavar="ID", help="with --db: this process's unique worker id (default HOST-PID)"
    )
    p.add_argument(
        "--concurrency", type=int, default=8, metavar="N", help="with --db: turns this process runs at once"
    )
    p.add_argument(
        "--grace",
        type=float,
        default=10.0,
        metavar="S",
        help="with --db: seconds running turns get to finish on shutdown before being handed back",
    )
    ks = p.add_subparsers(dest="serve_command", metavar="keys")
    keys = ks.add_parser("keys", help="manage API keys", description="Manage API keys.")
    kact = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    create = kact.add_parser("create", help="create a key and print it once")
    create.add_argument("--label", default="", help="a label to recognise the key by")
    kact.add_parser("list", help="list keys (ids and labels; never the keys)")
    revoke = kact.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("key_id", metavar="ID")
    for q in (create, kact.choices["list"], revoke):
        q.add_argument("--keys", metavar="FILE", default=argparse.SUPPRESS, help="the API key file")
        q.add_argument(
            "--db",
            metavar="URL",
            default=argparse.SUPPRESS,
            help="postgresql://...: the shared keys of serve --db",
        )


def _keys(args: argparse.Namespace) -> Any:
    if getattr(args, "db", None):
        if args.keys:
            raise ConfigurationError(
                "--keys and --db exclude each other: with --db the keys are in the database"
            )
        from ..serve.shared_db import SharedDatabase, SharedKeyStore

        if not args.db.startswith(("postgresql://", "postgres://")):
            raise ConfigurationError(f"--db needs a postgresql:// URL, not {args.db!r}")
        return SharedKeyStore(SharedDatabase(args.db, max_size=2))
    from ..serve.keys import KeyStore, default_keys_path

    return KeyStore(args.keys or default_keys_path())


def _cmd_keys(args: argparse.Namespace) -> int:
    store = _keys(args)
    if args.keys_command == "create":
        key_id, key = store.create(args.label)
        print(key)
        print(f"created {key_id} in {store.path}: the key is shown only now", file=sys.stderr)
    elif args.keys_command == "list":
        for k in store.list():
            print(f"{visible_line(str(k['id']))}\t{visible_line(str(k['label']))}")
    elif not store.revoke(args.key_id):
        raise ConfigurationError(f"no key {args.key_id!r}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Run ``serve`` (until SIGINT/SIGTERM) or ``serve keys ...``.

    Raises:
        ConfigurationError: ``--no-auth`` on a non-loopback bind, no keys without
            ``--no-auth``, an invalid agents file, an agent's model that cannot be built
            (unknown provider, missing API key), the ``serve`` extra not installed.
    """
    if getattr(args, "serve_command", None) == "keys":
        return _cmd_keys(args)
    try:
        from ..serve import Agent, Limits, ServeConfig, ServerThread, create_app, is_loopback, load_agents
    except ImportError as exc:
        raise ConfigurationError(
            f"serve needs the 'serve' extra (pip install 'foundation-ai[serve]'): {exc}"
        ) from None

    if args.no_auth and not is_loopback(args.host):
        raise ConfigurationError(f"--no-auth is allowed only on a loopback address, not {args.host!r}")
    keys = None
    if not args.no_auth:
        keys = _keys(args)
        if not len(keys):
            raise ConfigurationError(
                f"no API keys in {keys.path}: run `foundation-ai serve keys create` (or --no-auth on loopback)"
            )
    agents = (
        load_agents(args.agents)
        if args.agents
        else [Agent(args.name, model=args.model, system_prompt=args.system)]
    )
    for a in agents:  # a bad model string or a missing API key: say so now, not on every request
        a.resolved_model()
    shared = None
    if args.db:
        from ..serve.shared import SERVE_QUEUE, SharedServe

        shared = SharedServe(
            args.db,
            queue=args.queue or SERVE_QUEUE,
            executor_id=args.executor_id,
            concurrency=args.concurrency,
            grace=args.grace,
        )
    config = ServeConfig(
        shared=shared,
        agents=agents,
        keys=keys,
        no_auth=args.no_auth,
        allowed_hosts=args.allowed_host,
        allow_origins=args.allow_origin,
        data_dir=Path(args.data_dir) if args.data_dir else None,
        limits=Limits(
            max_body_bytes=args.max_body_bytes,
            max_messages=args.max_messages,
            max_turns_per_key=args.max_turns_per_key,
            header_timeout=args.header_timeout,
            max_connections=args.max_connections,
        ),
    )
    try:
        # on SIGTERM, streams still open after a few seconds are closed, so that the shutdown
        # (aborting or handing back running turns) always runs
        graceful = max(1, min(5, round(args.grace)))
        app = create_app(config)
        srv = ServerThread(app, args.host, args.port, timeout_graceful_shutdown=graceful)
    except OSError as exc:
        raise ConfigurationError(f"cannot bind {args.host}:{args.port}: {exc.strerror or exc}") from None
    srv.start()
    print(f"serving {', '.join(a.name for a in agents)} on {srv.url} (web chat: {srv.url}/)", flush=True)
    stop = {"now": False}

    def on_signal(signum: int, frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    try:
        while not stop["now"] and srv.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    srv.stop()
    return 0
