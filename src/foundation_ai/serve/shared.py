"""Several ``foundation-ai serve`` processes behind one address (``docs/serve.md``, "Several
processes"): ``SharedServe`` (the shared database and queue) and ``SharedSessionManager``.

With ``ServeConfig(shared=SharedServe("postgresql://..."))`` a server keeps nothing a request
needs in its own memory: session records live in the Postgres session store, keys, owners and
running turns in :mod:`foundation_ai.serve.shared_db`, and turns run as durable turns (DBOS
workflows, :mod:`foundation_ai.durable.served`) on a queue that every serving process consumes.
A turn started through one process is listed, followed (its events come from the shared event
log), steered and aborted (DBOS messages, taken before the turn's next model call) through any
other. A turn that pauses for approval waits durably (:mod:`foundation_ai.durable.approvals`):
its calls are decided through any process (or ``foundation-ai approve``), and the turn goes on
in whichever process holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from ..agentic import AgentSession, TurnEvent
from ..agentic.builder import AgentSessionBuilder
from ..agentic.events import TurnOutcome, TurnSummary
from ..errors import ConfigurationError
from ..ids import new_scru128
from ..types import AgenticError, Messages, ModelParams, TokenSnapshot, ToolCall, from_json, to_json
from .config import Agent, ServeConfig
from .errors import ApiError
from .masking import EventMasker, MaskingStore, SecretMask
from .runtime import SessionManager

__all__ = ["RemoteTurn", "SessionRef", "SharedServe", "SharedSessionManager"]

log = logging.getLogger(__name__)

SERVE_QUEUE = "foundation_ai_serve"
"""The DBOS queue served turns are enqueued on (not the ``foundation-ai worker`` queue)."""


@dataclass(frozen=True)
class SharedServe:
    """The shared state of several serving processes.

    Attributes:
        db: ``postgresql://...``: the session store, DBOS's system database (schema ``dbos``)
            and the serving tables, all in that database.
        queue: the DBOS queue of served turns.
        executor_id: this process's DBOS executor id, unique among live processes (default
            ``<hostname>-<pid>``; restart with the same id to resume its turns).
        concurrency: turns this process runs at once.
        poll: seconds between two polls of the queue, and of a followed turn's event log.
        grace: seconds running turns get to finish on shutdown before being handed back.

    Raises:
        ConfigurationError: ``db`` is not a ``postgresql://`` URL, or a limit is below 1.
    """

    db: str
    queue: str = SERVE_QUEUE
    executor_id: str | None = None
    concurrency: int = 8
    poll: float = 0.05
    grace: float = 10.0

    def __post_init__(self) -> None:
        if not self.db.startswith(("postgresql://", "postgres://")):
            raise ConfigurationError(
                f"serving from several processes needs a postgresql:// URL, not {self.db!r}"
            )
        if self.concurrency < 1 or self.poll <= 0:
            raise ConfigurationError("concurrency must be at least 1 and poll above 0 seconds")


def _failed(message: str) -> TurnEvent:
    err = AgenticError(kind="internal", message=message)
    return TurnEvent.Failed(
        err, TurnSummary(outcome=TurnOutcome.Failed, message_count=0, usage=TokenSnapshot())
    )


class _Answer:
    """What ``LiveTurn.turn`` offers the endpoints: ``text()``, the answer."""

    def __init__(self, text: str) -> None:
        self._text = text

    def text(self) -> str:
        return self._text


def answer_of(events: list[TurnEvent]) -> str:
    """The answer of a turn from its events: the text after its last tool result (retracted
    outputs dropped), as ``Turn.text()`` gives it."""
    pieces: list[tuple[str, str]] = []
    for ev in events:
        if isinstance(ev, TurnEvent.ToolResult):
            pieces = []
        elif isinstance(ev, TurnEvent.Text):
            pieces.append((ev.message_id, ev.text))
        elif isinstance(ev, TurnEvent.Retract):
            gone = set(ev.message_ids)
            pieces = [p for p in pieces if p[0] not in gone]
    return "".join(t for _, t in pieces)


class RemoteTurn:
    """A turn running on any serving process, seen from this one: the same attributes as
    :class:`~foundation_ai.serve.runtime.LiveTurn` (``id``, ``session_id``, ``owner``,
    ``events``, ``done``, ``turn``, ``task``, :meth:`follow`, :meth:`abort`), filled from the
    shared event log by a background task."""

    def __init__(
        self, manager: SharedSessionManager, turn_id: str, session_id: str, owner: str, *, ended: bool = False
    ) -> None:
        self.id, self.session_id, self.owner = turn_id, session_id, owner
        self.manager = manager
        self.events: list[TurnEvent] = []
        self.done = False
        """True once the turn ended, and while it waits for approval decisions (:attr:`paused`)."""
        self.closed = False
        self.asked: dict[int, list[Any]] = {}
        """``{index of a Done event: the tool calls that turn paused on}``, per pause."""
        self.turn: Any = None
        self._tick = asyncio.Event()
        self._pauses = 0  # pauses for approval read so far
        self._resumed = 0  # pauses whose last decision this process sent
        bodies, _ = manager.log.read(turn_id, 0)  # what the turn published so far, at once
        for b in bodies:
            ev: TurnEvent = from_json(b, TurnEvent)
            calls = manager.client.pending_approvals(turn_id) if _is_pause(ev) and not ended else None
            ended = self._add(ev, calls) or ended
        if ended:  # a finished turn
            if not self.events or not isinstance(self.events[-1], TurnEvent.Done | TurnEvent.Failed):
                self.events.append(_failed("the turn ended without a result"))
            self.turn, self.done = _Answer(answer_of(self.events)), True
        loop = asyncio.get_running_loop()
        work = asyncio.sleep(0) if ended else self._pump()
        self.task: asyncio.Task[None] = loop.create_task(work, name=f"follow-{turn_id}")
        if not ended:
            manager.followed.add(self)
            self.task.add_done_callback(lambda _: manager.followed.discard(self))

    def _notify(self) -> None:
        self._tick.set()
        self._tick = asyncio.Event()

    def _add(self, ev: TurnEvent, calls: list[ToolCall] | None) -> bool:
        """Add one event of the log (``calls``: those a pause waits on); True: the turn ended."""
        if self.paused:  # the continuation after the decisions: running again
            self.done, self.turn = False, None
        if _is_pause(ev):
            self._pauses += 1
            self.asked[len(self.events)] = calls or []
            self.events.append(ev)
            if self._resumed < self._pauses:  # (its last decision was not sent from here already)
                self.turn, self.done = _Answer(answer_of(self.events)), True
            return False
        self.events.append(ev)
        return isinstance(ev, TurnEvent.Done | TurnEvent.Failed)

    async def _pump(self) -> None:
        log_, wakeups = self.manager.log, self.manager.wakeups
        poll = self.manager.shared.poll
        wake = asyncio.Event()
        wakeups.register(self.id, asyncio.get_running_loop(), wake)
        checked = time.monotonic()
        try:
            while True:
                wake.clear()  # before the read: a notification after it is not lost
                over = False  # the workflow ended without saying so (checked now and then)
                if time.monotonic() - checked > 5.0:
                    checked = time.monotonic()
                    over = await asyncio.to_thread(self._workflow_ended)
                bodies, ended = await asyncio.to_thread(log_.read, self.id, len(self.events))
                for b in bodies:
                    ev: TurnEvent = from_json(b, TurnEvent)
                    calls = None  # a pause's calls are listed before the pause is published
                    if _is_pause(ev):
                        calls = await asyncio.to_thread(self.manager.client.pending_approvals, self.id)
                    if self._add(ev, calls):
                        return
                if bodies:
                    self._notify()
                if ended or over:  # ended without a terminal event: the turn's process crashed
                    self.events.append(_failed("the turn ended without a result"))
                    return
                # woken by the turn's NOTIFY; a slow poll in case one is missed (or LISTEN failed)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), 1.0 if wakeups.alive else poll)
        except Exception:
            log.exception("following turn %s failed", self.id)
            self.events.append(_failed("the turn's events could not be read"))
        finally:
            wakeups.unregister(self.id)
            self.turn = _Answer(answer_of(self.events))
            self.done = True
            self._notify()

    def _workflow_ended(self) -> bool:
        from ..durable.client import TERMINAL

        try:
            status = self.manager.client.dbos.retrieve_workflow(self.id).get_status().status
        except Exception:
            return False
        return str(status) in TERMINAL

    async def first_event(self) -> TurnEvent | None:
        """Wait for the turn's first event (``None`` when it ended without one, or this process
        stops): what decides whether a streamed request gets its HTTP error before any byte of
        the answer (served turns publish no ``Progress`` events)."""
        while not self.events:
            if self.done or self.closed:
                return None
            await self._tick.wait()
        return self.events[0]

    @property
    def paused(self) -> bool:
        """True while the turn waits for approval decisions (its last event is ``Done`` with
        outcome ``awaiting_approval``)."""
        return self.done and bool(self.events) and _is_pause(self.events[-1])

    async def follow(self, start: int = 0, *, through_pauses: bool = False) -> AsyncIterator[TurnEvent]:
        """The events from index ``start`` on, waiting for new ones until the turn ends, or
        until it pauses for approval unless ``through_pauses`` (then it goes on with the
        continuation, as an iteration starting after the pause does: the decisions may come
        from another process)."""
        i = start
        while True:
            while i < len(self.events):
                yield self.events[i]
                i += 1
            if self.closed or (self.done and not self.paused):
                return
            if self.paused and not through_pauses and i > start:  # the pause was followed
                return
            await self._tick.wait()

    def resume(self) -> None:
        """The last decision was sent: the turn goes on (its continuation is followed), also
        when this process has not read its pause yet."""
        self._resumed = self._pauses + (0 if self.paused else 1)
        if self.paused:
            self.done, self.turn = False, None
            self._notify()

    def close(self) -> None:
        """End the followers' iterations now (the process stops; the turn goes on)."""
        self.closed = True
        self._notify()

    def abort(self) -> None:
        """Abort the turn wherever it runs: a DBOS message (taken before its next model call)
        and a ``NOTIFY`` that stops a model call in progress at once. Not while this process
        stops: its streams are cut, and the turns they follow go on elsewhere."""
        if self.manager.stopping:
            return
        self.manager.client.abort(self.id)
        self.manager.log.request_abort(self.id)


