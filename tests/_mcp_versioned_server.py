"""A real MCP server (the SDK's ``MCPServer``, streamable HTTP on 127.0.0.1) whose tool list
depends on its version: ``python tests/_mcp_versioned_server.py PORT VERSION`` serves
``stock_<VERSION>`` and ``price`` (whose description names the version), so a restart with
another version changes the server's tool list."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

PORT, VERSION = int(sys.argv[1]), sys.argv[2]
app = MCPServer(f"inventory-{VERSION}")


def stock(item: str) -> str:
    """How many of ``item`` are in stock."""
    return f"{item}: 3 ({VERSION})"


def price(item: str) -> str:
    return f"{item}: 9.99 ({VERSION})"


app.tool(name=f"stock_{VERSION}")(stock)
app.tool(name="price", description=f"The price of an item (inventory {VERSION}).")(price)

if __name__ == "__main__":
    app.run("streamable-http", host="127.0.0.1", port=PORT)
