"""A minimal MCP stdio server for bench/startup.py: answers `initialize` and `tools/list`, nothing else.

One file, the standard library only (json + sys), so it starts in the time of a bare `python -c
pass`: the proxy's "first MCP answer" column then measures the proxy, not an SDK-based server's
own start. Newline-delimited JSON-RPC on stdin / stdout, as MCP's stdio transport frames it.
Notifications are read and ignored; any other request gets -32601 (method not found).
"""

from __future__ import annotations

import json
import sys

TOOLS = [{"name": "echo", "description": "echo", "inputSchema": {"type": "object"}}]


def answer(message: dict[str, object]) -> dict[str, object] | None:
    """The response to one message, or None for a notification."""
    if "id" not in message:
        return None
    method = message.get("method")
    if method == "initialize":
        params = message.get("params")
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        result: dict[str, object] = {
            "protocolVersion": version or "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench-responder", "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and (reply := answer(message)) is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
