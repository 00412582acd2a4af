"""The turn loop as named phases (full page: ``docs/turn-loop.md``).

A turn is a small state machine. Each phase is a function with one job that reads and updates
one :class:`TurnState`, appends the stream items it emits to ``state.out`` (the driver yields
them after the phase) and returns the next phase; ``generate`` streams its items as the model
produces them. Only :mod:`.persist` writes to the store.

::

    open -> prompt -> drain_steering -> admit -> assemble_context -> generate -> decide
                           ^                                                      |
                           |   retry: vacuous answer, steered, trimmed, fallback  |
                           +------------------------------------------------------+
                           |   tool calls:  execute_tools  <----------------------+
                           +--------------  (after the results)                   |
                           |   an answer:   follow_ups  <-------------------------+
                           +--------------  (follow-ups were queued)

    finish, after: an abort (drain_steering); the iteration limit, the budget, every model rate
    limited (admit); an error it cannot recover from (decide); an answer with no follow-up queued,
    or max_outer rounds (follow_ups); a gate's Ask (execute_tools).

=================  ==================  =====================================================
phase              module              job
=================  ==================  =====================================================
open               :mod:`.begin`       bind steering, start the ledger's turn
prompt             :mod:`.begin`       persist the prompt and queued follow-ups
drain_steering     :mod:`.drain`       safe point: abort, steering messages
admit              :mod:`.drain`       iteration limit, budget, circuit breakers: pick a model
assemble_context   :mod:`.assemble`    build the request (``ContextAssembler`` hook)
generate           :mod:`.generate`    call the model, merge chunks (``StepRunner`` hook)
decide             :mod:`.decide`      answer, tool calls, vacuous retry; :mod:`.recover`:
                                       interrupted, overflow trim, rate-limit fallback, failure
follow_ups         :mod:`.follow_ups`  go on with queued follow-ups (outer rounds)
execute_tools      :mod:`.execute`     ``ToolGate`` hook, run the calls (``StepRunner`` hook)
finish             :mod:`.finish`      persist and emit the ``Summary`` (then ``FailedAction``)
=================  ==================  =====================================================

:class:`PhaseHooks` are called before and after every phase. The session is seen through
:class:`TurnHost`; this package never imports the session module.
"""

from __future__ import annotations

from .generate import Generation, GenerationRecord
from .hooks import (
    Allow,
    Ask,
    ChainedPhaseHooks,
    ContextAssembler,
    ContextRequest,
    Deny,
    GateDecision,
    GateRequest,
    InProcessSteps,
    Phase,
    PhaseHooks,
    StepRunner,
    ToolGate,
    TurnHooks,
)
from .host import TurnHost
from .machine import run_turn
from .policy import CircuitBreaker, is_rate_limit, is_vacuous
from .state import TurnState

__all__ = [
    "Allow",
    "Ask",
    "ChainedPhaseHooks",
    "CircuitBreaker",
    "ContextAssembler",
    "ContextRequest",
    "Deny",
    "GateDecision",
    "GateRequest",
    "Generation",
    "GenerationRecord",
    "InProcessSteps",
    "Phase",
    "PhaseHooks",
    "StepRunner",
    "ToolGate",
    "TurnHooks",
    "TurnHost",
    "TurnState",
    "is_rate_limit",
    "is_vacuous",
    "run_turn",
]
