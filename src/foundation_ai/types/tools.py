"""Tools as the model sees them (docs/concepts.md: Tools) and ``ToolChoice`` (docs/concepts.md: Requests, parameters and usage).

- ``ToolArguments``: a tool call's arguments, the plain JSON object the model sent.
- :class:`Args`: a JSON Schema plus its validator, compiled once per ``Args``.
- :class:`ToolDefinition`, :class:`Tool` (``SingleCommand`` / ``MultiCommands``),
  :class:`ToolDeclarations`: what a request offers.
- :class:`FunctionSpec`: one function as rendered to a provider; ``Tool.functions()`` renders a
  ``MultiCommands`` tool as ONE function whose ``command`` argument selects the command.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, ClassVar

import msgspec

from ..errors import ArgumentValidationError, SchemaViolation
from ..schema import Validator, compile_schema, violations_of

__all__ = [
    "Args",
    "FunctionSpec",
    "Tool",
    "ToolArguments",
    "ToolChoice",
    "ToolDeclarations",
    "ToolDefinition",
]

ToolArguments = dict[str, Any]
"""A tool call's arguments: the JSON object the model sent, unchanged (docs/concepts.md: Tools)."""

_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


class Args(msgspec.Struct, frozen=True, dict=True):
    """A JSON Schema for a tool's arguments plus its validator (docs/concepts.md: Tools).

    Build with ``Args.new(scheme.object()...)`` (or ``Args(schema_dict)``), ``Args.from_value``
    for a raw schema, ``Args.empty()`` for no arguments. The validator (jsonschema-rs) is compiled
    on first use and cached on this ``Args``. JSON: ``{"schema": {...}}``.
    """

    schema: dict[str, Any]
    """The JSON Schema (an object schema for tool arguments)."""

    @classmethod
    def new(cls, builder: Any) -> Args:
        """From a ``scheme`` builder (anything with ``.build()``) or a schema dict."""
        schema = builder.build() if hasattr(builder, "build") else builder
        return cls(dict(schema))

    @classmethod
    def from_value(cls, schema: dict[str, Any]) -> Args:
        """From a raw JSON Schema dict.

        Raises:
            ConfigurationError: the schema is not a valid JSON Schema (checked now).
        """
        args = cls(dict(schema))
        _ = args.validator
        return args

    @classmethod
    def empty(cls) -> Args:
        """The schema of a tool with no arguments: an empty, closed object."""
        return cls(dict(_EMPTY_SCHEMA))

    @functools.cached_property
    def validator(self) -> Validator:
        """The compiled validator (compiled once per ``Args``).

        Raises:
            ConfigurationError: the schema is invalid.
        """
        return compile_schema(self.schema)

    def violations(self, arguments: ToolArguments | None) -> list[SchemaViolation]:
        """Every violation of ``arguments`` (``None`` counts as ``{}``), each with its JSON path."""
        return violations_of(self.validator, {} if arguments is None else arguments)

    def validate(self, arguments: ToolArguments | None) -> ToolArguments:
        """Return ``arguments`` (``{}`` for ``None``) when valid.

        Raises:
            ArgumentValidationError: listing every violation with its JSON path.
        """
        value = {} if arguments is None else arguments
        found = violations_of(self.validator, value)
        if found:
            raise ArgumentValidationError(found)
        return value


_NO_ARGS = Args.empty()
"""The default ``ToolDefinition.arguments``: one shared closed empty object schema."""


class FunctionSpec(msgspec.Struct, frozen=True):
    """One function as a provider sees it: ``name``, ``description``, ``parameters`` (a JSON Schema)."""

    name: str
    description: str
    parameters: dict[str, Any]


