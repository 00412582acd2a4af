"""What a turn produces: ``SessionRecord`` (docs/concepts.md: Stores) and ``AgentProgress`` (docs/concepts.md: Events)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import msgspec

from ..ids import Id, new_scru128
from .messages import MessagesT, _utc_field, utc_now
from .usage import TokenSnapshot

if TYPE_CHECKING:
    from .messages import Messages as _AnyMessage
else:
    _AnyMessage = MessagesT

__all__ = [
    "AgentProgress",
    "AgenticError",
    "MemoryFact",
    "ObservationEntry",
    "ReflectionEntry",
    "SessionRecord",
    "StructuredErrorTrace",
    "TimeRange",
]


def _attach(base: type, pairs: tuple[tuple[str, type], ...]) -> None:
    for attr, cls in pairs:
        setattr(base, attr, cls)
        cls.__qualname__ = cls.__name__ = f"{base.__name__}.{attr}"


# --------------------------------------------------------------------------------------------
# Memory entries


class MemoryFact(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One fact of working memory."""

    id: Id = msgspec.field(default_factory=new_scru128)
    content: str
    """The fact, in plain language."""
    confidence: float = 1.0
    """0.0 to 1.0."""
    source: str | None = None
    """Where it came from (a message id, a tool name, …)."""
    timestamp: datetime = msgspec.field(default_factory=utc_now)

    def __post_init__(self) -> None:
        _utc_field(self, "timestamp")


class ObservationEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One observation the agent made about the conversation (see ``docs/memory.md``)."""

    id: Id = msgspec.field(default_factory=new_scru128)
    content: str
    priority: int = 0
    """Higher is more important."""
    timestamp: datetime = msgspec.field(default_factory=utc_now)
    type: Literal["assertion", "question"] = "assertion"
    """``"assertion"``: something stated or done; ``"question"``: something still open."""
    source_message_id: Id | None = None
    """The message it was drawn from, when one."""
    scope: str | None = None
    """What it is about (``"user"``, ``"task"``, a project name, ...), free text."""

    def __post_init__(self) -> None:
        _utc_field(self, "timestamp")


class TimeRange(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A span of time, ``from`` to ``to`` (UTC). JSON ``{"from": ..., "to": ...}``."""

    from_: datetime = msgspec.field(name="from")
    to: datetime

    def __post_init__(self) -> None:
        _utc_field(self, "from_")
        _utc_field(self, "to")


class ReflectionEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One reflection condensed from observations (see ``docs/memory.md``).

    Raises:
        ValueError: ``importance`` outside 0.0 to 1.0 (``msgspec.ValidationError`` when decoding).
    """

    id: Id = msgspec.field(default_factory=new_scru128)
    content: str
    """The summary."""
    source_observations: list[Id] = msgspec.field(default_factory=list)
    """The observation (entry or record) ids it condenses."""
    time_range: TimeRange | None = None
    """The time the condensed observations span."""
    importance: float = 0.5
    """0.0 (trivia) to 1.0 (essential)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.importance <= 1.0:
            raise ValueError(f"importance must be between 0.0 and 1.0, got {self.importance}")


