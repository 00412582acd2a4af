"""The durable-turn commands: ``worker``, ``submit``, ``status``, ``follow``, ``steer``,
``abort``, ``approvals``, ``approve``, ``deny``, ``recover`` (``docs/scaling.md``). Registered on the parser by
:func:`add_durable_commands`; each handler returns the exit status."""

from __future__ import annotations

import argparse
import functools
import logging
import re
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError, FoundationAIError

__all__ = ["DURABLE_COMMANDS", "add_durable_commands"]

_DB_HELP = (
    "a SQLite file: PATH or sqlite:///PATH (embedded, one machine; default: durable.sqlite3 in "
    "the user data directory), or postgresql://... (many machines); env FOUNDATION_AI_DB"
)

READ_ONLY = ("status", "follow", "approvals")
"""The commands for which a ``--db`` file that does not exist is an error (exit 2)."""

STATES = {
    "ENQUEUED": "queued (waiting for a worker)",
    "PENDING": "running",
    "SUCCESS": "finished",
    "ERROR": "failed",
    "CANCELLED": "cancelled",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed (recovered too many times)",
}
"""DBOS workflow status -> the words ``status`` prints (``--json`` keeps DBOS's value; the
statuses are those of https://docs.dbos.dev/python/reference/contexts#workflow-status)."""


def _add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="PATH|URL", help=_DB_HELP)
    p.add_argument("--session-db", metavar="URL", help="the session store's URL when it differs from --db")
    p.add_argument(
        "--queue", default=None, metavar="NAME", help="the DBOS queue (default foundation_ai_turns)"
    )


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def add_durable_commands(sub: Any) -> None:
    """Add the durable-turn subcommands to ``sub`` (an argparse subparsers action)."""
    w = sub.add_parser(
        "worker",
        help="run durable turns from the queue (SIGTERM: finish or hand back, then exit)",
        description="Consume the durable turn queue. On SIGTERM/SIGINT stop taking turns, let "
        "running ones finish for --grace seconds, hand back the rest and exit.",
    )
    _add_db(w)
    w.add_argument(
        "--agent", required=True, metavar="MODULE:FUNCTION", help="returns the AgentSessionBuilder"
    )
    w.add_argument(
        "--concurrency", type=_positive, default=4, metavar="N", help="turns at once in this worker"
    )
    w.add_argument("--global-concurrency", type=_positive, metavar="N", help="turns at once over all workers")
    w.add_argument(
        "--executor-id",
        metavar="ID",
        help="unique worker id (default HOST-PID); restart with it to resume its turns",
    )
    w.add_argument(
        "--grace", type=float, default=30.0, metavar="S", help="seconds to finish turns on shutdown"
    )
    w.add_argument("--poll", type=float, default=0.2, metavar="S", help="queue polling interval")
    w.add_argument(
        "--no-steering",
        action="store_true",
        help="never check for steer/abort (saves one database read per model call)",
    )

    s = sub.add_parser(
        "submit", help="enqueue a durable turn and print its id", description="Enqueue a turn."
    )
    s.add_argument("session_id", metavar="SESSION", help="the session (created by its first turn)")
    s.add_argument("prompt", metavar="PROMPT", help="the prompt ('-' reads stdin)")
    s.add_argument(
        "--turn-id",
        metavar="ID",
        help="an idempotency key: the same session, prompt and id are enqueued once; "
        "an id taken by another session or prompt is refused",
    )
    s.add_argument("--wait", action="store_true", help="wait for the turn and print its answer")
    _add_db(s)

    st = sub.add_parser("status", help="print a durable turn's status", description="Print a turn's status.")
    st.add_argument("turn_id", metavar="TURN")
    st.add_argument("--json", action="store_true", help="one JSON object")
    _add_db(st)

    f = sub.add_parser(
        "follow", help="print a durable turn's records as it runs", description="Follow a turn."
    )
    f.add_argument("turn_id", metavar="TURN")
    f.add_argument("--json", action="store_true", help="the stored records as JSON lines")
    _add_db(f)

    for name, what in (("steer", "redirect"), ("abort", "abort")):
        p = sub.add_parser(
            name, help=f"{what} a running durable turn", description=f"{what.capitalize()} a turn."
        )
        p.add_argument("turn_id", metavar="TURN")
        if name == "steer":
            p.add_argument("message", metavar="TEXT")
        _add_db(p)

    a = sub.add_parser(
        "approvals",
        help="list the tool calls a durable turn waits for a decision on",
        description="List the pending tool calls of a turn waiting for approval.",
    )
    a.add_argument("turn_id", metavar="TURN")
    a.add_argument("--json", action="store_true", help="one JSON object per call")
    _add_db(a)
    for name in ("approve", "deny"):
        d = sub.add_parser(
            name,
            help=f"{name} a tool call a durable turn waits for",
            description=f"{name.capitalize()} a pending tool call (from any machine): once every "
            "pending call is decided, the worker holding the turn continues it.",
        )
        d.add_argument("turn_id", metavar="TURN")
        d.add_argument("call_id", metavar="CALL")
        if name == "deny":
            d.add_argument("--reason", default="the user denied it", help="what the model is told")
        _add_db(d)

    r = sub.add_parser(
        "recover",
        help="hand back the turns of stopped workers",
        description="Re-enqueue the running turns of workers that stopped for good. A turn "
        "recovered while its worker still runs it is taken over: that worker stops storing "
        "anything for it.",
    )
    r.add_argument("executor_ids", nargs="+", metavar="EXECUTOR_ID")
    _add_db(r)


