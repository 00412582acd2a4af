"""Durable agent turns on DBOS: a turn survives a crashed worker and any worker resumes it.

- :class:`DurableConfig` — the databases (``sqlite:///PATH`` embedded, or
  ``postgresql://...``) and the queue's limits.
- :func:`run_worker` — a worker process: consumes the turn queue (``foundation-ai worker``).
- :class:`DurableClient` / :func:`enqueue_turn` — submit a turn and get a :class:`TurnHandle`
  (``status()``, ``result()``, ``events()``, ``steer()``, ``abort()``) from any process.
- :func:`side_effects` — mark a tool to run at most once per call id; :func:`current_call_id`
  inside a tool.

How it works, what limits throughput and how to run many workers: ``docs/scaling.md``.
Needs the ``durable`` extra (``pip install foundation-ai[durable]``).
"""

from __future__ import annotations

from .client import DurableClient, TurnFailedError, TurnHandle, TurnIdConflictError, enqueue_turn
from .config import DurableConfig
from .steps import DurableSteps, current_call_id, has_side_effects, side_effects
from .worker import (
    AgentFactory,
    TurnResult,
    check_agent_factory,
    durable_turn,
    load_agent_factory,
    run_worker,
)

__all__ = [
    "AgentFactory",
    "DurableClient",
    "DurableConfig",
    "DurableSteps",
    "TurnFailedError",
    "TurnHandle",
    "TurnIdConflictError",
    "TurnResult",
    "check_agent_factory",
    "current_call_id",
    "durable_turn",
    "enqueue_turn",
    "has_side_effects",
    "load_agent_factory",
    "run_worker",
    "side_effects",
]
