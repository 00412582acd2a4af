"""foundation-ai: LLM agents on one normalized message model.

The types (docs/concepts.md) are importable from here or from :mod:`foundation_ai.types`. Heavier parts
load lazily on first use (``AgentSession``, ``tool``, ``model``, ``backends``), so
``import foundation_ai`` stays fast. ``model("openai:gpt-4o-mini")`` builds a model from a model
string (``docs/models.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports
from .errors import FoundationAIError
from .types import (
    Args,
    ImageContent,
    MessageRole,
    Messages,
    ModelId,
    ModelInteraction,
    ModelOutput,
    ModelParams,
    ModelState,
    SessionRecord,
    StopReason,
    Stream,
    Tool,
    ToolArgs,
    ToolChoice,
    ToolDefinition,
    UsageReport,
    from_json,
    to_json,
)

if TYPE_CHECKING:
    from ._model_string import model
    from .agentic import AgentSession, tool
    from .router import ProviderRouter

__version__ = "0.1.0"

Image = ImageContent
"""``ImageContent`` under a short name for prompts: ``agent.ask(["What is this?",
Image.from_path("cat.png")])`` sends the text and the image as one user message with two parts
(Anthropic, OpenAI Chat Completions and Responses)."""

_LAZY = {
    "AgentSession": "foundation_ai.agentic",
    "tool": "foundation_ai.agentic",
    "ProviderRouter": "foundation_ai.router",
    "model": "foundation_ai._model_string",
}

__all__ = [
    "AgentSession",
    "Args",
    "FoundationAIError",
    "Image",
    "MessageRole",
    "Messages",
    "ModelId",
    "ModelInteraction",
    "ModelOutput",
    "ModelParams",
    "ModelState",
    "ProviderRouter",
    "SessionRecord",
    "StopReason",
    "Stream",
    "Tool",
    "ToolArgs",
    "ToolChoice",
    "ToolDefinition",
    "UsageReport",
    "__version__",
    "from_json",
    "model",
    "to_json",
    "tool",
]


__getattr__ = lazy_exports(globals(), _LAZY)
