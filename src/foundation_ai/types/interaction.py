"""A request to a model: ``ModelInteraction`` and ``ModelParams`` (docs/concepts.md: Requests, parameters and usage)."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

import msgspec

from .messages import MessagesT
from .tools import ToolChoice, ToolChoiceT, ToolDeclarations

if TYPE_CHECKING:
    from .messages import Messages as _AnyMessage
    from .tools import ToolChoice as _AnyToolChoice
else:
    _AnyMessage = MessagesT
    _AnyToolChoice = ToolChoiceT

__all__ = [
    "CacheRetention",
    "ModelInteraction",
    "ModelParams",
    "OutputFormat",
    "ParamFields",
    "ThinkingLevel",
    "is_set",
    "with_fields",
]


_SEED_DEFAULTS = ("max_tokens", "temperature", "top_p", "top_k", "repeat_penalty")


def is_set(params: ModelParams, name: str) -> bool:
    """True when ``params.<name>`` was given by the caller, False while it is still the
    default (``max_tokens`` 2048, ``temperature`` 0.7, ``top_p`` 0.9, ``top_k`` 40,
    ``repeat_penalty`` 1.1).

    ``ModelParams()`` reports those defaults (``ModelParams().max_tokens == 2048``), but the HTTP
    backends send only what was set, so a server's own sampling and output limit apply
    (docs/models.md, "Parameters"). A value given explicitly counts as set even when it equals
    the default (``ModelParams(temperature=0.7)``); so does one read from JSON or a pickle.
    A default-valued field is left out of the JSON (``omit_defaults``), so after a JSON round
    trip a ``temperature`` of 0.7 is unset again.

    Raises:
        AttributeError: ``name`` is not a field of ``ModelParams``.
    """
    value = getattr(params, name)
    default = getattr(_UNSET_PARAMS, name)
    if name in _SEED_DEFAULTS:
        # the very default object (kept through ``with_``/``replace`` and filled in by decoding);
        # a value the caller wrote is another object, even when equal
        return value is not default
    return bool(value != default)


class ThinkingLevel(enum.Enum):
    """How much the model should reason before answering.

    Supported by: OpenAI Chat and Responses (``reasoning_effort`` / ``reasoning.effort``:
    minimal, low, medium, high), Anthropic (``thinking`` enabled with ``thinking_budget``
    tokens, or a budget derived from the level). ``Off`` disables reasoning where allowed.
    """

    Off = "off"
    Minimal = "minimal"
    Low = "low"
    Medium = "medium"
    High = "high"


class CacheRetention(enum.Enum):
    """How long the provider should keep the prompt cache.

    Supported by: Anthropic (``cache_control`` ``{"type": "ephemeral", "ttl": "5m" | "1h"}`` on the
    last system block and last message: ``Short`` = 5 minutes, ``Long`` = 1 hour), OpenAI
    (``prompt_cache_retention``: ``Long`` = ``"24h"``). ``None_`` disables cache markers.
    """

    None_ = "none"
    Short = "short"
    Long = "long"


class OutputFormat(msgspec.Struct, frozen=True, tag_field="type"):
    """The shape of the answer. ``OutputFormat.Text()`` (default), ``OutputFormat.JsonObject()``
    (any JSON object), ``OutputFormat.JsonSchema(name, schema, strict=True)``.

    Supported by: OpenAI Chat and Responses (``response_format`` / ``text.format``), Anthropic
    (a system instruction plus validation of the answer), llama.cpp (grammar-enforced).
    """

    Text: ClassVar[type[_Text]]
    JsonObject: ClassVar[type[_JsonObject]]
    JsonSchema: ClassVar[type[_JsonSchema]]


class _Text(OutputFormat, tag="text", frozen=True):
    """``OutputFormat.Text()``: free text (the default). JSON ``{"type": "text"}``."""


class _JsonObject(OutputFormat, tag="json_object", frozen=True):
    """``OutputFormat.JsonObject()``: any JSON object. JSON ``{"type": "json_object"}``."""


class _JsonSchema(OutputFormat, tag="json_schema", frozen=True):
    """``OutputFormat.JsonSchema(name, schema, strict=True)``: JSON matching ``schema``. JSON tag ``"json_schema"``."""

    name: str
    schema: dict[str, Any]
    strict: bool = True


for _attr, _cls in (("Text", _Text), ("JsonObject", _JsonObject), ("JsonSchema", _JsonSchema)):
    setattr(OutputFormat, _attr, _cls)
    _cls.__qualname__ = _cls.__name__ = f"OutputFormat.{_attr}"
OutputFormatT = _Text | _JsonObject | _JsonSchema


class ModelParams(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Sampling and output parameters (docs/concepts.md: Requests, parameters and usage). Backends ignore what they don't support.

    Change one field with ``msgspec.structs.replace(params, temperature=0.0)`` or
    :meth:`with_`.
    """

    max_tokens: int = 2048
    """Maximum output tokens. Supported by: all. Sent to HTTP providers only when set
    (:func:`is_set`); Anthropic requires one, so it gets 2048 when none was set."""
    temperature: float = 0.7
    """Sampling temperature. Supported by: all (not OpenAI reasoning models). Sent to HTTP
    providers only when set."""
    top_p: float = 0.9
    """Nucleus sampling. Supported by: all. Sent to HTTP providers only when set."""
    top_k: float = 40.0
    """Top-k sampling. Supported by: Anthropic, llama.cpp (OpenAI: ignored). Sent to HTTP
    providers only when set."""
    repeat_penalty: float = 1.1
    """Repetition penalty. Supported by: llama.cpp."""
    seed: int | None = None
    """Sampling seed. Supported by: OpenAI Chat, llama.cpp."""
    stop_tokens: list[str] = msgspec.field(default_factory=list)
    """Stop sequences. Supported by: OpenAI Chat (``stop``, max 4), Anthropic
    (``stop_sequences``), llama.cpp."""
    thinking_level: ThinkingLevel | None = None
    """Reasoning effort; see :class:`ThinkingLevel`."""
    thinking_budget: int | None = None
    """Reasoning token budget. Supported by: Anthropic (``budget_tokens``, >= 1024)."""
    cache_retention: CacheRetention | None = None
    """Prompt-cache retention; see :class:`CacheRetention`."""
    output_format: OutputFormatT = _Text()
    """Text, JSON object or JSON Schema; see :class:`OutputFormat`."""
    frequency_penalty: float | None = None
    """Supported by: OpenAI Chat, llama.cpp."""
    presence_penalty: float | None = None
    """Supported by: OpenAI Chat, llama.cpp."""
    logit_bias: dict[str, float] | None = None
    """Token id (as a string) -> bias. Supported by: OpenAI Chat, llama.cpp."""

    def __post_init__(self) -> None:
        # Choices given as strings ("high", "long", "json_object") become their typed values;
        # an unknown string raises instead of being ignored (see ``types/choices.py``).
        if self.thinking_level is not None and not isinstance(self.thinking_level, ThinkingLevel):
            from .choices import enum_choice

            msgspec.structs.force_setattr(
                self, "thinking_level", enum_choice("thinking_level", self.thinking_level, ThinkingLevel)
            )
        if self.cache_retention is not None and not isinstance(self.cache_retention, CacheRetention):
            from .choices import enum_choice

            msgspec.structs.force_setattr(
                self, "cache_retention", enum_choice("cache_retention", self.cache_retention, CacheRetention)
            )
        if not isinstance(self.output_format, OutputFormat):
            msgspec.structs.force_setattr(self, "output_format", _output_format_of(self.output_format))

    def with_(self, **changes: Any) -> ModelParams:
        """A copy with some fields changed."""
        return msgspec.structs.replace(self, **changes)


