"""Typed structured output: ``output_type=`` on the session builder and per call.

    class Invoice(msgspec.Struct):          # or a dataclass, a TypedDict, a pydantic model
        number: str
        total: float
        note: str | None = None

    invoice = agent.ask("Extract the invoice: ...", output_type=Invoice)   # an Invoice
    turn = agent.run_turn("...", output_type=list[Invoice]); turn.output    # a list[Invoice]

:class:`OutputSpec` turns the type into a schema every provider's strict mode accepts
(:func:`foundation_ai.schema.strict.strict_schema`: inlined, closed objects, every property
required, optional ones nullable), sent as ``ModelParams.output_format =
OutputFormat.JsonSchema(name, schema, strict=True)``, which each backend maps to its native
structured-output mode (OpenAI Chat ``response_format``, Responses ``text.format``, Anthropic
``output_config.format``, llama.cpp a grammar). A type whose schema is not an object (``list``,
``Literal``, an enum, a primitive, a union) is wrapped as ``{"result": <value>}`` and unwrapped
after decoding. The answer is decoded and validated against the type; ``null`` for an optional
field means its default. On a violation the loop sends the errors back to the model and lets it
retry (``retries`` times, default 2), then raises
:class:`~foundation_ai.errors.OutputValidationError`.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ..errors import ConfigurationError
from ..schema.refs import self_contained
from ..schema.strict import allows_null, strict_schema
from ..schema.typed import decode_as, type_schema
from ..types import (
    AssistantMessage,
    Messages,
    ModelParams,
    OutputFormat,
)

__all__ = ["DEFAULT_OUTPUT_RETRIES", "OutputSpec", "check_output", "output_spec", "params_for"]

DEFAULT_OUTPUT_RETRIES = 2
"""Answers that fail validation and are sent back for another try, per turn, by default."""

_NAME_BAD = re.compile(r"[^a-zA-Z0-9_-]+")
_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n(.*?)\n?```\s*$", re.DOTALL)
_JSON = msgspec.json.Decoder()


def _name_of(tp: Any) -> str:
    raw = getattr(tp, "__name__", None)
    if not isinstance(raw, str) or getattr(tp, "__origin__", None) is not None:
        return "result"
    return (_NAME_BAD.sub("_", raw).strip("_") or "result")[:64]


def _whole_floats_as_ints(value: Any) -> Any:
    """``value`` with every float that has no fractional part (``7.0``) as an int: JSON Schema
    counts ``7.0`` as an ``integer`` (https://json-schema.org/understanding-json-schema/reference/numeric#integer),
    and an ``int`` still decodes into a ``float`` field. Containers are changed in place."""
    if type(value) is float:
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if type(value) is dict:
        for k, v in value.items():
            if type(v) in (float, dict, list):
                value[k] = _whole_floats_as_ints(v)
    elif type(value) is list:
        for i, v in enumerate(value):
            if type(v) in (float, dict, list):
                value[i] = _whole_floats_as_ints(v)
    return value


def _prune_nulls(value: Any, schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """Drop ``null`` values of optional properties that do not accept ``null`` themselves (the
    strict schema made them nullable to mean "use the default"), walking ``value`` alongside the
    type's own schema (a recursive type's ``$ref`` followed into ``defs``, its root ``$defs``).
    Returns ``value`` (dicts changed in place)."""
    if not isinstance(schema, dict):
        return value
    ref = schema.get("$ref")
    if isinstance(ref, str) and defs:
        schema = defs.get(ref.removeprefix("#/$defs/"), schema)
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            required = set(schema.get("required") or ())
            for key in list(value):
                sub = props.get(key)
                if sub is None:
                    continue
                if value[key] is None and key not in required and not allows_null(sub):
                    del value[key]
                else:
                    value[key] = _prune_nulls(value[key], sub, defs)
        for branch in schema.get("anyOf") or schema.get("oneOf") or ():
            if isinstance(branch, dict) and ("properties" in branch or "$ref" in branch):
                _prune_nulls(value, branch, defs)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(value):
                value[i] = _prune_nulls(v, items, defs)
        for branch in schema.get("anyOf") or ():
            if isinstance(branch, dict) and "items" in branch:
                _prune_nulls(value, branch, defs)
    return value


class OutputSpec:
    """An output type ready to send and to check.

    Attributes:
        type: the Python type asked for.
        name: the schema name sent to the provider (``[a-zA-Z0-9_-]{1,64}``).
        schema: the JSON Schema sent (an object; see :attr:`wrapped`): strict, or the type's
            own self-contained schema with ``strict=False``.
        wrapped: True when the type's own schema is not an object and the answer is
            ``{"result": <value>}``.
        retries: answers that may fail validation and be sent back, per turn.
        strict: True when the schema is sent in the provider's strict mode.
    """

    __slots__ = ("_defs", "_loose", "name", "retries", "schema", "strict", "type", "wrapped")

    def __init__(self, tp: Any, *, retries: int = DEFAULT_OUTPUT_RETRIES, strict: bool = True) -> None:
        """Build the schema of ``tp``. A recursive type (``Node`` holding ``list[Node]``) keeps
        its recursive definitions in root ``$defs`` (every other reference inlined).

        ``strict=False`` sends the type's own schema (self-contained, not strict: open mappings,
        ``Any`` and tuples allowed) with ``strict: false``; the answer is still decoded and
        validated against ``tp`` locally, and sent back on a violation.

        Raises:
            ConfigurationError: ``tp`` cannot be described, or (strict) not in strict mode: an
                open mapping (a ``dict`` field, whatever the type source: pydantic, TypedDict,
                dataclass, msgspec Struct; the message names its path, e.g. ``$.payload``),
                ``Any``, a fixed-length tuple.
            ConfigurationError: ``retries`` is not an integer >= 0.
        """
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ConfigurationError(f"output_retries must be an integer >= 0, got {retries!r}")
        self.type = tp
        self.retries = retries
        self.strict = bool(strict)
        self.name = _name_of(tp)
        own = self_contained(type_schema(tp))
        defs = own.get("$defs")
        loose = {k: v for k, v in own.items() if k != "$defs"}
        self.wrapped = loose.get("type") != "object" or "anyOf" in loose or "properties" not in loose
        if self.wrapped:
            loose = {"type": "object", "properties": {"result": loose}, "required": ["result"]}
        if defs:
            loose = {**loose, "$defs": defs}
        self._loose = loose
        self._defs = defs
        self.schema = strict_schema(loose) if self.strict else loose

    def output_format(self) -> OutputFormat:
        """``OutputFormat.JsonSchema(name, schema, strict=...)`` for ``ModelParams``."""
        return OutputFormat.JsonSchema(name=self.name, schema=self.schema, strict=self.strict)

    def parse(self, text: str) -> Any:
        """The answer ``text`` as an instance of the type (a surrounding Markdown code fence is
        tolerated).

        Raises:
            ValueError: the text is not JSON or does not match the type; the message lists the
                problems with their JSON paths, ready to send back to the model.
        """
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced:
            body = fenced.group(1).strip()
        try:
            value = _JSON.decode(body)
        except msgspec.DecodeError as exc:
            raise ValueError(f"the answer is not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise ValueError(f"the answer must be a JSON object, got {type(value).__name__}")
        value = _prune_nulls(_whole_floats_as_ints(value), self._loose, self._defs)
        try:
            if self.wrapped:
                if "result" not in value:
                    raise ValueError('the answer must be an object with a "result" property')
                return decode_as(value["result"], self.type, parsed=True)
            return decode_as(value, self.type, parsed=True)
        except msgspec.ValidationError as exc:
            raise ValueError(str(exc)) from None

    def retry_prompt(self, problem: str) -> str:
        """The instruction sent back after an answer that failed validation."""
        return (
            f"Your answer does not match the required JSON schema: {problem}. "
            "Reply again with only the corrected JSON, matching the schema exactly."
        )

    def __repr__(self) -> str:
        return f"OutputSpec({self.name!r}, wrapped={self.wrapped}, retries={self.retries})"


def output_spec(tp: Any, retries: int | None = None, strict: bool | None = None) -> OutputSpec | None:
    """``tp`` as an :class:`OutputSpec` (``None`` and ``str`` mean plain text: ``None`` is
    returned; an ``OutputSpec`` is returned as is, with ``retries`` applied when given, and
    built again for another ``strict``)."""
    if tp is None or tp is str:
        return None
    if isinstance(tp, OutputSpec):
        if strict is not None and bool(strict) != tp.strict:
            return OutputSpec(tp.type, retries=tp.retries if retries is None else retries, strict=strict)
        if retries is not None and retries != tp.retries:
            spec = OutputSpec.__new__(OutputSpec)
            for slot in OutputSpec.__slots__:
                setattr(spec, slot, getattr(tp, slot))
            spec.retries = retries
            return spec
        return tp
    return OutputSpec(
        tp,
        retries=DEFAULT_OUTPUT_RETRIES if retries is None else retries,
        strict=True if strict is None else strict,
    )


def params_for(params: ModelParams | None, spec: OutputSpec | None, model: Any = None) -> ModelParams | None:
    """``params`` with ``output_format`` set to ``spec``'s strict JSON Schema (unchanged when
    there is no spec). Without ``params``, the model's own ``default_params`` (its recommended
    sampling) are the base, else ``ModelParams()``."""
    if spec is None:
        return params
    base = params or getattr(model, "default_params", None) or ModelParams()
    return base.with_(output_format=spec.output_format())


def check_output(spec: OutputSpec, state: Any, produced: list[AssistantMessage], text: str) -> Any:
    """Validate an answer of the turn against ``spec``: ``None`` when it is valid (the value is
    stored in ``state.output``); a ``Messages.system`` instruction listing the problems when a
    retry is left (``state.output_retries`` counts them); else the reason the turn fails
    (``state.output_errors`` and ``state.output_text`` are set)."""
    try:
        state.output = spec.parse(text)
        return None
    except ValueError as exc:
        problem = str(exc)
    if state.output_retries < spec.retries:
        state.output_retries += 1
        return Messages.system(spec.retry_prompt(problem))
    state.output_errors = [problem]
    state.output_text = text
    tries = state.output_retries + 1
    return f"no valid {spec.name} after {tries} answer{'s' if tries > 1 else ''}: {problem}"
