"""OpenTelemetry spans for agent turns, following the GenAI semantic conventions.

One ``invoke_agent`` span per turn, a ``chat`` child span per model call and an ``execute_tool``
child span per tool call, with the ``gen_ai.*`` attributes of
https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/ and
https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-agent-spans/ (operation, provider,
request and response model, token usage, finish reasons, tool name and call id, ``error.type``).
Message content (prompts, answers, tool arguments and results) is recorded only when asked for
(``capture_content=True``, or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``).

It needs ``opentelemetry-api`` (the ``otel`` extra); without it :func:`tracing_available` is
false and ``AgentSessionBuilder.with_tracing()`` adds nothing, so a turn costs what it costs
untraced. This module does not import OpenTelemetry until a :class:`Tracing` is made. The spans
go to the tracer provider the application configured (``opentelemetry.trace``); with none they
are the API's non-recording spans. See ``docs/telemetry.md``.

It plugs into the turn through its hooks (``docs/turn-loop.md``): :class:`Tracing` is a
``PhaseHooks`` (the turn and model-call spans) and :class:`TracingSteps` wraps the session's
``StepRunner`` (one span around each tool call, timed where the call runs).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .agentic.turn.hooks import Phase, PhaseHooks, StepRunner
from .types import StopReason, ToolCall, ToolResultMessage, UsageReport, to_json

if TYPE_CHECKING:
    from .agentic.turn.generate import Generation
    from .agentic.turn.state import TurnState

__all__ = ["CAPTURE_ENV", "Tracing", "TracingSteps", "session_tracing", "tracing_available"]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Set to ``true`` to record message content when ``capture_content`` is not given."""

INSTRUMENTATION = "foundation_ai"

_PROVIDERS = {"openai": "openai", "openai_responses": "openai", "anthropic": "anthropic"}
_ABANDONED = (GeneratorExit,)
_EMPTY_USAGE = UsageReport()
CANCELLED = "cancelled"
"""``error.type`` of a span whose operation was cut short: an abandoned turn, a model call
stopped by ``abort()`` or steering, or by the consumer leaving."""


def tracing_available() -> bool:
    """True when ``opentelemetry-api`` is installed (checked without importing it)."""
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except (ImportError, ValueError):
        return False


def finish_reason(stop: Any) -> str:
    """The semantic-conventions finish reason of a ``StopReason``: ``stop``, ``length``,
    ``tool_call``, ``content_filter`` (a refusal), ``error``, ``aborted`` or the provider's own
    string."""
    if not isinstance(stop, StopReason):
        return "stop"
    if stop.is_refusal():
        return "content_filter"
    tag = str(stop.__struct_config__.tag)
    if tag == "tool_use":
        return "tool_call"
    if tag == "message":
        return str(getattr(stop, "value", "other"))
    return tag


class _Turn:
    __slots__ = ("chat", "input", "output", "span", "usage_known")

    def __init__(self, span: Any) -> None:
        self.span = span
        self.chat: Any = None
        self.usage_known = False  # a model call of the turn reported token usage
        self.input = 0  # tokens the turn's model calls reported (cut calls included)
        self.output = 0


def _abandoned(error: BaseException | None) -> bool:
    """True for the end of a turn whose consumer left (``break``, a dropped stream, a cancelled
    task): the turn still runs its ``finish`` hooks afterwards (``run_turn``)."""
    return isinstance(error, _ABANDONED) or type(error).__name__ == "CancelledError"


def _known(usage: Any) -> bool:
    """True when ``usage`` is a report a provider sent (the empty ``UsageReport`` a
    generation starts with means "unknown": its attributes are left out, not 0)."""
    return usage is not None and usage != _EMPTY_USAGE