def _config(args: argparse.Namespace, **extra: Any) -> Any:
    import os

    from ..durable import DurableConfig
    from .locations import durable_url, require_existing, session_target

    db = args.db or os.environ.get("FOUNDATION_AI_DB")
    if db:
        if args.command in READ_ONLY:
            require_existing(session_target(db))
        db = durable_url(db)
    else:
        from ..agentic.stores.sqlite import default_store_path

        db = "sqlite:///" + str(default_store_path().with_name("durable.sqlite3"))
    if args.session_db:
        args.session_db = durable_url(args.session_db)
    kw: dict[str, Any] = dict(extra)
    if args.queue:
        kw["queue"] = args.queue
    return DurableConfig(db, session_db=args.session_db, **kw)


def cmd_worker(args: argparse.Namespace) -> int:
    from ..durable import load_agent_factory, run_worker

    cfg = _config(
        args,
        worker_concurrency=args.concurrency,
        global_concurrency=args.global_concurrency,
        polling_interval=args.poll,
        steering=not args.no_steering,
    )
    import os

    if "" not in sys.path and os.getcwd() not in sys.path:  # `--agent mymod:fn` from the cwd,
        sys.path.insert(0, os.getcwd())  # as uvicorn and celery do
    agent = load_agent_factory(args.agent)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def ready() -> None:
        print(f"worker ready (queue {cfg.queue})", file=sys.stderr, flush=True)

    run_worker(
        cfg,
        agent,
        executor_id=args.executor_id,
        stop=stop,
        grace=args.grace,
        ready=ready,
        agent_name=args.agent,
    )
    print("worker stopped", file=sys.stderr, flush=True)
    return 0


def _client(args: argparse.Namespace) -> Any:
    from ..durable import DurableClient

    return DurableClient(_config(args))


def cmd_submit(args: argparse.Namespace) -> int:
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise ConfigurationError("the prompt is empty")
    with _client(args) as client:
        h = client.enqueue_turn(args.session_id, prompt, turn_id=args.turn_id)
        print(h.turn_id, flush=True)
        if args.wait:
            res = h.result()
            print(res.text)
            return 0 if res.ok else 1
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    import json

    with _client(args) as client:
        h = client.handle(args.turn_id)
        status = h.status()
        if args.json:
            print(json.dumps({"turn_id": h.turn_id, "session_id": h.session_id, "status": status}))
        else:
            print(f"{h.turn_id}: {STATES.get(status, status.lower())} (session {h.session_id})")
    return 0


