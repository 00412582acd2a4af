"""The durable turn workflow and the worker process that runs it.

A worker (``foundation-ai worker``, or :func:`run_worker`) launches DBOS on the configured
system database, declares the turn queue and runs the turns it dequeues, each as the DBOS
workflow :func:`durable_turn` (https://docs.dbos.dev/python/tutorials/queue-tutorial):

- turns of one session run one at a time, in the order they were enqueued (the queue is
  partitioned by session id with ``partition_concurrency=1``);
- turns of different sessions run in parallel, at most ``worker_concurrency`` per worker and
  ``global_concurrency`` over all workers;
- on SIGTERM (:func:`run_worker` with ``stop``) the worker stops taking turns, waits up to
  ``grace`` seconds for the running ones and hands back those still running (they are
  re-enqueued, and another worker resumes them from their last checkpointed step).

The agent (model, tools, prompts) comes from an *agent factory*: a function returning an
``AgentSessionBuilder``, named ``module:function`` on the command line. Every worker must use
the same factory (``docs/scaling.md``).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import socket
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
from dbos import DBOS

from ..agentic.builder import AgentSessionBuilder
from ..agentic.errors import TurnFailedError
from ..agentic.session import AgentSession
from ..agentic.stores import SessionHeader, SessionMeta, SessionStore, conversation_of
from ..agentic.stores.base import takes_header
from ..agentic.stores.lease import SessionBusyError
from ..agentic.stores.sqlite import SqliteSessionStore
from ..agentic.turn.hooks import Phase, PhaseHooks
from ..agentic.turn.persist import Replay
from ..agentic.turn.state import TurnState
from ..errors import ConfigurationError
from ..types import Messages, SessionRecord, from_json
from .approvals import recheck_messages, settle_approvals
from .config import DurableConfig
from .ownership import Ownership
from .recorded import record_setup
from .steps import DurableSteps

__all__ = [
    "AgentFactory",
    "TurnResult",
    "check_agent_factory",
    "durable_turn",
    "load_agent_factory",
    "leased",
    "run_worker",
    "split_replay",
]

AgentFactory = Callable[[], AgentSessionBuilder]
"""Returns a fresh ``AgentSessionBuilder`` (model, tools, system prompt...) per turn; the worker
adds the session store and the durable step runner."""

WORKFLOW_NAME = "foundation_ai.durable_turn"

T = TypeVar("T")


class TurnResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a durable turn returns: ``ok`` (it completed), ``outcome`` (the ``TurnOutcome`` tag,
    e.g. ``"Completed"``), ``stop_reason`` (tag), ``text`` (the answer), ``messages`` (messages
    the turn persisted), ``error`` (the failure message, ``""`` when ok)."""

    session_id: str
    ok: bool
    outcome: str
    stop_reason: str
    text: str
    messages: int
    error: str = ""


@dataclass(slots=True)
class _Runtime:
    agent: AgentFactory
    store: SessionStore
    steering: bool = True


_RUNTIME: _Runtime | None = None


def split_replay(records: list[SessionRecord], first_prompt_id: str) -> tuple[list[Messages], Replay]:
    """Split a session's stored records at this turn's first prompt message: the conversation
    before the turn, and (as a :class:`~foundation_ai.agentic.turn.persist.Replay`) what an
    interrupted run of the turn already stored (empty for a first run)."""
    conv = conversation_of(records)
    ids = [m.id for m in conv]
    if first_prompt_id not in ids:
        return conv, Replay()
    cut = ids.index(first_prompt_id)
    replay = Replay(messages={m.id: m for m in conv[cut:]})
    seen = False
    for r in records:
        if isinstance(r, SessionRecord.Conversation) and r.message.id == first_prompt_id:
            seen = True
        elif seen and isinstance(r, SessionRecord.Summary):
            replay.summary = r
    return conv[:cut], replay


def _tag(value: Any) -> str:
    if isinstance(value, msgspec.Struct):
        return str(value.__struct_config__.tag or type(value).__name__)
    return str(getattr(value, "name", value))


_SHUTTING_DOWN = threading.Event()


class _ShutdownGuard(PhaseHooks):
    """Keeps a turn that the worker's shutdown abandons from storing anything more.

    A turn still running when the grace period ends is abandoned in this process (the loop
    would store "aborted" results and a ``Summary``) and handed back to another worker, which
    resumes it; so once a phase is left by ``GeneratorExit`` / ``CancelledError`` during
    shutdown, the session's writes are dropped."""

    def __init__(self, store: _GuardedStore) -> None:
        self.store = store

    def after_phase(self, phase: Phase, state: TurnState, error: BaseException | None) -> None:
        if isinstance(error, GeneratorExit | asyncio.CancelledError) and _SHUTTING_DOWN.is_set():
            self.store.frozen = True


