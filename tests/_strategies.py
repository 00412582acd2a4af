"""Hypothesis strategies for the seed's types (used by the property-based JSON tests)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from foundation_ai.types import (
    AgenticError,
    Args,
    CostStatus,
    ExecutionHint,
    GenerationMetadata,
    ImageContent,
    MemoryFact,
    MessageRole,
    Messages,
    MimeType,
    ModelId,
    ModelInteraction,
    ModelOutput,
    ObservationEntry,
    Quantization,
    ReflectionEntry,
    SessionRecord,
    StopReason,
    StructuredErrorTrace,
    TextContent,
    TokenLogProb,
    TokenSnapshot,
    Tool,
    ToolChoice,
    ToolDeclarations,
    ToolDefinition,
    UsageCosting,
    UsageReport,
)

text = st.text(max_size=40)
opt_text = st.none() | text
ids = st.from_regex(r"\A[0-9a-z]{25}\Z")
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
counts = st.floats(min_value=0, max_value=1e9, allow_nan=False)
i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
u32 = st.integers(min_value=0, max_value=2**32)
utc_times = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | i64 | finite | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(text, json_values, max_size=5)

roles = st.sampled_from(
    [MessageRole.User, MessageRole.Agent, MessageRole.System, MessageRole.Tool]
) | text.map(MessageRole.Custom)
text_content = st.builds(TextContent, text, opt_text)
image_content = st.builds(ImageContent, st.from_regex(r"\A[A-Za-z0-9+/]{0,16}\Z"), st.sampled_from(MimeType))
user_content = text_content | image_content

tool_calls = st.builds(
    ModelOutput.ToolCall,
    id=text,
    name=text,
    arguments=st.none() | json_objects,
    signature=opt_text,
    depends_on=st.lists(text, max_size=3),
    execution_hint=st.sampled_from(ExecutionHint),
    raw_arguments=opt_text,
)
model_outputs = st.one_of(
    text_content,
    image_content,
    st.builds(ModelOutput.ThinkingContent, text, opt_text, st.booleans(), opt_text),
    tool_calls,
    st.lists(finite, max_size=6).map(lambda v: ModelOutput.Embedding(dimensions=len(v), values=v)),
)
stop_reasons = st.sampled_from(
    [StopReason.STOP, StopReason.LENGTH, StopReason.TOOL_USE, StopReason.ERROR, StopReason.ABORTED]
) | text.map(StopReason.Message)
quantizations = st.none() | st.sampled_from(Quantization)
model_ids = st.one_of(
    *(
        st.builds(v, text, quantizations)
        for v in (ModelId.Name, ModelId.Alias, ModelId.Group, ModelId.Architecture)
    )
)
costings = st.builds(UsageCosting, counts, counts, counts, counts, counts, st.sampled_from(CostStatus))
usages = st.builds(UsageReport, counts, counts, counts, counts, counts, costings)
metadata = st.one_of(
    st.builds(
        GenerationMetadata.LogProbs,
        st.lists(
            st.builds(TokenLogProb, text, finite, st.lists(st.tuples(text, finite), max_size=2)), max_size=3
        ),
    ),
    st.builds(GenerationMetadata.SystemFingerprint, text),
    st.builds(GenerationMetadata.Timing, st.none() | counts, st.none() | counts, st.none() | counts),
    st.builds(GenerationMetadata.RefusalReason, text),
)

user_messages = st.builds(Messages.User, id=ids, role=roles, content=user_content, signature=opt_text)
assistant_messages = st.builds(
    Messages.Assistant,
    id=ids,
    model=model_ids,
    content=model_outputs,
    timestamp=utc_times,
    usage=usages,
    stop_reason=stop_reasons,
    provider=st.sampled_from(["openai", "anthropic", "llamacpp", "unknown"]) | text,
    error_detail=opt_text,
    signature=opt_text,
    metadata=st.none() | st.lists(metadata, max_size=3),
)
tool_results = st.builds(
    Messages.ToolResult,
    id=ids,
    tool_call_id=text,
    name=text,
    content=user_content,
    timestamp=utc_times,
    details=opt_text,
    error_detail=opt_text,
    signature=opt_text,
)
messages: st.SearchStrategy[Messages] = st.one_of(user_messages, assistant_messages, tool_results)

snapshots = st.builds(TokenSnapshot, counts, counts, counts, counts, counts, counts)
session_records: st.SearchStrategy[SessionRecord] = st.one_of(
    st.builds(SessionRecord.Conversation, message=messages),
    st.builds(
        SessionRecord.Retracted,
        id=ids,
        reason=text,
        timestamp=utc_times,
        message_ids=st.lists(ids, max_size=3),
    ),
    st.builds(
        SessionRecord.WorkingMemory,
        id=ids,
        facts=st.lists(
            st.builds(
                MemoryFact, id=ids, content=text, confidence=finite, source=opt_text, timestamp=utc_times
            ),
            max_size=3,
        ),
        version=u32,
        timestamp=utc_times,
    ),
    st.builds(
        SessionRecord.Observation,
        id=ids,
        observations=st.lists(
            st.builds(ObservationEntry, id=ids, content=text, priority=i64, timestamp=utc_times), max_size=3
        ),
        token_count=u32,
        timestamp=utc_times,
    ),
    st.builds(
        SessionRecord.Reflection,
        id=ids,
        reflections=st.lists(
            st.builds(ReflectionEntry, id=ids, content=text, source_observations=st.lists(ids, max_size=2)),
            max_size=3,
        ),
        generated_at=utc_times,
        observation_token_count_before=u32,
        reflection_token_count_after=u32,
    ),
    st.builds(
        SessionRecord.FailedAction,
        error=st.builds(AgenticError, kind=text, message=text, retryable=st.booleans()),
        trace=st.builds(StructuredErrorTrace, frames=st.lists(text, max_size=3), context=json_objects),
    ),
    st.builds(SessionRecord.Summary, message_count=u32, usage=snapshots),
)

schemas = st.builds(
    lambda props, required: {
        "type": "object",
        "properties": {name: {"type": t} for name, t in props.items()},
        "required": [n for n in props if n in required],
    },
    st.dictionaries(text, st.sampled_from(["string", "integer", "number", "boolean"]), max_size=3),
    st.sets(text, max_size=2),
)
tool_definitions = st.builds(
    ToolDefinition,
    name=text,
    description=text,
    arguments=schemas.map(Args),
    category=text,
    returns=st.none() | schemas.map(Args),
)
tools = st.one_of(
    tool_definitions.map(Tool.SingleCommand),
    st.builds(
        Tool.MultiCommands, tool_name=text, commands=st.lists(tool_definitions, max_size=3), description=text
    ),
)
tool_choices = st.sampled_from([ToolChoice.Auto(), ToolChoice.None_(), ToolChoice.Required()]) | text.map(
    ToolChoice.Function
)
interactions = st.builds(
    ModelInteraction,
    messages=st.lists(messages, max_size=4),
    system_prompt=opt_text,
    soul=opt_text,
    tools_shed=st.builds(ToolDeclarations, shed=st.none() | tools, tools=st.lists(tools, max_size=2)),
    chat_template=opt_text,
    tool_choice=st.none() | tool_choices,
)
