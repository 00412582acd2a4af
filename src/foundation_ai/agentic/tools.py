"""Tools the agent can run (docs/concepts.md: Tools): ``@tool``, class-based tools, MultiCommands
tools and the registry the loop dispatches through.

A function becomes a tool with ``@tool``::

    @tool
    async def search(q: str, limit: int = 10, mode: Literal["web", "news"] = "web") -> list[str]:
        \"\"\"Search the web.

        Args:
            q: The query.
            limit: How many results.
        \"\"\"

The ``Args`` schema comes from the signature (types, defaults, ``Literal``/``Enum`` as ``enum``,
nested ``msgspec.Struct``/dataclass/``TypedDict``/pydantic model as nested objects, generated
by ``msgspec.json.schema``; a pydantic model parameter is validated by pydantic and the function
receives the model instance) and the docstring (the summary is the tool's description; Google-style
``Args:`` or reST ``:param x:`` lines describe the arguments). The decorated object still calls
the function directly.

A class-based tool has a ``definition`` (:class:`~foundation_ai.types.ToolDefinition`) and an
``execute(args: ToolArgs)`` method (sync or async); subclass :class:`BaseTool` or just provide
both. :class:`MultiCommandTool` groups several tools behind one function whose ``command``
argument selects one (``Tool.MultiCommands``).

Every call is validated against the schema before it runs (:meth:`ToolRegistry.run`); a
validation failure, an exception or a timeout becomes a ``Messages.ToolResult`` with
``error_detail`` that goes back to the model while the turn goes on.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from types import CoroutineType
from typing import Any, Protocol, TypeVar, get_type_hints, overload, runtime_checkable

import msgspec

from ..errors import ArgumentValidationError, ConfigurationError, ToolArgumentError
from ..schema.typed import pydantic_dec_hook, pydantic_schema_hook
from ..schema.walk import map_subschemas
from ..types import (
    Args,
    ExecutionHint,
    ImageContent,
    Messages,
    TextContent,
    Tool,
    ToolArgs,
    ToolCall,
    ToolDeclarations,
    ToolDefinition,
    ToolResultMessage,
)
from ..types._text import scrub_surrogates
from ..types.serialization import nesting_exceeds, to_json
from .threads import run_in_daemon_thread

__all__ = [
    "MAX_ARGUMENT_NESTING",
    "AgentTool",
    "BaseTool",
    "FunctionTool",
    "MultiCommandTool",
    "ToolRegistry",
    "as_agent_tool",
    "calling_tool_loop",
    "error_result",
    "tool",
]

_T = TypeVar("_T")
F = TypeVar("F", bound=Callable[..., Any])

MAX_ARGUMENT_NESTING = 100
"""The deepest nesting of arrays and objects a tool call's arguments may have (the arguments
object itself is level 1). Deeper arguments become an error tool result before validation, and a
stored record holding them stays within the JSON format's limit (``docs/json-format.md``,
"Limits")."""

_NAME_OK = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:\s*$"
)
_GOOGLE_ARG = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


# --------------------------------------------------------------------------------------------
# docstrings and schemas


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into (description, {argument: description}).

    The description is the text before the first section header (``Args:``, ``Returns:``, …) or
    ``:param`` line; argument descriptions come from a Google-style ``Args:`` section (continuation
    lines indented further are joined) or reST ``:param name: text`` lines.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        rest = _REST_PARAM.match(line)
        if rest:
            section, current = "rest", rest.group(1)
            params[current] = rest.group(2).strip()
            continue
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            current, arg_indent = None, None
            continue
        if section is None:
            desc.append(line)
            continue
        if section in ("args", "arguments", "parameters", "params"):
            if not line.strip():
                continue
            indent = len(line) - len(line.lstrip())
            m = _GOOGLE_ARG.match(line)
            if m and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = m.group(1).lstrip("*")
                params[current] = m.group(2).strip()
            elif current is not None:
                params[current] = (params[current] + " " + line.strip()).strip()
        elif section == "rest" and current is not None and line.strip():
            params[current] = (params[current] + " " + line.strip()).strip()
    return "\n".join(desc).strip(), params


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace local ``$ref``s by their definitions (providers handle inline schemas best) and
    drop the ``title`` keywords msgspec adds. Only keyword positions are touched
    (:func:`~foundation_ai.schema.walk.map_subschemas`): a property or field named ``title``,
    ``$ref``, ``type`` … keeps its name and schema.

    A recursive type keeps its ``$defs`` and refs.
    """
    defs: dict[str, Any] = schema.get("$defs", {})

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if not isinstance(node, dict):
            return node  # a boolean schema
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/") :]
            if name in seen or name not in defs:
                raise _Recursive(name)
            inner = walk(defs[name], (*seen, name))
            rest = {k: v for k, v in node.items() if k not in ("$ref", "$defs", "title")}
            return {**inner, **map_subschemas(rest, lambda s: walk(s, seen))}
        kept = {k: v for k, v in node.items() if k not in ("$defs", "title")}
        return map_subschemas(kept, lambda s: walk(s, seen))

    try:
        out: dict[str, Any] = walk(schema, ())
        return out
    except _Recursive:
        return schema


