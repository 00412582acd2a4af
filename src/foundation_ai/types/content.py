"""What messages hold: ``UserModelContent`` (docs/concepts.md: Messages), ``ModelOutput`` and
``StopReason`` (docs/concepts.md: Outputs), ``MessageRole`` and ``GenerationMetadata``.

Every enum-like type is a base class with one ``msgspec.Struct`` subclass per variant,
reachable under the base's name (``ModelOutput.ToolCall``), so both ``isinstance`` and
``match`` work::

    match output:
        case ModelOutput.Text(content=text): ...
        case ModelOutput.ToolCall(name=name, arguments=args): ...

In JSON each variant is an object tagged by a ``"type"`` field (``"text"``, ``"tool_call"``, …).
"""

from __future__ import annotations

import enum
import os
from typing import Any, ClassVar

import msgspec

__all__ = [
    "ExecutionHint",
    "GenerationMetadata",
    "ImageContent",
    "MessageRole",
    "MimeType",
    "ModelOutput",
    "StopReason",
    "TextContent",
    "TokenLogProb",
    "UserModelContent",
]


def _name_variants(base: type, **variants: type) -> None:
    """Attach variant classes to their enum base under their variant names, with readable reprs."""
    for attr, cls in variants.items():
        setattr(base, attr, cls)
        cls.__qualname__ = f"{base.__name__}.{attr}"
        cls.__name__ = f"{base.__name__}.{attr}"


# --------------------------------------------------------------------------------------------
# MessageRole


class MessageRole:
    """Who a user-side message speaks for (docs/concepts.md: Messages).

    ``User`` (human input), ``Agent`` (a peer agent), ``System`` (instructions and loop
    redirects), ``Tool`` (tool context) and ``Custom(name)``. A role is a plain ``str``: the
    lowercase strings providers expect (``"user"``, ``"agent"``, ``"system"``, ``"tool"``), a
    custom role its bare string; so ``message.role == MessageRole.System`` and JSON stay simple.
    """

    User: ClassVar[str] = "user"
    Agent: ClassVar[str] = "agent"
    System: ClassVar[str] = "system"
    Tool: ClassVar[str] = "tool"

    @staticmethod
    def Custom(name: str) -> str:
        """A custom role, stored as ``name`` itself."""
        return name

    @staticmethod
    def is_custom(role: str) -> bool:
        """True for a role other than user, agent, system and tool."""
        return role not in _STANDARD_ROLES


_STANDARD_ROLES = frozenset({"user", "agent", "system", "tool"})


class MimeType(enum.Enum):
    """The media type of an image (``ImageContent.mime_type``), serialized as the MIME string."""

    Png = "image/png"
    Jpeg = "image/jpeg"
    Gif = "image/gif"
    Webp = "image/webp"


class ExecutionHint(enum.Enum):
    """How a tool call may be scheduled relative to its stage (docs/concepts.md: Outputs).

    ``Sequential`` calls run one at a time; the others may run concurrently within their
    ``depends_on`` stage.
    """

    Unspecified = "unspecified"
    Parallel = "parallel"
    Sequential = "sequential"


# --------------------------------------------------------------------------------------------
# UserModelContent and ModelOutput


class UserModelContent(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True):
    """The content of a user message or tool result (docs/concepts.md: Messages): exactly one item.

    Variants: ``UserModelContent.Text`` (= :class:`TextContent`) and ``UserModelContent.Image``
    (= :class:`ImageContent`). There is no multi-part variant.
    """

    Text: ClassVar[type[TextContent]]
    Image: ClassVar[type[ImageContent]]


class ModelOutput(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True):
    """One output of the assistant (docs/concepts.md: Outputs). One output per assistant message.

    Variants: ``Text`` (= :class:`TextContent`), ``Image`` (= :class:`ImageContent`),
    ``ThinkingContent``, ``ToolCall``, ``Embedding``. There is no refusal variant: refusals
    surface through :class:`StopReason` and ``GenerationMetadata.RefusalReason``.
    """

    Text: ClassVar[type[TextContent]]
    Image: ClassVar[type[ImageContent]]
    ThinkingContent: ClassVar[type[ThinkingContent]]
    ToolCall: ClassVar[type[ToolCall]]
    Embedding: ClassVar[type[Embedding]]


class TextContent(ModelOutput, UserModelContent, tag="text", frozen=True, gc=False):
    """Text. Both a ``ModelOutput`` and a ``UserModelContent``. JSON tag ``"text"``."""

    content: str
    """The text."""
    signature: str | None = None
    """An opaque provider signature over the text, replayed unchanged when present."""


