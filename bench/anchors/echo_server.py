"""Anchor: a typical backend, an `mcp` SDK v2 `MCPServer` with `echo` and `add` tools over streamable HTTP.

Usage: python echo_server.py PORT
"""

from __future__ import annotations

import sys

import uvicorn
from mcp.server import MCPServer

mcp = MCPServer("echo")


@mcp.tool()
def echo(text: str) -> str:
    """Echo text back."""
    return text


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


if __name__ == "__main__":
    uvicorn.run(mcp.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
