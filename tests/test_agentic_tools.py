"""Tools runtime: @tool schemas from signatures and docstrings, class tools, MultiCommands,
the registry, validation before running, errors and timeouts as error results (issue 5, item 1)."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Literal, TypedDict

import msgspec
import pytest

from foundation_ai import tool as root_tool
from foundation_ai.agentic import BaseTool, FunctionTool, MultiCommandTool, ToolRegistry, tool
from foundation_ai.errors import ConfigurationError
from foundation_ai.schema import scheme
from foundation_ai.types import Args, ToolArgs, ToolCall, ToolDefinition


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(msgspec.Struct):
    x: int
    y: int = 0


@dataclasses.dataclass
class Box:
    label: str
    corners: list[Point]


class Opts(TypedDict):
    verbose: bool


@tool
def draw(
    box: Box,
    color: Color,
    mode: Literal["fill", "outline"] = "fill",
    opts: Opts | None = None,
    scale: float = 1.0,
) -> str:
    """Draw a box.

    Args:
        box: The box to draw.
        color: Its colour.
        mode: Fill it or only draw the outline;
            outline is faster.
        scale: A factor.
    """
    return f"{box.label}:{len(box.corners)}:{color.value}:{mode}:{scale}:{opts}"


def call(name: str, args: dict[str, object] | None, **kw: object) -> ToolCall:
    return ToolCall(id=f"c_{name}", name=name, arguments=args, **kw)  # type: ignore[arg-type]


def test_root_package_exports_tool() -> None:
    assert root_tool is tool


def test_schema_from_signature_and_docstring() -> None:
    d = draw.definition
    assert d.name == "draw"
    assert d.description == "Draw a box."
    s = d.arguments.schema
    assert s["type"] == "object"
    assert s["additionalProperties"] is False
    assert set(s["required"]) == {"box", "color"}
    props = s["properties"]
    assert props["box"]["description"] == "The box to draw."
    # nested dataclass with a nested msgspec Struct, inlined (no $ref)
    assert props["box"]["properties"]["corners"]["items"]["properties"]["x"] == {"type": "integer"}
    assert "$ref" not in str(s) and "$defs" not in s
    assert sorted(props["color"]["enum"]) == ["blue", "red"]
    assert props["mode"]["enum"] == ["fill", "outline"]
    assert props["mode"]["default"] == "fill"
    assert props["mode"]["description"] == "Fill it or only draw the outline; outline is faster."
    assert props["scale"] == {"type": "number", "default": 1.0, "description": "A factor."}
    assert props["opts"]["anyOf"][0]["properties"]["verbose"] == {"type": "boolean"}
    # the schema is a valid JSON Schema
    Args.from_value(s)


def test_decorated_function_still_callable() -> None:
    assert draw(Box("b", []), Color.RED) == "b:0:red:fill:1.0:None"


def test_rest_docstring_and_options() -> None:
    @tool(name="find-it", timeout=3.0, sequential=True, category="search")
    async def find(q: str, limit: int = 5) -> list[str]:
        """Find things.

        :param q: The query.
        :param limit: Max results.
        """
        return [q] * limit

    assert isinstance(find, FunctionTool)
    d = find.definition
    assert (d.name, d.category, find.timeout, find.sequential) == ("find-it", "search", 3.0, True)
    assert d.arguments.schema["properties"]["q"]["description"] == "The query."
    assert d.arguments.schema["properties"]["limit"]["default"] == 5


def test_bad_tool_names_and_varargs_rejected() -> None:
    with pytest.raises(ConfigurationError):
        tool(name="has space")(lambda: 1)

    def f(*args: int) -> int:
        return 0

    with pytest.raises(ConfigurationError):
        tool(f)


def test_generator_functions_are_refused_as_tools() -> None:
    """A generator tool used to run as ``'<generator object ...>'`` sent to the model: now
    decorating one raises ``ConfigurationError`` saying a tool returns its result."""

    def lines(n: int) -> Iterator[int]:
        yield from range(n)

    async def alines(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    for fn in (lines, alines):
        with pytest.raises(ConfigurationError, match="generator function: a tool returns its result"):
            tool(fn)


async def test_nested_values_converted_before_call() -> None:
    reg = ToolRegistry([draw])
    r = await reg.run(
        call(
            "draw",
            {
                "box": {"label": "B", "corners": [{"x": 1}, {"x": 2, "y": 3}]},
                "color": "blue",
                "opts": {"verbose": True},
            },
        )
    )
    assert r.error_detail is None
    assert r.content.content == "B:2:blue:fill:1.0:{'verbose': True}"  # type: ignore[union-attr]


async def test_every_violation_reported_and_tool_not_run() -> None:
    ran: list[int] = []

    @tool
    def f(a: int, b: str, c: Literal["x", "y"]) -> str:
        ran.append(1)
        return "ran"

    reg = ToolRegistry([f])
    r = await reg.run(call("f", {"a": "nope", "c": "z", "extra": 1}))
    assert ran == []
    assert r.is_error and r.error_detail is not None
    detail = r.error_detail
    assert "$.a" in detail  # wrong type
    assert '"b" is a required property' in detail  # missing
    assert "$.c" in detail  # not in enum
    assert "extra" in detail  # additional property
    assert "4 problem(s)" in detail


async def test_truncated_arguments_are_an_error_never_run() -> None:
    """C06: arguments cut off mid-JSON: reported invalid, not run, not silently {}."""
    ran: list[int] = []

    @tool
    def g(q: str = "default") -> str:
        ran.append(1)
        return "ran"

    reg = ToolRegistry([g])
    r = await reg.run(call("g", None, raw_arguments='{"q": "hel'))
    assert ran == []
    assert r.is_error and "not a complete JSON object" in (r.error_detail or "")
    assert '{"q": "hel' in (r.error_detail or "")


async def test_unknown_tool() -> None:
    r = await ToolRegistry([draw]).run(call("nope", {}))
    assert r.is_error and "unknown tool 'nope'" in (r.error_detail or "") and "draw" in (r.error_detail or "")


async def test_raise_becomes_error_result() -> None:
    @tool
    def boom(x: int) -> int:
        raise ValueError(f"bad x {x}")

    r = await ToolRegistry([boom]).run(call("boom", {"x": 3}))
    assert r.is_error and r.error_detail == "tool 'boom' raised ValueError: bad x 3"


async def test_per_tool_timeout_async_and_sync() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        await asyncio.sleep(30)
        return "never"

    import threading

    gate = threading.Event()

    @tool(timeout=0.05)
    def slow_sync() -> str:
        gate.wait(30)
        return "late"

    reg = ToolRegistry([slow, slow_sync])
    r1 = await reg.run(call("slow", {}))
    r2 = await reg.run(call("slow_sync", {}))
    gate.set()
    assert r1.is_error and "timed out after 0.05 s" in (r1.error_detail or "")
    assert r2.is_error and "timed out" in (r2.error_detail or "")


async def test_registry_default_timeout_applies() -> None:
    @tool
    async def slow() -> str:
        await asyncio.sleep(30)
        return "x"

    r = await ToolRegistry([slow], default_timeout=0.02).run(call("slow", {}))
    assert r.is_error and "timed out" in (r.error_detail or "")


class Weather(BaseTool):
    definition = ToolDefinition(
        name="weather",
        description="Weather for a city.",
        arguments=Args.new(
            scheme.object().required("city", scheme.string()).optional("days", scheme.integer())
        ),
    )

    async def execute(self, args: ToolArgs) -> dict[str, object]:
        return {"city": args.str("city"), "days": args.opt_usize("days") or 1}


class DuckTool:
    definition = ToolDefinition(name="duck", description="Quack.")

    def execute(self, args: ToolArgs) -> str:
        return "quack"


async def test_class_based_tools() -> None:
    reg = ToolRegistry([Weather(), DuckTool()])
    assert reg.names() == ["weather", "duck"]
    r = await reg.run(call("weather", {"city": "Oslo", "days": 2}))
    assert r.content.content == '{"city":"Oslo","days":2}'  # type: ignore[union-attr]
    assert (await reg.run(call("duck", {}))).content.content == "quack"  # type: ignore[union-attr]
    bad = await reg.run(call("weather", {"days": -1.5}))
    assert bad.is_error and "city" in (bad.error_detail or "") and "$.days" in (bad.error_detail or "")


async def test_multi_commands_tool() -> None:
    facts: list[str] = []

    @tool
    def add(fact: str) -> str:
        """Remember a fact."""
        facts.append(fact)
        return f"added {fact}"

    @tool
    def remove(index: int) -> str:
        """Forget a fact."""
        return f"removed {facts.pop(index)}"

    memory = MultiCommandTool("memory", [add, remove], description="Working memory.")
    reg = ToolRegistry([memory])
    fn = reg.declarations().functions()[0]
    assert fn.name == "memory"
    assert fn.parameters["properties"]["command"]["enum"] == ["add", "remove"]
    assert (await reg.run(call("memory", {"command": "add", "fact": "sky is blue"}))).content.content == (  # type: ignore[union-attr]
        "added sky is blue"
    )
    assert facts == ["sky is blue"]
    bad = await reg.run(call("memory", {"command": "explode"}))
    assert bad.is_error and "$.command" in (bad.error_detail or "")
    bad2 = await reg.run(call("memory", {"command": "remove", "index": "x"}))
    assert bad2.is_error and "$.index" in (bad2.error_detail or "")


def test_registry_rejects_duplicates_and_wraps_plain_functions() -> None:
    def plain(n: int) -> int:
        """Double it."""
        return 2 * n

    reg = ToolRegistry([plain])
    assert reg.get("plain") is not None
    assert reg.declarations().functions()[0].description == "Double it."
    with pytest.raises(ConfigurationError):
        reg.add(plain)
    with pytest.raises(ConfigurationError):
        reg.add(42)


async def test_results_as_content() -> None:
    @tool(inline=True)
    def point() -> Point:
        return Point(1, 2)

    @tool(inline=True)
    def nothing() -> None:
        return None

    reg = ToolRegistry([point, nothing])
    assert (await reg.run(call("point", {}))).content.content == '{"x":1,"y":2}'  # type: ignore[union-attr]
    assert (await reg.run(call("nothing", None))).content.content == ""  # type: ignore[union-attr]


_ABANDONED_TOOL_SCRIPT = """
import sys, threading
from foundation_ai import AgentSession, tool
from foundation_ai.agentic import BaseTool, InMemorySessionStore, ScriptedModel, call, say
from foundation_ai.types import ToolDefinition, Args