_UNSET_PARAMS = ModelParams()


class ParamFields(TypedDict, total=False):
    """The :class:`ModelParams` fields accepted as keywords by ``AgentSessionBuilder.with_params``,
    ``AgentSession.run_turn``/``ask`` and their async and streamed twins
    (``agent.ask("Hi", temperature=0.2, max_tokens=200)``), so that ``ModelParams`` need not be
    imported. Each has the meaning of the field of the same name."""

    max_tokens: int
    temperature: float
    top_p: float
    top_k: float
    repeat_penalty: float
    seed: int | None
    stop_tokens: list[str]
    thinking_level: ThinkingLevel | str | None
    thinking_budget: int | None
    cache_retention: CacheRetention | str | None
    frequency_penalty: float | None
    presence_penalty: float | None
    logit_bias: dict[str, float] | None


_FIELDS = frozenset(ParamFields.__annotations__)


def with_fields(params: ModelParams, fields: ParamFields) -> ModelParams:
    """``params`` with ``fields`` set (each counts as set, :func:`is_set`); ``params`` itself
    when ``fields`` is empty.

    Raises:
        TypeError: a name that is not a :class:`ParamFields` key (``output_format`` is set
            through ``output_type``), naming it and the accepted ones.
    """
    if not fields:
        return params
    unknown = sorted(set(fields) - _FIELDS)
    if unknown:
        raise TypeError(
            f"unknown model parameter(s) {', '.join(unknown)} (accepted: {', '.join(sorted(_FIELDS))})"
        )
    # a new struct, so that __post_init__ turns choice strings into their types; the fields not
    # given keep their very objects, so the library's defaults stay unset (is_set)
    return ModelParams(**{**msgspec.structs.asdict(params), **fields})


