"""A real MCP server for the tests, written with the official SDK's server API (``MCPServer``).

Run: ``python tests/_mcp_server.py stdio`` or ``python tests/_mcp_server.py http PORT`` (streamable
HTTP on 127.0.0.1:PORT, path ``/mcp``). Tools: ``add``, ``echo``, ``fail`` (raises), ``crash``
(the process exits at once), ``pid`` (the server's process id), ``slow`` (sleeps),
``trace_context`` (the ``traceparent`` / ``tracestate`` the request's ``_meta`` carried).
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("test-tools")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@app.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    raise ToolError(reason)


@app.tool()
def crash() -> str:
    """Exit the server process at once."""
    os._exit(3)


@app.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@app.tool(name="slow.sleep")
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "slept"


@app.tool()
def trace_context(ctx: Context) -> str:
    """The W3C trace context fields the client sent in the request's ``_meta`` (JSON)."""
    import json

    fields = dict(ctx.request_context.meta or {})  # RequestParamsMeta: a TypedDict
    return json.dumps({k: v for k, v in fields.items() if k in ("traceparent", "tracestate")})


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        app.run()
    else:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
