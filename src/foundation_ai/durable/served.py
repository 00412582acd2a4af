"""Durable turns of served agents: the DBOS workflow :func:`served_turn` and
:func:`start_served_worker`, which makes a ``foundation-ai serve`` process one of the workers of
a shared turn queue (``docs/serve.md``, "Several processes").

Unlike :func:`~foundation_ai.durable.worker.durable_turn` (one agent factory per worker), a
served turn names its agent, and each process builds it from its own configuration: every
process sharing the queue must serve the same agents. While the turn runs, its
``TurnEvent``s (text and thinking pieces as the model streams them, tool calls, tool results,
the final ``Done``/``Failed``) go to an :class:`EventSink`, from which any process can follow
the turn. Steering and abort arrive as DBOS messages before each model call, as for every
durable turn (:class:`~foundation_ai.durable.steps.DurableSteps`).

A pause for approval is the durable wait of every durable turn
(:mod:`~foundation_ai.durable.approvals`): the turn publishes its ``Done`` with outcome
``AwaitingApproval`` once the calls waiting are listed (the DBOS event ``PENDING_EVENT``),
receives the decisions sent from any process as checkpointed steps, then publishes the
continuation's events after it, in the same turn's log, and ends with the continuation's end.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from dbos import DBOS
from dbos import error as dbos_errors

from ..agentic.builder import AgentSessionBuilder
from ..agentic.events import EventMapper, TurnEvent, TurnOutcome, TurnSummary
from ..agentic.stores import SessionStore
from ..agentic.stores.lease import SessionBusyError
from ..errors import ConfigurationError
from ..types import AgenticError, Messages, ModelParams, SessionRecord, TokenSnapshot, from_json, to_json
from .approvals import PENDING_EVENT, abort_waiting, receive_decisions, recheck_messages
from .config import DurableConfig
from .ownership import Ownership
from .recorded import record_setup
from .steps import DurableSteps
from .worker import (
    _SHUTTING_DOWN,
    LEASE_POLL,
    _GuardedStore,
    _ShutdownGuard,
    open_session,
    split_replay,
)

if TYPE_CHECKING:
    from ..agentic.turn.generate import Generation

__all__ = ["SERVED_WORKFLOW", "EventSink", "ServedWorker", "interrupt", "served_turn", "start_served_worker"]

log = logging.getLogger(__name__)

SERVED_WORKFLOW = "foundation_ai.served_turn"
"""The DBOS workflow name of a served turn."""


class EventSink(Protocol):
    """Where a served turn's events go (a table every serving process reads)."""

    def publish(self, turn_id: str, events: list[bytes]) -> None:
        """Append ``events`` (``TurnEvent`` JSON, in order) to the turn's log."""

    def finish(self, turn_id: str, events: list[bytes]) -> None:
        """Append the turn's last ``events`` (its ``Done``/``Failed``) and mark it ended, at
        once: whoever sees the end also sees the session free for its next turn."""

    def read(self, turn_id: str, start: int) -> tuple[list[bytes], bool]:
        """The turn's events from index ``start`` on, and whether the turn has ended."""


@dataclass(slots=True)
class _Served:
    builder: Callable[[str], AgentSessionBuilder]
    store: SessionStore
    sink: EventSink
    flush_every: float
    events: Callable[[], Any] | None = None
    checkpoints: Callable[[str], str] | None = None


_SERVED: _Served | None = None
_LIVE: dict[str, Any] = {}  # turn id -> the AgentSession running it in this process


def interrupt(turn_id: str) -> bool:
    """Abort turn ``turn_id`` now if this process runs it (any thread): a model call in
    progress stops at once, as ``AgentSession.abort()`` does in-process. The abort sent as a
    DBOS message (``DurableClient.abort``) is what a replay sees; this only makes it sooner.
    Returns whether this process runs the turn."""
    session = _LIVE.get(turn_id)
    if session is None:
        return False
    session.abort()
    return True


