"""A real MCP server for the tests, written with the SDK's low-level server API (``Server``),
for what the high-level one does not do: a tool list in pages (``nextCursor``), tool schemas
written by hand (``$defs``, a remote ``$ref``), and hostile answers.

Run: ``python tests/_mcp_paging_server.py stdio|http PORT [options]``:

- ``--page N``: tools per page (default 5); tools ``t00`` ... ``t11`` (``x: int`` -> ``x + i``).
- ``--remote-ref URL``: adds the tool ``fetchy`` whose input schema has ``{"$ref": URL}``.
- ``--garble-list``: the answer to ``tools/list`` is a line that is not JSON (stdio only), then
  nothing.
- ``--lose-sessions`` (http): every ``tools/call`` is answered HTTP 404 "Session not found", as
  by a server that forgot the session (``initialize`` and ``tools/list`` work).
Tools always there: ``tree`` (a ``$defs``/``$ref`` schema, recursive), ``big`` (``size`` bytes
of text), ``garble`` (writes a line that is not JSON to stdout, stdio only, then waits).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext

parser = argparse.ArgumentParser()
parser.add_argument("transport")
parser.add_argument("port", nargs="?", type=int, default=0)
parser.add_argument("--page", type=int, default=5)
parser.add_argument("--remote-ref", default=None)
parser.add_argument("--garble-list", action="store_true")
parser.add_argument("--lose-sessions", action="store_true")
opts = parser.parse_args()

_INT_ARG = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
TOOLS = [types.Tool(name=f"t{i:02d}", description=f"Adds {i}.", input_schema=_INT_ARG) for i in range(12)]
TOOLS.append(
    types.Tool(
        name="tree",
        description="Counts the nodes of a tree.",
        input_schema={
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}, "label": {"$ref": "#/$defs/Label"}},
            "required": ["root"],
            "$defs": {
                "Label": {"type": "string", "maxLength": 20},
                "Node": {
                    "type": "object",
                    "properties": {
                        "name": {"$ref": "#/$defs/Label"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    },
                    "required": ["name"],
                },
            },
        },
    )
)
TOOLS.append(
    types.Tool(
        name="big",
        description="Answers size bytes.",
        input_schema={"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]},
    )
)
TOOLS.append(types.Tool(name="garble", description="Writes garbage.", input_schema={"type": "object"}))
if opts.remote_ref:
    TOOLS.append(
        types.Tool(
            name="fetchy",
            description="Its schema refers to another document.",
            input_schema={"type": "object", "properties": {"q": {"$ref": opts.remote_ref}}},
        )
    )


def _garbage() -> None:
    sys.stdout.write("this is not JSON-RPC {{{\n")
    sys.stdout.flush()


def _count(node: Any) -> int:
    return 1 + sum(_count(c) for c in node.get("children", []))


async def list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    if opts.garble_list:
        _garbage()
        await anyio.sleep(3600)
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + opts.page
    return types.ListToolsResult(tools=TOOLS[start:end], next_cursor=str(end) if end < len(TOOLS) else None)


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "big":
        text = "x" * int(args["size"])
    elif params.name == "garble":
        _garbage()
        await anyio.sleep(3600)
        text = ""
    elif params.name == "tree":
        text = str(_count(args["root"]))
    else:
        text = str(int(args["x"]) + int(params.name[1:]))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _losing(inner: Any) -> Any:
    """ASGI middleware: a ``tools/call`` POST gets the 404 of an unknown session."""

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await inner(scope, receive, send)
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if b'"tools/call"' in body:
            reply = json.dumps(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 404,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": reply.encode()})
            return None
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await inner(scope, replay, send)

    return asgi


app = Server("paging", on_list_tools=list_tools, on_call_tool=call_tool)

if __name__ == "__main__":
    if opts.transport == "http":
        import uvicorn

        web = app.streamable_http_app()
        uvicorn.run(
            _losing(web) if opts.lose_sessions else web, host="127.0.0.1", port=opts.port, log_level="warning"
        )
    else:
        from mcp.server.stdio import stdio_server

        async def main() -> None:
            # stdout given explicitly: the SDK then leaves fd 1 alone (it would divert print()
            # to stderr), so the garbage of --garble-list / garble really reaches the client
            out = anyio.wrap_file(io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", write_through=True))
            async with stdio_server(stdout=out) as (read, write):
                await app.run(read, write, app.create_initialization_options())

        anyio.run(main)
