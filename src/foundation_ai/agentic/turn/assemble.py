"""Phase ``assemble_context``: build the request of the next generation."""

from __future__ import annotations

import inspect

from ...errors import ContextOverflowError
from ...types import ModelInteraction
from ..context import window
from .generate import Generation
from .hooks import ContextRequest, Phase, SpendRequest
from .host import TurnHost
from .state import TurnState, fail

__all__ = ["assemble_context", "assemble_plain", "default_interaction"]


def default_interaction(host: TurnHost, state: TurnState) -> ModelInteraction:
    """The request the loop sends by default: the context window oldest-first (``messages``
    from ``context_start``, minus the rounds cut after an overflow, see
    :mod:`foundation_ai.agentic.context`), the system prompt and soul (never messages), the
    session's tools, the turn's ``tool_choice`` for this step and the chat template."""
    choices = state.choices
    return ModelInteraction(
        messages=window(host.messages, host.context_start, host.context_cut),
        system_prompt=host.system_prompt,
        soul=host.soul,
        tools_shed=host.registry.declarations(),
        tool_choice=choices[state.step] if state.step < len(choices) else None,
        chat_template=host.chat_template,
    )


async def assemble_context(host: TurnHost, state: TurnState) -> Phase:
    """Build the request (:func:`default_interaction`, then the session's
    :data:`~foundation_ai.agentic.turn.hooks.ContextAssembler` when one is set) and the
    :class:`Generation` step that will send it (``state.generation``); then the session's
    :data:`~foundation_ai.agentic.turn.hooks.SpendCheck` (``can_spend``), when one is set, may
    refuse it: the turn ends ``BudgetExhausted`` before the model is called. An assembler that
    raises ``ContextOverflowError`` ends the turn ``context_overflow`` before the model is
    called. Emits nothing. Next: ``generate``, or ``finish`` when the spend check refused or
    the request cannot fit.

    Raises:
        TypeError: the context assembler returned something else than a ``ModelInteraction``.
    """
    hooks = host.hooks
    if hooks.context is None and hooks.can_spend is None:
        return assemble_plain(host, state)
    interaction = default_interaction(host, state)
    state.step += 1
    model = host.models[state.model_index]
    assembler = hooks.context
    if assembler is not None:
        request = ContextRequest(host.session_id, interaction, host.messages, model, state)
        try:
            made = assembler(request)
            interaction = await made if inspect.isawaitable(made) else made
        except ContextOverflowError as exc:  # the request cannot fit: fail before the model call
            fail(state, "context_overflow", str(exc), tokens=exc.tokens, window=exc.window)
            return Phase.FINISH
        if not isinstance(interaction, ModelInteraction):
            raise TypeError(f"a context assembler must return a ModelInteraction, got {interaction!r:.80}")
    check = hooks.can_spend
    if check is not None:
        verdict = check(SpendRequest(host.session_id, interaction, model, host.ledger, state))
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is False or isinstance(verdict, str):
            fail(state, "budget_exhausted", verdict or "the spend check refused the next generation")
            return Phase.FINISH
    gen = Generation(host, state, model, interaction)
    state.generation = gen
    state.live = gen.outputs
    return Phase.GENERATE


def assemble_plain(host: TurnHost, state: TurnState) -> Phase:
    """:func:`assemble_context` for a session with no context assembler and no spend check
    (nothing to await): :func:`default_interaction` and its :class:`Generation`. Next:
    ``generate``."""
    choices, step, cut, registry = state.choices, state.step, host.context_cut, host.registry
    decls = registry._decls  # cached; ``is None``: a ``ToolDeclarations`` has a Python ``__bool__``
    interaction = ModelInteraction(  # default_interaction, inlined
        messages=host.messages[host.context_start :]
        if cut is None
        else window(host.messages, host.context_start, cut),
        system_prompt=host.system_prompt,
        soul=host.soul,
        tools_shed=decls if decls is not None else registry.declarations(),
        tool_choice=choices[step] if step < len(choices) else None,
        chat_template=host.chat_template,
    )
    state.step = step + 1
    gen = Generation(host, state, host.models[state.model_index], interaction)
    state.generation = gen
    state.live = gen.outputs
    return Phase.GENERATE