class ImageContent(ModelOutput, UserModelContent, tag="image", frozen=True, gc=False):
    """An image, base64-encoded. Both a ``ModelOutput`` and a ``UserModelContent``. JSON tag ``"image"``."""

    b64: str
    """The image bytes, standard base64 without a ``data:`` prefix."""
    mime_type: MimeType = MimeType.Png
    """The image format."""

    @classmethod
    def from_bytes(cls, data: bytes, mime_type: MimeType | str | None = None) -> ImageContent:
        """An image from its bytes; ``mime_type`` (a ``MimeType`` or its string) or, when
        ``None``, the format its first bytes show (PNG, JPEG, GIF, WebP: what the providers
        take, https://platform.openai.com/docs/guides/images-vision).

        Raises:
            ValueError: the bytes are empty, or not one of those formats and no ``mime_type``
                was given, or ``mime_type`` names another format.
        """
        import base64

        if not data:
            raise ValueError("the image is empty (0 bytes)")
        if mime_type is None:
            mime = _sniff_image(data)
            if mime is None:
                raise ValueError(
                    f"not a PNG, JPEG, GIF or WebP image (first bytes {data[:8]!r}); give mime_type="
                )
        else:
            try:
                mime = mime_type if isinstance(mime_type, MimeType) else MimeType(mime_type)
            except ValueError:
                known = ", ".join(m.value for m in MimeType)
                raise ValueError(f"unsupported image type {mime_type!r} (accepted: {known})") from None
        return cls(b64=base64.b64encode(data).decode("ascii"), mime_type=mime)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> ImageContent:
        """An image from a file (PNG, JPEG, GIF or WebP, told by its first bytes), for a prompt:
        ``agent.ask(["What is this?", Image.from_path("cat.png")])``.

        Raises:
            OSError: the file cannot be read.
            ValueError: it is empty or not one of those formats.
        """
        with open(path, "rb") as f:
            data = f.read()
        try:
            return cls.from_bytes(data)
        except ValueError as exc:
            raise ValueError(f"{os.fspath(path)}: {exc}") from None


