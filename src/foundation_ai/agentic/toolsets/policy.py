"""Tool-call policy: retries with exponential backoff, an error policy, and loop detection.

    policy = ToolPolicy(max_retries=2, backoff=0.5, backoff_cap=8.0, loop_limit=3)
    agent = AgentSession.builder(model).with_tools(...).with_tool_policy(policy).build()

- **Retry**: a call that fails with a *transient* error (a timeout, a network error: see
  :func:`is_transient`) is run again up to ``max_retries`` times, waiting ``backoff`` seconds,
  then ``backoff * multiplier``, ... capped at ``backoff_cap`` (each attempt has the tool's own
  timeout). The wait can be interrupted by a steer or an abort.
- **Error policy**: ``on_error(call, exc)`` classifies a failure as ``"retry"`` (retry while
  attempts remain, then report), ``"report"`` (an error result the model sees: the fall-back,
  and today's behaviour for every error) or ``"fail"`` (the call gets its error result, then the
  turn ends with outcome ``Failed``, error kind ``tool_failed``). The default
  (:func:`default_on_error`) retries transient errors and reports everything else.
- **Loop detection**: the same call (name + canonical JSON arguments) made ``loop_limit``
  times in one turn (default 3) is not run: it gets a *nudge* result asking the model to change
  course; made again after that, the turn ends with outcome ``LoopDetected``.

The defaults (``max_retries=0``) run every call once and report every error, as before. See
``docs/tools.md``.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from ...errors import ArgumentValidationError, ToolArgumentError
from ...types import Messages, ToolCall, ToolResultMessage
from ..tools import AgentTool, ToolRegistry, error_result, to_content

__all__ = [
    "ErrorAction",
    "LoopTracker",
    "PolicyExecutor",
    "ToolPolicy",
    "call_key",
    "default_on_error",
    "is_transient",
]

ErrorAction = Literal["retry", "report", "fail"]
"""What to do with a failed call: retry it, report it to the model, or fail the turn."""


def is_transient(exc: BaseException) -> bool:
    """True for timeouts and network errors: ``TimeoutError``, ``ConnectionError``, httpx's
    ``TimeoutException``/``NetworkError``, or any exception with a true ``transient``
    attribute (e.g. an MCP server that stopped)."""
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    if getattr(exc, "transient", False) is True:
        return True
    # httpx2 (our HTTP stack) and, when a tool imported it, the older httpx: the same names
    for name in ("httpx2", "httpx"):
        mod = sys.modules.get(name)
        if mod is not None and isinstance(exc, mod.TimeoutException | mod.NetworkError):
            return True
    return False


def default_on_error(call: ToolCall, exc: BaseException) -> ErrorAction:
    """Retry transient errors (:func:`is_transient`), report everything else."""
    return "retry" if is_transient(exc) else "report"


def call_key(call: ToolCall) -> str:
    """A call's identity for loop detection: its name and its arguments as canonical JSON
    (keys sorted)."""
    try:
        args = msgspec.json.encode(call.arguments, order="sorted").decode()
    except (TypeError, msgspec.EncodeError):
        args = repr(call.arguments)
    except RecursionError:  # nested past the encoder's depth: the registry refuses such a call anyway
        args = "<arguments nested too deeply to encode>"
    return f"{call.name}\x00{args if call.arguments is not None else call.raw_arguments}"


@dataclass(frozen=True)
class ToolPolicy:
    """How tool calls are retried, how their errors are handled and when a loop is declared
    (see the module docstring).

    Attributes:
        max_retries: extra attempts after a failure classified ``"retry"`` (0: none).
        backoff: seconds before the first retry.
        multiplier: each later wait is this many times the previous one.
        backoff_cap: the longest wait, seconds.
        on_error: ``(call, exception) -> "retry" | "report" | "fail"``.
        loop_limit: identical calls per turn before the nudge (``None``: no loop detection).
    """

    max_retries: int = 0
    backoff: float = 0.5
    multiplier: float = 2.0
    backoff_cap: float = 10.0
    on_error: Callable[[ToolCall, BaseException], ErrorAction] = field(default=default_on_error)
    loop_limit: int | None = 3

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return float(min(self.backoff * self.multiplier ** (attempt - 1), self.backoff_cap))

    @property
    def plain(self) -> bool:
        """True when calls run exactly as without a policy (no retries, default errors)."""
        return self.max_retries == 0 and self.on_error is default_on_error


DEFAULT_POLICY = ToolPolicy()


class LoopTracker:
    """Counts identical calls within one turn (:func:`call_key`) and remembers why the turn
    must end: ``looped`` (the call repeated past the nudge) or ``failed`` (a ``"fail"`` error)."""

    __slots__ = ("counts", "failed", "looped")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}  # a plain dict: a Counter costs 1 us to make
        self.looped: ToolCall | None = None
        self.failed: tuple[ToolCall, str] | None = None

    @property
    def must_end(self) -> bool:
        """True when the turn has to end after this tool stage."""
        return self.looped is not None or self.failed is not None


def nudge_text(call: ToolCall, times: int) -> str:
    """The result a repeated call gets instead of running."""
    return (
        f"loop detected: you called {call.name} with the same arguments {times} times in this turn; "
        "the call was not run again. Its earlier results stand: use them, change the arguments, or "
        "answer. Calling it once more ends the turn."
    )


class PolicyExecutor:
    """A ``CallExecutor`` (``prepare``/``is_sequential``/``execute``) over a registry that
    applies a :class:`ToolPolicy` and a turn's :class:`LoopTracker`.

    Args:
        registry: the session's tools.
        policy: the policy.
        tracker: the turn's tracker (one per turn; shared by its tool stages).
        run: optional ``run(call, attempt)`` wrapper (the step runner); default: run directly.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        policy: ToolPolicy,
        tracker: LoopTracker,
        run: Callable[[ToolCall, Callable[[], Any]], Any] | None = None,
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.tracker = tracker
        self._run = run
        # ``policy.plain``, inlined: the registry runs calls as they are
        self._direct = run is None and policy.max_retries == 0 and policy.on_error is default_on_error
        if self._direct:
            self.execute = registry.execute  # type: ignore[method-assign]  # one frame less

    def prepare(self, call: ToolCall) -> Any:
        """Loop detection, then the registry's validation."""
        limit = self.policy.loop_limit
        if limit is not None:
            key = call_key(call)
            counts = self.tracker.counts
            counts[key] = n = counts.get(key, 0) + 1
            if n == limit:
                return error_result(call, nudge_text(call, n))
            if n > limit:
                self.tracker.looped = call
                return error_result(
                    call,
                    f"loop detected: {call.name} was called with the same arguments {n} times; the turn ends",
                )
        return self.registry.prepare(call)

    def is_sequential(self, call: ToolCall) -> bool:
        """The registry's answer."""
        return self.registry.is_sequential(call)

    async def execute(self, call: ToolCall, prepared: Any) -> ToolResultMessage:
        """Run ``call`` under the policy (through the ``run`` wrapper when given)."""
        if self._direct:  # no retries, default errors: the registry runs it as is
            return await self.registry.execute(call, prepared)
        if self._run is None:
            return await self._execute(call, prepared)
        result = self._run(call, lambda: self._execute(call, prepared))
        if inspect.isawaitable(result):
            result = await result
        return result  # type: ignore[no-any-return]

    async def _execute(self, call: ToolCall, prepared: Any) -> ToolResultMessage:
        policy = self.policy
        if policy.plain:
            return await self.registry.execute(call, prepared)
        t: AgentTool
        t, definition, value = prepared
        timeout = t.timeout if t.timeout is not None else self.registry.default_timeout
        attempt = 0
        while True:
            attempt += 1
            try:
                result = t.run(definition, value)
                if timeout is None:
                    if inspect.isawaitable(result):
                        result = await result
                else:
                    result = await asyncio.wait_for(_await(result), timeout)
                return Messages.ToolResult(tool_call_id=call.id, name=call.name, content=to_content(result))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                action = policy.on_error(call, exc)
                if action == "retry" and attempt <= policy.max_retries:
                    await asyncio.sleep(policy.delay(attempt))
                    continue
                detail = _describe(call, exc, timeout)
                if attempt > 1:
                    detail += f" (after {attempt} attempts)"
                if action == "fail":
                    self.tracker.failed = (call, detail)
                return error_result(call, detail)


async def _await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _describe(call: ToolCall, exc: BaseException, timeout: float | None) -> str:
    """The error text of a failed call, worded as ``ToolRegistry.execute`` words it."""
    if isinstance(exc, TimeoutError):
        return f"tool {call.name!r} timed out after {timeout} s"
    if isinstance(exc, ToolArgumentError):
        return f"invalid arguments: {exc}"
    if isinstance(exc, ArgumentValidationError):
        lines = [f"{v.path}: {v.message}" for v in exc.violations]
        return "invalid arguments (" + str(len(lines)) + " problem(s)):\n" + "\n".join(lines)
    return f"tool {call.name!r} raised {type(exc).__name__}: {exc}"