class _Outbox:
    """Events of one turn, written to the sink in batches (at most every ``every`` seconds,
    and at the end) on a worker thread: a token-by-token model costs one write per batch.
    A write in flight is never cancelled (it would be written again). Once the turn is owned
    by another run (``ownership``, checked before each batch) nothing more is written."""

    def __init__(
        self, sink: EventSink, turn_id: str, every: float, ownership: Ownership | None = None
    ) -> None:
        self.sink, self.turn_id, self.every, self.ownership = sink, turn_id, every, ownership
        self.pending: list[bytes] = []
        self.wake = asyncio.Event()
        self.closing = False
        self.idle = asyncio.Event()
        """Set while every event put is written."""
        self.idle.set()
        self.task: asyncio.Task[None] | None = None

    def put(self, ev: TurnEvent) -> None:
        self.pending.append(to_json(ev))
        self.idle.clear()
        self.wake.set()

    async def flush(self) -> None:
        """Wait until every event put so far is written (retried while the sink fails)."""
        await self.idle.wait()

    async def run(self) -> None:
        failures = 0
        while True:
            await self.wake.wait()
            self.wake.clear()
            batch, self.pending = self.pending, []
            if batch:
                try:
                    await asyncio.to_thread(self._publish, batch)
                    failures = 0
                except Exception:  # one transaction: nothing was stored; retry a bit later
                    failures += 1
                    log.warning("could not publish the events of turn %s", self.turn_id, exc_info=True)
                    if self.closing and failures >= 5:
                        return
                    self.pending[:0] = batch
                    self.wake.set()
                    await asyncio.sleep(1.0)
                    continue
            if not self.pending:
                self.idle.set()
            if self.closing and not self.pending:
                return
            await asyncio.sleep(self.every)

    def _publish(self, batch: list[bytes]) -> None:
        own = self.ownership
        if own is None or own.still_owned():  # else the run that owns the turn publishes its events
            self.sink.publish(self.turn_id, batch)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def close(self) -> None:
        """Write what is left and stop."""
        self.closing = True
        self.wake.set()
        if self.task is not None:
            await asyncio.shield(self.task)


class _StreamingSteps(DurableSteps):
    """:class:`DurableSteps` that also publish what a generation streams (text, thinking, tool
    calls) while it runs. A replayed generation publishes nothing: its events were published
    by the run that checkpointed it."""

    def __init__(
        self,
        out: Callable[[TurnEvent], None],
        *,
        steering: bool = True,
        stale: list[str] | None = None,
        ownership: Ownership | None = None,
    ) -> None:
        super().__init__(steering=steering, ownership=ownership)
        self.out = out
        self.stale = stale or []
        """Ids of outputs an earlier run of this turn published and never completed (it
        stopped during a model call): retracted before the model is called again."""

    async def generation(self, step: Generation) -> AsyncGenerator[Any, None]:
        """One checkpointed model call whose stream items are published as ``TurnEvent``s."""
        from ..agentic.turn.generate import GenerationRecord

        if self.steering:
            await self._take_steering(step)
        mapper = EventMapper()

        async def call_model() -> str:
            if self.stale:  # the call an earlier run left unfinished is made again: drop its output
                kept = {m.id for m in step.host.messages}
                gone = [i for i in self.stale if i not in kept]
                self.stale = []
                if gone:
                    why = "resumed: the model call is made again"
                    self.out(TurnEvent.Retract(gone, why))
                    # the store says it too (a Retracted record), written after this phase
                    step.host.pending_records.append(SessionRecord.Retracted(reason=why, message_ids=gone))
            async for item in step.stream():
                for ev in mapper.map(item):
                    if not isinstance(ev, TurnEvent.Progress):
                        self.out(ev)
            return to_json(step.snapshot()).decode()

        record = await self._step({"name": step.key}, call_model)
        step.restore(from_json(record, GenerationRecord))
        return
        yield  # an async generator that yields nothing


def _published_outputs(sink: EventSink, turn_id: str) -> tuple[list[str], int]:
    """Ids of the outputs (text, thinking, tool calls) earlier runs of ``turn_id`` published and
    did not retract, in order, and how many pauses for approval they published (a ``Done``
    with outcome ``AwaitingApproval``): empty and 0 for a turn's first run."""
    events, _ = sink.read(turn_id, 0)
    ids: dict[str, None] = {}
    pauses = 0
    for raw in events:
        ev: TurnEvent = from_json(raw, TurnEvent)
        if isinstance(ev, TurnEvent.Text | TurnEvent.Thinking | TurnEvent.ToolCall):
            ids[ev.message_id] = None
        elif isinstance(ev, TurnEvent.Retract):
            for i in ev.message_ids:
                ids.pop(i, None)
        elif _is_pause(ev):
            pauses += 1
    return list(ids), pauses