class ToolDefinition(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool (docs/concepts.md: Tools)."""

    name: str
    """The function name the model calls (provider limits: ``^[a-zA-Z0-9_-]{1,64}$``)."""
    description: str = ""
    """What it does, for the model."""
    arguments: Args = _NO_ARGS
    """The arguments' schema (default: the shared ``Args.empty()``, omitted from JSON)."""
    category: str = ""
    """A grouping label for discovery (``shed``) and display."""
    returns: Args | None = None
    """The result's schema, when documented."""

    def function(self) -> FunctionSpec:
        """This definition as one provider function."""
        return FunctionSpec(self.name, self.description, self.arguments.schema)


class Tool(msgspec.Struct, frozen=True, tag_field="type"):
    """A tool offered to the model (docs/concepts.md: Tools). Variants:

    - ``Tool.SingleCommand(definition)``: one function.
    - ``Tool.MultiCommands(name, commands)``: several commands behind one function (e.g.
      ``"memory"`` with add/remove/replace), rendered as one function whose required ``command``
      argument (an enum of the command names) selects the command.
    """

    SingleCommand: ClassVar[type[_SingleCommand]]
    MultiCommands: ClassVar[type[_MultiCommands]]

    def name(self) -> str:
        """The function name the model sees."""
        raise NotImplementedError

    def functions(self) -> list[FunctionSpec]:
        """The provider functions this tool renders to (always one)."""
        raise NotImplementedError

    def resolve(self, arguments: ToolArguments | None) -> tuple[ToolDefinition, ToolArguments | None]:
        """Which definition a call to this tool's function runs, and its arguments.

        For ``MultiCommands`` the ``command`` argument selects the definition and is removed
        from the arguments.

        Raises:
            ArgumentValidationError: ``command`` is missing or names no command.
        """
        raise NotImplementedError


class _SingleCommand(Tool, tag="single_command", frozen=True):
    """``Tool.SingleCommand(definition)``: one function. JSON tag ``"single_command"``."""

    definition: ToolDefinition

    def name(self) -> str:
        return self.definition.name

    def functions(self) -> list[FunctionSpec]:
        return [self.definition.function()]

    def resolve(self, arguments: ToolArguments | None) -> tuple[ToolDefinition, ToolArguments | None]:
        return self.definition, arguments


class _MultiCommands(Tool, tag="multi_commands", frozen=True):
    """``Tool.MultiCommands(tool_name, commands, description)``: several commands behind one
    function selected by its ``command`` argument. JSON tag ``"multi_commands"``."""

    tool_name: str
    commands: list[ToolDefinition]
    description: str = ""

    def name(self) -> str:
        return self.tool_name

    def functions(self) -> list[FunctionSpec]:
        properties: dict[str, Any] = {
            "command": {
                "type": "string",
                "enum": [c.name for c in self.commands],
                "description": "Which command to run.",
            }
        }
        users: dict[str, list[str]] = {}
        for cmd in self.commands:
            for prop, sub in cmd.arguments.schema.get("properties", {}).items():
                users.setdefault(prop, []).append(cmd.name)
                properties.setdefault(prop, dict(sub))
        for prop, cmds in users.items():
            if prop == "command":
                continue
            note = f"(for {', '.join(cmds)})"
            base = properties[prop].get("description")
            properties[prop] = {**properties[prop], "description": f"{note} {base}" if base else note}
        lines = [self.description] if self.description else []
        lines += [f"- {c.name}: {c.description}" for c in self.commands]
        params = {
            "type": "object",
            "properties": properties,
            "required": ["command"],
            "additionalProperties": False,
        }
        return [FunctionSpec(self.tool_name, "\n".join(lines), params)]

    def resolve(self, arguments: ToolArguments | None) -> tuple[ToolDefinition, ToolArguments | None]:
        args = dict(arguments or {})
        command = args.pop("command", None)
        for cmd in self.commands:
            if cmd.name == command:
                return cmd, args
        names = ", ".join(c.name for c in self.commands)
        got = "missing" if command is None else repr(command)
        raise ArgumentValidationError(
            [SchemaViolation("$.command", f"expected one of {names}; got {got}", "$.properties.command")]
        )


Tool.SingleCommand = _SingleCommand
Tool.MultiCommands = _MultiCommands
_SingleCommand.__qualname__ = _SingleCommand.__name__ = "Tool.SingleCommand"
_MultiCommands.__qualname__ = _MultiCommands.__name__ = "Tool.MultiCommands"
ToolT = _SingleCommand | _MultiCommands
"""The decodable union of ``Tool`` variants."""


class ToolDeclarations(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """The tools of a request (docs/concepts.md: Tools): ``shed`` (the discovery meta-tool, if any)
    and ``tools`` (the tools it has activated)."""

    shed: ToolT | None = None
    tools: list[ToolT] = msgspec.field(default_factory=list)

    def all_tools(self) -> Iterator[Tool]:
        """``shed`` (when set) then ``tools``."""
        if self.shed is not None:
            yield self.shed
        yield from self.tools

    def functions(self) -> list[FunctionSpec]:
        """Every function to offer the provider, in order."""
        return [f for t in self.all_tools() for f in t.functions()]

    def find(self, function_name: str) -> Tool | None:
        """The tool behind a function name, or ``None``."""
        for t in self.all_tools():
            if t.name() == function_name:
                return t
        return None

    def __bool__(self) -> bool:
        return self.shed is not None or bool(self.tools)


class ToolChoice(msgspec.Struct, frozen=True, tag_field="type"):
    """Whether and which tool the model must call (docs/concepts.md: Requests, parameters and usage).

    ``ToolChoice.Auto()`` the model decides; ``ToolChoice.None_()`` no tools (``None`` is a
    Python keyword); ``ToolChoice.Required()`` some tool; ``ToolChoice.Function(name)`` that
    tool. JSON tags: ``"auto"``, ``"none"``, ``"required"``, ``"function"``.

    Supported by: OpenAI Chat and Responses (all four), Anthropic (auto, any, tool, none),
    llama.cpp (required and function enforced by a grammar).
    """

    Auto: ClassVar[type[_Auto]]
    None_: ClassVar[type[_NoneChoice]]
    Required: ClassVar[type[_Required]]
    Function: ClassVar[type[_Function]]


class _Auto(ToolChoice, tag="auto", frozen=True):
    """``ToolChoice.Auto()``: the model decides. JSON ``{"type": "auto"}``."""


class _NoneChoice(ToolChoice, tag="none", frozen=True):
    """``ToolChoice.None_()``: no tool calls. JSON ``{"type": "none"}``."""


class _Required(ToolChoice, tag="required", frozen=True):
    """``ToolChoice.Required()``: the model must call some tool. JSON ``{"type": "required"}``."""


class _Function(ToolChoice, tag="function", frozen=True):
    """``ToolChoice.Function(name)``: the model must call this tool. JSON tag ``"function"``."""

    name: str


for _attr, _cls in (
    ("Auto", _Auto),
    ("None_", _NoneChoice),
    ("Required", _Required),
    ("Function", _Function),
):
    setattr(ToolChoice, _attr, _cls)
    _cls.__qualname__ = _cls.__name__ = f"ToolChoice.{_attr}"
ToolChoiceT = _Auto | _NoneChoice | _Required | _Function
"""The decodable union of ``ToolChoice`` variants."""
