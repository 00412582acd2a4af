"""Sub-agents: the ``agent`` tool runs a child session (its own model, system prompt and tools)
to an answer and returns it.

    researcher = SubAgent("researcher", "Finds facts in the files.", model=small_model,
                          system_prompt="Answer from the files only.", tools=files.tools(["read", "search_file"]))
    agents = SubAgents(researcher, max_depth=2)
    parent = AgentSession.builder(model).with_tool_factory(agents).build()

The ``agent`` tool is a multi-command tool (one function, ``command`` selects):

- ``run(agent, task)``: start a child session on ``task``, run its turn to the end, return
  ``{"agent", "session_id", "outcome", "answer"}`` as JSON.
- ``start(agent, task)`` -> ``{"id", "session_id"}``: the same in the background (a thread of
  its own); ``check(id)`` -> status and tokens so far; ``result(id, wait=true)`` -> the answer
  (waiting for it unless ``wait`` is false); ``stop(id)`` aborts it.

Rules:

- **Depth**: a child gets the ``agent`` tool too while its depth is below ``max_depth``
  (the parent is depth 0), so delegation is bounded.
- **Usage and budget**: a child's usage (tokens and cost) is recorded in its parent's ledger as
  each of its generations ends (and so in every ancestor's), so the parent's totals, ``Summary``
  and budget include it while the child runs. Every request of the tree is gated before it is
  sent: a child's admission checks the parent's budget (its totals so far, every running child
  included), and the parent's ``with_can_spend`` check (up the tree) is asked about the child's
  request with the parent's ledger, so a child never spends past its parent's budget by more
  than the one request under way.
- **Records**: the child is its own session in the parent's store (``session_id`` in the
  result; :func:`child_sessions` lists the children a parent's records name).
- **Steering and abort**: a steer or abort of the parent cancels a running ``run`` call, which
  ends the child's turn as aborted (its partial output kept); background children are aborted
  when the parent is aborted, and by ``stop``.

See ``docs/tools.md``.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ...errors import ConfigurationError
from ...ids import new_scru128
from ...types import Messages, SessionRecord, TextContent, ToolResultMessage
from ..errors import TurnFailedError
from ..ledger import TokenLedger
from ..tools import MultiCommandTool, tool
from ..turn.hooks import SpendRequest
from .errors import ToolRefused

if TYPE_CHECKING:
    from ..builder import AgentSessionBuilder
    from ..session import AgentSession

__all__ = ["SubAgent", "SubAgentRun", "SubAgents", "TreeLedger", "child_sessions"]

AGENT_TOOL = "agent"
_WATCH_INTERVAL = 0.05


@dataclass(frozen=True)
class SubAgent:
    """A kind of child agent the model can start.

    Attributes:
        name: what the model passes as ``agent``.
        description: when to use it (shown to the model).
        model: its model (``None``: the parent's primary model).
        system_prompt: its instructions.
        tools: its tools (the ``agent`` tool is added while depth allows).
        max_inner: model calls per child turn.
    """

    name: str
    description: str = ""
    model: Any = None
    system_prompt: str | None = None
    tools: Sequence[Any] = ()
    max_inner: int = 25


class SubAgentRun:
    """A background child started with ``start``: its session, thread and result."""

    def __init__(self, run_id: str, agent: str, child: AgentSession) -> None:
        self.id = run_id
        self.agent = agent
        self.child = child
        self.thread: threading.Thread | None = None
        self.turn: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.stopped = False

    def status(self) -> dict[str, Any]:
        """``{"id", "agent", "session_id", "status", "tokens"}`` (status: running/completed/...)."""
        if not self.done.is_set():
            status = "running"
        elif self.error is not None:
            status = "failed"
        else:
            status = self.turn.outcome.value
        return {
            "id": self.id,
            "agent": self.agent,
            "session_id": self.child.session_id,
            "status": status,
            "tokens": self.child.ledger.tokens,
        }


def child_sessions(records: Iterable[SessionRecord]) -> list[str]:
    """The ids of the child sessions a parent's records name (from its ``agent`` results), in
    order."""
    out: list[str] = []
    for r in records:
        if not isinstance(r, SessionRecord.Conversation):
            continue
        m = r.message
        if (
            isinstance(m, ToolResultMessage)
            and m.name.startswith(AGENT_TOOL)
            and isinstance(m.content, TextContent)
        ):
            try:
                value = msgspec.json.decode(m.content.content)
            except msgspec.DecodeError:
                continue
            sid = value.get("session_id") if isinstance(value, dict) else None
            if isinstance(sid, str) and sid not in out:
                out.append(sid)
    return out


class SubAgents:
    """The sub-agents a session may start; a session-aware tool factory (pass it to
    ``AgentSessionBuilder.with_tool_factory`` or ``ToolShed.factory``).

    Args:
        agents: the :class:`SubAgent` kinds (names must be distinct).
        max_depth: how deep delegation may go (1: children cannot start agents).

    Raises:
        ConfigurationError: no agents, duplicate names, or ``max_depth < 1``.
    """

    def __init__(self, *agents: SubAgent, max_depth: int = 2) -> None:
        if not agents:
            raise ConfigurationError("SubAgents needs at least one SubAgent")
        names = [a.name for a in agents]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"sub-agent names must be distinct: {names}")
        if max_depth < 1:
            raise ConfigurationError("max_depth must be at least 1")
        self.agents = {a.name: a for a in agents}
        self.max_depth = max_depth
        self._depth: dict[str, int] = {}
        self.runs: dict[str, SubAgentRun] = {}
        self._lock = threading.Lock()

    def __call__(self, session: AgentSession) -> list[Any]:
        """The ``agent`` tool bound to ``session`` (none past ``max_depth``)."""
        depth = self._depth.get(session.session_id, 0)
        if depth >= self.max_depth:
            return []
        return [_agent_tool(self, session, depth)]

    # -- children --------------------------------------------------------------------------------

    def _child(self, parent: AgentSession, kind: SubAgent, depth: int) -> AgentSession:
        from ..session import AgentSession

        builder = (
            AgentSession.builder(kind.model if kind.model is not None else parent.model)
            .with_store(parent.store)
            .with_tools(list(kind.tools))
            .with_max_iterations(kind.max_inner, 1)
        )
        if kind.system_prompt:
            builder = builder.with_system_prompt(kind.system_prompt)
        builder = _traced_like(builder, parent)
        child_id = new_scru128()
        self._depth[child_id] = depth + 1
        builder = builder.with_tool_factory(self)
        child = builder.build(child_id)
        child.ledger = TreeLedger(parent.ledger)
        gate = _tree_gate(parent)
        if gate is not None:
            child.hooks = dataclasses.replace(child.hooks, can_spend=gate)
        return child

    def _kind(self, name: str) -> SubAgent:
        kind = self.agents.get(name)
        if kind is None:
            raise ToolRefused(f"no sub-agent {name!r}; choose one of: {', '.join(self.agents)}")
        return kind

    async def run(self, parent: AgentSession, depth: int, agent: str, task: str) -> str:
        """Run a child to its answer (see the module docstring); JSON text.

        Raises:
            ToolRefused: an unknown agent, or the child's turn did not complete.
        """
        kind = self._kind(agent)
        child = self._child(parent, kind, depth)
        try:
            turn = await child.arun_turn(Messages.user(task))
        except TurnFailedError as exc:  # the child's failure is reported below, with its usage
            turn = exc.turn
        except asyncio.CancelledError:
            child.abort()  # its generations so far are in the parent's ledger already
            raise
        if not turn.ok:
            why = turn.error.message if turn.error is not None else turn.outcome.value
            raise ToolRefused(
                f"the sub-agent {agent!r} did not complete (outcome {turn.outcome.value}: {why}); "
                f"its session is {child.session_id}"
            )
        return _json(
            {
                "agent": agent,
                "session_id": child.session_id,
                "outcome": turn.outcome.value,
                "answer": turn.text(),
            }
        )

    def start(self, parent: AgentSession, depth: int, agent: str, task: str) -> str:
        """Start a child in the background; ``{"id", "session_id"}`` as JSON."""
        kind = self._kind(agent)
        child = self._child(parent, kind, depth)
        run = SubAgentRun(f"run-{len(self.runs) + 1}", agent, child)
        with self._lock:
            self.runs[run.id] = run

        def work() -> None:
            try:
                try:
                    run.turn = asyncio.run(child.arun_turn(Messages.user(task)))
                except TurnFailedError as exc:
                    run.turn = exc.turn
            except BaseException as exc:
                run.error = exc
            finally:
                run.done.set()

        def watch() -> None:  # the parent's abort (or stop) reaches the child, even before it started
            while not run.done.wait(_WATCH_INTERVAL):
                if run.stopped or parent.steering.aborted:
                    child.abort()

        ctx = contextvars.copy_context()  # the child's spans stay in the caller's trace
        run.thread = threading.Thread(
            target=ctx.run, args=(work,), name=f"foundation-ai-subagent-{run.id}", daemon=True
        )
        run.thread.start()
        threading.Thread(target=watch, name=f"foundation-ai-subagent-watch-{run.id}", daemon=True).start()
        return _json({"id": run.id, "agent": agent, "session_id": child.session_id})

    def _run_of(self, run_id: str) -> SubAgentRun:
        run = self.runs.get(run_id)
        if run is None:
            raise ToolRefused(f"no sub-agent run {run_id!r}; started: {', '.join(self.runs) or 'none'}")
        return run

    def check(self, run_id: str) -> str:
        """The status of a background run, as JSON."""
        return _json(self._run_of(run_id).status())

    async def result(self, run_id: str, wait: bool = True) -> str:
        """The answer of a background run (waiting for it unless ``wait`` is false), as JSON.

        Raises:
            ToolRefused: unknown id, or the child failed.
        """
        run = self._run_of(run_id)
        if wait:
            while not run.done.is_set():
                await asyncio.sleep(_WATCH_INTERVAL)
        if not run.done.is_set():
            return _json(run.status())
        if run.error is not None:
            raise ToolRefused(f"the sub-agent run {run_id!r} failed: {type(run.error).__name__}: {run.error}")
        out = run.status()
        out["answer"] = run.turn.text()
        return _json(out)

    def stop(self, run_id: str) -> str:
        """Abort a background run; its status as JSON."""
        run = self._run_of(run_id)
        if not run.done.is_set():
            run.stopped = True  # the watcher aborts the child until its turn ends
            run.done.wait(30.0)
        return _json(run.status())


def _traced_like(builder: AgentSessionBuilder, parent: AgentSession) -> AgentSessionBuilder:
    """``builder`` with the parent's tracing (the same ``Tracing`` hooks), so a child's
    ``invoke_agent`` span is a child of the ``execute_tool`` span of the call that runs it
    (docs/telemetry.md)."""
    from ..turn.hooks import IN_PROCESS

    steps = parent.hooks.steps
    tracing: Any = getattr(steps, "tracing", None)  # TracingSteps' (agentic.plugins.TracingPlugin)
    if tracing is None:
        return builder
    return builder.with_phase_hooks(tracing).with_step_runner(tracing.steps(IN_PROCESS))


class TreeLedger(TokenLedger):
    """A child session's ledger: its own totals, each generation also recorded in the parent's
    ledger (and so up the tree) at once; its budget is the parent's, checked against the
    parent's totals (:meth:`exhausted`).

    Args:
        parent: the parent session's ledger.
    """

    __slots__ = ("parent",)
    _lock = threading.RLock()  # children in background threads record into one parent (nested: re-entered)

    def __init__(self, parent: TokenLedger) -> None:
        super().__init__(parent.budget)
        self.parent = parent

    def record(self, usage: Any) -> None:
        """Add one generation's usage here and to the parent's ledger."""
        super().record(usage)
        with TreeLedger._lock:
            self.parent.record(usage)

    def exhausted(self) -> str | None:
        """The parent's verdict (its totals hold every child's usage so far)."""
        return self.parent.exhausted()


def _tree_gate(parent: AgentSession) -> Any:
    """A ``can_spend`` check for a child of ``parent``: the parent's own check (which, for a
    child parent, asks its parent in turn), given the child's request (its ``session_id``) with
    the parent's ledger; ``None`` when no session up the tree has one."""
    check = parent.hooks.can_spend
    if check is None:
        return None

    def gate(request: SpendRequest) -> Any:
        # the child's request (its session id, model, turn) against the parent's ledger
        return check(
            SpendRequest(request.session_id, request.interaction, request.model, parent.ledger, request.state)
        )

    return gate