def _is_pause(ev: TurnEvent | None) -> bool:
    return isinstance(ev, TurnEvent.Done) and ev.summary.outcome is TurnOutcome.AwaitingApproval


def _crashed() -> TurnEvent:
    err = AgenticError(kind="internal", message="the turn failed inside the server")
    return TurnEvent.Failed(
        err, TurnSummary(outcome=TurnOutcome.Failed, message_count=0, usage=TokenSnapshot())
    )


@DBOS.workflow(name=SERVED_WORKFLOW)
async def served_turn(agent: str, session_id: str, prompt: str, params: str) -> str:
    """The DBOS workflow of one served turn: ``agent`` names the served agent, ``prompt`` is
    the JSON list of the prompt's messages (ids fixed when enqueued), ``params`` the turn's
    ``ModelParams`` as JSON (``"null"``: the agent's own). Publishes every ``TurnEvent`` to the
    process's :class:`EventSink`; returns the terminal event's JSON. A run whose turn was
    handed to another run publishes and stores nothing more
    (:mod:`~foundation_ai.durable.ownership`)."""
    rt = _SERVED
    if rt is None:
        raise ConfigurationError("served_turn runs in a serving process (start_served_worker) only")
    turn_id = str(DBOS.workflow_id)
    ownership = Ownership.of_this_run()
    box = _Outbox(rt.sink, turn_id, rt.flush_every, ownership)
    box.start()
    put = box.put
    sift = rt.events() if rt.events is not None else None
    if sift is not None:  # e.g. secrets masked before anything is published

        def put(ev: TurnEvent) -> None:
            for e in sift.feed(ev):
                box.put(e)

    last: TurnEvent = _crashed()
    abandoned = False
    mine: Any = None
    try:
        msgs: list[Messages] = from_json(prompt, list[Messages])
        steps = _StreamingSteps(put, ownership=ownership)
        # read at the same time: the session's records, what earlier runs published, and the
        # system database's probe (owner, recorded steps, a waiting steering message)
        records, (stale, published_pauses), _ = await asyncio.gather(
            asyncio.to_thread(rt.store.load, session_id),
            asyncio.to_thread(_published_outputs, rt.sink, turn_id),
            steps.probe(),
        )
        history, replay = split_replay(records, msgs[0].id)
        steps.stale = stale
        steps.checkpoint_filter = rt.checkpoints
        store = _GuardedStore(rt.store, ownership)
        builder = rt.builder(agent).with_store(store).with_step_runner(steps)
        session = open_session(builder.with_phase_hooks(_ShutdownGuard(store)), session_id)
        steps.lookup = session.registry.get
        _LIVE[turn_id] = mine = session
        session.messages = history
        session.replay = replay
        overrides: ModelParams | None = from_json(params, ModelParams | None)
        if overrides is not None:
            session.params = overrides
        session.lease_turn_id = turn_id  # a recovered run takes its crashed run's lease
        await record_setup(session, steps)  # a recovered run offers what the first run offered

        async def run(stream: Callable[[], Any]) -> TurnEvent:
            end: TurnEvent = _crashed()
            while True:
                # a continuation takes the pause's calls and decisions: given back if refused
                kept = session.awaiting, session.paused_calls, dict(session._decisions)
                try:
                    async for ev in stream().events():
                        if isinstance(ev, TurnEvent.Done | TurnEvent.Failed):
                            end = ev  # published with the end (sink.finish), or at a pause
                        elif not isinstance(ev, TurnEvent.Progress):
                            put(ev)
                    return end
                except SessionBusyError:  # refused before its first phase: wait for the session
                    session.awaiting, session.paused_calls, session._decisions = kept
                    ownership.check()
                    await asyncio.sleep(LEASE_POLL)

        last = await run(lambda: session.arun_turn_stream(msgs))
        pauses = 0
        while _is_pause(last):  # a durable wait for decisions from any process (docs/serve.md)
            pauses += 1

            async def waiting(paused: TurnEvent = last, n: int = pauses) -> None:
                # the calls are listed: now followers may see the pause (once: a recovered run
                # does not publish again a pause an earlier run published)
                if n > published_pauses:
                    put(paused)  # (text a filter held back goes first)
                    await box.flush()

            decided = await receive_decisions(session, steps, waiting)
            if not decided:
                abort_waiting(session)
            last = await run(session._continue_stream)
            if not decided:
                await steps._refusal_noted(DBOS.set_event_async(PENDING_EVENT, "[]"))
    except (GeneratorExit, asyncio.CancelledError):
        abandoned = _SHUTTING_DOWN.is_set()  # handed back to the queue: another process goes on
        raise
    except dbos_errors.DBOSWorkflowConflictIDError:
        abandoned = True  # owned by another run now: it publishes the turn's end
        raise
    except Exception:
        log.exception("served turn %s of session %s crashed", turn_id, session_id)
        last = _crashed()
    finally:
        if mine is not None and _LIVE.get(turn_id) is mine:  # a run that took the turn over keeps its own
            del _LIVE[turn_id]
        if sift is not None:
            for e in sift.flush():
                box.put(e)
            last = sift.feed(last)[-1]
        await box.close()
        if not abandoned and not ownership.lost:
            await asyncio.to_thread(rt.sink.finish, turn_id, [to_json(last)])
    return to_json(last).decode()