class AgenticError(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """An error of the agent loop (in ``SessionRecord.FailedAction``).

    ``kind`` is a stable machine name: ``"provider"``, ``"context_overflow"``, ``"rate_limited"``,
    ``"tool"``, ``"budget_exhausted"``, ``"iteration_limit"``, ``"aborted"``, ``"internal"``.
    """

    kind: str
    message: str
    retryable: bool = False


class StructuredErrorTrace(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where an error happened: the steps the loop went through (``frames``, outermost first) and
    free-form context (model, iteration, tool name, …)."""

    frames: list[str] = msgspec.field(default_factory=list)
    context: dict[str, Any] = msgspec.field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# SessionRecord


class SessionRecord(msgspec.Struct, frozen=True, tag_field="type", kw_only=True, omit_defaults=True):
    """A record of a session (docs/concepts.md: Stores). Variants and JSON tags:

    - ``Conversation(message)`` ``"conversation"``: one persisted message (one per output).
    - ``Retracted(id, reason, timestamp)`` ``"retracted"``: drop the assistant output streamed so far.
    - ``WorkingMemory(id, facts, version, timestamp)`` ``"working_memory"``.
    - ``Observation(id, observations, token_count, timestamp)`` ``"observation"``.
    - ``Reflection(id, reflections, generated_at, observation_token_count_before,
      reflection_token_count_after)`` ``"reflection"``.
    - ``FailedAction(error, trace)`` ``"failed_action"``: never persisted.
    - ``Summary(message_count, usage)`` ``"summary"``: the end of a turn, cumulative usage.
    """

    Conversation: ClassVar[type[_Conversation]]
    Retracted: ClassVar[type[_Retracted]]
    WorkingMemory: ClassVar[type[_WorkingMemory]]
    Observation: ClassVar[type[_Observation]]
    Reflection: ClassVar[type[_Reflection]]
    FailedAction: ClassVar[type[_FailedAction]]
    Summary: ClassVar[type[_Summary]]

    @property
    def persistable(self) -> bool:
        """False for ``FailedAction`` (never persisted), True otherwise."""
        return not isinstance(self, _FailedAction)


class _Conversation(SessionRecord, tag="conversation", frozen=True, kw_only=True, gc=False):
    """``SessionRecord.Conversation(message)``: one persisted message. JSON tag ``"conversation"``."""

    message: _AnyMessage


class _Retracted(SessionRecord, tag="retracted", frozen=True, kw_only=True, gc=False):
    """``SessionRecord.Retracted(reason, ...)``: drop the assistant output streamed so far. JSON tag ``"retracted"``."""

    id: Id = msgspec.field(default_factory=new_scru128)
    """The id of the retraction itself."""
    reason: str
    timestamp: datetime = msgspec.field(default_factory=utc_now)
    message_ids: list[Id] = msgspec.field(default_factory=list)
    """Ids of the streamed (or persisted) messages this retracts, when known."""

    def __post_init__(self) -> None:
        _utc_field(self, "timestamp")


class _WorkingMemory(SessionRecord, tag="working_memory", frozen=True, kw_only=True, gc=False):
    """``SessionRecord.WorkingMemory(facts, version, ...)``: the working-memory facts. JSON tag ``"working_memory"``."""

    id: Id = msgspec.field(default_factory=new_scru128)
    facts: list[MemoryFact] = msgspec.field(default_factory=list)
    version: int = 0
    timestamp: datetime = msgspec.field(default_factory=utc_now)

    def __post_init__(self) -> None:
        _utc_field(self, "timestamp")


class _Observation(SessionRecord, tag="observation", frozen=True, kw_only=True, gc=False):
    """``SessionRecord.Observation(observations, token_count, ...)``. JSON tag ``"observation"``."""

    id: Id = msgspec.field(default_factory=new_scru128)
    observations: list[ObservationEntry] = msgspec.field(default_factory=list)
    token_count: int = 0
    timestamp: datetime = msgspec.field(default_factory=utc_now)

    def __post_init__(self) -> None:
        _utc_field(self, "timestamp")


class _Reflection(SessionRecord, tag="reflection", frozen=True, kw_only=True, gc=False):
    """``SessionRecord.Reflection(reflections, ...)``: reflections condensed from observations;
    token counts before and after. JSON tag ``"reflection"``."""

    id: Id = msgspec.field(default_factory=new_scru128)
    reflections: list[ReflectionEntry] = msgspec.field(default_factory=list)
    generated_at: datetime = msgspec.field(default_factory=utc_now)
    observation_token_count_before: int = 0
    reflection_token_count_after: int = 0

    def __post_init__(self) -> None:
        _utc_field(self, "generated_at")


class _FailedAction(SessionRecord, tag="failed_action", frozen=True, kw_only=True):
    """``SessionRecord.FailedAction(error, trace)``: a loop failure; never persisted. JSON tag ``"failed_action"``."""

    error: AgenticError
    trace: StructuredErrorTrace = msgspec.field(default_factory=StructuredErrorTrace)


class _Summary(SessionRecord, tag="summary", frozen=True, kw_only=True, gc=False):
    """``SessionRecord.Summary(message_count, usage)``: the end of a turn, cumulative usage. JSON tag ``"summary"``."""

    message_count: int
    """Messages persisted in the turn."""
    usage: TokenSnapshot
    """Cumulative usage of the turn."""
    awaiting_approval: list[str] = msgspec.field(default_factory=list)
    """Ids of the tool calls the turn paused on, waiting for ``approve``/``deny`` (empty: the
    turn did not pause; omitted from JSON then)."""


_attach(
    SessionRecord,
    (
        ("Conversation", _Conversation),
        ("Retracted", _Retracted),
        ("WorkingMemory", _WorkingMemory),
        ("Observation", _Observation),
        ("Reflection", _Reflection),
        ("FailedAction", _FailedAction),
        ("Summary", _Summary),
    ),
)
SessionRecordT = (
    _Conversation | _Retracted | _WorkingMemory | _Observation | _Reflection | _FailedAction | _Summary
)
"""The decodable union of ``SessionRecord`` variants."""


# --------------------------------------------------------------------------------------------
# AgentProgress


class AgentProgress(msgspec.Struct, frozen=True, tag_field="type", kw_only=True, omit_defaults=True):
    """Advisory progress hints (docs/concepts.md: Events) — not a framing guarantee.

    Non-exhaustive: new variants may be added, so a ``match`` needs a ``case _:`` arm. Variants:
    ``Initializing(step)``, ``Generating(model, tokens_so_far)``, ``ToolCallRequested(name)``,
    ``ExecutingTools(total, completed)``, ``ToolCallCancelled(id)``, ``ProcessingMemory(kind)``,
    ``FlushingRecords(count)``, ``Steering(source)``, ``TurnComplete(usage)``,
    ``SessionEnding()``. A JSON document naming an unknown variant decodes as
    ``AgentProgress.Unknown(kind, data)``.
    """

    Initializing: ClassVar[type[_Initializing]]
    Generating: ClassVar[type[_Generating]]
    ToolCallRequested: ClassVar[type[_ToolCallRequested]]
    ExecutingTools: ClassVar[type[_ExecutingTools]]
    ToolCallCancelled: ClassVar[type[_ToolCallCancelled]]
    ProcessingMemory: ClassVar[type[_ProcessingMemory]]
    FlushingRecords: ClassVar[type[_FlushingRecords]]
    Steering: ClassVar[type[_Steering]]
    TurnComplete: ClassVar[type[_TurnComplete]]
    SessionEnding: ClassVar[type[_SessionEnding]]
    Unknown: ClassVar[type[_UnknownProgress]]


class _Initializing(AgentProgress, tag="initializing", frozen=True, kw_only=True):
    """``AgentProgress.Initializing(step)``."""

    step: str


class _Generating(AgentProgress, tag="generating", frozen=True, kw_only=True):
    """``AgentProgress.Generating(model, tokens_so_far)``: the model is generating (tokens so far).

    With memory on, ``context_tokens`` is the request's estimated size in tokens as context
    assembly counted it, and ``token_counter`` how: ``"tokenizer"`` (the model's own, in
    process) or ``"estimate"`` (see ``docs/memory.md``).
    """

    model: str
    tokens_so_far: int = 0
    context_tokens: int | None = None
    token_counter: str | None = None


class _ToolCallRequested(AgentProgress, tag="tool_call_requested", frozen=True, kw_only=True):
    """``AgentProgress.ToolCallRequested(name)``: the model asked for a tool."""

    name: str


class _ExecutingTools(AgentProgress, tag="executing_tools", frozen=True, kw_only=True):
    """``AgentProgress.ExecutingTools(total, completed)``: tools are running."""

    total: int
    completed: int = 0


class _ToolCallCancelled(AgentProgress, tag="tool_call_cancelled", frozen=True, kw_only=True):
    """``AgentProgress.ToolCallCancelled(id)``: a pending tool call was cancelled."""

    id: str


class _ProcessingMemory(AgentProgress, tag="processing_memory", frozen=True, kw_only=True):
    """``AgentProgress.ProcessingMemory(kind)``: memory (observation, reflection, …) is being processed."""

    kind: str


class _FlushingRecords(AgentProgress, tag="flushing_records", frozen=True, kw_only=True):
    """``AgentProgress.FlushingRecords(count)``: records are being written to the store."""

    count: int


class _Steering(AgentProgress, tag="steering", frozen=True, kw_only=True):
    """``AgentProgress.Steering(source)``: a steering message arrived."""

    source: str


class _TurnComplete(AgentProgress, tag="turn_complete", frozen=True, kw_only=True):
    """``AgentProgress.TurnComplete(usage)``: the turn ended; cumulative usage."""

    usage: TokenSnapshot


class _SessionEnding(AgentProgress, tag="session_ending", frozen=True, kw_only=True):
    """``AgentProgress.SessionEnding()``: the session is closing."""


class _UnknownProgress(AgentProgress, tag="unknown", frozen=True, kw_only=True):
    """``AgentProgress.Unknown(kind, data)``: a variant this version does not know (decoded from JSON)."""

    kind: str
    """The unknown variant's tag."""
    data: dict[str, Any] = msgspec.field(default_factory=dict)
    """Its other fields, as JSON."""


_attach(
    AgentProgress,
    (
        ("Initializing", _Initializing),
        ("Generating", _Generating),
        ("ToolCallRequested", _ToolCallRequested),
        ("ExecutingTools", _ExecutingTools),
        ("ToolCallCancelled", _ToolCallCancelled),
        ("ProcessingMemory", _ProcessingMemory),
        ("FlushingRecords", _FlushingRecords),
        ("Steering", _Steering),
        ("TurnComplete", _TurnComplete),
        ("SessionEnding", _SessionEnding),
        ("Unknown", _UnknownProgress),
    ),
)
AgentProgressT = (
    _Initializing
    | _Generating
    | _ToolCallRequested
    | _ExecutingTools
    | _ToolCallCancelled
    | _ProcessingMemory
    | _FlushingRecords
    | _Steering
    | _TurnComplete
    | _SessionEnding
    | _UnknownProgress
)
"""The decodable union of ``AgentProgress`` variants."""
AGENT_PROGRESS_TAGS = frozenset(c.__struct_config__.tag for c in AgentProgressT.__args__)
