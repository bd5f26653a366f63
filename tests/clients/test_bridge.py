"""Claude Desktop's entry, run the way Claude Desktop runs it: the `command` and `args` written by
`client setup` (`npx -y mcp-remote URL --header Authorization:${MCPFLEET_HEADER_1}`) with the entry's
`env`, as a stdio server the MCP SDK client talks to. Behind it, an MCP server that answers only
with the right bearer token: the header reaches it through the bridge.

The bridge is the one in tools/node (`make node-tools`, pinned in its package-lock.json); npm runs
offline, so the test uses nothing but loopback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from mcpfleet.clients.table import by_id
from tests.vmcp.servers import Served, sdk_backend

NODE = Path(__file__).resolve().parents[2] / "tools" / "node"
TOKEN = "bridge-token-42"


def _requiring_token(app: Any) -> Any:
    """`app`, answering 401 to any request without `Authorization: Bearer TOKEN`."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (b"authorization", f"Bearer {TOKEN}".encode()) not in scope["headers"]:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return guarded


async def test_claude_desktop_entry_reaches_a_server_that_needs_a_token(tmp_path: Path) -> None:
    bridge = NODE / "node_modules" / ".bin" / "mcp-remote"
    assert bridge.exists(), f"{bridge} is missing; run `make node-tools`"
    served = await Served(_requiring_token(sdk_backend("alpha").streamable_http_app())).start()
    try:
        with pytest.raises(Exception):  # noqa: B017 - the guard works: no token, no session
            async with Client(served.url, read_timeout_seconds=10) as client:
                await client.list_tools()
        entry = by_id("claude-desktop").entry("mcpfleet", served.url, {"Authorization": f"Bearer {TOKEN}"})
        assert TOKEN not in " ".join(entry["args"])  # the value travels in env, not in argv
        environ = {
            **os.environ,
            **entry["env"],
            "HOME": str(tmp_path),  # mcp-remote keeps its state under ~/.mcp-auth
            "PATH": f"{NODE / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "npm_config_offline": "true",
        }
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=environ, cwd=NODE)
        async with Client(params, read_timeout_seconds=120) as client:
            result = await client.call_tool("echo", {"text": "through the bridge"})
        assert not result.is_error, result
        assert "alpha:through the bridge" in " ".join(getattr(part, "text", "") for part in result.content)
    finally:
        await served.stop()