def _sniff_image(data: bytes) -> MimeType | None:
    """The format the first bytes of ``data`` show (the formats' own signatures), else ``None``."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return MimeType.Png
    if data.startswith(b"\xff\xd8\xff"):
        return MimeType.Jpeg
    if data.startswith((b"GIF87a", b"GIF89a")):
        return MimeType.Gif
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return MimeType.Webp
    return None


class ThinkingContent(ModelOutput, tag="thinking", frozen=True, gc=False):
    """The model's reasoning (docs/concepts.md: Outputs). JSON tag ``"thinking"``.

    Thinking is replayed to the provider that issued it byte-exact, never as plain text
    (https://docs.anthropic.com/en/api/messages).

    Supported by: Anthropic (``thinking`` and ``redacted_thinking`` blocks), OpenAI Responses
    (``reasoning`` items), llama.cpp (``<think>`` text of reasoning models).
    """

    thinking: str
    """The reasoning text so far (may be empty: the "omitted display" shape)."""
    signature: str | None = None
    """Anthropic: the block's ``signature``; for a redacted block, its opaque ``data``.
    OpenAI Responses: the reasoning item's ``encrypted_content``."""
    redacted: bool = False
    """Anthropic ``redacted_thinking``: ``signature`` holds the block's ``data``."""
    item_id: str | None = None
    """OpenAI Responses: the reasoning item's ``id`` (``"rs_…"``), needed to replay it."""


class ToolCall(ModelOutput, tag="tool_call", frozen=True, gc=False):
    """A request to run a tool (docs/concepts.md: Outputs). JSON tag ``"tool_call"``."""

    id: str
    """The correlation id; the matching ``Messages.ToolResult.tool_call_id`` carries it back.
    For OpenAI Responses this is the ``call_id``, not the item id."""
    name: str
    """The tool (function) name."""
    arguments: dict[str, Any] | None = None
    """The JSON object the model sent, unchanged (docs/concepts.md: Tools); ``None`` when it sent no
    object or invalid JSON (validation then reports the missing fields to the model)."""
    signature: str | None = None
    """An opaque provider signature on the call, echoed back on replay."""
    depends_on: list[str] = msgspec.field(default_factory=list)
    """Ids of calls in the same response that must finish before this one runs."""
    execution_hint: ExecutionHint = ExecutionHint.Unspecified
    """Scheduling hint within its dependency stage."""
    raw_arguments: str | None = None
    """The argument text as received when it was not a JSON object (truncated or malformed,
    for example); ``None`` when ``arguments`` holds the parsed object."""


class Embedding(ModelOutput, tag="embedding", frozen=True, gc=False):
    """An embedding vector (docs/concepts.md: Outputs). JSON tag ``"embedding"``."""

    dimensions: int
    """The vector length."""
    values: list[float]
    """The vector."""


# TextContent and ImageContent are shared by both unions and keep their own names.
UserModelContent.Text = ModelOutput.Text = TextContent
UserModelContent.Image = ModelOutput.Image = ImageContent
ModelOutput.ThinkingContent = ThinkingContent
ModelOutput.ToolCall = ToolCall
ModelOutput.Embedding = Embedding

UserModelContentT = TextContent | ImageContent
"""The decodable union of ``UserModelContent`` variants."""
ModelOutputT = TextContent | ImageContent | ThinkingContent | ToolCall | Embedding
"""The decodable union of ``ModelOutput`` variants."""


# --------------------------------------------------------------------------------------------
# StopReason


class StopReason(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True):
    """Why a generation ended (docs/concepts.md: Outputs).

    ``Stop`` natural end; ``Length`` hit ``max_tokens``; ``ToolUse`` the model wants tools;
    ``Error`` provider error (see ``error_detail``); ``Aborted`` cancelled; ``Message(value)``
    any other provider value, preserved. Variants without data compare equal to each other
    (``StopReason.Stop() == StopReason.STOP``); the upper-case constants are shared instances.
    """

    Stop: ClassVar[type[_Stop]]
    Length: ClassVar[type[_Length]]
    ToolUse: ClassVar[type[_ToolUse]]
    Error: ClassVar[type[_Error]]
    Aborted: ClassVar[type[_Aborted]]
    Message: ClassVar[type[_Message]]

    STOP: ClassVar[StopReason]
    LENGTH: ClassVar[StopReason]
    TOOL_USE: ClassVar[StopReason]
    ERROR: ClassVar[StopReason]
    ABORTED: ClassVar[StopReason]
    REFUSAL: ClassVar[StopReason]
    """``Message("refusal")``: how every backend ends a refusal (see :meth:`is_refusal`)."""

    @staticmethod
    def parse(value: str) -> StopReason:
        """Map a provider's stop string to a variant.

        ``stop``, ``end_turn``, ``stop_sequence``, ``completed`` -> ``Stop``; ``length``,
        ``max_tokens``, ``max_output_tokens`` -> ``Length``; ``tool_calls``, ``tool_use``,
        ``function_call`` -> ``ToolUse``; ``error`` -> ``Error``; ``aborted``, ``cancelled`` ->
        ``Aborted``; anything else -> ``Message(value)`` (e.g. ``"content_filter"``,
        ``"refusal"``, ``"pause_turn"``). Sources: OpenAI ``finish_reason``, Anthropic
        ``stop_reason``, OpenAI Responses ``incomplete_details.reason``.

        Raises:
            TypeError: ``value`` is not a ``str`` (e.g. ``None``: a provider that sent no stop
                reason; map that case explicitly, the caller knows what it means).
        """
        if not isinstance(value, str):
            raise TypeError(f"StopReason.parse() takes a str, got {type(value).__name__}: {value!r:.60}")
        known = _STOP_STRINGS.get(value.strip().lower())
        return known if known is not None else _Message(value)

    def as_str(self) -> str:
        """A short lowercase name: ``"stop"``, ``"tool_use"``, or a ``Message``'s own value."""
        return self.__struct_config__.tag  # type: ignore[return-value]

    def is_refusal(self) -> bool:
        """True for the stop of a refusal: ``Message("refusal")`` (``StopReason.REFUSAL``: the
        model declined, Anthropic ``stop_reason: "refusal"``, an OpenAI ``refusal``) or
        ``Message("content_filter")`` (the provider's filter withheld the answer). The refusal
        text rides in ``GenerationMetadata.RefusalReason`` (docs/providers.md, "Refusals")."""
        return False


class _Stop(StopReason, tag="stop", frozen=True, gc=False):
    """``StopReason.Stop``: the natural end of the answer. JSON ``{"type": "stop"}``."""


class _Length(StopReason, tag="length", frozen=True, gc=False):
    """``StopReason.Length``: the output hit ``max_tokens``. JSON ``{"type": "length"}``."""


class _ToolUse(StopReason, tag="tool_use", frozen=True, gc=False):
    """``StopReason.ToolUse``: the model wants tools run. JSON ``{"type": "tool_use"}``."""


class _Error(StopReason, tag="error", frozen=True, gc=False):
    """``StopReason.Error``: the provider failed; the text is in ``error_detail``. JSON ``{"type": "error"}``."""


class _Aborted(StopReason, tag="aborted", frozen=True, gc=False):
    """``StopReason.Aborted``: cancelled. JSON ``{"type": "aborted"}``."""


class _Message(StopReason, tag="message", frozen=True, gc=False):
    """``StopReason.Message(value)``: any other provider stop value, preserved. JSON ``{"type": "message", "value": ...}``."""

    value: str
    """The provider's own stop value."""

    def as_str(self) -> str:
        return self.value

    def is_refusal(self) -> bool:
        return self.value in _REFUSAL_VALUES


_name_variants(
    StopReason, Stop=_Stop, Length=_Length, ToolUse=_ToolUse, Error=_Error, Aborted=_Aborted, Message=_Message
)
StopReason.STOP = _Stop()
StopReason.LENGTH = _Length()
StopReason.TOOL_USE = _ToolUse()
StopReason.ERROR = _Error()
StopReason.ABORTED = _Aborted()
StopReason.REFUSAL = _Message("refusal")
_REFUSAL_VALUES = frozenset({"refusal", "content_filter"})
_STOP_STRINGS: dict[str, StopReason] = {
    "stop": StopReason.STOP,
    "end_turn": StopReason.STOP,
    "stop_sequence": StopReason.STOP,
    "completed": StopReason.STOP,
    "eos": StopReason.STOP,
    "length": StopReason.LENGTH,
    "max_tokens": StopReason.LENGTH,
    "max_output_tokens": StopReason.LENGTH,
    "tool_calls": StopReason.TOOL_USE,
    "tool_use": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "error": StopReason.ERROR,
    "aborted": StopReason.ABORTED,
    "cancelled": StopReason.ABORTED,
}
StopReasonT = _Stop | _Length | _ToolUse | _Error | _Aborted | _Message
"""The decodable union of ``StopReason`` variants."""


# --------------------------------------------------------------------------------------------
# GenerationMetadata


class TokenLogProb(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """One sampled token with its log probability (natural log) and the top alternatives."""

    token: str
    logprob: float
    top: list[tuple[str, float]] = msgspec.field(default_factory=list)


class GenerationMetadata(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True):
    """Extra facts about a generation, attached to ``Messages.Assistant.metadata``.

    Variants: ``LogProbs(tokens)``, ``SystemFingerprint(value)``, ``Timing(...)`` (seconds and
    tokens per second), ``RefusalReason(reason)``.
    """

    LogProbs: ClassVar[type[_LogProbs]]
    SystemFingerprint: ClassVar[type[_SystemFingerprint]]
    Timing: ClassVar[type[_Timing]]
    RefusalReason: ClassVar[type[_RefusalReason]]


class _LogProbs(GenerationMetadata, tag="log_probs", frozen=True, gc=False):
    """``GenerationMetadata.LogProbs(tokens)``: per-token natural-log probabilities. JSON tag ``"log_probs"``."""

    tokens: list[TokenLogProb]
    """Per-token log probabilities, in output order."""


class _SystemFingerprint(GenerationMetadata, tag="system_fingerprint", frozen=True, gc=False):
    """``GenerationMetadata.SystemFingerprint(value)``. JSON tag ``"system_fingerprint"``."""

    value: str
    """OpenAI ``system_fingerprint``: the backend configuration that served the request."""


class _Timing(GenerationMetadata, tag="timing", frozen=True, gc=False):
    """``GenerationMetadata.Timing``: latency figures in seconds and tokens per second. JSON tag ``"timing"``."""

    time_to_first_token: float | None = None
    """Seconds from sending the request to the first output chunk."""
    tokens_per_second: float | None = None
    """Output tokens per second after the first token."""
    duration: float | None = None
    """Seconds from sending the request to the end of the stream."""


class _RefusalReason(GenerationMetadata, tag="refusal_reason", frozen=True, gc=False):
    """``GenerationMetadata.RefusalReason(reason)``: why the model refused. JSON tag ``"refusal_reason"``."""

    reason: str
    """The provider's refusal text or reason code (Anthropic: ``stop_details.explanation`` when
    sent, else ``"refusal"``; OpenAI: the ``refusal`` text; ``"content_filter"`` for a filter)."""
    category: str | None = None
    """The provider's refusal category when it sends one (Anthropic ``stop_details.category``,
    e.g. ``"cyber"``)."""


_name_variants(
    GenerationMetadata,
    LogProbs=_LogProbs,
    SystemFingerprint=_SystemFingerprint,
    Timing=_Timing,
    RefusalReason=_RefusalReason,
)
GenerationMetadataT = _LogProbs | _SystemFingerprint | _Timing | _RefusalReason
"""The decodable union of ``GenerationMetadata`` variants."""

JsonObject = dict[str, Any]
