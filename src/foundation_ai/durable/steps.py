"""``DurableSteps``: the turn's model calls and tool calls as DBOS steps.

Plugged in with ``AgentSessionBuilder.with_step_runner`` (``docs/turn-loop.md``, "Step
runner") inside a DBOS workflow. Each generation is one step (its ``GenerationRecord`` is
checkpointed as JSON); each tool call is one step (its ``ToolResultMessage``). When DBOS
recovers the workflow on another worker, the completed steps return their checkpoints and the
turn goes on from the first step that had not completed
(https://docs.dbos.dev/python/tutorials/step-tutorial).

Step identity: DBOS names a workflow's steps by the order they start in
(https://docs.dbos.dev/architecture#workflow-recovery: a recovered workflow must call the same
steps in the same order). The tool calls of one response run concurrently, so their steps
would start in an order that depends on timing (a claim step finishing, a replayed step
returning from the database). :class:`DurableSteps` therefore starts every tool step in the
order the turn asks for the calls (:class:`StepOrder`): the calls of a ``depends_on`` stage in
the order of the model's answer, stage after stage, never in completion order; a recovered run
meets each recorded step at the same position (``docs/scaling.md``, "Parallel tool calls").

Side effects: a tool marked with :func:`side_effects` runs **at most once per call id**. A
``claim`` step is checkpointed before it runs; if the workflow is recovered after the claim
but before the tool's own step completed, the tool is not run again and the call gets an
error result saying its outcome is unknown. A tool marked ``side_effects(idempotent=True)``
keys its effect on :func:`current_call_id` (a unique key in what it writes): it is run again
after a crash with the same call id, so its effect exists exactly once and the turn gets its
real result (the idempotency-key pattern of
https://docs.dbos.dev/python/tutorials/step-tutorial). Unmarked tools are re-run (at least
once).

A run that lost its turn to another run (:mod:`foundation_ai.durable.ownership`) ends at its
next step: DBOS refuses the step's checkpoint, or the runner sees the loss first and runs no
more model or tool calls.

Steering costs a read, not a recorded operation, when nobody steers: before each generation the
runner looks whether a steering message waits for the turn (one read of DBOS's messages; before
the first generation, what the turn's start probe read, :mod:`~foundation_ai.durable.sysdb`) and
only then takes it with ``DBOS.recv`` (a recorded operation: two commits). A recovered run does
at each position what the first run recorded there (a ``recv`` or not), so replay stays
deterministic whatever was sent since.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from dbos import DBOS, StepOptions
from dbos import error as dbos_errors

from ..agentic.tools import error_result
from ..agentic.turn.generate import GenerationRecord
from ..agentic.turn.hooks import StepRunner
from ..types import Messages, ToolCall, ToolResultMessage, from_json, to_json
from .ownership import Ownership
from .sysdb import claim_supported, message_waits, probe_turn, record_claim

if TYPE_CHECKING:
    from ..agentic.turn.generate import Generation

__all__ = [
    "DurableSteps",
    "StepOrder",
    "current_call_id",
    "has_side_effects",
    "is_idempotent",
    "side_effects",
]

T = TypeVar("T")

log = logging.getLogger("foundation_ai.durable")

RECV = "DBOS.recv"
"""The name DBOS records a ``recv`` under."""

_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("foundation_ai_call_id", default=None)
STEER_TOPIC = "foundation_ai.steer"
"""The DBOS message topic steering and abort requests are sent on."""


@overload
def side_effects(tool: T, *, idempotent: bool = False) -> T: ...


@overload
def side_effects(tool: None = None, *, idempotent: bool = False) -> Callable[[T], T]: ...


def side_effects(tool: Any = None, *, idempotent: bool = False) -> Any:
    """Mark ``tool`` (a ``@tool`` function or any tool object) as having side effects; use it
    as ``@side_effects`` or ``@side_effects(idempotent=True)``. Returns ``tool`` (or the
    decorator).

    - plain: in a durable turn it runs at most once per call id; a crash between its start and
      its recorded result gives the call an error result saying the outcome is unknown.
    - ``idempotent=True``: the tool keys its effect on :func:`current_call_id` (e.g. a unique
      column, an idempotency key sent to an API); after a crash it is run again with the same
      call id, so the effect exists once and the model gets the real result.

    See the module docstring."""

    def mark(t: T) -> T:
        t.side_effects = True  # type: ignore[attr-defined]
        t.idempotent = idempotent  # type: ignore[attr-defined]
        return t

    return mark if tool is None else mark(tool)


def has_side_effects(tool: object) -> bool:
    """Whether :func:`side_effects` marked ``tool`` as at most once (not ``idempotent``)."""
    return bool(getattr(tool, "side_effects", False)) and not is_idempotent(tool)


def is_idempotent(tool: object) -> bool:
    """Whether ``side_effects(idempotent=True)`` marked ``tool``."""
    return bool(getattr(tool, "side_effects", False)) and bool(getattr(tool, "idempotent", False))


def current_call_id() -> str | None:
    """The id of the tool call running in this task (inside a durable turn's tool step; ``None``
    elsewhere): a tool can use it as an idempotency key for what it writes."""
    return _CALL_ID.get()


def _dbos_run() -> tuple[Any, Any] | None:
    """(the DBOS context of the workflow running in this task, DBOS's system database), or
    ``None`` when this DBOS release keeps them elsewhere (steering then takes a ``recv``
    before every generation, as it always could)."""
    try:  # DBOS keeps the context and the system database internal
        from dbos._context import get_local_dbos_context
        from dbos._dbos import _get_dbos_instance

        ctx = get_local_dbos_context()
        sys_db = _get_dbos_instance()._sys_db
    except (ImportError, AttributeError):  # pragma: no cover - another DBOS release
        return None
    usable = (
        ctx is not None
        and isinstance(getattr(ctx, "function_id", None), int)
        and hasattr(sys_db, "tables")
        and hasattr(sys_db, "list_workflow_steps")
    )
    return (ctx, sys_db) if usable else None


class StepOrder:
    """Starts concurrent steps in the order they were asked for.

    :meth:`ticket` is taken synchronously when a step is asked for (the loop asks for the calls
    of a stage in call order: it creates their tasks in that order and each task reaches
    ``tool_call`` before its first ``await``; asyncio runs callbacks in the order they were
    scheduled, https://docs.python.org/3/library/asyncio-eventloop.html#asyncio.loop.call_soon).
    A ticket's holder waits (:meth:`wait`) until the previous holder has *started* its DBOS
    step, i.e. DBOS gave it its position (DBOS does so synchronously, before its first
    ``await``); it then calls :meth:`release` right before starting its own last step, so the
    next holder starts after it. Only the start is ordered: the steps still run concurrently.
    """

    __slots__ = ("_tail",)

    def __init__(self) -> None:
        self._tail: asyncio.Future[None] | None = None

    def ticket(self) -> tuple[asyncio.Future[None] | None, asyncio.Future[None]]:
        """``(previous, mine)``: wait on ``previous`` (``None``: first), release ``mine``."""
        prev, mine = self._tail, asyncio.get_running_loop().create_future()
        self._tail = mine
        return prev, mine

    @staticmethod
    async def wait(prev: asyncio.Future[None] | None) -> None:
        """Wait until the previous holder started its step (a cancellation of this task does
        not cancel the previous holder's future)."""
        if prev is not None and not prev.done():
            await asyncio.shield(prev)

    @staticmethod
    def release(mine: asyncio.Future[None]) -> None:
        """Let the next holder start (idempotent)."""
        if not mine.done():
            mine.set_result(None)


class DurableSteps(StepRunner):
    """A :class:`~foundation_ai.agentic.turn.hooks.StepRunner` checkpointing every step in
    DBOS. Only usable inside a DBOS workflow (``foundation_ai.durable.worker``).

    Before each generation it takes the steering messages sent to the workflow
    (``DBOS.recv`` on :data:`STEER_TOPIC`, checkpointed so a replay sees the same ones) into the
    session's steering queue: a steer or abort sent from another process reaches the turn at
    the next model call (``docs/scaling.md``).

    Args:
        lookup: tool name -> the session's tool object or ``None`` (to find the
            :func:`side_effects` marks), e.g. ``session.registry.get``.
        steering: take steering messages before each generation (``False``: never; saves one
            ``DBOS.recv`` per model call).
        ownership: this run's hold on the turn: once it is lost no step starts, and a step
            DBOS refuses (``DBOSWorkflowConflictIDError``) marks it lost.

    Raises (from every step):
        dbos.error.DBOSWorkflowConflictIDError: the turn is owned by another run now.
    """

    def __init__(
        self,
        lookup: Callable[[str], Any] | None = None,
        *,
        steering: bool = True,
        ownership: Ownership | None = None,
    ) -> None:
        self.lookup = lookup
        self.steering = steering
        self.ownership = ownership
        self.order = StepOrder()
        self._recorded: dict[int, str] | None = None
        """Function id -> name of the operations DBOS had recorded for this workflow when this
        run first looked (a first run: none), read by :meth:`probe` or at the first steering
        point."""
        self._message_waited: bool | None = None
        """Whether a steering message waited when :meth:`probe` looked (``None``: not known,
        or already used at the first new steering position)."""
        self.checkpoint_filter: Callable[[str], str] | None = None
        """Applied to each step's JSON before DBOS checkpoints it (``serve --db``: its
        secrets masked, ``serve.masking.SecretMask.json``); the run goes on with what was
        checkpointed, as a recovered run would."""
        self.setup: tuple[Callable[[], str], Callable[[str], None]] | None = None
        """``(record, apply)``: the next step also checkpoints ``record()`` (what the turn
        offers the model) and hands the checkpointed value to ``apply`` when it returns
        (:func:`~foundation_ai.durable.recorded.record_setup`)."""

    async def _step(self, options: StepOptions, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``DBOS.run_step_async(options, fn)`` for a run that still owns the turn. A step
        whose function ran was checkpointed by DBOS only if this run still owned the turn:
        that confirms the ownership (:meth:`Ownership.confirm`)."""
        own, setup, filt = self.ownership, self.setup, self.checkpoint_filter
        if filt is not None:
            inner = fn

            async def filtered() -> T:
                out = await inner()
                return cast(T, filt(out)) if isinstance(out, str) else out

            fn = filtered
        if own is None and setup is None:
            return await self._refusal_noted(DBOS.run_step_async(options, fn))
        if own is not None:
            own.check()
        self.setup = None
        ran = False

        async def body() -> Any:
            nonlocal ran
            recorded = None if setup is None else setup[0]()  # what this step's call is offered
            out = await fn()
            ran = True
            return out if setup is None else [recorded, out]

        out = await self._refusal_noted(DBOS.run_step_async(options, body))
        if ran and own is not None:
            own.confirm()
        if setup is None:
            return out  # type: ignore[no-any-return]
        recorded, result = out
        setup[1](recorded)
        return result  # type: ignore[no-any-return]

    async def _claim_at_once(self, name: str) -> bool:
        """Record the claim step ``name`` with one write (:func:`~.sysdb.record_claim`) when
        the start probe found its position unrecorded; False (nothing done) otherwise: the
        claim is then a DBOS step as usual."""
        run = _dbos_run()
        own = self.ownership
        if run is None or self._recorded is None or own is None or self.setup is not None:
            return False
        if not claim_supported():  # another DBOS release's internals: an ordinary step
            return False
        ctx, _ = run
        token = getattr(ctx, "owner_xid", None)
        if not isinstance(token, str) or (ctx.function_id + 1) in self._recorded:
            return False
        from dbos._dbos import _get_dbos_instance

        own.check()
        reservation = DBOS.reserve_step()  # takes the position now, as run_step_async would
        wf, fid = ctx.workflow_id, reservation.step_id
        await self._refusal_noted(asyncio.to_thread(record_claim, _get_dbos_instance(), wf, fid, name, token))
        own.confirm()
        return True

    async def _refusal_noted(self, call: Awaitable[T]) -> T:
        """Await a DBOS call of this workflow; DBOS refusing it because another run owns the
        turn (``DBOSWorkflowConflictIDError``, re-raised) marks the turn lost."""
        try:
            return await call
        except dbos_errors.DBOSWorkflowConflictIDError:
            if self.ownership is not None:
                self.ownership.mark_lost()
            raise

    async def probe(self) -> None:
        """Read at the turn's start, in one statement (:func:`~.sysdb.probe_turn`), the
        workflow's owner (noted on the ownership), the operations recorded for it and whether
        a steering message waits: the first steering point then reads nothing. A failed read
        leaves all three to be read as before (no error)."""
        run = _dbos_run()
        if run is None:
            return
        ctx, sys_db = run
        try:
            seen = await asyncio.to_thread(probe_turn, sys_db, ctx.workflow_id, STEER_TOPIC)
        except Exception as exc:  # another DBOS release's tables, a failed read
            log.debug("durable turn %s: start probe failed (%s), read one by one", ctx.workflow_id, exc)
            return
        self._recorded = seen.recorded
        self._message_waited = seen.message_waits
        if self.ownership is not None:
            self.ownership.observed(seen.owner)

    async def _steering_waits(self) -> bool:
        """Whether to take a steering message now (with ``DBOS.recv``): at a position the
        first run of this turn recorded, whether it recorded a ``recv`` there; at a new one,
        whether a message waits (one read; a failed read counts as none: the message is taken
        at the next generation)."""
        run = _dbos_run()
        if run is None:
            return True
        ctx, sys_db = run
        wf, position = ctx.workflow_id, ctx.function_id + 1  # DBOS numbers operations in order
        if self._recorded is None:
            steps = await asyncio.to_thread(sys_db.list_workflow_steps, wf, load_output=False)
            self._recorded = {int(s["function_id"]): str(s["function_name"]) for s in steps}
        name = self._recorded.get(position)
        if name is not None:
            return name == RECV
        waited, self._message_waited = self._message_waited, None
        if waited is not None:  # read by the start probe
            return waited
        try:
            return await asyncio.to_thread(message_waits, sys_db, wf, STEER_TOPIC)
        except Exception as exc:  # counts as none: taken at the next generation
            log.warning("durable turn %s: could not look for a steering message: %s", wf, exc)
            return False

    async def _take_steering(self, step: Generation) -> None:
        while await self._steering_waits():
            msg = await self._refusal_noted(DBOS.recv_async(STEER_TOPIC, timeout_seconds=0))
            if msg is None:
                return
            kind, body = msg.get("kind"), msg.get("message")
            if kind == "abort":
                step.host.steering.abort()
            elif kind == "steer" and isinstance(body, str):
                step.host.steering.steer(from_json(body, Messages))
            elif kind == "follow_up" and isinstance(body, str):
                step.host.steering.follow_up(from_json(body, Messages))

    async def generation(self, step: Generation) -> AsyncGenerator[Any, None]:
        """One checkpointed model call (step ``generation:<n>``): streamed once, replayed from
        its ``GenerationRecord`` afterwards. Yields nothing (durable turns run unstreamed)."""
        if self.steering:
            await self._take_steering(step)

        async def call_model() -> str:
            async for _ in step.stream():
                pass
            return to_json(step.snapshot()).decode()

        record = await self._step({"name": step.key}, call_model)
        step.restore(from_json(record, GenerationRecord))
        return
        yield  # an async generator that yields nothing

    async def tool_call(
        self, call: ToolCall, run: Callable[[], Awaitable[ToolResultMessage]]
    ) -> ToolResultMessage:
        """One checkpointed tool call (step ``tool:<name>``). A :func:`side_effects` tool is
        claimed first and never re-run after a crash between its claim and its result. The
        steps of concurrent calls start in the order the calls were asked for
        (:class:`StepOrder`), whatever order they finish in."""
        prev, mine = self.order.ticket()  # before any await: the order the loop asked in
        try:
            await StepOrder.wait(prev)
            return await self._tool_steps(call, run, mine)
        finally:
            StepOrder.release(mine)

    async def _tool_steps(
        self, call: ToolCall, run: Callable[[], Awaitable[ToolResultMessage]], mine: asyncio.Future[None]
    ) -> ToolResultMessage:
        guarded = self.lookup is not None and has_side_effects(self.lookup(call.name))
        fresh = {"claimed": not guarded}

        async def claim() -> bool:
            fresh["claimed"] = True
            return True

        if guarded:
            if await self._claim_at_once(f"claim:{call.name}"):
                fresh["claimed"] = True
            else:
                await self._step({"name": f"claim:{call.name}"}, claim)

        async def run_tool() -> str:
            if not fresh["claimed"]:  # claimed by a run that died before checkpointing
                return to_json(_unknown_outcome(call)).decode()
            token = _CALL_ID.set(call.id)
            try:
                result = await run()
            finally:
                _CALL_ID.reset(token)
            return to_json(result).decode()

        # the next call's steps start once this one has its position: ``_step`` reaches
        # DBOS.run_step_async (which takes the position) before it first awaits
        StepOrder.release(mine)
        out: Messages = from_json(
            await self._step({"name": f"tool:{call.name}", "retries_allowed": False}, run_tool),
            Messages,
        )
        assert isinstance(out, ToolResultMessage)
        return out


def _unknown_outcome(call: ToolCall) -> ToolResultMessage:
    return error_result(
        call,
        "the worker running this call stopped before its result was recorded; the tool has "
        "side effects, so it was not run again (its effect may or may not have happened)",
    )
