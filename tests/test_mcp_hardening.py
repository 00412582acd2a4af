"""MCP sources against real SDK servers (tests/_mcp_server.py, tests/_mcp_paging_server.py) over
stdio and streamable HTTP on 127.0.0.1: a server restarted on the same port is reconnected and
the call retried once, a server that keeps losing the session is an error result naming it, a
paged tool list is read to its end, a remote ``$ref`` is never fetched and its tool refused, a
recursive ``$defs`` schema is made self-contained, an unparseable answer and an oversized one
fail at once with the server and the cause named."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foundation_ai.agentic import AgentSession, InMemorySessionStore, ScriptedModel, call, say
from foundation_ai.agentic.toolsets.mcp import MCPServerTools, MCPToolError, MCPToolRefused
from foundation_ai.schema.refs import has_refs
from foundation_ai.types import TextContent

from .test_mcp_tools import SERVER, _free_port, _start_http, _stop

PAGING = str(Path(__file__).with_name("_mcp_paging_server.py"))
PAGED_TOOLS = [f"t{i:02d}" for i in range(12)] + ["tree", "big", "garble"]


def _session(tools: list[Any], script: list[Any]) -> AgentSession:
    return (
        AgentSession.builder(ScriptedModel(script))
        .with_tools(tools)
        .with_store(InMemorySessionStore())
        .build()
    )


def _start_paging_http(port: int, *extra: str) -> subprocess.Popen[bytes]:
    return _start_http(port, [sys.executable, PAGING, "http", str(port), *extra])


@pytest.fixture()
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        _stop(p)


def test_a_restarted_mcp_server_is_reconnected_once_and_the_call_retried(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    port = _free_port()
    procs.append(_start_http(port))
    src = MCPServerTools.http(f"http://127.0.0.1:{port}/mcp", name="web")
    try:
        tools = src.list_tools()
        session = _session(tools, [call("add", {"a": 20, "b": 22}), call("pid"), say("ok")])
        added, pid_before = session.run_turn("go").tool_results()
        assert added.content == TextContent("42")
        _stop(procs[0])  # restarted on the same port: our session id means nothing to it
        procs.append(_start_http(port))
        again = _session(tools, [call("add", {"a": 1, "b": 2}), call("pid"), say("up")])
        retried, pid_after = again.run_turn("go").tool_results()
        # the first call after the restart got "Session not found", initialized a new session
        # and was sent again: the model sees the answer, not an error
        assert retried.error_detail is None and retried.content == TextContent("3")
        assert pid_after.content != pid_before.content  # really another server process
        assert src.starts == 2  # one new session, not one per call
    finally:
        src.close()


def test_a_server_that_loses_the_session_again_gives_an_error_result_naming_it(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    port = _free_port()
    procs.append(_start_paging_http(port, "--lose-sessions"))
    src = MCPServerTools.http(f"http://127.0.0.1:{port}/mcp", name="forgetful")
    try:
        tools = src.list_tools()
        result = _session(tools, [call("t01", {"x": 1}), say("no")]).run_turn("go").tool_results()[0]
        assert result.error_detail is not None
        assert "MCPToolError" in result.error_detail and "'forgetful'" in result.error_detail
        assert "lost the session again" in result.error_detail
        assert src.starts == 2  # initialized again once, then gave up: no loop
    finally:
        src.close()


def test_a_paged_tool_list_is_read_to_its_end_over_stdio_and_http(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    port = _free_port()
    procs.append(_start_paging_http(port, "--page", "4"))
    sources = [
        MCPServerTools.stdio([sys.executable, PAGING, "stdio", "--page", "4"], name="paged"),
        MCPServerTools.http(f"http://127.0.0.1:{port}/mcp", name="paged-web"),
    ]
    try:
        for src in sources:
            tools = src.list_tools()  # 15 tools over 4 pages (nextCursor "4", "8", "12")
            assert [t.definition.name for t in tools] == PAGED_TOOLS
            last = _session(tools, [call("t11", {"x": 1}), say("ok")]).run_turn("go").tool_results()[0]
            assert last.content == TextContent("12")  # a tool of the last page is called
    finally:
        for src in sources:
            src.close()


class _Counting(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        _Counting.hits.append(self.path)
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


def test_a_remote_ref_in_an_input_schema_is_never_fetched_and_the_tool_is_refused() -> None:
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{web.server_address[1]}/schema.json"
    _Counting.hits.clear()
    src = MCPServerTools.stdio([sys.executable, PAGING, "stdio", "--remote-ref", url], name="hostile")
    try:
        tools = src.list_tools()
        names = [t.definition.name for t in tools]
        assert "fetchy" not in names and names == PAGED_TOOLS  # the others are offered
        refusal = src.refused["fetchy"]
        assert isinstance(refusal, MCPToolRefused) and isinstance(refusal, MCPToolError)
        assert refusal.server == "hostile" and refusal.tool == "fetchy"
        assert url in str(refusal) and "never fetched" in str(refusal)
        assert _Counting.hits == []  # the agent process made no request to the URL
        # a call of the refused tool is the ordinary "unknown tool" result
        result = _session(tools, [call("fetchy", {"q": "x"}), say("no")]).run_turn("go").tool_results()[0]
        assert result.error_detail is not None and "unknown tool 'fetchy'" in result.error_detail
    finally:
        src.close()
        web.shutdown()
    assert _Counting.hits == []


def test_a_recursive_defs_schema_from_a_server_is_self_contained_and_called(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    src = MCPServerTools.stdio([sys.executable, PAGING, "stdio"], name="trees")
    try:
        tree = next(t for t in src.list_tools() if t.definition.name == "tree")
        schema = tree.definition.arguments.schema
        # Label (not recursive) is inlined everywhere; Node (recursive) is one root definition
        assert set(schema["$defs"]) == {"Node"}
        assert schema["properties"]["root"] == {"$ref": "#/$defs/Node"}
        assert schema["properties"]["label"] == {"type": "string", "maxLength": 20}
        assert schema["$defs"]["Node"]["properties"]["name"] == {"type": "string", "maxLength": 20}
        three = {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}
        bad = {"name": "a", "children": [{"children": []}]}
        session = _session([tree], [[call("tree", {"root": three}), call("tree", {"root": bad})], say("ok")])
        counted, refused = session.run_turn("go").tool_results()
        assert counted.content == TextContent("3")
        assert refused.error_detail is not None and "$.root.children[0]" in refused.error_detail
        assert has_refs(schema)  # the recursion is kept, not cut
    finally:
        src.close()


def test_an_unparseable_answer_fails_at_once_naming_the_server_and_the_cause() -> None:
    # timeouts far longer than the test: the error must come from the garbage, not from a timeout
    listing = MCPServerTools.stdio(
        [sys.executable, PAGING, "stdio", "--garble-list"], name="garbled", connect_timeout=300
    )
    try:
        with pytest.raises(MCPToolError) as caught:
            listing.list_tools()
        text = str(caught.value)
        assert "'garbled'" in text and "not valid JSON-RPC" in text and "timed out" not in text
    finally:
        listing.close()
    calling = MCPServerTools.stdio([sys.executable, PAGING, "stdio"], name="garbler", call_timeout=300)
    try:
        tools = calling.list_tools()
        session = _session(tools, [call("garble"), call("t02", {"x": 1}), say("ok")])
        garbled, after = session.run_turn("go").tool_results()
        assert garbled.error_detail is not None
        assert "'garbler'" in garbled.error_detail and "not valid JSON-RPC" in garbled.error_detail
        assert after.content == TextContent("3")  # the connection was opened again
        assert calling.starts == 2
    finally:
        calling.close()


def test_an_oversized_result_is_an_error_result_naming_the_server_and_the_cap(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    port = _free_port()
    procs.append(_start_paging_http(port))
    sources = [
        MCPServerTools.stdio([sys.executable, PAGING, "stdio"], name="huge", max_result_bytes=100_000),
        MCPServerTools.http(f"http://127.0.0.1:{port}/mcp", name="huge-web", max_result_bytes=100_000),
    ]
    try:
        for src in sources:
            tools = src.list_tools()
            session = _session(
                tools, [call("big", {"size": 2_000_000}), call("big", {"size": 1000}), say("ok")]
            )
            huge, small = session.run_turn("go").tool_results()
            assert huge.error_detail is not None, src.name
            assert f"'{src.name}'" in huge.error_detail and "max_result_bytes" in huge.error_detail
            assert small.content == TextContent("x" * 1000)  # the next call works
    finally:
        for src in sources:
            src.close()


def test_max_result_bytes_must_be_positive() -> None:
    from foundation_ai.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="max_result_bytes"):
        MCPServerTools.stdio([sys.executable, SERVER, "stdio"], max_result_bytes=0)