class _GuardedStore:
    """The worker's session store as one turn sees it: writes are dropped once ``frozen`` (the
    worker's shutdown abandoned the turn) or once the turn is owned by another run."""

    def __init__(self, store: SessionStore, ownership: Ownership | None = None) -> None:
        self.inner, self.frozen, self.ownership = store, False, ownership

    def append(
        self, session_id: str, records: Sequence[SessionRecord], header: SessionHeader | None = None
    ) -> None:
        if not self.frozen and (self.ownership is None or self.ownership.still_owned()):
            if header is not None and takes_header(self.inner):
                self.inner.append(session_id, records, header)
            else:
                self.inner.append(session_id, records)

    def load(self, session_id: str) -> list[SessionRecord]:
        return self.inner.load(session_id)

    def sessions(self) -> list[str]:
        return self.inner.sessions()

    def list_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionMeta]:
        return self.inner.list_sessions(limit, offset)

    def session_meta(self, session_id: str) -> SessionMeta | None:
        return self.inner.session_meta(session_id)

    def delete_session(self, session_id: str) -> bool:
        return self.inner.delete_session(session_id)

    def close(self) -> None:
        """The worker owns the store: closing one turn's view does nothing."""


def open_session(builder: AgentSessionBuilder, session_id: str) -> AgentSession:
    """The session ``session_id`` as ``builder`` makes it (its store, model, tools, hooks),
    whether or not the store already holds it, WITHOUT loading its history: a durable turn sets
    the history itself from the records (``split_replay``). ``build()`` refuses an existing id,
    and ``resume()`` would also pair dangling calls, which a replay must not do."""
    store = builder._store if builder._store is not None else SqliteSessionStore()
    return builder._make(store, session_id, builder._model, builder._system, builder._tools)


@DBOS.workflow(name=WORKFLOW_NAME)
async def durable_turn(session_id: str, prompt: str) -> str:
    """The DBOS workflow of one turn: ``prompt`` is the JSON list of the prompt's messages
    (ids fixed at enqueue time); returns a :class:`TurnResult` as JSON. Each model call and
    tool call is a step (:class:`~foundation_ai.durable.steps.DurableSteps`); a recovered run
    replays them and stores nothing twice (``host.replay``). A run whose turn was handed to
    another run stores nothing more and ends at its next step
    (:mod:`~foundation_ai.durable.ownership`; DBOS then waits for the owner's outcome)."""
    rt = _RUNTIME
    if rt is None:
        raise ConfigurationError("durable_turn runs in a worker (run_worker) only")
    msgs: list[Messages] = from_json(prompt, list[Messages])
    ownership = Ownership.of_this_run()
    steps = DurableSteps(steering=rt.steering, ownership=ownership)
    # the session's records and the system database's probe (owner, recorded steps, a waiting
    # steering message) are read at the same time
    records, _ = await asyncio.gather(asyncio.to_thread(rt.store.load, session_id), steps.probe())
    history, replay = split_replay(records, msgs[0].id)
    store = _GuardedStore(rt.store, ownership)
    builder = (
        _built(rt.agent).with_store(store).with_step_runner(steps).with_phase_hooks(_ShutdownGuard(store))
    )
    session = open_session(builder, session_id)
    steps.lookup = session.registry.get
    session.messages = history
    session.replay = replay
    session.lease_turn_id = DBOS.workflow_id  # a recovered run takes its crashed run's lease
    await record_setup(session, steps)  # a recovered run offers what the first run offered
    try:
        turn = await leased(lambda: session.arun_turn(msgs), ownership)
        # a pause for approval is a durable wait: decisions from any process continue the turn
        turn = await settle_approvals(session, steps, turn, lambda make: leased(make, ownership))
    except TurnFailedError as failed:  # a failed turn is a result here, not a worker crash
        turn = failed.turn
    result = TurnResult(
        session_id=session_id,
        ok=turn.ok,
        outcome=_tag(turn.outcome),
        stop_reason=_tag(turn.stop_reason),
        text=turn.text(),
        messages=turn.summary.message_count,
        error="" if turn.error is None else turn.error.message,
    )
    return msgspec.json.encode(result).decode()


LEASE_POLL = 0.1
"""Seconds between two tries of a durable turn waiting for its session's lease."""


async def leased(run: Callable[[], Awaitable[T]], ownership: Ownership | None = None) -> T:
    """``await run()``, waiting while another turn (an interactive session in some process)
    holds the session's lease: a durable turn waits its turn rather than failing
    (``docs/scaling.md``). Nothing of the turn ran when the lease is refused, and the wait
    records no DBOS step, so a replay stays deterministic. Stops waiting once this run lost
    the turn (``ownership``)."""
    while True:
        try:
            return await run()
        except SessionBusyError:
            if ownership is not None:
                ownership.check()
            await asyncio.sleep(LEASE_POLL)