class Tracing(PhaseHooks):
    """Phase hooks emitting GenAI spans; add with ``AgentSessionBuilder.with_tracing(...)``.

    Args:
        tracer_provider: an ``opentelemetry.trace.TracerProvider`` (default: the global one).
        agent_name: ``gen_ai.agent.name`` of the ``invoke_agent`` spans (and their name,
            ``"invoke_agent <agent_name>"``).
        capture_content: record ``gen_ai.input.messages``, ``gen_ai.output.messages``,
            ``gen_ai.system_instructions``, ``gen_ai.tool.call.arguments`` and
            ``gen_ai.tool.call.result`` (JSON). Default: the :data:`CAPTURE_ENV` variable.

    Raises:
        FoundationAIError: ``opentelemetry-api`` is not installed (check :func:`tracing_available`
            first, or use ``with_tracing``, which is then a no-op).

    Spans: ``invoke_agent`` (internal) from the turn's ``open`` phase to ``finish`` (or to the
    phase that raised or was abandoned), with the turn's token totals and, for a failed turn,
    status ERROR and ``error.type`` (the ``AgenticError`` kind); ``chat <model>`` (client) around
    each ``generate`` phase; ``execute_tool <name>`` (internal) around each tool call (through
    :class:`TracingSteps`). Both are children of the turn's span.
    """

    def __init__(
        self,
        tracer_provider: Any = None,
        *,
        agent_name: str = "foundation-ai",
        capture_content: bool | None = None,
    ) -> None:
        try:
            from opentelemetry import trace
        except ImportError:
            from .errors import FoundationAIError

            raise FoundationAIError(
                "tracing needs opentelemetry-api: pip install 'foundation-ai[otel]'"
            ) from None
        from opentelemetry import context

        from . import __version__

        self._trace = trace
        self._context = context
        self.tracer = trace.get_tracer(INSTRUMENTATION, __version__, tracer_provider=tracer_provider)
        self.agent_name = agent_name
        if capture_content is None:
            capture_content = os.environ.get(CAPTURE_ENV, "").strip().lower() in ("1", "true", "yes")
        self.capture_content = capture_content
        self._turns: dict[int, _Turn] = {}
        self._calls: dict[str, Any] = {}  # tool call id -> the turn span (the tool span's parent)

    def steps(self, inner: StepRunner) -> TracingSteps:
        """``inner`` with an ``execute_tool`` span around each tool call (``agentic.plugins.TracingPlugin``)."""
        return TracingSteps(self, inner)

    # -- the turn ---------------------------------------------------------------------------------

    def before_phase(self, phase: Phase, state: TurnState) -> None:
        """Start the turn span (``open``) or a model-call span (``generate``); note the parent of
        the tool calls about to run (``execute_tools``)."""
        if phase is Phase.OPEN:
            span = self.tracer.start_span(
                f"invoke_agent {self.agent_name}",
                kind=self._trace.SpanKind.INTERNAL,
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent_name},
            )
            self._turns[id(state)] = _Turn(span)
            return
        turn = self._turns.get(id(state))
        if turn is None:
            return
        if phase is Phase.GENERATE:
            turn.chat = self.tracer.start_span(
                "chat",
                context=self._trace.set_span_in_context(turn.span),
                kind=self._trace.SpanKind.CLIENT,
                attributes={"gen_ai.operation.name": "chat"},
            )
        elif phase is Phase.EXECUTE_TOOLS:
            for call in state.calls:
                self._calls[call.id] = turn.span

    def after_phase(self, phase: Phase, state: TurnState, error: BaseException | None) -> None:
        """End the model-call span (``generate``) or the turn span (``finish``, or any phase that
        raised or was abandoned)."""
        turn = self._turns.get(id(state))
        if turn is None:
            return
        if phase is Phase.GENERATE and turn.chat is not None:
            self._end_chat(turn, state.generation, error)
            turn.chat = None
        elif phase is Phase.EXECUTE_TOOLS:
            for call in state.calls:
                self._calls.pop(call.id, None)
        if phase is Phase.FINISH or (error is not None and not _abandoned(error)):
            # an abandoned turn ends at the ``finish`` hook run_turn calls after closing it, so
            # its span carries the outcome the closing set (``aborted``), not ``completed``
            del self._turns[id(state)]
            if turn.chat is not None:  # abandoned inside generate
                self._end_chat(turn, state.generation, error)
                turn.chat = None
            self._end_turn(turn, state, error)

    def _end_chat(self, turn: _Turn, gen: Generation | None, error: BaseException | None) -> None:
        span = turn.chat
        cut = _abandoned(error) or (gen is not None and gen.interrupted)
        if gen is not None:
            attrs: dict[str, Any] = {}
            model = gen.model
            model_id = getattr(model, "model_id", None)
            name = model_id.name() if model_id is not None and hasattr(model_id, "name") else str(model_id)
            outputs = list(gen.outputs.values())
            provider = outputs[0].provider if outputs else getattr(model, "provider", None)
            provider = _PROVIDERS.get(str(provider), str(provider or "unknown"))
            span.update_name(f"chat {name}")
            attrs["gen_ai.request.model"] = name
            attrs["gen_ai.provider.name"] = provider
            msgs = outputs if gen.error is None else [*outputs, gen.error]
            if msgs:
                attrs["gen_ai.response.model"] = _model_name(msgs[-1].model)
            if cut:  # stopped before the model finished: no provider finish reason exists
                attrs["gen_ai.response.finish_reasons"] = ["aborted"]
                attrs["error.type"] = CANCELLED
            elif msgs:
                # one choice: why it ended (an error, else a tool call, else the last output's)
                reasons = [finish_reason(m.stop_reason) for m in msgs]
                pick = next((r for r in ("error", "tool_call") if r in reasons), reasons[-1])
                attrs["gen_ai.response.finish_reasons"] = [pick]
            if _known(gen.usage):  # unknown usage is absent, never 0
                turn.usage_known = True
                turn.input += int(gen.usage.input)
                turn.output += int(gen.usage.output)
                attrs["gen_ai.usage.input_tokens"] = int(gen.usage.input)
                attrs["gen_ai.usage.output_tokens"] = int(gen.usage.output)
            if self.capture_content:
                inter = gen.interaction
                attrs["gen_ai.input.messages"] = to_json(list(inter.messages)).decode()
                if inter.system_prompt:
                    attrs["gen_ai.system_instructions"] = str(inter.system_prompt)
                attrs["gen_ai.output.messages"] = to_json(outputs).decode()
            span.set_attributes(attrs)
            if gen.error is not None and error is None and not cut:
                span.set_attribute("error.type", "provider_error")
                span.set_status(
                    self._trace.Status(self._trace.StatusCode.ERROR, gen.error.error_detail or "")
                )
        self._record(span, error)
        span.end()

    def _end_turn(self, turn: _Turn, state: TurnState, error: BaseException | None) -> None:
        span = turn.span
        attrs: dict[str, Any] = {
            "foundation_ai.turn.outcome": state.outcome.value,
            "foundation_ai.turn.generations": state.generations,
        }
        if turn.usage_known:  # the sum its model calls reported; none reported: absent, not 0
            attrs["gen_ai.usage.input_tokens"] = turn.input
            attrs["gen_ai.usage.output_tokens"] = turn.output
        span.set_attributes(attrs)
        if state.error is not None and error is None:
            span.set_attribute("error.type", state.error.kind)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, state.error.message))
        self._record(span, error)
        span.end()

    def _record(self, span: Any, error: BaseException | None) -> None:
        if error is None:
            return
        if _abandoned(error):
            span.set_attribute("error.type", CANCELLED)
            return
        span.record_exception(error)
        span.set_attribute("error.type", type(error).__qualname__)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(error)))

    # -- tool calls -------------------------------------------------------------------------------

    def tool_span(self, call: ToolCall) -> Any:
        """Start the ``execute_tool`` span of ``call`` (a child of its turn's span)."""
        parent = self._calls.get(call.id)
        ctx = None if parent is None else self._trace.set_span_in_context(parent)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if self.capture_content:
            attrs["gen_ai.tool.call.arguments"] = to_json(call.arguments or {}).decode()
        return self.tracer.start_span(
            f"execute_tool {call.name}", context=ctx, kind=self._trace.SpanKind.INTERNAL, attributes=attrs
        )

    def end_tool_span(self, span: Any, result: ToolResultMessage | None, error: BaseException | None) -> None:
        """End a span from :meth:`tool_span` with the call's result (an error result sets
        status ERROR, ``error.type`` ``tool_error``)."""
        if result is not None:
            if self.capture_content:
                span.set_attribute("gen_ai.tool.call.result", to_json(result.content).decode())
            if result.error_detail:
                span.set_attribute("error.type", "tool_error")
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, result.error_detail))
        self._record(span, error)
        span.end()


