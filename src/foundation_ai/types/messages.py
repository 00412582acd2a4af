"""``Messages``: the normalized conversation format (docs/concepts.md: Messages).

Three variants; system prompts are not a variant (they ride on
``ModelInteraction.system_prompt``) and loop-injected instructions are ``Messages.User`` with
``role=MessageRole.System``::

    prompt = Messages.user("Hi")                    # role user, text content, fresh id
    steer = Messages.agent("Stop and summarise.")    # role agent
    note = Messages.system("Be brief.")              # role system
    Messages.coerce("Hi") == prompt (but for the id) # a str converts to a user message

A streaming backend yields one ``Messages.Assistant`` per chunk, each holding one
``ModelOutput``. HTTP backends send the whole text so far in every text chunk; llama.cpp sends
only the new piece (see ``Model.chunk_mode``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar

import msgspec

from ..ids import Id, new_scru128
from ._text import scrub_surrogates
from .content import (
    GenerationMetadata,
    GenerationMetadataT,
    MessageRole,
    ModelOutputT,
    StopReason,
    StopReasonT,
    TextContent,
    UserModelContentT,
)
from .model_id import ModelIdT, ModelProviders
from .overflow import is_overflow_text
from .usage import UsageReport

if TYPE_CHECKING:
    # Type checkers see the enum base classes (so `StopReason.STOP` or any `ModelId` is
    # accepted; content fields keep their unions so `isinstance` narrows them); at run time msgspec sees the unions of variants it decodes.
    from .content import GenerationMetadata as _AnyMetadata
    from .content import StopReason as _AnyStopReason
    from .model_id import ModelId as _AnyModelId
else:
    _AnyMetadata = GenerationMetadataT
    _AnyStopReason = StopReasonT
    _AnyModelId = ModelIdT

__all__ = ["Messages", "MessagesT", "as_utc", "utc_now"]

_RefusalReason = GenerationMetadata.RefusalReason


def utc_now() -> datetime:
    """The current time as a timezone-aware UTC ``datetime``."""
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC: an aware datetime is converted, a naive one is taken to be UTC already.

    Every timestamp field applies this on construction and on decoding, so the JSON format only
    ever holds RFC 3339 UTC timestamps ending in ``Z`` (docs/json-format.md).
    """
    if value.tzinfo is UTC:
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _text_arg(text: object, ctor: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"Messages.{ctor}() takes a str, got {type(text).__name__}: {text!r:.60}")
    return text if text.isascii() else scrub_surrogates(text)


def _utc_field(obj: msgspec.Struct, name: str) -> None:
    value: datetime = getattr(obj, name)
    if value.tzinfo is not UTC:
        msgspec.structs.force_setattr(obj, name, as_utc(value))


class Messages(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True, kw_only=True):
    """A message of the conversation (docs/concepts.md: Messages). Variants:

    - ``Messages.User``: input from a human, a peer agent, the loop or a tool context.
    - ``Messages.Assistant``: one model output (text, thinking, a tool call, …).
    - ``Messages.ToolResult``: the result of a tool call.

    Every variant has ``id`` (a 25-character SCRU128 string). JSON: tagged by ``"type"``
    (``"user"``, ``"assistant"``, ``"tool_result"``); a document without ``id`` loads with a
    fresh one.
    """

    User: ClassVar[type[UserMessage]]
    Assistant: ClassVar[type[AssistantMessage]]
    ToolResult: ClassVar[type[ToolResultMessage]]

    id: Id = msgspec.field(default_factory=new_scru128)
    """A SCRU128 id, time-ordered; made fresh when absent."""

    # -- constructors (docs/concepts.md: Messages) ------------------------------------------------------

    @staticmethod
    def user(text: str) -> UserMessage:
        """A human's text message (role ``user``) with a fresh id.

        Raises:
            TypeError: ``text`` is not a ``str`` (such a message could be sent but never loaded
                back from JSON).
        """
        return UserMessage(role=MessageRole.User, content=TextContent(_text_arg(text, "user")))

    @staticmethod
    def agent(text: str) -> UserMessage:
        """A peer agent's text message (role ``agent``) with a fresh id.

        Raises:
            TypeError: ``text`` is not a ``str``.
        """
        return UserMessage(role=MessageRole.Agent, content=TextContent(_text_arg(text, "agent")))

    @staticmethod
    def system(text: str) -> UserMessage:
        """A loop-injected instruction (role ``system``) with a fresh id.

        Raises:
            TypeError: ``text`` is not a ``str``.
        """
        return UserMessage(role=MessageRole.System, content=TextContent(_text_arg(text, "system")))

    @staticmethod
    def coerce(message: str | Messages) -> Messages:
        """``impl Into<Messages>``: a ``str`` becomes ``Messages.user(text)``; a message is returned as is.

        Raises:
            TypeError: ``message`` is neither.
        """
        if isinstance(message, Messages):
            return message
        if isinstance(message, str):
            return Messages.user(message)
        raise TypeError(f"expected a str or Messages, got {type(message).__name__}")

    # -- queries ------------------------------------------------------------------------------

    def is_context_overflow(self, context_window: int | None = None) -> bool:
        """True when this is an Assistant message that reports a context overflow.

        Two cases (docs/concepts.md: Context overflow): ``stop_reason`` is ``Error`` and ``error_detail``
        matches one of the providers' overflow messages (``types.overflow.OVERFLOW_PATTERNS``);
        or "silent" overflow: ``stop_reason`` is ``Stop`` and ``usage.input + usage.cache_read``
        exceeds ``context_window`` (tokens), when given.
        """
        return False

    def text(self) -> str | None:
        """The text of a text message or text output, else ``None``."""
        content = getattr(self, "content", None)
        return content.content if isinstance(content, TextContent) else None