class SessionRef:
    """A session of a shared server as the endpoints handle it: ``session_id``, ``agent``,
    ``params`` (this turn's sampling parameters) and :meth:`steer`."""

    def __init__(
        self, manager: SharedSessionManager, session_id: str, agent: Agent, *, ephemeral: bool = False
    ) -> None:
        self.manager, self.session_id, self.agent = manager, session_id, agent
        self.params: ModelParams | None = agent.params
        self._decided: set[str] = set()  # decisions this request sent
        self.ephemeral = ephemeral
        """Kept nowhere (Responses ``store: false``): no index entry; its records and events are
        deleted when its turn ends."""
        self.history: list[Messages] = []
        """An ephemeral session's messages before its turn (written when the turn starts)."""

    @property
    def awaiting(self) -> list[ToolCall]:
        """The calls the session's paused turn waits on (``[]`` when none), as the turn lists them."""
        return self.manager.waiting_calls(self.session_id)[1]

    def pending_approvals(self) -> list[ToolCall]:
        """The calls waiting for a decision, in call order (``[]`` when none)."""
        return [c for c in self.awaiting if c.id not in self._decided]

    def approve_stream(self, call_id: str) -> RemoteTurn | None:
        """Approve a pending call of the paused turn (a DBOS message: the turn's process takes
        it). Returns the turn once no call waits any more (it goes on), else ``None``.

        Raises:
            ApprovalPendingError: no call ``call_id`` waits for a decision.
        """
        return self._decide(call_id, None)

    def deny_stream(self, call_id: str, reason: str = "the user denied it") -> RemoteTurn | None:
        """Deny a pending call (its error result says ``reason``); see :meth:`approve_stream`."""
        return self._decide(call_id, reason)

    def _decide(self, call_id: str, reason: str | None) -> RemoteTurn | None:
        turn_id, _ = self.manager.waiting_calls(self.session_id)
        if turn_id is None:
            from ..agentic.errors import ApprovalPendingError

            raise ApprovalPendingError(f"no tool call {call_id!r} is waiting for approval")
        if reason is None:
            self.manager.client.approve(turn_id, call_id)
        else:
            self.manager.client.deny(turn_id, call_id, reason)
        self._decided.add(call_id)
        if self.pending_approvals():
            return None
        turn: RemoteTurn | None = self.manager.turn_of(self.session_id)
        if turn is not None:
            turn.resume()
        return turn

    def steer(self, message: str | Messages) -> None:
        """Steer the running turn (wherever it runs), or keep the message for the next turn.

        Raises:
            TypeError / ValueError: not a non-empty ``str`` / ``Messages``.
        """
        msg = message if isinstance(message, Messages) else Messages.agent(message)
        if isinstance(message, str) and not message.strip():
            raise ValueError("the steering message is empty")
        latest = self.manager.log.latest(self.session_id)
        if latest is not None and not latest[2]:
            self.manager.client.steer(latest[0], msg)
        else:
            self.manager.log.queue_pending(self.session_id, to_json(msg))