class TracingSteps(StepRunner):
    """A ``StepRunner`` that puts an ``execute_tool`` span around each tool call and otherwise
    defers to ``inner`` (the session's step runner: in-process or durable)."""

    def __init__(self, tracing: Tracing, inner: StepRunner) -> None:
        self.tracing = tracing
        self.inner = inner

    def around(self, inner: StepRunner) -> TracingSteps:
        """The same tool spans around another runner (``agentic.plugins.WrappingSteps``: the
        builder's ``with_step_runner`` after ``with_tracing``)."""
        return TracingSteps(self.tracing, inner)

    def generation(self, step: Generation) -> AsyncGenerator[Any, None]:
        """The inner runner's generation (the ``chat`` span comes from the phase hooks)."""
        return self.inner.generation(step)

    async def tool_call(
        self, call: ToolCall, run: Callable[[], Awaitable[ToolResultMessage]]
    ) -> ToolResultMessage:
        """Run the call through the inner runner inside an ``execute_tool`` span, with that
        span as the current span: spans the tool opens itself are its children (async tools in
        this task; sync tools on worker threads, which get the caller's context variables;
        MCP calls; sub-agents' turns)."""
        tracing = self.tracing
        span = tracing.tool_span(call)
        token = tracing._context.attach(tracing._trace.set_span_in_context(span))
        try:
            result = await self.inner.tool_call(call, run)
        except BaseException as exc:
            tracing.end_tool_span(span, None, exc)
            raise
        finally:
            tracing._context.detach(token)
        tracing.end_tool_span(span, result, None)
        return result


def _model_name(model_id: Any) -> str:
    name = getattr(model_id, "name", None)
    return name() if callable(name) else str(model_id)


def session_tracing(
    tracer_provider: Any = None, *, agent_name: str = "foundation-ai", capture_content: bool | None = None
) -> Tracing | None:
    """The :class:`Tracing` hooks the session builder's ``with_tracing`` installs
    (``agentic.plugins.TracingPlugin``), or ``None`` when ``opentelemetry-api`` is not installed
    (tracing is then a no-op). Arguments as for :class:`Tracing`."""
    if not tracing_available():
        return None
    return Tracing(tracer_provider, agent_name=agent_name, capture_content=capture_content)
