"""Running turns for HTTP clients: ``SessionManager`` (sessions per key, live turns, limits)
and ``LiveTurn`` (one running turn whose ``TurnEvent``s any number of followers read).

A turn runs as an asyncio task of the server, independent of the request that started it: a
Chat or Responses stream whose client disconnects aborts its turn (as the OpenAI API stops
generating); a turn started through the sessions API keeps running and can be followed,
steered or aborted from any request of the same key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec

from ..agentic import AgentSession, SqliteSessionStore, TurnEvent
from ..agentic.errors import ApprovalPendingError
from ..agentic.events import TurnOutcome, TurnStream
from ..ids import new_scru128
from ..types import Messages, ModelParams, SessionRecord, TextContent, ToolCall
from .config import Agent, ServeConfig
from .errors import ApiError
from .index import SessionIndex
from .masking import EventMasker, MaskingStore, SecretMask

__all__ = ["LiveTurn", "SessionManager", "event_batches", "first_event"]

log = logging.getLogger(__name__)


class LiveTurn:
    """A running (or finished) turn of a session.

    Attributes:
        id: the turn's id (SCRU128).
        session_id, owner: the session and the key id that started it.
        events: every ``TurnEvent`` so far (the last is ``Done`` or ``Failed`` once ``done``).
        turn: the finished ``Turn`` (``None`` while running, or when the loop crashed).
    """

    def __init__(
        self,
        session: AgentSession,
        owner: str,
        prompts: list[Messages],
        stream: TurnStream | None = None,
        mask: SecretMask | None = None,
    ) -> None:
        self.id = new_scru128()
        self.mask = mask if mask else None
        """Secrets masked in every event published (``masking.py``)."""
        self._masker = EventMasker(mask) if mask else None
        self.session = session
        self.session_id = session.session_id
        self.owner = owner
        self.prompts = prompts
        self.events: list[TurnEvent] = []
        self.done = False
        self.turn: Any = None
        self._waiters: list[asyncio.Future[None]] = []
        """One future per follower waiting for the next event (``_notify`` wakes them)."""
        self.task: asyncio.Task[None] | None = None
        self.closed = False
        self.asked: dict[int, list[ToolCall]] = {}
        """``{index of a Done event: the tool calls that turn paused on}``, per pause."""
        self._abort = False
        # checks the prompt now (TypeError, ValueError, ApprovalPendingError)
        self._stream = stream if stream is not None else session.arun_turn_stream(prompts)

    def _notify(self) -> None:
        # called once per published event: nothing to allocate when no follower waits
        waiters = self._waiters
        if waiters:
            self._waiters = []
            for w in waiters:
                if not w.done():  # a follower cancelled while it waited
                    w.set_result(None)

    async def _tick(self) -> None:
        """Wait for the next :meth:`_notify`."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        await fut

    async def run(self) -> None:
        """Run the turn to its end, publishing each event. A ``Done`` with outcome
        ``awaiting_approval`` is published only once the turn has fully ended (the session is
        free), so a client that sees it can decide at once."""
        stream = self._stream
        held: TurnEvent | None = None
        try:
            async for ev in stream.events():
                if self._abort:  # asked before the turn's first step, when it could not take it
                    self._abort = False
                    self.session.abort()
                if isinstance(ev, TurnEvent.Done) and ev.summary.outcome is TurnOutcome.AwaitingApproval:
                    self.events += self._release()
                    held = ev
                    continue
                if self._masker is None:
                    self.events.append(ev)
                else:
                    self.events += self._masker.feed(ev)
                self._notify()
        except Exception:  # the loop itself crashed: followers get a Failed event, clients no trace
            held = None
            log.exception("turn %s of session %s crashed", self.id, self.session_id)
            from ..agentic.events import TurnSummary
            from ..types import AgenticError, TokenSnapshot

            err = AgenticError(kind="internal", message="the turn failed inside the server")
            summary = TurnSummary(
                outcome=TurnOutcome.Failed, message_count=0, usage=TokenSnapshot(), error=err
            )
            self.events += self._release()
            self.events.append(TurnEvent.Failed(err, summary))
        finally:
            self.turn = stream.turn
            if held is not None:
                self.asked[len(self.events)] = self.session.pending_approvals()
                self.events.append(held)
            self.done = True
            self._notify()

    def _masked(self, ev: TurnEvent) -> list[TurnEvent]:
        """``ev`` with the secrets masked (:class:`~foundation_ai.serve.masking.EventMasker`):
        a text piece may be held back while its end could begin a secret."""
        return [ev] if self._masker is None else self._masker.feed(ev)

    def _release(self) -> list[TurnEvent]:
        return [] if self._masker is None else self._masker.flush()

    @property
    def paused(self) -> bool:
        """True when the turn stopped for approval of tool calls (its last event is ``Done``
        with outcome ``awaiting_approval``) and no continuation runs yet."""
        last = self.events[-1] if self.events else None
        return (
            self.done
            and isinstance(last, TurnEvent.Done)
            and last.summary.outcome is TurnOutcome.AwaitingApproval
        )

    def resume(self, stream: TurnStream) -> None:
        """Continue a paused turn with ``stream`` (the continuation after the approval
        decisions): its events are appended to :attr:`events`, so followers see them."""
        self._stream = stream
        self.done = False
        self.turn = None
        self._abort = False
        self._notify()

    async def first_event(self) -> TurnEvent | None:
        """Wait for the turn's first event that is not ``Progress`` (``None`` when it ended
        without one): what decides whether a streamed request gets its HTTP error before any
        byte of the answer."""
        i = 0
        while True:
            while i < len(self.events):
                if not isinstance(self.events[i], TurnEvent.Progress):
                    return self.events[i]
                i += 1
            if self.done:
                return None
            await self._tick()

    def close(self) -> None:
        """Wake followers waiting at a pause for good (the server shuts down)."""
        self.closed = True
        self._notify()

    async def follow(self, start: int = 0, *, through_pauses: bool = False) -> AsyncIterator[TurnEvent]:
        """The events from index ``start`` on, waiting for new ones until the turn ends.

        A turn paused for approval ends the iteration after its ``Done`` event, unless
        ``through_pauses``: then the iteration waits for the continuation (started by an
        approval decision) and goes on with its events.
        """
        i = start
        while True:
            while i < len(self.events):
                yield self.events[i]
                i += 1
            if self.done and (self.closed or not (through_pauses and self.paused)):
                return
            await self._tick()

    async def batches(
        self, start: int = 0, *, through_pauses: bool = False
    ) -> AsyncIterator[tuple[int, list[TurnEvent]]]:
        """Like :meth:`follow`, but each step is ``(index of its first event, the events)``: every
        event that arrived since the previous step (never empty), so a follower that fell behind
        writes them at once."""
        i = start
        while True:
            if i < len(self.events):
                batch = self.events[i:]
                yield i, batch
                i += len(batch)
                continue
            if self.done and (self.closed or not (through_pauses and self.paused)):
                return
            await self._tick()

    def abort(self) -> None:
        """Ask the turn to stop at its next safe point (its output so far is kept). Asked
        before the turn has taken its first step, the turn takes it at its first event."""
        if not self.done:
            self._abort = True
        self.session.abort()