def _is_pause(ev: TurnEvent) -> bool:
    return isinstance(ev, TurnEvent.Done) and ev.summary.outcome is TurnOutcome.AwaitingApproval


class SharedSessionManager(SessionManager):
    """A :class:`~foundation_ai.serve.runtime.SessionManager` whose sessions, owners and turns
    are shared with the other processes of ``config.shared`` (a :class:`SharedServe`); this
    process is also one of the workers running the turns.

    Raises:
        ConfigurationError: the database cannot be reached; a served worker already runs in
            this process (one shared app per process).
    """

    def __init__(self, config: ServeConfig) -> None:
        from ..agentic.stores.postgres import PostgresSessionStore
        from ..durable import DurableClient, DurableConfig
        from ..durable.served import start_served_worker
        from .shared_db import SharedDatabase, SharedIndex, TurnLog, Wakeups

        shared: SharedServe = config.shared
        self.config = config
        self.shared = shared
        self.stopping = False
        """Set when the process begins to stop (``stop_threadsafe``): ended streams abort nothing."""
        self.agents = {a.name: a for a in config.agents}
        self._sessions: dict[str, Any] = {}
        self._turns: dict[str, Any] = {}
        self.followed: set[RemoteTurn] = set()
        """Turns whose events this process is reading (cancelled at shutdown)."""
        self._running: dict[str, int] = {}
        self._waits: set[str] = set()  # sessions :meth:`running` saw waiting for decisions
        self.db = SharedDatabase(shared.db)
        self.index: SharedIndex = SharedIndex(self.db)  # type: ignore[assignment]
        self.log = TurnLog(self.db)
        from ..durable.served import interrupt

        self.wakeups = Wakeups(shared.db, on_abort=interrupt)
        self._own_store = config.store is None
        self.store = config.store if config.store is not None else PostgresSessionStore(shared.db)
        self.mask = SecretMask(config.secret_texts())
        if self.mask:  # every record is masked before it is written, by any process
            self.store = MaskingStore(self.store, self.mask)
        self._recent: dict[str, OrderedDict[str, None]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._forgetting: set[Any] = set()
        self.durable = DurableConfig(
            shared.db, queue=shared.queue, worker_concurrency=shared.concurrency, polling_interval=shared.poll
        )
        self.client = DurableClient(self.durable, store=self.store)
        mask = self.mask
        self.worker = start_served_worker(
            self.durable,
            self.builder_of,
            self.store,
            self.log,
            executor_id=shared.executor_id,
            events=(lambda: EventMasker(mask)) if mask else None,
            checkpoints=mask.json if mask else None,  # DBOS's step records hold no secret either
        )

    def builder_of(self, name: str) -> AgentSessionBuilder:
        """A fresh builder of the agent ``name`` (model, system prompt, tools, params).

        Raises:
            KeyError: no such agent in this process's configuration.
        """
        agent = self.agents[name]
        b = AgentSession.builder(agent.resolved_model())
        if agent.system_prompt:
            b = b.with_system_prompt(agent.system_prompt)
        if agent.tools:
            b = b.with_tools(*agent.tools)
        if agent.params is not None:
            b = b.with_params(agent.params)
        gate = agent.can_use_tool() if hasattr(agent, "can_use_tool") else None
        if gate is not None:  # requires_approval = false: marked tools run without asking
            b = b.with_can_use_tool(gate)
        return b

    async def new_session(self, owner: str, agent: Agent, history: list[Messages], title: str) -> Any:
        """A new session of ``agent`` owned by ``owner``, starting from ``history`` (persisted)."""
        from ..types import SessionRecord

        sid = new_scru128()
        if history:
            recs = [SessionRecord.Conversation(message=m) for m in history]
            await asyncio.to_thread(self.store.append, sid, recs)
        await asyncio.to_thread(self.index.add, sid, owner, agent.name, title)
        return SessionRef(self, sid, agent)

    async def open_session(self, owner: str, session_id: Any) -> Any:
        """A session the key owns.

        Raises:
            ApiError: (404) no such session for this key.
        """
        meta = self.meta(owner, session_id)
        return SessionRef(self, meta["id"], self.agent(meta["agent"]))

    def new_ephemeral_session(self, agent: Agent, history: list[Messages]) -> Any:
        """A session kept nowhere (Responses ``store: false``): no index entry (no key lists,
        reads or continues it); its ``history`` is written to the store when its turn starts
        (the turn may run in another process) and deleted with its events when the turn ends."""
        ref = SessionRef(self, new_scru128(), agent, ephemeral=True)
        ref.history = list(history)
        return ref

    def _keep(self, live: RemoteTurn) -> None:
        """Remember ``live`` in :attr:`_turns` while it runs; once it ended, the key's least
        recently used finished turns beyond ``limits.idle_sessions_per_key`` leave memory (their
        events are in the shared log)."""
        self._turns[live.session_id] = live

        def ended(_: Any) -> None:
            if self._turns.get(live.session_id) is live:
                self._used(live.owner, live.session_id)

        live.task.add_done_callback(ended)

    def turn_of(self, session_id: str) -> Any:
        """The session's latest turn (on any process), followed from the shared event log."""
        latest = self.log.latest(session_id)
        if latest is None:
            return None
        turn_id, owner, ended = latest
        live = self._turns.get(session_id)
        if live is None or live.id != turn_id:
            live = RemoteTurn(self, turn_id, session_id, owner, ended=ended)
            self._keep(live)
        return live

    async def forget_session(self, session_id: str) -> None:
        """Delete a session in the shared database: its owner entry and Responses ids, its
        turns and their event logs, and its records in the store."""
        self.index.delete(session_id)
        self._turns.pop(session_id, None)
        for recent in self._recent.values():
            recent.pop(session_id, None)

        # no turn of it runs: a workflow still pending is one paused for approval (left, with a
        # warning) or one recording its end (a moment): a request waits 1 s at most
        await asyncio.to_thread(self._erase, session_id, 1.0)

    def _owners_at_work(self) -> set[str]:
        return set()  # the shared turn log says which turns run (watch_revocations)

    async def watch_revocations(self, keys: Any, end_streams: Callable[[str], None] | None = None) -> None:
        """Until cancelled: every :attr:`revocation_check` seconds, abort the turns not ended
        (running in any process, or waiting in the queue) whose key was revoked: one query of
        the shared database, the same in every process (each aborts them; a second abort does
        nothing)."""
        done: OrderedDict[str, None] = OrderedDict()
        while True:
            await asyncio.sleep(self.revocation_check)
            try:
                for turn_id, owner in await asyncio.to_thread(self.log.of_revoked_keys):
                    if turn_id in done:
                        continue
                    if end_streams is not None:  # this process's streams of the key end as revoked
                        end_streams(owner)
                    done[turn_id] = None
                    if len(done) > 10_000:
                        done.popitem(last=False)
                    await asyncio.to_thread(self._abort_turn, turn_id)
            except Exception:  # the database is unreachable: try again
                log.warning("could not check the API keys for revocations", exc_info=True)

    def _abort_turn(self, turn_id: str) -> None:
        if not self.stopping:
            self.client.abort(turn_id)
            self.log.request_abort(turn_id)

    def running(self, session_id: str) -> bool:
        """True while a turn of the session runs (on any process), not while it waits for
        approval decisions."""
        listed = self.index.listed_running.pop(session_id, None)  # a listing just read it (once)
        if listed is not None and time.monotonic() - listed[1] < 0.5:
            busy = bool(listed[0])
        else:
            latest = self.log.latest(session_id)
            busy = latest is not None and not latest[2]
        waits = busy and bool(self.waiting_calls(session_id)[1])
        if waits:  # for awaits_approval, asked next
            if len(self._waits) > 10_000:
                self._waits.clear()
            self._waits.add(session_id)
        else:
            self._waits.discard(session_id)
        return busy and not waits

    def awaits_approval(self, meta: dict[str, Any]) -> bool:
        """True when the session's turn waits for approval decisions (in any process), as
        :meth:`running`, asked just before (a listing asks both per session), saw it."""
        waits = meta["id"] in self._waits
        self._waits.discard(meta["id"])
        return waits

    def waiting_calls(self, session_id: str) -> tuple[str | None, list[ToolCall]]:
        """``(turn id, calls)``: the session's unfinished turn and the calls it waits for a
        decision on (``(None, [])`` when no turn runs; ``[]`` while it runs)."""
        latest = self.log.latest(session_id)
        if latest is None or latest[2]:
            return None, []
        return latest[0], self.client.pending_approvals(latest[0])

    def continue_turn(self, owner: str, session: Any, stream: Any) -> Any:
        """The turn the last decision continued (``stream``, from ``SessionRef.approve_stream``):
        it goes on in the process that holds it, nothing starts here."""
        return stream

    async def abort_paused(self, owner: str, session_id: str) -> Any:
        """End the session's turn waiting for approvals as ``aborted`` (wherever it runs: each
        pending call gets an "aborted" result, the model is not called again). Returns the
        turn, ``None`` when none waits."""
        turn_id, calls = await asyncio.to_thread(self.waiting_calls, session_id)
        if turn_id is None or not calls:
            return None
        await asyncio.to_thread(self.client.abort, turn_id)
        return self.turn_of(session_id)

    def start_turn(self, owner: str, session: Any, prompts: list[Messages]) -> Any:
        """Enqueue a durable turn of ``session`` and follow it.

        Raises:
            TypeError / ValueError: a bad prompt.
            ApiError: (409) the session already runs a turn; (429) the key runs
                ``limits.max_turns_per_key`` turns already.
        """
        from dbos import EnqueueOptions

        from ..agentic.turn_inputs import _prompt_messages
        from ..durable.config import APP_VERSION
        from ..durable.served import SERVED_WORKFLOW

        msgs = _prompt_messages(prompts)
        sid = session.session_id
        ephemeral = getattr(session, "ephemeral", False)
        if self.log.running_count(owner) >= self.config.limits.max_turns_per_key:
            raise ApiError(
                429,
                f"at most {self.config.limits.max_turns_per_key} turns may run at once per key",
                type="rate_limit_error",
                code="too_many_turns",
            )
        turn_id = f"turn-{new_scru128()}"
        if not self.log.begin(turn_id, sid, owner):
            _, calls = self.waiting_calls(sid)
            if calls:
                raise ApiError(
                    409,
                    f"the last turn is waiting for approval of tool call(s) {', '.join(c.id for c in calls)}:"
                    f" decide each with POST /v1/sessions/{sid}/approvals/{{call_id}} first",
                    code="approval_pending",
                )
            raise ApiError(
                409, "this session is already running a turn (abort it or wait)", code="session_busy"
            )
        try:
            if ephemeral and session.history:
                from ..types import SessionRecord

                self.store.append(sid, [SessionRecord.Conversation(message=m) for m in session.history])
            msgs += [from_json(b, Messages) for b in self.log.take_pending(sid)]
            opts: EnqueueOptions = {
                "workflow_name": SERVED_WORKFLOW,
                "queue_name": self.durable.queue,
                "workflow_id": turn_id,
                "queue_partition_key": sid,
                "app_version": APP_VERSION,
            }
            params = to_json(session.params).decode()
            if self.mask:  # the workflow's inputs (DBOS keeps them) hold no secret
                msgs = [self.mask.value(m, Messages) for m in msgs]
            self.client.dbos.enqueue(opts, session.agent.name, sid, to_json(msgs).decode(), params)
        except BaseException:
            self.log.finish(turn_id)
            raise
        with contextlib.suppress(Exception):
            self.index.touch(sid)
        live = RemoteTurn(self, turn_id, sid, owner)
        if ephemeral:  # kept nowhere: its records and events go when it ends
            live.task.add_done_callback(lambda _: self._forget_later(sid))
        else:
            self._keep(live)
        return live

    def _forget_later(self, session_id: str) -> None:
        def delete() -> None:
            try:
                self._erase(session_id, 10.0)
            except Exception:
                log.warning("could not delete the store: false session %s", session_id, exc_info=True)

        if not self.stopping:
            fut = asyncio.get_running_loop().run_in_executor(None, delete)
            self._forgetting.add(fut)
            fut.add_done_callback(self._forgetting.discard)

    def _erase(self, session_id: str, wait: float) -> None:
        """Delete a session's turns and event logs, what DBOS keeps of them
        (:meth:`_drop_workflows`, waiting ``wait`` seconds) and its records in the store."""
        self._drop_workflows(self.log.forget_session(session_id), wait)
        self.store.delete_session(session_id)

    def _drop_workflows(self, turn_ids: list[str], wait: float) -> None:
        """Delete what DBOS keeps of ended turns (their inputs, step checkpoints, outputs and
        events: ``DBOSClient.delete_workflows``), so a deleted or ``store: false`` session
        leaves nothing there either. A turn whose workflow is still finishing (its last event
        is published just before DBOS records its end) is waited for up to ``wait`` seconds
        (one read of all their statuses every 50 ms); one still running after that is left,
        with a warning."""
        if not turn_ids:
            return
        dbos = self.client.dbos
        deadline = time.monotonic() + wait
        running = list(turn_ids)
        while True:
            rows = dbos.list_workflows(workflow_ids=running, load_input=False, load_output=False)
            running = [r.workflow_id for r in rows if r.status in ("PENDING", "ENQUEUED")]
            if not running or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        for turn_id in running:
            log.warning("turn %s still runs: DBOS keeps its records", turn_id)
        ended = [t for t in turn_ids if t not in running]
        if ended:
            dbos.delete_workflows(ended)

    def _stop_streams(self) -> None:
        # the process stops: end the streams it serves, abort nothing (their turns go on
        # in the other processes, or are handed back to them)
        self.stopping = True
        for t in list(self.followed):
            t.close()

    async def shutdown(self) -> None:
        """Stop following, hand back this process's running turns, close the connections.
        Turns keep running on the other processes."""
        for t in list(self.followed):
            t.task.cancel()
        if self._forgetting:  # store: false sessions being deleted
            await asyncio.wait(set(self._forgetting), timeout=10)
        await asyncio.to_thread(self.worker.stop, self.shared.grace)
        self.client.close()
        self.wakeups.close()
        if self._own_store:
            self.store.close()
        self.db.close()
