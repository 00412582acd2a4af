"""MCP servers as tool sources: real MCP servers (tests/_mcp_server.py, written with the SDK's
server API) over stdio and streamable HTTP on 127.0.0.1; their tools listed and called as
ordinary tools through real sessions, schemas validated before sending, errors and crashes as
error results, the server restarted on the next call, and ``shed`` discovery over them."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel, call, say
from foundation_ai.agentic.toolsets.mcp import MCPServerTools, MCPTool
from foundation_ai.agentic.toolsets.shed import SHED_NAME, ToolShed
from foundation_ai.types import TextContent

SERVER = str(Path(__file__).with_name("_mcp_server.py"))


def _stdio(**kw: Any) -> MCPServerTools:
    return MCPServerTools.stdio([sys.executable, SERVER, "stdio"], name="test", **kw)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_http(port: int, command: list[str] | None = None) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        command or [sys.executable, SERVER, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("the MCP HTTP test server exited") from None
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the MCP HTTP test server did not start")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture()
def stdio_server() -> Iterator[MCPServerTools]:
    src = _stdio()
    yield src
    src.close()


@pytest.fixture()
def http_server() -> Iterator[tuple[MCPServerTools, int, list[subprocess.Popen[bytes]]]]:
    port = _free_port()
    procs = [_start_http(port)]
    src = MCPServerTools.http(f"http://127.0.0.1:{port}/mcp", name="web")
    yield src, port, procs
    src.close()
    for p in procs:
        _stop(p)


def _session(tools: list[Any], script: list[Any]) -> AgentSession:
    return (
        AgentSession.builder(ScriptedModel(script))
        .with_tools(tools)
        .with_store(InMemorySessionStore())
        .build()
    )


def test_stdio_tools_are_listed_as_ordinary_tools(stdio_server: MCPServerTools) -> None:
    tools = stdio_server.list_tools()
    assert all(isinstance(t, MCPTool) for t in tools)
    by_name = {t.definition.name: t for t in tools}
    assert sorted(by_name) == ["add", "crash", "echo", "fail", "pid", "slow_sleep", "trace_context"]
    assert by_name["slow_sleep"].remote_name == "slow.sleep"  # a provider-safe name, called by its own
    add = by_name["add"].definition
    assert add.description == "Add two integers." and add.category == "mcp:test"
    assert add.arguments.schema["required"] == ["a", "b"]
    prefixed = _stdio(prefix="srv")
    try:
        assert "srv_add" in [t.definition.name for t in prefixed.list_tools()]
    finally:
        prefixed.close()


def test_stdio_calls_validate_answer_and_report_errors(stdio_server: MCPServerTools) -> None:
    session = _session(
        stdio_server.list_tools(),
        [
            [
                call("add", {"a": 2, "b": 40}),
                call("add", {"a": "x", "b": 1}),
                call("fail", {"reason": "disk full"}),
                call("slow_sleep", {"seconds": 0}),
            ],
            say("done"),
        ],
    )
    turn = session.run_turn("go")
    assert turn.ok and turn.text() == "done"
    added, invalid, failed, slept = turn.tool_results()
    assert added.error_detail is None and added.content == TextContent("42")
    # validated by our schema check before anything was sent (not the server's pydantic message)
    assert invalid.error_detail is not None and '$.a: "x" is not of type "integer"' in invalid.error_detail
    assert failed.error_detail is not None and "MCPToolError" in failed.error_detail
    assert "disk full" in failed.error_detail
    assert slept.content == TextContent("slept")


def test_a_crashed_stdio_server_is_an_error_result_and_restarts_on_the_next_call(
    stdio_server: MCPServerTools,
) -> None:
    tools = stdio_server.list_tools()
    session = _session(tools, [call("pid"), call("crash"), call("pid"), say("ok")])
    turn = session.run_turn("go")
    before, crashed, after = turn.tool_results()
    assert crashed.error_detail is not None and "will be restarted on the next call" in crashed.error_detail
    assert before.error_detail is None and after.error_detail is None
    assert before.content != after.content  # a new server process
    assert stdio_server.starts == 2


def test_a_call_past_its_timeout_is_an_error_result() -> None:
    src = _stdio(call_timeout=0.5)
    try:
        session = _session(
            src.list_tools(), [call("slow_sleep", {"seconds": 5}), call("add", {"a": 1, "b": 1}), say("ok")]
        )
        slow, fine = session.run_turn("go").tool_results()
        assert slow.error_detail is not None and "MCPToolError" in slow.error_detail
        assert fine.content == TextContent("2")
    finally:
        src.close()


def test_a_server_that_cannot_start_is_an_error_not_a_hang() -> None:
    src = MCPServerTools.stdio(
        [sys.executable, "-c", "import sys; sys.exit(7)"], name="broken", connect_timeout=20
    )
    try:
        with pytest.raises(Exception, match="broken"):
            src.list_tools()
    finally:
        src.close()


def test_streamable_http_tools_called_and_reconnected_after_the_server_restarts(
    http_server: tuple[MCPServerTools, int, list[subprocess.Popen[bytes]]],
) -> None:
    src, port, procs = http_server
    tools = src.list_tools()
    assert "add" in [t.definition.name for t in tools]
    session = _session(tools, [call("add", {"a": 20, "b": 22}), say("42")])
    turn = session.run_turn("go")
    assert turn.ok and turn.tool_results()[0].content == TextContent("42")
    _stop(procs[0])
    down = _session(tools, [call("add", {"a": 1, "b": 1}), say("down")])
    failed = down.run_turn("go").tool_results()[0]
    assert failed.error_detail is not None and "MCPToolError" in failed.error_detail
    procs.append(_start_http(port))
    again = _session(tools, [call("add", {"a": 1, "b": 2}), say("up")])
    assert again.run_turn("go").tool_results()[0].content == TextContent("3")
    assert src.starts >= 2


def test_shed_discovers_mcp_tools(stdio_server: MCPServerTools) -> None:
    shed = ToolShed().tools(stdio_server.list_tools())
    model = ScriptedModel(
        [
            call(SHED_NAME, {"description": "add two integers", "limit": 1}),
            call("add", {"a": 1, "b": 2}),
            say("3"),
        ]
    )
    session = AgentSession.builder(model).with_tool_shed(shed).with_store(InMemorySessionStore()).build()
    turn = session.run_turn("add")
    found, added = turn.tool_results()
    assert [h["name"] for h in msgspec.json.decode(found.content.content)] == ["add"]  # type: ignore[union-attr]
    assert added.content == TextContent("3")
    assert [t.name() for t in model.interactions[0].tools_shed.all_tools()] == [SHED_NAME]


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "server.py"
    path.write_text(body)
    return [sys.executable, str(path)]


def test_a_stdio_server_that_dies_at_start_is_reported_with_the_tail_of_its_stderr(tmp_path: Path) -> None:
    from foundation_ai.agentic.toolsets.mcp import STDERR_TAIL_LINES, MCPToolError

    command = _script(
        tmp_path,
        "import sys\n"
        "for i in range(2000):\n"
        "    sys.stderr.write(f'noise line {i}\\n')\n"
        "sys.stderr.write('x' * 5000 + '\\n')\n"
        "sys.stderr.write('FATAL: config missing at /etc/myserver.toml\\n')\n"
        "sys.exit(3)\n",
    )
    source = MCPServerTools.stdio(command, name="broken")
    try:
        with pytest.raises(MCPToolError) as caught:
            source.list_tools()
    finally:
        source.close()
    text = str(caught.value)
    assert text.startswith("could not start the MCP server 'broken': ")
    assert text.endswith("FATAL: config missing at /etc/myserver.toml")
    quoted = text.split("its stderr ended with:\n", 1)[1].splitlines()
    assert len(quoted) <= STDERR_TAIL_LINES
    assert "noise line 1999" in text and "noise line 0\n" not in text
    assert len(text) < 4000  # the 5,000-character line is cut


def test_a_stdio_server_stuck_before_its_handshake_is_reported_with_its_stderr(tmp_path: Path) -> None:
    from foundation_ai.agentic.toolsets.mcp import MCPToolError

    command = _script(
        tmp_path,
        "import sys, time\nsys.stderr.write('waiting for the license server at 10.0.0.9...\\n')\n"
        "sys.stderr.flush()\ntime.sleep(120)\n",
    )
    source = MCPServerTools.stdio(command, name="stuck", connect_timeout=2.0)
    try:
        with pytest.raises(MCPToolError, match="did not complete its handshake") as caught:
            source.list_tools()
    finally:
        source.close()
    assert caught.value.transient
    assert str(caught.value).endswith("waiting for the license server at 10.0.0.9...")


def test_a_given_errlog_receives_the_servers_stderr(tmp_path: Path) -> None:
    command = _script(tmp_path, "import sys\nsys.stderr.write('FATAL: no config\\n')\nsys.exit(3)\n")
    log_path = tmp_path / "server.log"
    with log_path.open("w") as errlog:
        source = MCPServerTools.stdio(command, name="logged", errlog=errlog)
        try:
            with pytest.raises(Exception, match="could not start the MCP server 'logged'"):
                source.list_tools()
        finally:
            source.close()
    assert log_path.read_text() == "FATAL: no config\n"


def test_without_the_mcp_package_a_source_fails_at_once_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from foundation_ai._cli.commands import _mcp_source
    from foundation_ai.errors import ConfigurationError

    monkeypatch.setitem(sys.modules, "mcp", None)  # what `import mcp` meets without the package
    hint = r"pip install 'foundation-ai\[mcp\]'"
    with pytest.raises(ConfigurationError, match=hint):
        MCPServerTools.stdio([sys.executable, SERVER, "stdio"])
    with pytest.raises(ConfigurationError, match=hint):
        MCPServerTools.http("http://127.0.0.1:9/mcp")
    with pytest.raises(ConfigurationError, match=hint):  # the CLI's --mcp
        _mcp_source(f"{sys.executable} {SERVER} stdio")


def test_server_tool_names_are_made_safe_and_unique_without_hiding_a_tool() -> None:
    from foundation_ai.agentic.toolsets.mcp import tool_names

    long = "x" * 80
    got = tool_names(["get.item", "get_item", long, long + "y", "search"])
    # the name that is safe as it is keeps it; the others get a suffix instead of being dropped
    assert got == ["get_item_2", "get_item", "x" * 64, "x" * 62 + "_2", "search"]
    assert len(set(got)) == len(got) and all(len(n) <= 64 for n in got)
    assert tool_names(["search", "a.b"], "b_") == ["b_search", "b_a_b"]  # no "b__search"
    assert tool_names(["add"], "srv") == ["srv_add"]
