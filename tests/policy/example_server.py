"""A stdio MCP server with the tools and prompts ToolHive's example authz files name (weather,
calculator, translator; greeting, farewell). Every tools/call and prompts/get it serves is appended
to the file named by $POLICY_SERVER_CALLS, so a test can prove a denied call never reached it."""

from __future__ import annotations

import json
import os

from mcp.server import MCPServer

mcp = MCPServer("policy-example")


def _count(kind: str, name: str, arguments: dict[str, object]) -> None:
    path = os.environ.get("POLICY_SERVER_CALLS")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"kind": kind, "name": name, "arguments": arguments}) + "\n")


@mcp.tool()
def weather(city: str = "Paris") -> str:
    """Weather forecast tool."""
    _count("tool", "weather", {"city": city})
    return f"sunny in {city}"


@mcp.tool()
def calculator(a: int = 1, b: int = 2) -> str:
    """Calculator tool."""
    _count("tool", "calculator", {"a": a, "b": b})
    return str(a + b)


@mcp.tool()
def translator(text: str = "hello") -> str:
    """Translator tool."""
    _count("tool", "translator", {"text": text})
    return text[::-1]


@mcp.prompt()
def greeting(who: str = "you") -> str:
    """Greeting prompt."""
    _count("prompt", "greeting", {"who": who})
    return f"Hello {who}"


@mcp.prompt()
def farewell(who: str = "you") -> str:
    """Farewell prompt."""
    _count("prompt", "farewell", {"who": who})
    return f"Goodbye {who}"


if __name__ == "__main__":
    mcp.run("stdio")