class _Recursive(Exception):
    """A ``$ref`` cycle: the schema keeps its ``$defs``."""


def _params_struct(fn: Callable[..., Any], name: str) -> tuple[type[msgspec.Struct], list[str]]:
    """A msgspec Struct mirroring ``fn``'s parameters, and the parameter names in order.

    Raises:
        ConfigurationError: a parameter is positional-only-variadic (``*args``/``**kwargs``)
            or has no type annotation msgspec can describe.
    """
    sig = inspect.signature(fn)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ConfigurationError(f"tool {name!r}: cannot resolve type hints: {exc}") from exc
    fields: list[Any] = []
    names: list[str] = []
    for p in sig.parameters.values():
        if p.name in ("self", "cls"):
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ConfigurationError(f"tool {name!r}: *args/**kwargs cannot be described to a model")
        ann = hints.get(p.name, Any)
        names.append(p.name)
        if p.default is inspect.Parameter.empty:
            fields.append((p.name, ann))
        elif isinstance(p.default, list | dict | set):
            fields.append((p.name, ann, msgspec.field(default_factory=_copier(p.default))))
        else:
            fields.append((p.name, ann, p.default))
    struct = msgspec.defstruct(f"{name}_args", fields, kw_only=True, forbid_unknown_fields=True)
    return struct, names


def _copier(value: Any) -> Callable[[], Any]:
    return lambda: type(value)(value)


def schema_for(fn: Callable[..., Any], name: str, arg_docs: dict[str, str]) -> dict[str, Any]:
    """The JSON Schema of ``fn``'s arguments (an object schema; see the module docstring).

    Raises:
        ConfigurationError: a parameter type cannot be turned into a schema.
    """
    struct, _ = _params_struct(fn, name)
    try:
        raw = msgspec.json.schema(struct, schema_hook=pydantic_schema_hook)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"tool {name!r}: cannot build a schema: {exc}") from exc
    schema = _inline_refs(raw)
    if "$ref" in schema:  # recursive: hoist the root definition, keep $defs
        root = raw["$defs"][raw["$ref"][len("#/$defs/") :]]
        schema = {**root, "$defs": raw["$defs"]}
    schema.pop("title", None)
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    for arg, text in arg_docs.items():
        prop = schema["properties"].get(arg)
        if prop is not None and text and "description" not in prop:
            prop["description"] = text
    return schema


# --------------------------------------------------------------------------------------------
# results


def to_content(value: Any) -> TextContent | ImageContent:
    """A tool's return value as ``UserModelContent``: ``str`` as is, text/image content as is,
    ``None`` as ``""``, anything else as JSON (msgspec: structs, dataclasses, dicts, lists).
    Lone surrogates (a non-UTF-8 file name from ``os.listdir``) become U+FFFD
    (docs/json-format.md, "Text")."""
    if isinstance(value, str):
        return TextContent(value if value.isascii() else scrub_surrogates(value))
    if type(value) is int:  # its JSON is its decimal digits
        return TextContent(str(value))
    if isinstance(value, TextContent):
        clean = scrub_surrogates(value.content)
        return value if clean is value.content else msgspec.structs.replace(value, content=clean)
    if isinstance(value, ImageContent):
        return value
    if value is None:
        return TextContent("")
    try:
        return TextContent(to_json(value).decode())
    except (TypeError, msgspec.EncodeError):
        return TextContent(scrub_surrogates(str(value)))


def _too_deep(call: ToolCall) -> ToolResultMessage:
    return error_result(
        call,
        f"the arguments nest arrays/objects deeper than {MAX_ARGUMENT_NESTING} levels; "
        "the tool was not run, send the call again with flatter arguments",
    )


