"""Benchmark backends for bench/vmcp.py (run as separate processes, uvicorn uvloop + httptools).

`bare PORT [N_BACKENDS N_TOOLS]`: a bare ASGI JSON-RPC endpoint (no MCP SDK), the Python floor.
It answers initialize / tools/list / tools/call / ping on `/mcp` (and on `/bN/mcp` for N < N_BACKENDS,
each advertising N_TOOLS tools), the minimum the gateway needs to aggregate it.
`sdk PORT`: an `mcp` SDK v2 MCPServer with an `echo` tool (the typical backend).
"""

from __future__ import annotations

import sys

# bench/ holds scripts named like stdlib modules (operator.py); never import from it by accident.
sys.path[:] = [p for p in sys.path if p.rstrip("/") != __file__.rsplit("/", 1)[0]]

import sys  # noqa: E402
from typing import Any  # noqa: E402

import orjson  # noqa: E402
import uvicorn  # noqa: E402


async def _read_body(receive: Any) -> bytes:
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            return body


async def _empty(send: Any, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def bare_app(n_backends: int = 0, n_tools: int = 1) -> Any:
    def tools_for(prefix: str) -> bytes:
        tools = [
            {
                "name": f"{prefix}tool{i}" if i else "echo",
                "description": f"Tool {i}: echoes its text argument back.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
            }
            for i in range(n_tools)
        ]
        return orjson.dumps({"tools": tools})

    lists = {"/mcp": tools_for("")}
    for b in range(n_backends):
        lists[f"/b{b}/mcp"] = tools_for(f"b{b}_")
    init = orjson.dumps(
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bare", "version": "1"},
        }
    )

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await _read_body(receive)
        if scope["method"] != "POST":
            await _empty(send, 405)
            return
        req = orjson.loads(body)
        method = req.get("method")
        if "id" not in req:
            await _empty(send, 202)
            return
        if method == "tools/call":
            text = req["params"]["arguments"]["text"]
            result = orjson.dumps({"content": [{"type": "text", "text": text}], "isError": False})
        elif method == "tools/list":
            result = lists.get(scope["path"], lists["/mcp"])
        elif method == "initialize":
            result = init
        elif method == "ping":
            result = b"{}"
        else:
            out = orjson.dumps(
                {"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": "nope"}}
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": out})
            return
        out = b'{"jsonrpc":"2.0","id":' + orjson.dumps(req["id"]) + b',"result":' + result + b"}"
        headers = [(b"content-type", b"application/json")]
        if method == "initialize":
            headers.append((b"mcp-session-id", b"bare-session"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": out})

    return app


def sdk_app() -> Any:
    from mcp.server import MCPServer

    mcp = MCPServer("echo")

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo text back."""
        return text

    return mcp.streamable_http_app()


def main() -> None:
    kind, port = sys.argv[1], int(sys.argv[2])
    if kind == "bare":
        nb = int(sys.argv[3]) if len(sys.argv) > 3 else 0
        nt = int(sys.argv[4]) if len(sys.argv) > 4 else 1
        app = bare_app(nb, nt)
    else:
        app = sdk_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", loop="uvloop", http="httptools")


if __name__ == "__main__":
    main()