class ServedWorker:
    """The DBOS worker of a serving process (:func:`start_served_worker`); :meth:`stop` once."""

    def __init__(self, config: DurableConfig, executor_id: str) -> None:
        self.config, self.executor_id = config, executor_id

    def stop(self, grace: float = 10.0) -> None:
        """Stop taking turns, let running ones finish for ``grace`` seconds, hand back the rest
        to the queue (another process resumes them from their last step)."""
        global _SERVED
        _SHUTTING_DOWN.set()
        try:
            DBOS.destroy(workflow_completion_timeout_sec=max(0, round(grace)))
        finally:
            _SERVED = None
            _SHUTTING_DOWN.clear()
        from .client import DurableClient

        with DurableClient(self.config) as client:
            client.recover([self.executor_id])


def start_served_worker(
    config: DurableConfig,
    builder: Callable[[str], AgentSessionBuilder],
    store: SessionStore,
    sink: EventSink,
    *,
    executor_id: str | None = None,
    flush_every: float = 0.05,
    events: Callable[[], Any] | None = None,
    checkpoints: Callable[[str], str] | None = None,
) -> ServedWorker:
    """Launch DBOS in this process and consume ``config.queue`` with :func:`served_turn`.

    Args:
        config: the databases and the queue's limits (``worker_concurrency`` per process).
        builder: agent name -> a fresh ``AgentSessionBuilder`` (model, tools, system prompt);
            it raises ``KeyError`` for an unknown name.
        store: the shared session store.
        sink: where turns publish their events.
        executor_id: this process's DBOS executor id, unique among live processes (default
            ``<hostname>-<pid>``; a process restarted with the same id resumes its turns).
        flush_every: seconds between two batches of events written to ``sink``.
        events: makes, per turn, a filter of its events before they are published: ``feed(ev)``
            gives the events to publish for ``ev``, ``flush()`` what it held back (the serving
            process masks its secrets with it, ``serve.masking.EventMasker``).
        checkpoints: applied to the JSON of each model call and tool call before DBOS
            checkpoints it (the serving process masks its secrets: ``SecretMask.json``).

    Raises:
        ConfigurationError: a worker already runs in this process (DBOS is one per process).
    """
    global _SERVED
    if _SERVED is not None:
        raise ConfigurationError("a served worker already runs in this process")
    me = executor_id or f"{socket.gethostname()}-{os.getpid()}"
    _SERVED = _Served(
        builder=builder,
        store=store,
        sink=sink,
        flush_every=flush_every,
        events=events,
        checkpoints=checkpoints,
    )
    recheck_messages()  # a decision reaches a waiting turn within a second, NOTIFY lost or not
    DBOS(config=config.dbos_config(executor_id=me))  # type: ignore[arg-type]
    try:
        DBOS.launch()
        DBOS.register_queue(
            config.queue,
            worker_concurrency=config.worker_concurrency,
            global_concurrency=config.global_concurrency,
            partition_concurrency=1,
            polling_interval_sec=config.polling_interval,
        )
    except BaseException:
        _SERVED = None
        DBOS.destroy()
        raise
    return ServedWorker(config, me)