def error_result(call: ToolCall, detail: str, *, short: str | None = None) -> ToolResultMessage:
    """A ``Messages.ToolResult`` reporting a failure of ``call`` (``error_detail`` = ``detail``)."""
    return Messages.ToolResult(
        tool_call_id=call.id,
        name=call.name,
        content=TextContent(short or f"Error: {detail}"),
        error_detail=detail,
    )


# --------------------------------------------------------------------------------------------
# tool kinds


@runtime_checkable
class AgentTool(Protocol):
    """What the registry needs from a tool: its declaration and how to run a call.

    ``declaration`` is the ``Tool`` offered to the model; ``run(definition, arguments)`` runs a
    call whose arguments were already validated against ``definition.arguments`` and returns
    any value (see :func:`to_content`) or raises. ``timeout`` is seconds (``None``: none) and
    ``sequential`` forces one-at-a-time execution within a DAG stage.
    """

    @property
    def declaration(self) -> Tool: ...

    timeout: float | None
    sequential: bool

    def run(self, definition: ToolDefinition, arguments: dict[str, Any]) -> Any: ...


class FunctionTool:
    """A typed Python function (sync or async) as a tool; made by :func:`tool`.

    Calling the object calls the function. ``definition`` is its ``ToolDefinition``. Sync
    functions run in a daemon worker thread (so they run concurrently and time out) unless
    ``inline=True``, which runs them on the event loop (fastest; for quick, non-blocking code).
    A sync call abandoned by a timeout, a steer or an abort keeps running in the background
    until it returns (its result is dropped); being a daemon thread, it does not delay the
    interpreter's exit (see :mod:`.threads`).

    Raises:
        ConfigurationError: a bad tool name, ``*args``/``**kwargs``, a parameter type with no
            JSON Schema, or a generator function (a tool returns its result).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        category: str = "",
        timeout: float | None = None,
        sequential: bool = False,
        inline: bool = False,
    ) -> None:
        tool_name = name or fn.__name__
        if not _NAME_OK.match(tool_name):
            raise ConfigurationError(f"tool name {tool_name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise ConfigurationError(
                f"tool {tool_name!r} is a generator function: a tool returns its result (e.g. "
                "collect the items into a list and return it)"
            )
        summary, arg_docs = parse_docstring(fn.__doc__)
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        self.timeout = timeout
        self.sequential = sequential
        self.inline = inline
        self._struct, self._names = _params_struct(fn, tool_name)
        self.definition = ToolDefinition(
            name=tool_name,
            description=description if description is not None else summary,
            arguments=Args(schema_for(fn, tool_name, arg_docs)),
            category=category,
        )
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self.definition.name!r})"

    @functools.cached_property
    def declaration(self) -> Tool:
        """``Tool.SingleCommand(self.definition)``."""
        return Tool.SingleCommand(self.definition)

    def _kwargs(self, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            value = msgspec.convert(arguments, self._struct, strict=False, dec_hook=pydantic_dec_hook)
        except msgspec.ValidationError as exc:
            raise ToolArgumentError("$", "arguments matching the signature", str(exc)) from exc
        return msgspec.structs.asdict(value)  # its fields are the parameters, in order

    def run(self, definition: ToolDefinition, arguments: dict[str, Any]) -> Awaitable[Any]:
        """Convert ``arguments`` to the parameter types and call the function: an awaitable of
        its result (an async function's own coroutine).

        Raises:
            ToolArgumentError: ``arguments`` do not match the parameters (at once).
        """
        kwargs = self._kwargs(arguments)
        if self.is_async:
            return self.fn(**kwargs)  # type: ignore[no-any-return]
        return self._call(kwargs)

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        """Run the sync function: on the event loop (``inline``) or in a daemon thread."""
        if self.inline:
            result = self.fn(**kwargs)
        else:
            result = await run_in_daemon_thread(self.fn, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


@overload
def tool(fn: F, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    category: str = "",
    timeout: float | None = None,
    sequential: bool = False,
    inline: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    category: str = "",
    timeout: float | None = None,
    sequential: bool = False,
    inline: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a typed function into a tool: ``@tool`` or ``@tool(name=..., timeout=5.0)``.

    Args:
        name: the function name the model sees (default: the Python name).
        description: overrides the docstring summary.
        category: a grouping label.
        timeout: seconds a call may take before it becomes an error result (``None``: no limit).
        sequential: never run concurrently with other calls of the same stage.
        inline: run a sync function on the event loop instead of a worker thread.

    Raises:
        ConfigurationError: the name is invalid or a parameter cannot be described.
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            description=description,
            category=category,
            timeout=timeout,
            sequential=sequential,
            inline=inline,
        )

    return wrap(fn) if fn is not None else wrap


class BaseTool:
    """Base for class-based tools: set ``definition`` and implement ``execute(args)``.

    ``execute`` receives a :class:`~foundation_ai.types.ToolArgs` over the validated arguments and
    may be sync (run in a daemon worker thread; see :class:`FunctionTool` on abandoned calls) or
    async. Raise to report a failure.
    """

    definition: ToolDefinition
    timeout: float | None = None
    sequential: bool = False

    @property
    def declaration(self) -> Tool:
        """``Tool.SingleCommand(self.definition)``."""
        return Tool.SingleCommand(self.definition)

    def execute(self, args: ToolArgs) -> Any:
        """Run the tool. Override."""
        raise NotImplementedError

    async def run(self, definition: ToolDefinition, arguments: dict[str, Any]) -> Any:
        """Call ``execute`` with a ``ToolArgs``."""
        return await _call_execute(self.execute, ToolArgs(arguments))


async def _call_execute(execute: Callable[[ToolArgs], Any], args: ToolArgs) -> Any:
    if inspect.iscoroutinefunction(execute):
        return await execute(args)
    result = await run_in_daemon_thread(execute, args)
    if inspect.isawaitable(result):
        result = await result
    return result


class _ObjectTool:
    """Adapts any object with ``definition`` and ``execute(args)`` (duck-typed class tools)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.definition: ToolDefinition = obj.definition
        self.timeout: float | None = getattr(obj, "timeout", None)
        self.sequential: bool = bool(getattr(obj, "sequential", False))

    @functools.cached_property
    def declaration(self) -> Tool:
        return Tool.SingleCommand(self.definition)

    async def run(self, definition: ToolDefinition, arguments: dict[str, Any]) -> Any:
        return await _call_execute(self.obj.execute, ToolArgs(arguments))


class MultiCommandTool:
    """Several commands behind one function (``Tool.MultiCommands``), e.g. ``memory`` with
    add/remove/replace. The model passes ``command`` plus that command's arguments.

    Args:
        name: the function name the model sees.
        commands: tools (``@tool`` functions, class tools) whose names are the command names.
        description: what the group does.
        timeout: seconds, for every command (a command's own timeout wins).
    """

    def __init__(
        self,
        name: str,
        commands: Iterable[Any],
        *,
        description: str = "",
        timeout: float | None = None,
        sequential: bool = False,
    ) -> None:
        if not _NAME_OK.match(name):
            raise ConfigurationError(f"tool name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
        self.commands: dict[str, AgentTool] = {}
        for c in commands:
            t = as_agent_tool(c)
            decl = t.declaration
            if not isinstance(decl, Tool.SingleCommand):
                raise ConfigurationError("a MultiCommands command must be a single-command tool")
            self.commands[decl.definition.name] = t
        self.name = name
        self.timeout = timeout
        self.sequential = sequential
        self._decl = Tool.MultiCommands(
            tool_name=name,
            commands=[t.declaration.definition for t in self.commands.values()],  # type: ignore[attr-defined]
            description=description,
        )

    @property
    def declaration(self) -> Tool:
        return self._decl

    async def run(self, definition: ToolDefinition, arguments: dict[str, Any]) -> Any:
        return await self.commands[definition.name].run(definition, arguments)


_TOOL_CLASSES = (FunctionTool, BaseTool, MultiCommandTool)
"""The tool classes :func:`as_agent_tool` takes as they are (an ``isinstance`` tuple: made once,
where ``FunctionTool | BaseTool | MultiCommandTool`` made a union per call)."""


def as_agent_tool(obj: Any) -> AgentTool:
    """Accept a ``FunctionTool``, ``BaseTool``, ``MultiCommandTool``, any object with
    ``definition`` + ``execute``, or a plain typed function (wrapped with :func:`tool`). Every
    argument schema of the tool is compiled now, so a tool the model could never call correctly
    is refused when it is registered, not when the model first calls it.

    Raises:
        ConfigurationError: ``obj`` is none of these, or one of its argument schemas is not a
            valid JSON Schema (the message names the tool).
    """
    if isinstance(obj, _TOOL_CLASSES):
        return _schemas_checked(obj)
    if hasattr(obj, "definition") and hasattr(obj, "execute"):
        return _schemas_checked(_ObjectTool(obj))
    if hasattr(obj, "declaration") and hasattr(obj, "run"):
        return _schemas_checked(obj)  # type: ignore[no-any-return]
    if callable(obj) and (inspect.isfunction(obj) or inspect.ismethod(obj)):
        return FunctionTool(obj)  # its schema is built from the signature
    raise ConfigurationError(f"not a tool: {obj!r}")


def _schemas_checked(t: _T) -> _T:
    """``t``, once each of its definitions' argument schemas compiled (compiled once per
    ``Args``: the validator calls use the same one).

    Raises:
        ConfigurationError: a schema is not a valid JSON Schema."""
    decl = t.declaration  # type: ignore[attr-defined]
    single = getattr(decl, "definition", None)
    definitions = decl.commands if isinstance(decl, Tool.MultiCommands) else [single] if single else []
    for d in definitions:
        try:
            _ = d.arguments.validator
        except ConfigurationError as exc:
            raise ConfigurationError(f"tool {d.name!r}: its arguments schema is unusable: {exc}") from None
    return t


# --------------------------------------------------------------------------------------------
# registry

_TOOL_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "foundation_ai_tool_loop", default=None
)


def calling_tool_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop of the turn whose tool call is running the calling code (in the tool's own
    task, or its worker thread for a sync tool), else ``None``. Steering uses it: a tool that
    calls ``steer()`` on its own session must not interrupt (and so lose) its own call; the steer
    is taken once the tool stage ends."""
    return _TOOL_LOOP.get()


class ToolRegistry:
    """The tools of a session, by function name.

    ``declarations()`` is what a request offers; :meth:`run` validates and runs one call and
    always returns a ``Messages.ToolResult`` (errors included), never raises for tool failures.
    """

    def __init__(self, tools: Iterable[Any] = (), *, default_timeout: float | None = None) -> None:
        self._tools: dict[str, AgentTool] = {}
        self.default_timeout = default_timeout
        self._decls: ToolDeclarations | None = None
        self.version = 0
        """Counts the tools added: it changes whenever the set of tools does (a cheap check)."""
        for t in tools:
            self.add(t)

    def add(self, obj: Any) -> AgentTool:
        """Register a tool (see :func:`as_agent_tool`).

        Raises:
            ConfigurationError: not a tool, or its name is taken.
        """
        t = as_agent_tool(obj)
        name = t.declaration.name()
        if name in self._tools:
            raise ConfigurationError(f"two tools are named {name!r}")
        self._tools[name] = t
        self._decls = None
        self.version += 1
        return t

    def get(self, name: str) -> AgentTool | None:
        """The tool behind a function name, or ``None``."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """The function names, in registration order."""
        return list(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def declarations(self) -> ToolDeclarations:
        """``ToolDeclarations(tools=[...])`` for a ``ModelInteraction`` (cached)."""
        if self._decls is None:
            self._decls = ToolDeclarations(tools=[t.declaration for t in self._tools.values()])  # type: ignore[misc]
        return self._decls

    def is_sequential(self, call: ToolCall) -> bool:
        """True when ``call`` must run alone: its hint says so or its tool is sequential."""
        if call.execution_hint == ExecutionHint.Sequential:
            return True
        t = self._tools.get(call.name)
        return bool(t is not None and t.sequential)

    def prepare(self, call: ToolCall) -> tuple[AgentTool, ToolDefinition, dict[str, Any]] | ToolResultMessage:
        """Resolve and validate ``call``: the tool, the definition and arguments to run, or an
        error result (unknown tool, arguments that are not a JSON object, schema
        violations, every one listed)."""
        t = self._tools.get(call.name)
        if t is None:
            known = ", ".join(self._tools) or "none"
            return error_result(call, f"unknown tool {call.name!r}; available tools: {known}")
        if call.arguments is None and call.raw_arguments is not None:
            if nesting_exceeds(call.raw_arguments.encode("utf-8", "replace"), MAX_ARGUMENT_NESTING):
                return _too_deep(call)  # too deep for the JSON decoder (~1,000 levels) too
            return error_result(call, _not_an_object(t, call.raw_arguments))
        if call.arguments is not None and nested_deeper_than(call.arguments, MAX_ARGUMENT_NESTING):
            return _too_deep(call)
        try:
            definition, args = t.declaration.resolve(call.arguments)
        except ArgumentValidationError as exc:
            return error_result(call, _violations_text(exc))
        value = {} if args is None else args
        schema = definition.arguments
        try:
            valid = schema.validator.is_valid(value)  # the valid case builds no violation list
        except ConfigurationError as exc:  # a schema that cannot compile (refused at registration)
            return error_result(call, f"the tool {call.name!r} cannot be called: {exc}")
        if not valid:
            violations = schema.violations(value)
            if violations:
                return error_result(call, _violations_text(ArgumentValidationError(violations)))
        return t, definition, value

    async def execute(
        self, call: ToolCall, prepared: tuple[AgentTool, ToolDefinition, dict[str, Any]]
    ) -> ToolResultMessage:
        """Run a prepared call with its timeout; exceptions and timeouts become error results."""
        t, definition, value = prepared
        timeout = t.timeout if t.timeout is not None else self.default_timeout
        token = _TOOL_LOOP.set(asyncio.get_running_loop())  # copied into the tool's task/thread
        try:
            if timeout is None:
                result = t.run(definition, value)
                if type(result) is _COROUTINE or inspect.isawaitable(result):
                    result = await result
            else:
                result = await asyncio.wait_for(_maybe_await(t.run(definition, value)), timeout)
        except TimeoutError:
            return error_result(call, f"tool {call.name!r} timed out after {timeout} s")
        except ToolArgumentError as exc:
            return error_result(call, f"invalid arguments: {exc}")
        except ArgumentValidationError as exc:
            return error_result(call, _violations_text(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return error_result(call, f"tool {call.name!r} raised {type(exc).__name__}: {exc}")
        finally:
            _TOOL_LOOP.reset(token)
        return Messages.ToolResult(
            tool_call_id=call.id, name=call.name, content=to_content(result), timestamp=_utcnow()
        )

    async def run(self, call: ToolCall) -> ToolResultMessage:
        """Validate then run one call; always a result (see :meth:`prepare`, :meth:`execute`)."""
        prepared = self.prepare(call)
        if isinstance(prepared, ToolResultMessage):
            return prepared
        return await self.execute(call, prepared)


def nested_deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` (decoded JSON: dicts, lists, scalars) nests dicts/lists deeper than
    ``limit`` levels (``{}`` is level 1). Iterative: never recurses, stops at the first proof."""
    if type(value) is dict and limit >= 1:  # the usual case: a flat object
        for c in value.values():
            if isinstance(c, _CONTAINERS):
                break
        else:
            return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth > limit:
            return True
        for c in children:
            if isinstance(c, _CONTAINERS):
                stack.append((c, depth + 1))
    return False


_CONTAINERS = (dict, list, tuple)
_COROUTINE = CoroutineType
_utcnow = functools.partial(datetime.now, UTC)  # ``utc_now`` without a Python frame


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _not_an_object(t: AgentTool, raw: str) -> str:
    """What the model is told when a call's arguments are not a JSON object (``[1, 2]``, a
    JSON string, ``{not json``): what was received, then the schema's violations, as for any
    invalid arguments (the received value's, e.g. its type, and the required fields it lacks,
    those of ``{}``)."""
    shown = raw if len(raw) <= 200 else raw[:200] + "..."
    try:
        value: Any = msgspec.json.decode(raw)
        what = f"not a JSON object but a JSON {_JSON_KINDS.get(type(value), 'value')}: {shown!r}"
        parsed = True
    except (msgspec.DecodeError, RecursionError):
        what = f"not a complete JSON object (truncated or malformed): {shown!r}"
        parsed = False
    decl = t.declaration
    definition = getattr(decl, "definition", None)
    try:
        if isinstance(definition, ToolDefinition):
            validator = definition.arguments.validator
        else:
            from ..schema import compile_schema

            validator = compile_schema(decl.functions()[0].parameters)
        from ..schema import violations_of

        lines: list[str] = []
        for candidate in ([value] if parsed else []) + [{}]:
            for v in violations_of(validator, candidate):
                line = f"{v.path}: {v.message}"
                if line not in lines:
                    lines.append(line)
    except ConfigurationError:
        lines = []
    listed = f" ({len(lines)} problem(s)):\n" + "\n".join(lines) if lines else ""
    return (
        f"invalid arguments: the arguments were {what}; the tool was not run{listed}\n"
        "Send the call again with a JSON object of valid arguments."
    )


_JSON_KINDS = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _violations_text(exc: ArgumentValidationError) -> str:
    lines = [f"{v.path}: {v.message}" for v in exc.violations]
    return "invalid arguments (" + str(len(lines)) + " problem(s)):\n" + "\n".join(lines)