def _factory_name(agent: AgentFactory) -> str:
    mod, name = getattr(agent, "__module__", None), getattr(agent, "__qualname__", None)
    return f"{mod}:{name}" if mod and name else repr(agent)


def _built(agent: AgentFactory, name: str | None = None) -> AgentSessionBuilder:
    """``agent()``, checked.

    Raises:
        ConfigurationError: it raised, or returned something else than an ``AgentSessionBuilder``.
    """
    label = name or _factory_name(agent)
    try:
        builder = agent()
    except Exception as exc:
        raise ConfigurationError(
            f"agent factory {label}: calling it raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(builder, AgentSessionBuilder):
        raise ConfigurationError(
            f"agent factory {label}: returned {type(builder).__name__}, not an AgentSessionBuilder "
            "(return e.g. AgentSession.builder(model).with_tools(...); see docs/scaling.md)"
        )
    return builder


def check_agent_factory(agent: AgentFactory, name: str | None = None) -> None:
    """Call ``agent`` once and check it returns an ``AgentSessionBuilder`` (a worker does this
    at start, before taking any turn: a wrong factory stops it instead of failing every turn).

    Args:
        agent: the agent factory.
        name: how errors name it (default ``module:qualname``).

    Raises:
        ConfigurationError: calling it raised, or it returned something else.
    """
    _built(agent, name)


def load_agent_factory(spec: str) -> AgentFactory:
    """``"package.module:function"`` -> that function (it must return an
    ``AgentSessionBuilder`` when called with no argument).

    Raises:
        ConfigurationError: the spec is malformed, the module cannot be imported or has no such
            callable.
    """
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise ConfigurationError(f"agent factory {spec!r}: expected 'module:function'")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ConfigurationError(f"agent factory {spec!r}: cannot import {mod_name!r}: {exc}") from exc
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise ConfigurationError(f"agent factory {spec!r}: {mod_name} has no callable {attr!r}")
    return fn  # type: ignore[no-any-return]


def run_worker(
    config: DurableConfig,
    agent: AgentFactory,
    *,
    executor_id: str | None = None,
    stop: threading.Event | None = None,
    grace: float = 30.0,
    ready: Callable[[], None] | None = None,
    agent_name: str | None = None,
) -> None:
    """Run a worker until ``stop`` is set (blocks; a new ``Event`` waited forever if ``None``).
    The agent factory is called once before any turn runs (:func:`check_agent_factory`).

    Args:
        config: the databases and the queue's limits.
        agent: the agent factory.
        executor_id: this worker's DBOS executor id, unique among live workers (default:
            ``<hostname>-<pid>``). A worker restarted with the same id resumes its unfinished
            turns at launch; for a worker that will not come back, call
            :meth:`DurableClient.recover` with its id. Two live workers with one id would
            resume each other's running turns.
        stop: set it to shut down (the CLI sets it on SIGTERM / SIGINT).
        grace: seconds to let running turns finish on shutdown before handing them back.
        ready: called once the worker is consuming the queue.
        agent_name: how errors name the agent factory (e.g. the ``module:function`` given).

    Raises:
        ConfigurationError: a bad config (database URL, limits), or an agent factory that
            raises or does not return an ``AgentSessionBuilder``.
    """
    global _RUNTIME
    stop = stop or threading.Event()
    me = executor_id or f"{socket.gethostname()}-{os.getpid()}"
    store = config.open_store()  # an unreachable database is reported first
    try:
        check_agent_factory(agent, agent_name)  # before DBOS resumes this worker's turns
    except BaseException:
        store.close()
        raise
    _RUNTIME = _Runtime(agent=agent, store=store, steering=config.steering)
    recheck_messages()  # approval decisions reach a waiting turn within a second
    DBOS(config=config.dbos_config(executor_id=me))  # type: ignore[arg-type]
    try:
        from .client import system_database_errors

        with system_database_errors(config.system_database_url):
            DBOS.launch()
        DBOS.register_queue(
            config.queue,
            worker_concurrency=config.worker_concurrency,
            global_concurrency=config.global_concurrency,
            partition_concurrency=1,
            polling_interval_sec=config.polling_interval,
        )
        if ready is not None:
            ready()
        stop.wait()
        _SHUTTING_DOWN.set()
    finally:
        DBOS.destroy(workflow_completion_timeout_sec=max(0, round(grace)))
        _RUNTIME = None
    from .client import DurableClient

    with DurableClient(config) as client:  # hand back the turns abandoned after the grace period
        client.recover([me])
    store.close()