def _json(value: dict[str, Any]) -> str:
    return msgspec.json.encode(value).decode()


def _agent_tool(agents: SubAgents, parent: AgentSession, depth: int) -> MultiCommandTool:
    kinds = "; ".join(
        f"{a.name}: {a.description}" if a.description else a.name for a in agents.agents.values()
    )

    @tool(name="run", category="agents")
    async def run(agent: str, task: str) -> str:
        """Give a task to a sub-agent and wait for its answer.

        Args:
            agent: which sub-agent.
            task: the complete task, with everything the sub-agent needs to know.
        """
        return await agents.run(parent, depth, agent, task)

    @tool(name="start", category="agents")
    def start(agent: str, task: str) -> str:
        """Start a sub-agent in the background; returns its run id.

        Args:
            agent: which sub-agent.
            task: the complete task.
        """
        return agents.start(parent, depth, agent, task)

    @tool(name="check", category="agents", inline=True)
    def check(id: str) -> str:
        """The status of a background sub-agent run.

        Args:
            id: the run id from start.
        """
        return agents.check(id)

    @tool(name="result", category="agents")
    async def result(id: str, wait: bool = True) -> str:
        """The answer of a background sub-agent run.

        Args:
            id: the run id from start.
            wait: wait for the run to finish.
        """
        return await agents.result(id, wait)

    @tool(name="stop", category="agents")
    def stop(id: str) -> str:
        """Stop a background sub-agent run.

        Args:
            id: the run id from start.
        """
        return agents.stop(id)

    return MultiCommandTool(
        AGENT_TOOL,
        [run, start, check, result, stop],
        description=f"Delegate a task to a sub-agent (a separate session). Sub-agents: {kinds}.",
    )