async def first_event(live: Any) -> TurnEvent | None:
    """:meth:`LiveTurn.first_event`; ``None`` at once for a turn without it (a turn of another
    process, ``shared.RemoteTurn``: its stream starts before its first event, as before)."""
    wait = getattr(live, "first_event", None)
    return await wait() if wait is not None else None


def event_batches(live: Any, *, through_pauses: bool = False) -> AsyncIterator[tuple[int, list[TurnEvent]]]:
    """``live.batches(...)`` for a :class:`LiveTurn` (itself: no hop per step); for another
    followed turn (one with only ``follow``, e.g. a turn running in another process) its events
    one at a time, as ``(index, [event])``."""
    batches = getattr(live, "batches", None)
    if batches is not None:
        it: AsyncIterator[tuple[int, list[TurnEvent]]] = batches(through_pauses=through_pauses)
        return it
    return _one_by_one(live, through_pauses)


async def _one_by_one(live: Any, through_pauses: bool) -> AsyncIterator[tuple[int, list[TurnEvent]]]:
    i = 0
    async for ev in live.follow(through_pauses=through_pauses):
        yield i, [ev]
        i += 1


class SessionManager:
    """Sessions of a server, per API key.

    Args:
        config: the :class:`ServeConfig`.
    """

    mask: SecretMask = SecretMask(())
    """The secrets masked in what is served and stored (``ServeConfig.secrets``; set per
    instance)."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.agents = {a.name: a for a in config.agents}
        data = config.data_path()
        self._own_store = config.store is None
        self.store = (
            config.store if config.store is not None else SqliteSessionStore(data / "serve-sessions.sqlite3")
        )
        self.mask = SecretMask(config.secret_texts())
        if self.mask:
            self.store = MaskingStore(self.store, self.mask)
        self.index = SessionIndex(str(data / "serve-index.sqlite3"))
        self._sessions: dict[str, AgentSession] = {}
        self._turns: dict[str, LiveTurn] = {}
        self._running: dict[str, int] = {}
        self._recent: dict[str, OrderedDict[str, None]] = {}
        """Per key, the ids of its sessions in memory, least recently used first."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The server's event loop (set when the app starts)."""

    # -- agents and sessions -------------------------------------------------------------------

    def agent(self, name: Any) -> Agent:
        """The agent named ``name``.

        Raises:
            ApiError: (404 ``model_not_found``) no such agent.
        """
        agent = self.agents.get(name) if isinstance(name, str) else None
        if agent is None:
            raise ApiError(
                404,
                f"the model {name!r} does not exist (GET /v1/models lists the agents)",
                type="not_found_error",
                code="model_not_found",
                param="model",
            )
        return agent

    def _builder(self, agent: Agent) -> Any:
        b = AgentSession.builder(agent.resolved_model()).with_store(self.store)
        if agent.system_prompt:
            b = b.with_system_prompt(agent.system_prompt)
        if agent.tools:
            b = b.with_tools(*agent.tools)
        if agent.params is not None:
            b = b.with_params(agent.params)
        gate = agent.can_use_tool()
        if gate is not None:
            b = b.with_can_use_tool(gate)
        return b

    async def new_session(
        self, owner: str, agent: Agent, history: list[Messages], title: str
    ) -> AgentSession:
        """A new session of ``agent`` owned by ``owner``, starting from ``history`` (persisted)."""

        def make() -> AgentSession:
            session: AgentSession = self._builder(agent).build()
            if history:
                self.store.append(
                    session.session_id, [SessionRecord.Conversation(message=m) for m in history]
                )
                session.messages = list(history)
            return session

        # building does no I/O once the model is resolved (a model string may load weights);
        # writing a history does: those two run off the event loop
        blocking = bool(history) or (isinstance(agent.model, str) and agent._resolved is None)
        session = await asyncio.to_thread(make) if blocking else make()
        self.index.add(session.session_id, owner, agent.name, title)
        self._sessions[session.session_id] = session
        self._used(owner, session.session_id)
        return session

    def new_ephemeral_session(self, agent: Agent, history: list[Messages]) -> AgentSession:
        """A session of ``agent`` kept nowhere: its records go to an ``InMemorySessionStore`` of
        its own, it has no index entry (no key lists, reads or continues it) and it is not kept
        in :attr:`_sessions` (the Responses API's ``store: false``)."""
        from ..agentic import InMemorySessionStore

        session: AgentSession = self._builder(agent).with_store(InMemorySessionStore()).build()
        session.messages = list(history)
        return session

    async def conversation(self, owner: str, session_id: str) -> list[Messages]:
        """The messages of a session the key owns, from the store (``conversation_of``)."""
        from ..agentic.stores import conversation_of

        return conversation_of(await self.records(owner, session_id))

    def _used(self, owner: str, session_id: str) -> None:
        recent = self._recent.setdefault(owner, OrderedDict())
        recent[session_id] = None
        recent.move_to_end(session_id)
        self._retire(owner)

    def _busy(self, owner: str, session_id: str) -> None:
        """A turn of the session starts: it leaves the key's idle sessions (:attr:`_recent`)
        until the turn ends (``_used`` again), so that the idle ones alone are counted and
        scanned, however many turns run."""
        recent = self._recent.get(owner)
        if recent is not None:
            recent.pop(session_id, None)
            if not recent:
                del self._recent[owner]

    def _retire(self, owner: str) -> None:
        """Drop the key's least recently used idle sessions and finished turns from memory
        beyond ``limits.idle_sessions_per_key`` (they stay in the store; ``open_session``
        resumes them). Running turns and turns paused for approval stay (their followers wait
        on them); they are not counted (a running one leaves the idle list when its turn starts,
        :meth:`_busy`, and comes back when it ends)."""
        recent = self._recent.get(owner)
        if recent is None:
            return
        limit = self.config.limits.idle_sessions_per_key
        while len(recent) > limit:
            sid, _ = recent.popitem(last=False)
            live = self._turns.get(sid)
            if live is not None and (not live.done or live.paused):
                continue  # not idle: stays in memory (a finished turn of it calls _used again)
            self._turns.pop(sid, None)
            self._sessions.pop(sid, None)
        if not recent:
            del self._recent[owner]

    def meta(self, owner: str, session_id: Any) -> dict[str, Any]:
        """The index entry of a session the key owns.

        Raises:
            ApiError: (404) no such session for this key (another key's session is reported
                exactly like a missing one).
        """
        meta = self.index.get(session_id) if isinstance(session_id, str) else None
        if meta is None or meta["owner"] != owner:
            raise ApiError(
                404, f"no session {session_id!r}", type="not_found_error", code="session_not_found"
            )
        return meta

    async def open_session(self, owner: str, session_id: Any) -> AgentSession:
        """A session the key owns (resumed from the store when not in memory).

        Raises:
            ApiError: (404) no such session for this key.
        """
        meta = self.meta(owner, session_id)
        live = self._sessions.get(meta["id"])
        if live is not None:
            self._used(owner, meta["id"])
            return live
        agent = self.agent(meta["agent"])
        session: AgentSession = await asyncio.to_thread(lambda: self._builder(agent).resume(meta["id"]))
        # two requests may resume the same session at once: the first one stored wins
        session = self._sessions.setdefault(meta["id"], session)
        self._used(owner, meta["id"])
        return session

    async def records(self, owner: str, session_id: Any) -> list[SessionRecord]:
        """The stored records of a session the key owns."""
        meta = self.meta(owner, session_id)
        return await asyncio.to_thread(self.store.load, meta["id"])

    # -- turns ---------------------------------------------------------------------------------

    def turn_of(self, session_id: str) -> LiveTurn | None:
        """The session's latest turn started by this process (running or finished)."""
        return self._turns.get(session_id)

    def running(self, session_id: str) -> bool:
        """True while a turn of the session runs."""
        t = self._turns.get(session_id)
        return t is not None and not t.done

    def awaits_approval(self, meta: dict[str, Any]) -> bool:
        """True when a tool call of the session (``meta``: its index entry) waits for a
        decision (and no turn of it runs)."""
        return bool(meta.get("waiting")) and not self.running(meta["id"])

    def start_turn(self, owner: str, session: AgentSession, prompts: list[Messages]) -> LiveTurn:
        """Start a turn in the background.

        Raises:
            ApiError: (409) the session is already running a turn; (429) the key runs
                ``limits.max_turns_per_key`` turns already.
        """
        sid = session.session_id
        if self.running(sid):
            raise ApiError(
                409, "this session is already running a turn (abort it or wait)", code="session_busy"
            )
        if self._running.get(owner, 0) >= self.config.limits.max_turns_per_key:
            raise ApiError(
                429,
                f"at most {self.config.limits.max_turns_per_key} turns may run at once per key",
                type="rate_limit_error",
                code="too_many_turns",
            )
        try:
            live = LiveTurn(session, owner, prompts, mask=self.mask)
        except ApprovalPendingError:
            pending = ", ".join(c.id for c in session.pending_approvals())
            raise ApiError(
                409,
                f"the last turn is waiting for approval of tool call(s) {pending}: decide each with"
                f" POST /v1/sessions/{sid}/approvals/{{call_id}} first",
                code="approval_pending",
            ) from None
        self._turns[sid] = live
        self._launch(owner, live)
        return live

    def continue_turn(self, owner: str, session: AgentSession, stream: TurnStream) -> LiveTurn:
        """Run ``stream`` (a paused turn's continuation after approval decisions) in the
        background: as more events of the session's paused :class:`LiveTurn` when this process
        ran it (its followers go on), else as a new one. Not limited by ``max_turns_per_key``:
        the decisions were already taken and the paused turn's records must be completed."""
        sid = session.session_id
        live = self._turns.get(sid)
        if live is not None and live.paused and live.owner == owner:
            live.resume(stream)
        else:
            live = LiveTurn(session, owner, [], stream, mask=self.mask)
            self._turns[sid] = live
        self._launch(owner, live)
        return live

    async def abort_paused(self, owner: str, session_id: str) -> LiveTurn | None:
        """End a turn paused for approvals (no turn of the session runs): its continuation
        is started and aborted before its first step, so no tool call of the pause runs (not
        even one approved already: each gets the error result "interrupted (aborted)"), the
        model is not called again and the turn ends ``aborted``. Returns the continued
        :class:`LiveTurn`, ``None`` when nothing waits (docs/serve.md: Approvals)."""
        session = await self.open_session(owner, session_id)
        if not isinstance(session, AgentSession) or self.running(session_id):
            return None
        stream = None
        for c in session.pending_approvals():
            stream = session.deny_stream(c.id, "the turn was aborted")
        if stream is None:
            return None
        live = self.continue_turn(owner, session, stream)
        live.abort()
        return live

    def _launch(self, owner: str, live: LiveTurn) -> None:
        sid = live.session_id
        self._running[owner] = self._running.get(owner, 0) + 1
        self._busy(owner, sid)
        recorded = False

        async def run() -> None:
            nonlocal recorded
            try:
                await live.run()
            finally:  # in the same step as the turn's end: before any follower hears of a pause
                with contextlib.suppress(Exception):
                    waiting = len(live.session.pending_approvals()) if live.paused else 0
                    self.index.turn_ended(sid, waiting)  # one write: waiting, and used now
                    recorded = True

        live.task = asyncio.get_running_loop().create_task(run(), name=f"turn-{live.id}")

        def ended(_: Any) -> None:
            self._running[owner] -= 1
            if not self._running[owner]:
                del self._running[owner]
            if not recorded:  # cancelled before it ran, or the index write failed
                with contextlib.suppress(Exception):
                    self.index.touch(sid)
            if sid in self._sessions:
                self._used(owner, sid)
            elif self._turns.get(sid) is live:  # a session kept nowhere (store: false): gone
                del self._turns[sid]

        live.task.add_done_callback(ended)

    def abort_turns_of(self, owner: str) -> int:
        """Abort every running turn of the key ``owner`` (its key was revoked), and end its
        turns paused for approval (:meth:`abort_paused`); how many."""
        n = 0
        for t in list(self._turns.values()):
            if t.owner == owner and not t.done:
                t.abort()
                n += 1
            elif t.owner == owner and t.paused and self.loop is not None:
                self.loop.create_task(self.abort_paused(owner, t.session_id))
                n += 1
        return n

    revocation_check = 0.5
    """Seconds between two checks of the keys while turns run (a revoked key's turns with no
    open stream are aborted within it)."""

    def _owners_at_work(self) -> set[str]:
        return {t.owner for t in self._turns.values() if not t.done or t.paused}

    async def watch_revocations(self, keys: Any, end_streams: Callable[[str], None] | None = None) -> None:
        """Until cancelled: every :attr:`revocation_check` seconds while turns run or wait for
        approval, abort those of revoked keys (``keys.list()``: the valid ones, read again
        when another process changed them), whether or not a stream follows them.
        ``end_streams`` (``StreamGuard.revoke``) is called with a revoked key id first, so
        that its open streams end as revoked."""
        while True:
            await asyncio.sleep(self.revocation_check)
            try:
                owners = self._owners_at_work()
                if not owners:
                    continue
                valid = {k["id"] for k in await asyncio.to_thread(keys.list)}
                for owner in owners - valid:
                    if end_streams is not None:
                        end_streams(owner)
                    self.abort_turns_of(owner)
            except Exception:  # the key store is unreachable: try again
                log.warning("could not check the API keys for revocations", exc_info=True)

    async def forget_session(self, session_id: str) -> None:
        """Delete a session (no turn of it runs): its index entry, what this process keeps of it
        and its records in the store (``delete_session``: gone from the store's files too)."""
        self.index.delete(session_id)
        self._sessions.pop(session_id, None)
        self._turns.pop(session_id, None)
        delete = getattr(self.store, "delete_session", None)
        if delete is None:  # a store of before delete_session joined the contract
            log.warning("the session store cannot delete session %s: its records stay", session_id)
            return
        await asyncio.to_thread(delete, session_id)

    def stop_threadsafe(self) -> None:
        """From any thread, before the server stops accepting: abort running turns and end
        the streams waiting at a pause for approval, so that open streams finish (the server
        waits for them before it stops)."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._stop_streams)

    def _stop_streams(self) -> None:
        for t in self._turns.values():
            t.close()
            if not t.done:
                t.abort()

    async def shutdown(self) -> None:
        """Abort running turns and wait for them (their records are persisted)."""
        tasks = []
        for t in self._turns.values():
            t.close()
            if not t.done and t.task is not None:
                t.abort()
                tasks.append(t.task)
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        self.index.close()
        if self._own_store:
            self.store.close()


def title_of(prompts: list[Messages]) -> str:
    """A session title: the first user text of the prompt (trimmed)."""
    for m in prompts:
        if isinstance(m, Messages.User) and m.role == "user" and isinstance(m.content, TextContent):
            return " ".join(m.content.content.split())[:80]
    return ""


async def begin_turn(
    manager: SessionManager,
    owner: str,
    agent: Agent,
    session_id: str | None,
    messages: list[Messages],
    param: str,
    overrides: dict[str, Any] | None = None,
    *,
    ephemeral: bool = False,
) -> LiveTurn:
    """Start a turn for an OpenAI-style request.

    ``ephemeral`` (no ``session_id``): the session is kept nowhere
    (:meth:`SessionManager.new_ephemeral_session`; Responses ``store: false``).

    ``overrides`` (``convert.sampling``) replace fields of the agent's ``ModelParams`` for this
    turn. With ``session_id`` the session (owned by ``owner``, of the same agent) continues and the
    prompt is the request's messages after its last assistant output; without, a new session
    starts from the request's earlier messages and the prompt is the rest.

    Raises:
        ApiError: (400) too many messages, a text over the limit, nothing to answer, a session
            of another agent; (404) an unknown session; (409) busy; (429) too many turns.
    """
    from .convert import split_prompt

    limits = manager.config.limits
    if len(messages) > limits.max_messages:
        raise ApiError(
            400, f"at most {limits.max_messages} messages per request", code="too_many_messages", param=param
        )
    for m in messages:
        text = m.text() if isinstance(m, Messages) else None
        if text is not None and len(text) > limits.max_text_chars:
            raise ApiError(
                400,
                f"a message is longer than {limits.max_text_chars} characters",
                code="message_too_long",
                param=param,
            )
    if session_id is not None:
        meta = manager.meta(owner, session_id)
        if meta["agent"] != agent.name:
            raise ApiError(
                400,
                f"session {session_id!r} belongs to agent {meta['agent']!r}, not {agent.name!r}",
                param="model",
            )
        _, prompt = split_prompt(messages, param)
        session = await manager.open_session(owner, session_id)
    elif ephemeral:
        history, prompt = split_prompt(messages, param)
        session = manager.new_ephemeral_session(agent, history)
    else:
        history, prompt = split_prompt(messages, param)
        session = await manager.new_session(owner, agent, history, manager.mask.whole(title_of(prompt)))
    if manager.running(session.session_id):
        raise ApiError(409, "this session is already running a turn (abort it or wait)", code="session_busy")
    if overrides:  # this turn only: the request's sampling fields over the agent's parameters
        session.params = msgspec.structs.replace(agent.params or ModelParams(), **overrides)
    else:
        session.params = agent.params
    try:
        return manager.start_turn(owner, session, prompt)
    except (TypeError, ValueError) as exc:
        raise ApiError(400, str(exc), param=param) from None