never = threading.Event()

@tool(timeout=0.2)
def stuck() -> str:
    "Blocks forever."
    never.wait()
    return "late"

class Stuck(BaseTool):
    definition = ToolDefinition(name="stuck_cls", description="Blocks forever.", arguments=Args({"type": "object"}))
    timeout = 0.2
    def execute(self, args):
        never.wait()

model = ScriptedModel([call("stuck", {}), call("stuck_cls", {}), say("done")])
turn = AgentSession.builder(model).with_tools(stuck, Stuck()).with_store(InMemorySessionStore()).build().run_turn("go")
print([r.is_error for r in turn.tool_results()], turn.text(), flush=True)
"""


def test_a_timed_out_sync_tool_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    """Tester defect 2: sync tools ran in the default ThreadPoolExecutor, whose threads are
    joined at exit, so a tool that timed out (here: blocks forever) kept the interpreter alive.
    They now run in daemon threads: the process exits once the turn is over."""
    script = tmp_path / "abandon.py"
    script.write_text(_ABANDONED_TOOL_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )  # without the fix this never returns (the TimeoutExpired fails the test)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True, True] done"


async def test_daemon_thread_runs_sync_tools_with_context_and_errors() -> None:
    import contextvars
    import threading

    from foundation_ai.agentic.threads import run_in_daemon_thread

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("caller")

    def where() -> tuple[str, bool]:
        return var.get(), threading.current_thread().daemon

    assert await run_in_daemon_thread(where) == ("caller", True)

    def boom() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        await run_in_daemon_thread(boom)


class _BadSchema(BaseTool):
    definition = ToolDefinition(
        name="bad_schema",
        description="a tool whose schema no validator accepts",
        arguments=Args({"type": "object", "properties": {"a": {"type": "integer", "minimum": "x"}}}),
    )

    def execute(self, args: ToolArgs) -> str:
        return "ran"


def test_a_tool_with_an_invalid_arguments_schema_is_refused_when_registered() -> None:
    from foundation_ai.agentic import AgentSession, ScriptedModel, say
    from foundation_ai.agentic.toolsets.shed import ToolShed

    with pytest.raises(ConfigurationError, match=r"tool 'bad_schema'.*invalid JSON Schema"):
        ToolRegistry([_BadSchema()])
    with pytest.raises(ConfigurationError, match="tool 'bad_schema'"):
        AgentSession.builder(ScriptedModel([say("hi")])).with_tools(_BadSchema()).build()
    with pytest.raises(ConfigurationError, match="tool 'bad_schema'"):
        ToolShed().tool(_BadSchema())
    with pytest.raises(ConfigurationError, match="tool 'bad_schema'"):
        MultiCommandTool("kit", [_BadSchema()])  # as a command of a multi-command tool


def test_a_schema_broken_after_registration_gives_the_call_an_error_result_and_the_turn_goes_on() -> None:
    from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel, call, say

    class Mutable(BaseTool):
        definition = ToolDefinition(name="mutable", description="d", arguments=Args({"type": "object"}))

        def execute(self, args: ToolArgs) -> str:
            return "ran"

    t = Mutable()
    model = ScriptedModel([[call("mutable", {"a": 1})], say("done")])
    agent = AgentSession.builder(model).with_tools(t).with_store(InMemorySessionStore()).build()
    # the same name, now with a broken schema
    t.definition = ToolDefinition(name="mutable", description="d", arguments=_BadSchema.definition.arguments)
    turn = agent.run_turn("go")
    assert turn.text() == "done"
    (result,) = turn.tool_results()
    assert result.error_detail is not None and "cannot be called" in result.error_detail


async def test_non_object_arguments_go_through_schema_validation_and_name_the_missing_fields() -> None:
    ran: list[int] = []

    @tool
    def move(x: int, y: int, label: str = "") -> str:
        ran.append(1)
        return "moved"

    reg = ToolRegistry([move])
    for raw, what in [
        ("[1, 2]", "not a JSON object but a JSON array"),
        ('"x=1, y=2"', "not a JSON object but a JSON string"),
        ("{not json", "not a complete JSON object (truncated or malformed)"),
    ]:
        r = await reg.run(call("move", None, raw_arguments=raw))
        detail = r.error_detail or ""
        assert r.is_error and what in detail and "the tool was not run" in detail, detail
        # the same listing as for any other invalid arguments: which fields are missing
        assert '$: "x" is a required property' in detail and '$: "y" is a required property' in detail
        if raw.startswith(("[", '"')):
            assert 'is not of type "object"' in detail
    assert ran == []
