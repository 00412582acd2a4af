"""The turn loop as named phases (full page: ``docs/turn-loop.md``).

A turn is a small state machine. Each phase is a function with one job that reads and updates
one :class:`TurnState`, appends the stream items it emits to ``state.out`` (the driver yields
them after the phase) and returns the next phase; ``generate`` and ``execute_tools`` stream
their items as they happen. Only :mod:`.persist` writes to the store.

::

    open ─> prompt ─> drain_steering ─> admit ─> assemble_context ─> generate ─> decide
                          ^   │            │                                       │
                          │   └─(abort)────┴─(limit, budget, breakers)─> finish <──┤
                          │                                                        │
                          ├──── retry: vacuous, steered, overflow trim, fallback ──┤
                          ├──── follow_ups <──────── answer without tool calls ────┤
                          └──── execute_tools <──────────────── tool calls ────────┘

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
