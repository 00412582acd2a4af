"""The agent layer (docs/concepts.md: Messages, Tools, The stream contract, Stores, Events): ``AgentSession`` runs multi-step turns
with tools on any ``Model``, streams ``TurnEvent``s, persists ``SessionRecord``s and can be
steered while it runs.

    from foundation_ai.agentic import AgentSession, tool, ScriptedModel, say, call

Modules: ``tools`` (``@tool``, class tools, MultiCommands, registry), ``dag`` (``depends_on``
stages), ``session`` (builder, ``AgentSession``, ``Turn``, ``Answer``), ``turn`` (the turn loop:
its phases and hooks, see ``docs/turn-loop.md``; ``loop`` re-exports its entry points),
``events`` (``TurnStream``, ``TurnEvent``), ``steering``, ``ledger``, ``context`` (the window,
trimming), ``stores`` (in-memory and SQLite), ``scripted`` (a deterministic ``Model``).
"""

from __future__ import annotations

from ..types import ToolArgs
from .answer import Answer
from .builder import AgentSessionBuilder
from .errors import (
    ApprovalRequiredError,
    CorruptRecordError,
    SessionClosedError,
    SessionExistsError,
    SessionNotFoundError,
    StoreError,
)
from .events import AgentStream, TurnEvent, TurnOutcome, TurnStream, TurnSummary
from .ledger import TokenBudget, TokenLedger
from .scripted import Reply, ScriptedModel, call, fail, hook, overflow, pause, rate_limited, say, think
from .session import AgentSession
from .stores import InMemorySessionStore, SessionHeader, SessionMeta, SessionStore, SqliteSessionStore
from .tools import BaseTool, FunctionTool, MultiCommandTool, ToolRegistry, tool
from .turn_result import Turn

__all__ = [
    "AgentSession",
    "AgentSessionBuilder",
    "AgentStream",
    "Answer",
    "BaseTool",
    "CorruptRecordError",
    "FunctionTool",
    "InMemorySessionStore",
    "MultiCommandTool",
    "Reply",
    "ScriptedModel",
    "SessionClosedError",
    "SessionExistsError",
    "SessionNotFoundError",
    "ApprovalRequiredError",
    "SessionHeader",
    "SessionMeta",
    "SessionStore",
    "SqliteSessionStore",
    "StoreError",
    "TokenBudget",
    "TokenLedger",
    "ToolArgs",
    "ToolRegistry",
    "Turn",
    "TurnEvent",
    "TurnOutcome",
    "TurnStream",
    "TurnSummary",
    "call",
    "fail",
    "hook",
    "overflow",
    "pause",
    "rate_limited",
    "say",
    "think",
    "tool",
]