def cmd_follow(args: argparse.Namespace) -> int:
    from ..durable.client import TurnFailedError
    from ..types import to_json
    from .render import RecordPrinter, make_console

    printer = RecordPrinter(make_console())
    with _client(args) as client:
        h = client.handle(args.turn_id)
        for rec in h.events():
            if args.json:
                print(to_json(rec).decode(), flush=True)
            else:  # the lines `show` prints (you>, tool panels, the answer, usage)
                printer.record(rec)
                sys.stdout.flush()
        try:
            res = h.result(timeout=5)
        except TurnFailedError as exc:
            print(str(exc), file=sys.stderr)
            return 1
        return 0 if res.ok else 1


def cmd_steer(args: argparse.Namespace) -> int:
    with _client(args) as client:
        client.steer(args.turn_id, args.message)
    return 0


def cmd_abort(args: argparse.Namespace) -> int:
    with _client(args) as client:
        client.abort(args.turn_id)
    return 0


def cmd_approvals(args: argparse.Namespace) -> int:
    import json

    with _client(args) as client:
        for c in client.pending_approvals(args.turn_id):
            if args.json:
                print(json.dumps({"id": c.id, "name": c.name, "arguments": c.arguments}))
            else:
                print(f"{c.id}\t{c.name}({json.dumps(c.arguments)})")
    return 0


def cmd_approve(args: argparse.Namespace) -> int:
    with _client(args) as client:
        client.approve(args.turn_id, args.call_id)
    return 0


def cmd_deny(args: argparse.Namespace) -> int:
    with _client(args) as client:
        client.deny(args.turn_id, args.call_id, args.reason)
    return 0


def cmd_recover(args: argparse.Namespace) -> int:
    with _client(args) as client:
        for turn in client.recover(args.executor_ids):
            print(turn)
    return 0


class DatabaseUnreachableError(FoundationAIError):
    """The durable database (``--db`` / ``FOUNDATION_AI_DB``) refused or dropped the connection."""


class _DropConnectLog(logging.Filter):
    # DBOS and the session store's pool log each failed connection attempt before the error is
    # raised; the CLI prints one line instead.
    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not text.startswith(("Error connecting to the DBOS system database", "error connecting in"))


def _is_connection_error(exc: BaseException) -> bool:
    from ..agentic.errors import StoreError

    if isinstance(exc, StoreError):  # the session store could not open its connection pool
        return exc.retryable and str(exc).startswith("could not connect to")
    names = {f"{t.__module__}.{t.__qualname__}" for t in type(exc).__mro__}
    return bool(
        names
        & {
            "sqlalchemy.exc.OperationalError",
            "sqlalchemy.exc.InterfaceError",
            "psycopg.OperationalError",
            "psycopg.errors.OperationalError",
            "sqlite3.OperationalError",
            "psycopg_pool.PoolTimeout",
        }
    )


def _hide_password(url: str) -> str:
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def _one_line(cmd: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``cmd`` with a database it cannot reach reported as one line (exit 1), not a traceback."""

    @functools.wraps(cmd)
    def run(args: argparse.Namespace) -> int:
        try:
            import dbos  # noqa: F401
        except ImportError:
            raise ConfigurationError(
                f"{args.command} needs the 'durable' extra (pip install 'foundation-ai[durable]')"
            ) from None
        for name in ("dbos", "psycopg.pool"):
            logging.getLogger(name).addFilter(_DropConnectLog())
        try:
            return cmd(args)
        except Exception as exc:
            if not _is_connection_error(exc):
                raise
            import os

            url = args.db or os.environ.get("FOUNDATION_AI_DB") or "(default)"
            detail = " ".join(str(getattr(exc, "orig", None) or exc).split("\n")[0].split())
            detail = detail.split(": ", 1)[1] if detail.startswith("could not connect to") else detail
            raise DatabaseUnreachableError(
                f"cannot reach the database {_hide_password(url)}: {detail}"
            ) from None

    return run


DURABLE_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    name: _one_line(fn)
    for name, fn in {
        "worker": cmd_worker,
        "submit": cmd_submit,
        "status": cmd_status,
        "follow": cmd_follow,
        "steer": cmd_steer,
        "abort": cmd_abort,
        "approvals": cmd_approvals,
        "approve": cmd_approve,
        "deny": cmd_deny,
        "recover": cmd_recover,
    }.items()
}
"""Subcommand name -> handler."""