def _output_format_of(value: object) -> OutputFormatT:
    from ..errors import InvalidChoiceError

    key = value.strip().lower() if isinstance(value, str) else None
    if key == "text":
        return _Text()
    if key in ("json", "json_object"):
        return _JsonObject()
    raise InvalidChoiceError(
        "output_format",
        value,
        ["text", "json_object", "OutputFormat.JsonSchema(...)"],
        message=f"output_format: unknown choice {value!r} (accepted: 'text', 'json_object', an"
        " OutputFormat; for a schema pass output_type= to the session or OutputFormat.JsonSchema)",
    )


class ModelInteraction(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """One request to a model (docs/concepts.md: Requests, parameters and usage).

    ``messages`` are oldest-first. The system prompt is not a message: ``system_prompt`` and
    ``soul`` (a persona, joined to the system prompt by a blank line) ride here.
    """

    messages: list[_AnyMessage] = msgspec.field(default_factory=list)
    """The conversation, oldest first."""
    system_prompt: str | None = None
    """Instructions for the model."""
    soul: str | None = None
    """A persona / character text, appended to the system prompt after a blank line."""
    tools_shed: ToolDeclarations = msgspec.field(default_factory=ToolDeclarations)
    """The tools on offer."""
    chat_template: str | None = None
    """Local backends: a Jinja chat template overriding the model's own."""
    tool_choice: _AnyToolChoice | None = None
    """Whether/which tool must be called; ``None`` means the provider default (auto)."""

    def __post_init__(self) -> None:
        # ``tool_choice="required"`` (or "auto", "none", a tool name) becomes a ToolChoice; an
        # unknown string raises ToolChoiceError instead of being ignored by the backend.
        if self.tool_choice is not None and not isinstance(self.tool_choice, ToolChoice):
            from .choices import tool_choice_of

            offered = [f.name for f in self.tools_shed.functions()]
            msgspec.structs.force_setattr(self, "tool_choice", tool_choice_of(self.tool_choice, offered))

    def full_system_prompt(self) -> str | None:
        """``system_prompt`` and ``soul`` joined by a blank line, or ``None`` when both are empty."""
        parts = [p for p in (self.system_prompt, self.soul) if p]
        return "\n\n".join(parts) if parts else None
