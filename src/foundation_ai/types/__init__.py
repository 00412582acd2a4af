"""The shared types (docs/concepts.md): pure data, no I/O.

Every enum-like type is a base class with one ``msgspec.Struct`` per variant under the
base's name (``Messages.User``, ``ModelOutput.ToolCall``, ``StopReason.ToolUse``, …), so
``isinstance`` and ``match`` both work. ``to_json`` / ``from_json`` read and write the
versioned JSON format (``docs/json-format.md``).
"""

from __future__ import annotations

from ..ids import Id, new_scru128
from .content import (
    ExecutionHint,
    GenerationMetadata,
    ImageContent,
    MessageRole,
    MimeType,
    ModelOutput,
    StopReason,
    TextContent,
    ThinkingContent,
    TokenLogProb,
    ToolCall,
    UserModelContent,
)
from .interaction import (
    CacheRetention,
    ModelInteraction,
    ModelParams,
    OutputFormat,
    ParamFields,
    ThinkingLevel,
    is_set,
)
from .messages import AssistantMessage, Messages, ToolResultMessage, UserMessage, utc_now
from .model_id import ModelId, ModelProviders, Quantization
from .overflow import OVERFLOW_PATTERNS, is_overflow_text
from .records import (
    AgenticError,
    AgentProgress,
    MemoryFact,
    ObservationEntry,
    ReflectionEntry,
    SessionRecord,
    StructuredErrorTrace,
    TimeRange,
)
from .serialization import FORMAT_VERSION, dump_document, from_json, load_document, to_json
from .stream import ModelState, Stream
from .tool_args import ToolArgs
from .tools import Args, FunctionSpec, Tool, ToolArguments, ToolChoice, ToolDeclarations, ToolDefinition
from .usage import CostStatus, TokenSnapshot, UsageCosting, UsageReport

__all__ = [
    "FORMAT_VERSION",
    "OVERFLOW_PATTERNS",
    "AgentProgress",
    "AgenticError",
    "Args",
    "AssistantMessage",
    "CacheRetention",
    "CostStatus",
    "ExecutionHint",
    "FunctionSpec",
    "GenerationMetadata",
    "Id",
    "ImageContent",
    "MemoryFact",
    "MessageRole",
    "Messages",
    "MimeType",
    "ModelId",
    "ModelInteraction",
    "ModelOutput",
    "ModelParams",
    "ParamFields",
    "is_set",
    "ModelProviders",
    "ModelState",
    "ObservationEntry",
    "OutputFormat",
    "Quantization",
    "ReflectionEntry",
    "SessionRecord",
    "StopReason",
    "Stream",
    "StructuredErrorTrace",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevel",
    "TimeRange",
    "TokenLogProb",
    "TokenSnapshot",
    "Tool",
    "ToolArgs",
    "ToolArguments",
    "ToolCall",
    "ToolChoice",
    "ToolDeclarations",
    "ToolDefinition",
    "ToolResultMessage",
    "UsageCosting",
    "UsageReport",
    "UserMessage",
    "UserModelContent",
    "dump_document",
    "from_json",
    "is_overflow_text",
    "load_document",
    "new_scru128",
    "to_json",
    "utc_now",
]