class UserMessage(Messages, tag="user", frozen=True, kw_only=True, gc=False):
    """``Messages.User``: input to the model. JSON tag ``"user"``."""

    role: str = MessageRole.User
    """A :class:`MessageRole`: ``"user"``, ``"agent"``, ``"system"``, ``"tool"`` or a custom string."""
    content: UserModelContentT
    """One content item: ``TextContent`` or ``ImageContent``."""
    signature: str | None = None
    """An opaque signature, replayed unchanged."""


class AssistantMessage(Messages, tag="assistant", frozen=True, kw_only=True, gc=False):
    """``Messages.Assistant``: one model output. JSON tag ``"assistant"``.

    A provider error is an Assistant message too: ``stop_reason`` ``Error``, the provider's text
    in ``error_detail``, and usually an empty ``TextContent``.
    """

    model: _AnyModelId
    """The model that produced it."""
    content: ModelOutputT
    """One output: text, image, thinking, a tool call or an embedding."""
    timestamp: datetime = msgspec.field(default_factory=utc_now)
    """When it was produced, UTC."""
    usage: UsageReport = UsageReport()
    """Token usage; on streamed chunks, cumulative for the generation so far."""
    stop_reason: _AnyStopReason = StopReason.STOP
    """Why generation stopped (on intermediate stream chunks: ``Stop`` until known)."""
    provider: str = ModelProviders.Unknown
    """The provider that produced it (``ModelProviders``): decides whose signatures are valid."""
    error_detail: str | None = None
    """The provider's error text when ``stop_reason`` is ``Error``; never contains API keys."""
    signature: str | None = None
    """An opaque provider signature, replayed unchanged."""
    metadata: list[_AnyMetadata] | None = None
    """Log probs, system fingerprint, timing, refusal reason, when known."""
    origin: str | None = None
    """The server that issued this message's continuation tokens (the API host, e.g.
    ``"openrouter.ai"``), set by ``openai_chat`` on a message that carries one: one provider
    name covers every OpenAI-compatible server, so the tokens are replayed only to a backend
    talking to that same server (docs/providers.md)."""

    def __post_init__(self) -> None:
        if self.timestamp.tzinfo is not UTC:  # the default (``utc_now``) is UTC already
            _utc_field(self, "timestamp")

    def refusal(self) -> str | None:
        """The refusal text when this message reports that the model (or the provider's
        filter) refused, else ``None``.

        A refusal is ``stop_reason`` ``StopReason.REFUSAL`` (``Message("refusal")``) or
        ``Message("content_filter")``, or a ``GenerationMetadata.RefusalReason`` in
        ``metadata``; the text is the last ``RefusalReason``'s ``reason`` (the provider's
        explanation when it sent one, else its reason code). See docs/providers.md, "Refusals".
        """
        reasons = [m for m in self.metadata or () if isinstance(m, _RefusalReason)]
        if reasons:
            return reasons[-1].reason
        if self.stop_reason.is_refusal():
            return self.stop_reason.as_str()
        return None

    def is_context_overflow(self, context_window: int | None = None) -> bool:
        if isinstance(self.stop_reason, StopReason.Error):
            return self.error_detail is not None and is_overflow_text(self.error_detail)
        if context_window is not None and isinstance(self.stop_reason, StopReason.Stop):
            return self.usage.input + self.usage.cache_read > context_window
        return False


class ToolResultMessage(Messages, tag="tool_result", frozen=True, kw_only=True, gc=False):
    """``Messages.ToolResult``: a tool's answer to one call. JSON tag ``"tool_result"``."""

    tool_call_id: str
    """The ``ModelOutput.ToolCall.id`` this answers."""
    name: str
    """The tool's name."""
    content: UserModelContentT
    """What the tool returned, as text or an image; for a failure, a short description."""
    timestamp: datetime = msgspec.field(default_factory=utc_now)
    """When the tool finished, UTC."""
    details: str | None = None
    """Extra detail for people and logs (not sent to the model)."""
    error_detail: str | None = None
    """Set when the tool failed (validation, exception, timeout): sent to the model as an error."""
    signature: str | None = None
    """An opaque signature, replayed unchanged."""

    def __post_init__(self) -> None:
        if self.timestamp.tzinfo is not UTC:  # the default (``utc_now``) is UTC already
            _utc_field(self, "timestamp")

    @property
    def is_error(self) -> bool:
        """True when the tool failed."""
        return self.error_detail is not None


Messages.User = UserMessage
Messages.Assistant = AssistantMessage
Messages.ToolResult = ToolResultMessage
for _cls, _n in ((UserMessage, "User"), (AssistantMessage, "Assistant"), (ToolResultMessage, "ToolResult")):
    _cls.__qualname__ = _cls.__name__ = f"Messages.{_n}"

MessagesT = UserMessage | AssistantMessage | ToolResultMessage
"""The decodable union of ``Messages`` variants (use it as ``msgspec`` type or annotation)."""
