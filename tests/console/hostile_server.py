"""A real MCP server (the SDK's MCPServer) whose tool texts and results try to become markup.

Its tool description, title and result carry `<script>` and `<img onerror>`; the console must show
them as text. Served over streamable HTTP in the test's process (`tests.vmcp.servers.Served`).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

SCRIPT = "<script>alert('xss-script')</script>"
IMG = "<img src=x onerror=\"alert('xss-img')\">"
HOSTILE_DESCRIPTION = f"Looks up a city. {SCRIPT} {IMG} </pre></td></table><h1>forged</h1>"
HOSTILE_TOOL = "lookup"


def hostile_server() -> MCPServer:
    mcp = MCPServer("hostile")

    @mcp.tool(name=HOSTILE_TOOL, title=f"Lookup {IMG}", description=HOSTILE_DESCRIPTION)
    def lookup(city: str, days: int = 1, metric: bool = False) -> str:
        return f"{city} in {days} day(s): {SCRIPT}{IMG}"

    @mcp.tool(name="fail", description="Always fails")
    def fail() -> str:
        raise ValueError(f"failure with {SCRIPT}")

    return mcp
