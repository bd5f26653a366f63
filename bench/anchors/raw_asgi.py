"""Anchor: the Python floor, a bare ASGI app answering MCP JSON-RPC (2025-11-25, JSON responses), no SDK.

Answers initialize, notifications (202), ping, tools/list and tools/call, so a gateway can aggregate it.
Usage: python raw_asgi.py PORT [N_TOOLS]  (default 1: just `echo`; N>1 adds tool1..tool{N-1}, all echo).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

N = int(sys.argv[2]) if len(sys.argv) > 2 else 1
TOOLS = json.dumps(
    {
        "tools": [
            {
                "name": "echo" if i == 0 else f"tool{i}",
                "description": f"Tool {i}: echoes its text argument back.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
            }
            for i in range(N)
        ]
    }
)
INIT = json.dumps(
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "raw", "version": "1"},
    }
)
JSON = [(b"content-type", b"application/json")]


async def _empty(send: Send, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _spliced(request_id: Any, result: str) -> bytes:
    return ('{"jsonrpc":"2.0","id":' + json.dumps(request_id) + ',"result":' + result + "}").encode()


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["method"] != "POST":
        await _empty(send, 405)
        return
    req = json.loads(body)
    method = req.get("method")
    # The result strings are spliced in pre-serialised: the floor should not pay for re-encoding them.
    if method == "tools/call":
        text = req["params"]["arguments"]["text"]
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        out = json.dumps({"jsonrpc": "2.0", "id": req.get("id"), "result": result}).encode()
    elif "id" not in req:  # notification
        await _empty(send, 202)
        return
    elif method == "tools/list":
        out = _spliced(req["id"], TOOLS)
    elif method == "initialize":
        out = _spliced(req["id"], INIT)
    elif method == "ping":
        out = _spliced(req["id"], "{}")
    else:
        error = {"code": -32601, "message": f"method not found: {method}"}
        out = json.dumps({"jsonrpc": "2.0", "id": req["id"], "error": error}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": JSON})
    await send({"type": "http.response.body", "body": out})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
